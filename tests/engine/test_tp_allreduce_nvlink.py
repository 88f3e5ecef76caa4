"""Tensor-parallel all-reduce inside one NVSwitch host follows the NVLink rate when it is
bandwidth-bound, in the collective path and in a full training run.

Expected values from the ring all-reduce on 2 ranks: each rank sends S/2 in the reduce-scatter and
S/2 in the all-gather over its own NVLink direction, so t ~= S / R_eff with R_eff the effective
NVLink rate (line rate x NCCL's NVLink efficiency, heterosim/config/cluster.py). Context: in the
Megatron-LM README 2020 cases the TP=2 all-reduce took the same time on DGX-2 V100 (150 GB/s) and
DGX-A100 (300 GB/s); the A100 rows use micro-batch 16 against the V100 rows' 8, i.e. twice the
message at twice the rate, so equal times are expected (tested below), not a rate being ignored.
"""

from __future__ import annotations

import pytest

from heterosim.config.cluster import ClusterConfig, parse_cluster
from heterosim.config.experiment import NetworkConfig, parse_experiment
from heterosim.engine.executor import engine_config, execute_plan
from heterosim.engine.topology import build_topology
from heterosim.plan.collectives import decompose_collective

pytestmark = pytest.mark.ns3

NETWORK = NetworkConfig(cc="dcqcn", mtu_bytes=4096, pfc=True, buffer_bytes=32 << 20, ecmp=True)
MIB = 1 << 20


def host(gpu: str, gpus: int = 2, nvlink_bw: str | None = None) -> dict:
    host_type = {"gpu": gpu, "gpus": gpus, "fabric": "nvswitch", "nics": gpus, "nic_speed": "200Gbps"}
    if nvlink_bw is not None:
        host_type["nvlink_bw"] = nvlink_bw
    return {
        "name": f"{gpus}x{gpu}",
        "host_types": {"h": host_type},
        "hosts": [{"type": "h", "count": 1}],
        "fabric": {"kind": "fat-tree", "link_delay": "1us", "oversubscription": 1},
    }


def allreduce_ns(cluster: ClusterConfig, size: int) -> int:
    ranks = list(range(cluster.world_size))
    plan = decompose_collective("allreduce", size, ranks, cluster, algorithm="ring")
    engine = execute_plan(
        plan.to_execution_plan(cluster.world_size),
        build_topology(cluster),
        NETWORK,
        engine_config(fidelity="flow"),
    )
    return int(engine.makespan_ns)


def effective_bytes_per_s(cluster: ClusterConfig) -> float:
    return cluster.host_types["h"].nvlink_effective_bps / 8


def test_bandwidth_bound_allreduce_scales_with_nvlink_rate(native_lib) -> None:
    """Same GPU, NVLink 150 vs 300 GB/s per direction: a 256 MiB TP=2 all-reduce takes twice as
    long on the slower link, and S / R_eff within 3 %."""
    size = 256 * MIB
    slow = parse_cluster(host("A100-80GB-SXM", nvlink_bw="150GB/s"), "slow")
    fast = parse_cluster(host("A100-80GB-SXM", nvlink_bw="300GB/s"), "fast")
    t_slow, t_fast = allreduce_ns(slow, size), allreduce_ns(fast, size)
    assert t_slow / t_fast == pytest.approx(2.0, rel=0.03)
    for cluster, t in ((slow, t_slow), (fast, t_fast)):
        assert t * 1e-9 == pytest.approx(size / effective_bytes_per_s(cluster), rel=0.03)


def test_latency_bound_allreduce_barely_depends_on_the_rate(native_lib) -> None:
    """A 32 KiB all-reduce is dominated by per-step latency: doubling NVLink saves < 25 %."""
    slow = parse_cluster(host("A100-80GB-SXM", nvlink_bw="150GB/s"), "slow")
    fast = parse_cluster(host("A100-80GB-SXM", nvlink_bw="300GB/s"), "fast")
    ratio = allreduce_ns(slow, 32 * 1024) / allreduce_ns(fast, 32 * 1024)
    assert 1.0 <= ratio < 1.25


def test_catalogue_v100_and_a100_tp2_allreduce(native_lib) -> None:
    """The README 2020 TP=2 message (b*s*h*2 bytes, h = 2304, s = 1024, b = 8): the V100 - A100
    time difference is the bandwidth term S/R_v100 - S/R_a100 (the latency part is the same),
    and A100 at twice the micro-batch takes as long as V100 (the README rows' situation)."""
    v100 = parse_cluster(host("V100-SXM2-32GB"), "v100")
    a100 = parse_cluster(host("A100-40GB-SXM"), "a100")
    message = 8 * 1024 * 2304 * 2
    t_v100, t_a100 = allreduce_ns(v100, message), allreduce_ns(a100, message)
    bandwidth_gap = message / effective_bytes_per_s(v100) - message / effective_bytes_per_s(a100)
    assert (t_v100 - t_a100) * 1e-9 == pytest.approx(bandwidth_gap, rel=0.03)
    assert t_v100 / t_a100 > 1.8
    assert allreduce_ns(a100, 2 * message) == pytest.approx(t_v100, rel=0.03)


def tp2_comm_s(gpu: str, micro_batch: int) -> float:
    from heterosim.report.run_report import results_dict
    from heterosim.simulate import run_experiment

    exp = parse_experiment(
        {
            "model": {
                "name": "gpt-2l",
                "arch": "gpt",
                "hidden": 2304,
                "layers": 2,
                "heads": 18,
                "ffn": 9216,
                "vocab": 51200,
                "seq": 1024,
            },
            "training": {
                "global_batch": micro_batch,
                "micro_batch": micro_batch,
                "seq_len": 1024,
                "dtype": "fp16",
                "attention": "unfused",
            },
            "parallel": {"tp": 2, "dp": 1, "partition": "uniform"},
            "cluster": host(gpu),
            "simulation": {"fidelity": "flow"},
        },
        "tp2.yaml",
    )
    return float(results_dict(run_experiment(exp))["breakdown"]["intra_host_comm_s"])


def test_training_run_tp_comm_follows_nvlink_rate(native_lib) -> None:
    """In a simulated TP=2 iteration the b*s*h fp16 all-reduces are 2 forward + 2 backward per
    layer (2 layers), the vocab-parallel embedding's forward one and the head's input-gradient
    one: 10 (the cross-entropy max/sum all-reduces are a few KiB). The intra-host communication
    time drops from V100 to A100 at the same micro-batch by the bandwidth term of those 10."""
    v100, a100 = tp2_comm_s("V100-SXM2-32GB", 8), tp2_comm_s("A100-40GB-SXM", 8)
    message = 8 * 1024 * 2304 * 2
    per_allreduce_gap = message / (150e9 * 0.8) - message / (300e9 * 0.8)  # 20/25 GB/s per link
    assert v100 - a100 == pytest.approx(10 * per_allreduce_gap, rel=0.05)
    assert v100 / a100 > 1.8
