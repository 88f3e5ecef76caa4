"""GeForce servers without P2P (NCCL's SHM transport) against published nccl-tests runs.

Usage: python benchmarks/bench_workstation_shm.py

The published runs, with the machine details each source states, are in
``validation/workstation_shm/measurements.yaml``.

1. Every run with bus bandwidths and a preset (``cluster``): ``heterosim collective --op
   allreduce --size 1GiB..8GiB`` (flow fidelity) on GPUs 0..n-1 of the preset, the largest bus
   bandwidth beside the published one. NVIDIA/nccl #1639 (8x RTX 5090, 2x Xeon Platinum 8480+,
   ``NCCL_NTHREADS=256 NCCL_MIN_NCHANNELS=8 all_reduce_perf -b 1g -e 8g -f 2 -g 8``: busbw 28 GB/s
   with 8 GPUs, 35 with 4) on ``rtx5090_8gpu_2socket.yaml``, whose constants are datasheet numbers
   (PCIe Gen5 x16, 4 UPI links at 16 GT/s, 8 DDR5-4800 channels per socket), none fitted.
2. Capacity ledger at the published bus bandwidth B: what each host resource the SHM ring uses
   carries, from NCCL's data path (every byte a GPU receives is written by the sender's kernel
   into host memory on the receiver's NUMA node and read back by the receiver's kernel;
   shm.cc, ``NCCL_SHM_LOCALITY`` 2): per socket, DRAM writes + reads = 2 B x receivers on the
   socket; the inter-socket link per direction, B x ring hops that cross it (ring order as the
   planner builds it); each GPU's PCIe link, B each way. Beside each, the preset's capacity.
3. NVIDIA/nccl issue #1309 (two RTX 4090): the pair under one PCIe switch is slower than a pair
   on different sockets; NCCL's maintainer: without P2P "the traffic cannot stay local to the
   PCI switch and has to go back to the CPU, causing a 2x increase in load on the PCI link to the
   CPU". Checked on ``topologies/workstations/rtx4090_8gpu_2switch.yaml``: 2-GPU all-reduce,
   GPUs 0-1 (one switch) and 0-4 (two sockets).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

WORKSTATIONS = REPO / "topologies" / "workstations"
MEASUREMENTS = REPO / "validation" / "workstation_shm" / "measurements.yaml"
SIZES = [1 << 30, 2 << 30, 4 << 30, 8 << 30]
PAIR_CLUSTER = WORKSTATIONS / "rtx4090_8gpu_2switch.yaml"
SAME_SWITCH, ACROSS_SOCKETS = (0, 1), (0, 4)  # NVIDIA/nccl issue #1309


def published_runs() -> list[dict[str, Any]]:
    """The runs of ``validation/workstation_shm/measurements.yaml``."""
    runs: list[dict[str, Any]] = yaml.safe_load(MEASUREMENTS.read_text())["runs"]
    return runs


def simulated_busbw(cluster_file: Path, ranks: tuple[int, ...], sizes: list[int]) -> float:
    """Largest all-reduce bus bandwidth over ``sizes`` (GB/s, flow fidelity)."""
    from heterosim.config.cluster import load_cluster
    from heterosim.simulate import CollectiveSpec, engine_config, simulate_collective_sizes

    cluster = load_cluster(cluster_file)
    rows = simulate_collective_sizes(
        cluster, CollectiveSpec("allreduce", ranks), sizes, engine_config(fidelity="flow")
    )
    return max(row.busbw_GBps for row in rows)


def ring_loads(cluster_file: Path, gpus: int) -> dict[str, tuple[float, float]]:
    """Per host resource of one host's SHM ring over GPUs 0..gpus-1: (bytes carried per byte of
    bus bandwidth, capacity GB/s). Rings as the planner orders them (one per channel, all
    channels alike in load)."""
    import numpy as np

    from heterosim.config.cluster import load_cluster
    from heterosim.plan import host_paths
    from heterosim.plan.collectives.commview import comm_view
    from heterosim.plan.collectives.ring import ring_orders

    cluster = load_cluster(cluster_file)
    host = cluster.host(0)
    socket = np.array([host_paths.socket_of_gpu(host, g) for g in range(gpus)])
    order = ring_orders(comm_view(list(range(gpus)), cluster), 1)[0]
    src, dst = socket[order], socket[np.roll(order, -1)]
    loads: dict[str, tuple[float, float]] = {}
    for s in range(host.sockets):
        receivers = int((dst == s).sum())
        loads[f"DRAM socket {s}"] = (2.0 * receivers, host.memory_bps / 8e9)
    for a in range(host.sockets):
        for b in range(host.sockets):
            if a != b:
                crossings = float(((src == a) & (dst == b)).sum())
                loads[f"socket link {a}->{b}"] = (crossings, host.socket_link_bps / 8e9)
    loads["PCIe per GPU, each way"] = (1.0, host.pcie_bps / 8e9)
    return loads


def main() -> int:
    runs = published_runs()
    print("| run | GPUs | measured busbw (GB/s) | simulated (GB/s) | error |")
    print("|---|---|---|---|---|")
    ledgers = []
    for run in runs:
        if not run["busbw_GBps"] or not run["cluster"]:
            continue
        cluster_file = WORKSTATIONS / run["cluster"]
        for gpus, measured in sorted(run["busbw_GBps"].items(), reverse=True):
            sim = simulated_busbw(cluster_file, tuple(range(gpus)), SIZES)
            err = 100 * (sim / measured - 1)
            print(f"| {run['id']} | {gpus} | {measured:.1f} | {sim:.1f} | {err:+.1f} % |")
            ledgers.append((run["id"], gpus, measured, ring_loads(cluster_file, gpus)))

    print("\nLoad at the measured bus bandwidth B (GB/s, and the share of the preset's capacity):")
    for run_id, gpus, measured, loads in ledgers:
        cells = [
            f"{name} {per_b * measured:.1f} ({100 * per_b * measured / cap:.0f} %)"
            for name, (per_b, cap) in loads.items()
            if per_b
        ]
        print(f"- {run_id}, {gpus} GPUs, B = {measured:.1f}: " + "; ".join(cells))

    unread = [run["id"] for run in runs if not run["busbw_GBps"]]
    print(f"\nRuns whose result rows could not be read (measurements.yaml `readable`): {', '.join(unread)}")

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
