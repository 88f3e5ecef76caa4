"""Multi-plane fabrics: one plane of 800G against two of 400G and four of 200G (128 GPUs).

Usage: python3 benchmarks/bench_planes.py [--fidelity flow,packet] [--size 256MiB]

On the presets topologies/b200_800g_128gpu.yaml, b200_2plane_128gpu.yaml and
b200_4plane_128gpu.yaml (every GPU has 800 Gb/s of scale-out bandwidth in each) it simulates a
ring all-reduce (NCCL's channels, Simple protocol) of ``--size`` across the 16 hosts, one GPU
per host (the data-parallel group of a TP=8 job: NIC-bound), and a send/recv of the same size
between two hosts; it prints the channels NCCL builds, the time, the bus bandwidth and the
share of the fabric bytes each plane carried (access links, both directions).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from heterosim.config.cluster import load_cluster
from heterosim.config.experiment import default_network
from heterosim.engine.executor import engine_config, execute_plan
from heterosim.engine.topology import ACCESS, build_topology
from heterosim.plan.collectives.decompose import decompose_collective
from heterosim.units import parse_size

TOPOLOGIES = Path(__file__).resolve().parent.parent / "topologies"
PRESETS = ("b200_800g_128gpu", "b200_2plane_128gpu", "b200_4plane_128gpu")


def run(
    name: str, op: str, ranks: list[int], size: int, fidelity: str
) -> tuple[int, float, float, list[float]]:
    """(channels, time in us, bus bandwidth in GB/s, share of access-link bytes per plane)."""
    cluster = load_cluster(TOPOLOGIES / f"{name}.yaml")
    topo = build_topology(cluster)
    algorithm = "ring" if op == "allreduce" else "auto"
    protocol = "simple" if op == "allreduce" else "auto"
    coll = decompose_collective(op, size, ranks, cluster, algorithm=algorithm, protocol=protocol)
    result = execute_plan(
        coll.to_execution_plan(cluster.world_size), topo, default_network(), engine_config(fidelity=fidelity)
    )
    links = result.links
    access = topo.link_kind[links["link"]] == ACCESS
    plane = topo.node_plane[topo.link_a[links["link"]]]
    total = float(links["bytes"][access].sum())
    shares = [float(links["bytes"][access & (plane == p)].sum()) / total for p in range(topo.planes)]
    seconds = result.makespan_ns * 1e-9
    n = len(ranks)
    factor = 2 * (n - 1) / n if op == "allreduce" else 1.0  # nccl-tests bus factors
    return coll.channels, seconds * 1e6, size / seconds / 1e9 * factor, shares


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--fidelity", default="flow,packet")
    parser.add_argument("--size", default="256MiB")
    args = parser.parse_args()
    size = int(parse_size(args.size))
    cases = (("allreduce", list(range(0, 128, 8))), ("sendrecv", [0, 8]))
    print("| fidelity | op | fabric | channels | time (us) | busbw (GB/s) | bytes per plane |")
    print("|---|---|---|---:|---:|---:|---|")
    for fidelity in args.fidelity.split(","):
        for op, ranks in cases:
            for name in PRESETS:
                started = time.perf_counter()
                channels, us, busbw, shares = run(name, op, ranks, size, fidelity)
                wall = time.perf_counter() - started
                split = " / ".join(f"{s:.3f}" for s in shares)
                print(
                    f"| {fidelity} | {op} | {name} | {channels} | {us:,.1f} | {busbw:.1f} | {split} |",
                    flush=True,
                )
                print(f"  ({wall:.1f} s wall)", flush=True)


if __name__ == "__main__":
    main()
