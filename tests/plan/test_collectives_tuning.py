"""NCCL tuning model: reference worked example, choices by size, the choice recorded in the plan."""

from __future__ import annotations

import pytest

from heterosim.config.cluster import parse_cluster
from heterosim.plan.collectives import decompose_collective
from heterosim.plan.collectives.commview import comm_view
from heterosim.plan.collectives.tuning import choose, graph_channels, model_bw_lat


def cluster(hosts: int, gpu: str = "H100-SXM", nics: int = 8, fabric: str = "nvswitch"):
    return parse_cluster(
        {
            "name": "t",
            "host_types": {
                "h": {"gpu": gpu, "gpus": 8, "nics": nics, "fabric": fabric, "nic_speed": "400Gbps"}
            },
            "hosts": [{"type": "h", "count": hosts}],
            "fabric": {"kind": "rail-optimized"},
        },
        "t.yaml",
    )


def test_reference_worked_example_a100():
    """docs/network_models.md §4.6: A100 x8 NVSwitch, 12 channels at 20 GB/s, AllReduce."""
    view = comm_view(list(range(8)), cluster(1, gpu="A100-80GB-SXM", nics=4))
    assert view.intra_gbps == pytest.approx(240.0)
    expect = {  # (a, p): (latency us, algbw GB/s)
        ("ring", "ll"): (15.0, 50.1),
        ("ring", "ll128"): (40.6, 126.2),
        ("ring", "simple"): (56.0, 137.1),
        ("tree", "ll"): (15.2, 29.1),
        ("tree", "ll128"): (31.5, 85.9),
        ("tree", "simple"): (64.4, 110.4),
    }
    for (a, p), (lat, bw) in expect.items():
        got_bw, got_lat = model_bw_lat("allreduce", a, p, view, 12, 2**20)
        assert got_lat == pytest.approx(lat, abs=0.05), (a, p)
        assert got_bw == pytest.approx(bw, abs=0.05), (a, p)


def test_channel_counts():
    assert graph_channels(comm_view(list(range(8)), cluster(1))) == 24  # H100: 6 rings x 2 x 2
    assert graph_channels(comm_view(list(range(8)), cluster(1, gpu="A100-80GB-SXM", nics=4))) == 24
    assert graph_channels(comm_view(list(range(32)), cluster(4))) == 16  # 8 NICs, doubled


def test_choice_by_size_single_host_ring():
    view = comm_view(list(range(8)), cluster(1, gpu="A100-80GB-SXM", nics=4))
    small = choose("allreduce", 4096, view, algorithm="ring")
    large = choose("allreduce", 2**30, view, algorithm="ring")
    assert small.protocol == "ll" and large.protocol == "simple"
    # the chosen pair is the cheapest of the candidates the model evaluated
    assert small.predicted_us == min(small.candidates.values())
    assert choose("allreduce", 8 * 2**20, view, algorithm="ring").protocol == "ll128"


def test_choice_recorded_in_plan_and_auto_algorithms():
    c = cluster(1)
    small = decompose_collective("allreduce", 4096, list(range(8)), c)
    large = decompose_collective("allreduce", 2**30, list(range(8)), c)
    assert small.protocol == "ll" and large.algorithm == "nvls" and large.protocol == "simple"
    assert small.predicted_ns < large.predicted_ns
    assert set(large.candidates) >= {"ring/simple", "nvls/simple", "tree/ll"}
    ag = decompose_collective("allgather", 2**30, list(range(8)), c, protocol="ll128")
    assert (ag.algorithm, ag.protocol) == ("ring", "ll128")
    # small messages use fewer channels (NCCL's per-thread threshold)
    assert small.channels < large.channels


def test_pcie_hosts_have_no_ll128_or_nvls():
    view = comm_view(list(range(8)), cluster(1, gpu="L40S", nics=2, fabric="pcie"))
    c = choose("allreduce", 2**30, view)
    assert c.algorithm in ("ring", "tree") and not any("ll128" in k or "nvls" in k for k in c.candidates)
