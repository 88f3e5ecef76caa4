"""Workload generation speed (trace nodes per second) and peak memory.

Runs, each in a fresh process so peak RSS is per case:
  - every file of the SimAI suite at its stated batch size (summary only: build every rank's
    trace in memory, count it, drop it);
  - GPT-3 175B, TP8 PP8 DP2 on 128 GPUs at global batch 1536 (a realistic iteration);
  - the same, writing the Chakra ET files of 8 ranks (writer throughput).

usage: python benchmarks/bench_workload.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _case(path: str, overrides: list[str], write_ranks: str | None) -> dict:
    from heterosim.config.experiment import load_experiment
    from heterosim.workload.chakra import write_trace
    from heterosim.workload.generator import generate_workload

    start = time.perf_counter()
    workload = generate_workload(load_experiment(path, overrides))
    setup_s = time.perf_counter() - start
    nodes = 0
    build_s = write_s = 0.0
    ranks = None
    if write_ranks:
        lo, hi = (int(x) for x in write_ranks.split("-"))
        ranks = list(range(lo, hi + 1))
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        for trace in workload.iter_traces(ranks):
            nodes += len(trace)
            if write_ranks:
                w = time.perf_counter()
                write_trace(trace, Path(tmp) / f"t.{trace.rank}.et")
                write_s += time.perf_counter() - w
        build_s = time.perf_counter() - t - write_s
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {
        "setup_s": setup_s,
        "build_s": build_s,
        "write_s": write_s,
        "nodes": nodes,
        "ranks": len(ranks) if ranks else workload.world_size,
        "nodes_per_s": nodes / build_s if build_s else 0.0,
        "write_nodes_per_s": nodes / write_s if write_s else 0.0,
        "peak_rss_mb": peak_mb,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="skip the SimAI suite")
    parser.add_argument("--one", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        path, sets, ranks = args.one
        print(json.dumps(_case(path, [s for s in sets.split(";") if s], ranks or None)))
        return
    cases = []
    if not args.quick:
        cases += [(p.stem, str(p), "", "") for p in sorted((ROOT / "workloads/simai").glob("*.yaml"))]
    big = str(ROOT / "workloads/simai/gpt3_175b_tp8_pp8.yaml")
    cases += [
        ("gpt3_175b gb1536 (all ranks, in memory)", big, "training.global_batch=1536", ""),
        ("gpt3_175b gb1536 (write ranks 0-7)", big, "training.global_batch=1536", "0-7"),
    ]
    print(
        f"{'case':44} {'ranks':>5} {'nodes':>11} {'setup s':>8} {'build s':>8} "
        f"{'Mnodes/s':>9} {'write Mn/s':>10} {'peak MB':>8}"
    )
    for name, path, sets, ranks in cases:
        out = subprocess.run(
            [sys.executable, __file__, "--one", path, sets, ranks], capture_output=True, text=True, check=True
        ).stdout
        r = json.loads(out)
        print(
            f"{name:44} {r['ranks']:5d} {r['nodes']:11d} {r['setup_s']:8.2f} "
            f"{r['build_s']:8.2f} {r['nodes_per_s'] / 1e6:9.2f} "
            f"{r['write_nodes_per_s'] / 1e6:10.2f} {r['peak_rss_mb']:8.0f}"
        )


if __name__ == "__main__":
    main()
