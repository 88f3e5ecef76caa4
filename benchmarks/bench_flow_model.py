"""Wall time of the fluid (``flow``) network model and the plan executor at scale.

1. Ring AllReduce over all 1024 GPUs of the H0 1024-GPU preset run through ``execute_plan`` with
   fidelity ``flow``: a plain ring built here (2(n-1) steps, one flow per rank per step, a rank
   sends step s once it has received step s-1) with ``channels`` parallel rings; and, at 128 GPUs,
   the NCCL-style decomposition of heterosim.plan.collectives (channels, chunks).
2. 100k independent flows between random GPUs of the same cluster through ``run_flows_fluid``:
   once with Poisson arrivals (a busy fabric, flows overlapping in time), once all starting at
   time 0 (worst case: every flow shares the fabric with every other, large components).

Usage: python benchmarks/bench_flow_model.py [--quick]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from heterosim.config.cluster import load_cluster
from heterosim.config.experiment import NetworkConfig
from heterosim.engine import native
from heterosim.engine.executor import engine_config, execute_plan
from heterosim.engine.fluid import run_flows_fluid
from heterosim.engine.topology import build_topology
from heterosim.plan.collectives.decompose import decompose_collective
from heterosim.plan.execution_plan import FLOW, ExecutionPlan

REPO = Path(__file__).resolve().parent.parent
NETWORK = NetworkConfig(cc="dcqcn", mtu_bytes=4096, pfc=True, buffer_bytes=32 << 20, ecmp=True)


def ring_allreduce_plan(gpus: int, size_bytes: int, channels: int) -> ExecutionPlan:
    """``channels`` rings over GPUs 0..gpus-1 (channel c shifts the order by c * 8 + c so rings
    leave hosts through different GPUs); flow (c, s, r) depends on flow (c, s-1, r-1)."""
    steps = 2 * (gpus - 1)
    chunk = max(1, size_bytes // (gpus * channels))
    c, s, r = np.meshgrid(np.arange(channels), np.arange(steps), np.arange(gpus), indexing="ij")
    c, s, r = c.ravel(), s.ravel(), r.ravel()
    order = (np.arange(gpus)[None, :] + (np.arange(channels) * 9)[:, None]) % gpus
    n = c.size
    src = order[c, r]
    dst = order[c, (r + 1) % gpus]
    has_dep = s > 0
    parent = (c * steps + s - 1) * gpus + (r - 1) % gpus
    dep_ptr = np.concatenate([[0], np.cumsum(has_dep)]).astype(np.int64)
    return ExecutionPlan(
        kind=np.full(n, FLOW, np.uint8),
        gpu=src.astype(np.int32),
        dst=dst.astype(np.int32),
        bytes=np.full(n, chunk, np.int64),
        duration_ns=np.zeros(n, np.int64),
        delay_ns=np.zeros(n, np.int64),
        stream=np.zeros(n, np.int16),
        priority=np.zeros(n, np.uint8),
        dep_ptr=dep_ptr,
        dep_idx=parent[has_dep].astype(np.int64),
        rank=src.astype(np.int32),
        node=np.full(n, -1, np.int64),
        collective=np.zeros(n, np.int64),
        num_gpus=gpus,
    )


def report_allreduce(
    label: str, plan: ExecutionPlan, build_s: float, size_bytes: int, gpus: int, topo
) -> None:
    result = execute_plan(plan, topo, NETWORK, engine_config("flow"))
    flows = int((plan.kind == FLOW).sum())
    seconds = result.makespan_ns * 1e-9
    busbw = size_bytes / seconds * 2 * (gpus - 1) / gpus / 1e9
    print(
        f"{label}: {gpus} GPUs {size_bytes / 2**20:.0f} MiB: tasks {len(plan)}, flows {flows}, "
        f"plan {build_s:.2f} s, execute {result.wall_s:.2f} s ({result.events} events, "
        f"{result.events / result.wall_s / 1e6:.2f} M events/s), simulated "
        f"{seconds * 1e3:.3f} ms, busbw {busbw:.1f} GB/s"
    )


def bench_ring(cluster_file: str, size_bytes: int, channels: int) -> None:
    topo = build_topology(load_cluster(REPO / "topologies" / cluster_file))
    gpus = len(topo.gpu_node)
    started = time.perf_counter()
    plan = ring_allreduce_plan(gpus, size_bytes, channels)
    report_allreduce(
        f"plain ring x{channels} on {cluster_file}",
        plan,
        time.perf_counter() - started,
        size_bytes,
        gpus,
        topo,
    )


def bench_nccl_ring(cluster_file: str, size_bytes: int) -> None:
    cluster = load_cluster(REPO / "topologies" / cluster_file)
    topo = build_topology(cluster)
    gpus = len(topo.gpu_node)
    started = time.perf_counter()
    coll = decompose_collective("allreduce", size_bytes, list(range(gpus)), cluster, algorithm="ring")
    plan = coll.to_execution_plan(gpus)
    report_allreduce(
        f"NCCL-style ring on {cluster_file}", plan, time.perf_counter() - started, size_bytes, gpus, topo
    )


def bench_random_flows(cluster_file: str, count: int, arrivals: str, seed: int = 1) -> None:
    topo = build_topology(load_cluster(REPO / "topologies" / cluster_file))
    gpus = len(topo.gpu_node)
    rng = np.random.default_rng(seed)
    src = rng.integers(0, gpus, count)
    dst = (src + rng.integers(1, gpus, count)) % gpus
    size = np.exp(rng.uniform(np.log(64 << 10), np.log(16 << 20), count)).astype(np.int64)
    if arrivals == "poisson":
        # offered load ~ 30 % of the GPUs' injection bandwidth (400 Gb/s per GPU)
        mean_gap_ns = size.mean() * 8 / (0.3 * gpus * 400e9) * 1e9
        start = np.cumsum(rng.exponential(mean_gap_ns, count)).astype(np.int64)
    else:
        start = np.zeros(count, np.int64)
    out = run_flows_fluid(topo, NETWORK, src, dst, size, start, seed=seed)
    fct = out["flows"]["fct_ns"]
    print(
        f"{count} flows ({arrivals}) on {cluster_file}: wall {out['wall_s']:.2f} s, simulated "
        f"{out['sim_end_ns'] * 1e-6:.3f} ms, median FCT {np.median(fct) / 1e3:.1f} us, "
        f"max FCT {fct.max() / 1e3:.1f} us, all delivered {bool((fct > 0).all())}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes (smoke run)")
    args = parser.parse_args()
    started = time.perf_counter()
    native.load()
    print(f"load native library: {time.perf_counter() - started:.2f} s")
    if args.quick:
        bench_ring("h0_128gpu.yaml", 64 << 20, 1)
        bench_random_flows("h0_128gpu.yaml", 10_000, "poisson")
        return
    bench_nccl_ring("h0_128gpu.yaml", 64 << 20)
    bench_ring("h0_1024gpu.yaml", 1 << 30, 1)
    bench_ring("h0_1024gpu.yaml", 1 << 30, 4)
    bench_random_flows("h0_1024gpu.yaml", 100_000, "poisson")
    bench_random_flows("h0_1024gpu.yaml", 100_000, "all-at-once")


if __name__ == "__main__":
    main()
