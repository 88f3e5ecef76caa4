"""GeForce servers without P2P (NCCL's SHM transport) against published nccl-tests runs.

Usage: python benchmarks/bench_workstation_shm.py

1. ``heterosim collective --cluster topologies/workstations/rtx5090_8gpu_2socket.yaml --op
   allreduce --size 1GiB..8GiB`` (flow fidelity) on 8 and on 4 GPUs: the largest bus bandwidth
   beside the measurement of NVIDIA/nccl issue #1639 (https://github.com/NVIDIA/nccl/issues/1639:
   8x RTX 5090, 2x Xeon Platinum 8480+, stock driver, ``NCCL_NTHREADS=256 NCCL_MIN_NCHANNELS=8
   all_reduce_perf -b 1g -e 8g -f 2 -g 8``: busbw 28 GB/s with 8 GPUs, 35 GB/s with 4). Every
   constant of the cluster file is a datasheet number (PCIe Gen5 x16, 4 UPI links at 16 GT/s, 8
   DDR5-4800 channels per socket); none is fitted to the measurement.
2. NVIDIA/nccl issue #1309 (https://github.com/NVIDIA/nccl/issues/1309, two RTX 4090): the pair
   under one PCIe switch is slower than a pair on different sockets; NCCL's maintainer: without
   P2P "the traffic cannot stay local to the PCI switch and has to go back to the CPU, causing a
   2x increase in load on the PCI link to the CPU". Checked on
   ``topologies/workstations/rtx4090_8gpu_2switch.yaml``: 2-GPU all-reduce, GPUs 0-1 (one
   switch) and 0-4 (two sockets).
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

WORKSTATIONS = REPO / "topologies" / "workstations"
CLUSTER = WORKSTATIONS / "rtx5090_8gpu_2socket.yaml"
MEASURED = {8: 28.0, 4: 35.0}  # busbw GB/s, NVIDIA/nccl issue #1639
SIZES = [1 << 30, 2 << 30, 4 << 30, 8 << 30]
PAIR_CLUSTER = WORKSTATIONS / "rtx4090_8gpu_2switch.yaml"
SAME_SWITCH, ACROSS_SOCKETS = (0, 1), (0, 4)  # NVIDIA/nccl issue #1309


def simulated_busbw(cluster_file: Path, ranks: tuple[int, ...], sizes: list[int]) -> float:
    """Largest all-reduce bus bandwidth over ``sizes`` (GB/s, flow fidelity)."""
    from heterosim.config.cluster import load_cluster
    from heterosim.simulate import CollectiveSpec, engine_config, simulate_collective_sizes

    cluster = load_cluster(cluster_file)
    rows = simulate_collective_sizes(
        cluster, CollectiveSpec("allreduce", ranks), sizes, engine_config(fidelity="flow")
    )
    return max(row.busbw_GBps for row in rows)


def main() -> int:
    print("| GPUs (nccl #1639) | measured busbw (GB/s) | simulated (GB/s) | error |")
    print("|---|---|---|---|")
    for ranks, measured in MEASURED.items():
        sim = simulated_busbw(CLUSTER, tuple(range(ranks)), SIZES)
        print(f"| {ranks} | {measured:.1f} | {sim:.1f} | {100 * (sim / measured - 1):+.1f} % |")
    same = simulated_busbw(PAIR_CLUSTER, SAME_SWITCH, [1 << 28])
    across = simulated_busbw(PAIR_CLUSTER, ACROSS_SOCKETS, [1 << 28])
    verdict = "holds" if same < across else "FAILS"
    print(
        f"\nnccl #1309 (one switch slower than two sockets, 2x load on the uplink): one switch "
        f"{same:.2f} GB/s, two sockets {across:.2f} GB/s, ratio {across / same:.2f}: {verdict}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
