"""Decomposer speed: NCCL-style all-reduce of 1 GiB on 256 and 1024 H100 GPUs (8 per host).

Run: ``python benchmarks/bench_decompose.py``; numbers go to benchmarks/README.md.
"""

from __future__ import annotations

import time

from heterosim.config.cluster import parse_cluster
from heterosim.plan.collectives import decompose_collective


def main() -> None:
    cluster = parse_cluster(
        {
            "name": "bench",
            "host_types": {"h": {"gpu": "H100-SXM", "gpus": 8, "nics": 8, "nic_speed": "400Gbps"}},
            "hosts": [{"type": "h", "count": 128}],
            "fabric": {"kind": "rail-optimized"},
        },
        "bench",
    )
    print(f"{'gpus':>5} {'algorithm':>9} {'channels':>8} {'flows':>10} {'wall_s':>7} {'us/flow':>7}")
    for n in (256, 1024):
        for algorithm in ("ring", "tree", "nvls"):
            started = time.perf_counter()
            plan = decompose_collective("allreduce", 2**30, list(range(n)), cluster, algorithm=algorithm)
            wall = time.perf_counter() - started
            print(
                f"{n:>5} {plan.algorithm:>9} {plan.channels:>8} {plan.num_flows:>10} {wall:>7.2f} "
                f"{wall / plan.num_flows * 1e6:>7.2f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
