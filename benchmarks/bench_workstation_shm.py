"""8-GPU GeForce server without P2P (NCCL's SHM transport) against a published all_reduce_perf run.

Usage: python benchmarks/bench_workstation_shm.py

Runs ``heterosim collective --cluster topologies/workstations/rtx5090_8gpu_2socket.yaml --op
allreduce --size 1GiB..8GiB`` (flow fidelity) on 8 and on 4 GPUs and prints the largest bus
bandwidth beside the measurement of NVIDIA/nccl issue #1639
(https://github.com/NVIDIA/nccl/issues/1639: 8x RTX 5090, 2x Xeon Platinum 8480+, stock driver,
``all_reduce_perf -b 1g -e 8g -f 2 -g 8``: busbw 28 GB/s with 8 GPUs, 35 GB/s with 4). Every
constant of the cluster file is a datasheet number (PCIe Gen5 x16, 4 UPI links at 16 GT/s, 8
DDR5-4800 channels per socket); none is fitted to the measurement.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

CLUSTER = REPO / "topologies" / "workstations" / "rtx5090_8gpu_2socket.yaml"
MEASURED = {8: 28.0, 4: 35.0}  # busbw GB/s, NVIDIA/nccl issue #1639
SIZES = [1 << 30, 2 << 30, 4 << 30, 8 << 30]


def simulated_busbw(ranks: int) -> float:
    from heterosim.config.cluster import load_cluster
    from heterosim.simulate import CollectiveSpec, engine_config, simulate_collective_sizes

    cluster = load_cluster(CLUSTER)
    spec = CollectiveSpec("allreduce", tuple(range(ranks)))
    rows = simulate_collective_sizes(cluster, spec, SIZES, engine_config(fidelity="flow"))
    return max(row.busbw_GBps for row in rows)


def main() -> int:
    print("| GPUs | measured busbw (GB/s) | simulated (GB/s) | error |")
    print("|---|---|---|---|")
    for ranks, measured in MEASURED.items():
        sim = simulated_busbw(ranks)
        print(f"| {ranks} | {measured:.1f} | {sim:.1f} | {100 * (sim / measured - 1):+.1f} % |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
