"""Time trace.json writing (heterosim.report.perfetto) for one experiment at three span caps.

    PYTHONPATH=$PWD python3 benchmarks/bench_trace_write.py workloads/examples/hetero_partition_h2.yaml flow

Simulates the experiment once (not timed), then writes trace.json with --trace-spans 200000,
2000000 (the default) and 0 (all), printing spans kept and dropped, seconds, file size and peak RSS.
"""

import resource
import sys
import time
from pathlib import Path

from heterosim.config.experiment import load_experiment
from heterosim.report import run_report
from heterosim.report.perfetto import write_perfetto_trace
from heterosim.simulate import run_experiment

exp = load_experiment(Path(sys.argv[1]), [f"simulation.fidelity={sys.argv[2]}"])
run = run_experiment(exp)
results = run_report.results_dict(run)
rank_names = [f"rank {r}" for r in range(len(run.rank_gpu))]
for cap in (200_000, 2_000_000, 0):
    t0 = time.perf_counter()
    info = write_perfetto_trace(
        Path("/tmp/bench_trace.json"),
        run.tables.plan,
        run.engine.task_start_ns,
        run.engine.task_end_ns,
        run.rank_gpu,
        rank_names,
        run_report._label_fn(run),
        None,
        max_spans=cap,
    )
    size_mb = Path("/tmp/bench_trace.json").stat().st_size / 1e6
    rss_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6
    print(
        cap,
        info,
        f"{time.perf_counter() - t0:.1f} s",
        f"{size_mb:.0f} MB",
        f"peak RSS {rss_gb:.2f} GB",
        flush=True,
    )
