"""Where a run's memory goes as the micro-batch count grows (resident set size per stage).

usage: python3 benchmarks/bench_plan_memory.py [EXPERIMENT.yaml] [--batches 32 512] [--cli]
       [--stages] [--set KEY=VALUE ...]

Runs the experiment (default: workloads/examples/sailor_workstations.yaml, 2 pipelines of
micro-batch 2) at flow fidelity once per global batch, each in a fresh process, and prints the
resident set size after each stage: imports and the ns-3 library, workload and traces, plan,
engine, results and outputs; the peak (``VmHWM``); the plan's own arrays (bytes per task);
and the iteration time. ``--cli`` also times ``heterosim run ... --fidelity flow`` as a user
runs it and reports its peak RSS (``os.wait4``'s usage of the child). ``--stages`` runs it as
``heterosim run`` does (ns-3 loaded after planning, ``run_for_reports``, the outputs without
plots) and prints each stage's peak RSS, counted from the end of the stage before it
(``/proc/self/clear_refs`` resets the high-water mark), and the RSS after it, with the plan's,
times' and flow table's bytes per task.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
DEFAULT = ROOT / "workloads/examples/sailor_workstations.yaml"


def rss_mb() -> tuple[float, float]:
    """(current, peak) resident set size of this process in MB, from /proc/self/status."""
    fields = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0]) / 1024
    return fields["VmRSS"], fields["VmHWM"]


def plan_bytes(plan) -> int:
    return sum(v.nbytes for v in vars(plan).values() if isinstance(v, np.ndarray))


def one(path: str, batch: int, out: str, overrides: list[str]) -> dict:
    """Run one experiment in this process, recording RSS after every stage."""
    from heterosim.config.experiment import load_experiment
    from heterosim.engine import native
    from heterosim.engine.executor import execute_plan
    from heterosim.engine.process_memory import return_large_frees
    from heterosim.report.run_report import results_dict, write_run_outputs
    from heterosim.results import RunArtifacts
    from heterosim.simulate.experiment import _record_granularity, prepare_run

    stages: dict[str, float] = {}
    return_large_frees()  # as `heterosim run` does
    native.load()
    stages["imports_and_ns3"] = rss_mb()[0]
    sets = [f"training.global_batch={batch}", "simulation.fidelity=flow", *overrides]
    experiment = load_experiment(path, sets)
    experiment = _record_granularity(experiment)
    prepared = prepare_run(experiment)
    stages["workload_and_plan"] = rss_mb()[0]
    plan = prepared.tables.plan
    assert prepared.topology is not None
    plan_mb = plan_bytes(plan) / 1e6
    t0 = time.perf_counter()
    # as `heterosim run` does: the schedule columns freed once the executor has read them
    engine = execute_plan(
        plan, prepared.topology, experiment.network, experiment.simulation, release_schedule=True
    )
    engine_s = time.perf_counter() - t0
    stages["engine"] = rss_mb()[0]
    run = RunArtifacts.from_prepared(experiment, prepared, engine)
    results = results_dict(run)
    write_run_outputs(run, Path(out), results, plots=False)
    stages["outputs"] = rss_mb()[0]
    trace_bytes = sum(
        v.nbytes for t in prepared.traces for v in vars(t).values() if isinstance(v, np.ndarray)
    )
    return {
        "global_batch": batch,
        "tasks": len(plan),
        "plan_mb": plan_mb,
        "plan_bytes_per_task": plan_mb * 1e6 / max(len(plan), 1),
        "trace_mb": trace_bytes / 1e6,
        "rss_mb": stages,
        "peak_mb": rss_mb()[1],
        "engine_s": engine_s,
        "iteration_s": results["iteration_time_s"],
    }


# (module, function, label) of the stages --stages times, in the order heterosim run calls them
STAGES = (
    ("heterosim.simulate.experiment", "prepare_run", "workload, traces, plan"),
    ("heterosim.engine.executor", "connection_ids", "connection ids (ns-3 loaded before)"),
    ("heterosim.engine.executor", "_load", "plan handed to the executor"),
    ("heterosim.engine.executor", "_check_and_install_contention", "plan checked, contention model"),
    ("heterosim.engine.executor", "_TaskTimes", "task times allocated"),
    ("heterosim.engine.executor", "_run", "run"),
    ("heterosim.engine.executor", "_release_contention", "contention accounts"),
    ("heterosim.engine.executor", "_collect", "times widened, readout"),
    ("heterosim.report.run_report", "results_dict", "breakdown, results"),
    ("heterosim.report.run_report", "_write_collectives", "collectives.csv"),
    ("heterosim.report.run_report", "_write_flows", "flows.csv"),
    ("heterosim.report.run_report", "_write_links", "links.csv"),
    ("heterosim.report.run_report", "_write_trace", "trace.json"),
)


def stage_peaks(path: str, batch: int, out: str, overrides: list[str]) -> dict:
    """Run the experiment as ``heterosim run`` does, recording (label, peak, after) RSS in MB for
    each of :data:`STAGES`."""
    import importlib

    from heterosim.config.experiment import load_experiment
    from heterosim.simulate.jobs import run_for_reports

    rows: list[tuple[str, float, float]] = []

    def timed(function, label):
        def call(*args, **kwargs):
            value = function(*args, **kwargs)
            rows.append((label, rss_mb()[1], rss_mb()[0]))
            Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS for the next stage
            return value

        return call

    for module_name, name, label in STAGES:
        module = importlib.import_module(module_name)
        setattr(module, name, timed(getattr(module, name), label))
    report = importlib.import_module("heterosim.report.run_report")
    sets = [f"training.global_batch={batch}", "simulation.fidelity=flow", *overrides]
    Path("/proc/self/clear_refs").write_text("5")
    run = run_for_reports(load_experiment(path, sets))
    results = report.results_dict(run)
    report.write_run_outputs(run, Path(out), results, plots=False)
    plan, engine, n = run.tables.plan, run.engine, max(len(run.tables.plan), 1)
    return {
        "tasks": len(plan),
        "stages": rows,
        "plan_bytes_per_task": plan_bytes(plan) / n,
        "times_bytes_per_task": (engine.task_start_ns.nbytes + engine.task_end_ns.nbytes) / n,
        "flow_table_bytes_per_task": engine.flows.retained_bytes() / n,
    }


def cli_peak(path: str, batch: int, out: str, overrides: list[str]) -> tuple[float, float, float]:
    """(peak RSS MB, wall s, iteration s) of ``heterosim run`` in a child process."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    start = time.perf_counter()
    child = subprocess.Popen(
        [sys.executable, "-m", "heterosim.cli", "run", path, "--fidelity", "flow", "--out", out]
        + ["--no-plots", "--quiet", "--set", f"training.global_batch={batch}"]
        + [arg for key in overrides for arg in ("--set", key)],
        env=env,
        stdout=subprocess.DEVNULL,
    )
    _, status, usage = os.wait4(child.pid, 0)  # this child's own peak, not all children's
    child.returncode = os.waitstatus_to_exitcode(status)
    assert child.returncode == 0, f"heterosim run exited {child.returncode}"
    wall = time.perf_counter() - start
    peak = usage.ru_maxrss / 1024
    iteration = json.loads((Path(out) / "results.json").read_text())["iteration_time_s"]
    return peak, wall, iteration


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("experiment", nargs="?", default=str(DEFAULT))
    parser.add_argument("--batches", type=int, nargs="+", default=[32, 512])
    parser.add_argument("--cli", action="store_true", help="also measure `heterosim run`")
    parser.add_argument("--set", dest="overrides", action="append", default=[], help="experiment key")
    parser.add_argument("--stages", action="store_true", help="peak RSS per stage of heterosim run")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        with tempfile.TemporaryDirectory() as tmp:
            work = stage_peaks if args.stages else one
            print(json.dumps(work(args.experiment, args.child, tmp, args.overrides)))
        return
    if args.stages:
        for batch in args.batches:
            row = _child(args, batch, ["--stages"])
            print(
                f"global batch {batch}: {row['tasks']:,} tasks; bytes per task: plan "
                f"{row['plan_bytes_per_task']:.1f}, times {row['times_bytes_per_task']:.1f}, flow "
                f"table {row['flow_table_bytes_per_task']:.1f}"
            )
            for label, peak, after in row["stages"]:
                print(f"  {label:40s} peak {peak:7,.0f} MB, after {after:7,.0f} MB")
        return
    for batch in args.batches:
        row = _child(args, batch, [])
        stages = "  ".join(f"{k} {v:,.0f}" for k, v in row["rss_mb"].items())
        print(
            f"global batch {batch}: {row['tasks']:,} tasks, plan {row['plan_mb']:,.0f} MB "
            f"({row['plan_bytes_per_task']:.0f} B/task), traces {row['trace_mb']:,.1f} MB; "
            f"RSS MB after {stages}; peak {row['peak_mb']:,.0f} MB; engine {row['engine_s']:.1f} s; "
            f"iteration {row['iteration_s']:.9f} s"
        )
        if args.cli:
            with tempfile.TemporaryDirectory() as tmp:
                peak, wall, iteration = cli_peak(args.experiment, batch, tmp, args.overrides)
            print(f"  heterosim run: peak RSS {peak:,.0f} MB, wall {wall:.1f} s, iteration {iteration:.9f} s")


def _child(args: argparse.Namespace, batch: int, extra: list[str]) -> dict:
    """One global batch measured in a fresh process (its JSON line)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    line = (
        subprocess.run(
            [sys.executable, __file__, args.experiment, "--child", str(batch), *extra]
            + [arg for key in args.overrides for arg in ("--set", key)],
            check=True,
            env=env,
            capture_output=True,
            text=True,
        )
        .stdout.strip()
        .splitlines()[-1]
    )
    return json.loads(line)


if __name__ == "__main__":
    main()
