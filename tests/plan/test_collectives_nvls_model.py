"""NVLS against NCCL's own constants: search graph, availability, and simulated bus bandwidth.

The expected numbers are derived from NCCL's NVLS model (docs/network_models.md §4.4, §4.6:
heads x per-head speed x efficiency x (heads-1)/heads, x2 for AllReduce, x(ppn-1)/ppn for
AllGather), never from a measured case.
"""

from __future__ import annotations

import pytest

from heterosim.config.cluster import parse_cluster
from heterosim.config.experiment import default_network
from heterosim.errors import UserError
from heterosim.plan.collectives import decompose_collective
from heterosim.plan.collectives.commview import comm_view
from heterosim.plan.collectives.tuning import choose, nvls_bus_gbps, nvls_search_graph

H100_NVLINK = 18 * 20.6  # NCCL's per-GPU NVLink GB/s on H100 (links x SM90 per-link value)


def cluster(gpu: str = "H100-SXM", efficiency: float | None = None):
    host = {"gpu": gpu, "gpus": 8, "fabric": "nvswitch", "nics": 8, "nic_speed": "400Gbps"}
    if efficiency is not None:
        host["nvlink_efficiency"] = efficiency
    return parse_cluster(
        {
            "name": "t",
            "host_types": {"h": host},
            "hosts": [{"type": "h", "count": 1}],
            "fabric": {"kind": "rail-optimized", "link_delay": "1us"},
        },
        "t.yaml",
    )


def nccl_nvls_busbw(heads: int, speed: float, eff: float, coll: str) -> float:
    bus = heads * speed * eff * (heads - 1) / heads
    return bus * 2 if coll == "allreduce" else bus * (heads - 1) / heads


@pytest.mark.parametrize("n,speed", [(8, 40.0), (4, 60.0), (3, 60.0)])
def test_nvls_search_graph_h100(n, speed):
    """One head per GPU; (n+1) x speed fits the port (head counted twice): 370.8/9 -> 40 on 8 GPUs."""
    view = comm_view(list(range(n)), cluster())
    assert view.intra_gbps == pytest.approx(H100_NVLINK)
    assert nvls_search_graph(view) == (n, speed)
    for coll in ("allreduce", "allgather", "reducescatter"):
        assert nvls_bus_gbps(coll, view) == pytest.approx(nccl_nvls_busbw(n, speed, 0.85, coll))
    assert nvls_bus_gbps("allreduce", comm_view(list(range(8)), cluster())) == pytest.approx(476.0)


def test_nvls_blackwell_uses_its_ladder_and_efficiency():
    view = comm_view(list(range(8)), cluster("B200"))
    assert view.intra_gbps == pytest.approx(18 * 40.1)
    assert nvls_search_graph(view) == (8, 80.0)  # 721.8 / 9 = 80.2 on the SM100 ladder
    assert nvls_bus_gbps("allreduce", view) == pytest.approx(nccl_nvls_busbw(8, 80.0, 0.74, "allreduce"))


def test_no_nvls_on_two_gpus():
    """ncclNvlsInit: no NVLS with <= 2 GPUs, so a TP=2 all-reduce is a ring at every size."""
    c = cluster()
    for size in (2**16, 37_748_736, 2**30):
        plan = decompose_collective("allreduce", size, [0, 1], c)
        assert plan.algorithm == "ring" and not any(k.startswith("nvls") for k in plan.candidates)
    with pytest.raises(UserError, match="not available"):
        decompose_collective("allreduce", 2**20, [0, 1], c, algorithm="nvls")
    fallback = decompose_collective("allreduce", 2**20, [0, 1], c, algorithm="nvls", strict=False)
    assert fallback.algorithm == "ring"
    assert "nvls/simple" in choose("allreduce", 2**30, comm_view([0, 1, 2], c)).candidates


def test_auto_choice_is_the_cheapest_model_candidate():
    """H100: NVLS (476) beats the ring (370.8) on 8 GPUs for large messages; on 4 GPUs NVLS
    (4 x 60 x 0.85 x 3/4 x 2 = 306) loses to the ring, as NCCL's model says."""
    c = cluster()
    eight = choose("allreduce", 2**30, comm_view(list(range(8)), c))
    four = choose("allreduce", 2**30, comm_view(list(range(4)), c))
    assert eight.algorithm == "nvls" and four.algorithm == "ring"
    for ch in (eight, four):
        assert ch.predicted_us == min(ch.candidates.values())


def _simulate(plan, c):
    from heterosim.engine.executor import engine_config, execute_plan
    from heterosim.engine.topology import build_topology

    return execute_plan(
        plan.to_execution_plan(c.world_size),
        build_topology(c),
        default_network(),
        engine_config(fidelity="flow", seed=1),
    )


@pytest.mark.ns3
@pytest.mark.parametrize(
    "coll,n", [("allreduce", 8), ("allreduce", 4), ("allgather", 8), ("reducescatter", 4)]
)
def test_simulated_nvls_busbw_follows_nccl_model(native_lib, coll, n):
    c = cluster()
    size = 2**30
    plan = decompose_collective(coll, size, list(range(n)), c, algorithm="nvls")
    assert plan.algorithm == "nvls"
    t_ns = _simulate(plan, c).makespan_ns
    factor = 2 * (n - 1) / n if coll == "allreduce" else (n - 1) / n
    busbw = size / t_ns * factor  # bytes/ns = GB/s
    expected = nccl_nvls_busbw(*nvls_search_graph(comm_view(list(range(n)), c)), 0.85, coll)
    assert busbw <= expected * 1.001
    assert busbw == pytest.approx(expected, rel=0.02)
    # latency + bandwidth: the simulated time is NCCL's own estimate (25 us + S / algbw)
    assert t_ns == pytest.approx(plan.predicted_ns, rel=0.02)


@pytest.mark.ns3
@pytest.mark.parametrize("size", [2**20, 36 * 2**20])
def test_simulated_nvls_time_matches_tuning_estimate_at_small_sizes(native_lib, size):
    c = cluster()
    plan = decompose_collective("allreduce", size, list(range(8)), c, algorithm="nvls")
    assert _simulate(plan, c).makespan_ns == pytest.approx(plan.predicted_ns, rel=0.03)


@pytest.mark.ns3
def test_simulated_nvls_follows_the_link_rate(native_lib):
    """The wire factor is a ratio to NCCL's NVLink view: a link at half NCCL's effective rate
    doubles the bandwidth term (documented limit in nvls.py)."""
    size = 2**30
    times = []
    for eff in (20.6 / 25.0, 20.6 / 50.0):
        c = cluster(efficiency=eff)
        plan = decompose_collective("allreduce", size, list(range(8)), c, algorithm="nvls")
        times.append(_simulate(plan, c).makespan_ns - 25_000)
    assert times[1] / times[0] == pytest.approx(2.0, rel=0.01)
