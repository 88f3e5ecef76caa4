"""Load balancing and IRN through the Python engine: the shipped permutation scenarios
(workloads/netbench/lb_*_permutation.yaml) at packet fidelity, smaller flows."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from heterosim.config.scenario import load_scenario
from heterosim.simulate.flowset import simulate_flow_set

pytestmark = pytest.mark.ns3

NETBENCH = Path(__file__).resolve().parents[2] / "workloads" / "netbench"
SIZE = "1MiB"
# line-rate FCT of 1 MiB in 1 KiB frames (+82 B each) at 100 Gb/s, ns
IDEAL_NS = (1 << 20) * (1024 + 82) / 1024 * 8 / 100e9 * 1e9


def _flows(name: str, *overrides: str) -> dict[str, np.ndarray]:
    sets = [f"flows.{i}.size={SIZE}" for i in range(8)]
    scenario = load_scenario(NETBENCH / name, [*sets, "simulation.sample_interval=0us", *overrides])
    return simulate_flow_set(scenario).raw["flows"]


def test_adaptive_routing_runs_every_flow_near_line_rate_where_ecmp_collides(native_lib):
    ecmp = _flows("lb_ecmp_permutation.yaml")
    adaptive = _flows("lb_adaptive_permutation.yaml")
    for flows in (ecmp, adaptive):
        assert (flows["end_ns"] >= 0).all() and (flows["bytes_delivered"] == 1 << 20).all()
    assert ecmp["fct_ns"].max() > 1.8 * IDEAL_NS  # seed 1: two flows hash onto one uplink
    assert adaptive["fct_ns"].max() < 1.25 * IDEAL_NS
    assert ecmp["out_of_order"].sum() == 0


def test_spraying_reorders_and_irn_delivers_everything_in_order(native_lib):
    flows = _flows("lb_spray_permutation.yaml", "network.attributes.RdmaNic::SackReorderThreshold=512")
    assert (flows["bytes_delivered"] == 1 << 20).all()
    assert (flows["out_of_order"] > 0).all() and flows["max_reorder_depth"].max() > 1
    again = _flows("lb_spray_permutation.yaml", "network.attributes.RdmaNic::SackReorderThreshold=512")
    assert np.array_equal(again["end_ns"], flows["end_ns"])  # the spraying draws are seeded


def test_spraying_over_go_back_n_resends_far_more_than_over_irn(native_lib):
    irn = _flows("lb_spray_permutation.yaml")
    gbn = _flows("lb_spray_permutation.yaml", "network.transport=roce", "network.accept_reordering=true")
    assert (gbn["bytes_delivered"] == 1 << 20).all()
    assert gbn["retransmits"].sum() > 5 * irn["retransmits"].sum() > 0


def test_flowlets_never_reorder_a_paced_flow_unless_the_gap_is_tiny(native_lib):
    flowlet = _flows("lb_flowlet_permutation.yaml")
    assert flowlet["out_of_order"].sum() == 0 and (flowlet["bytes_delivered"] == 1 << 20).all()
    tiny = _flows(
        "lb_flowlet_permutation.yaml",
        "network.transport=irn",
        "network.attributes.LoadBalancer::FlowletGap=1ns",
    )
    assert tiny["out_of_order"].sum() > 0 and (tiny["bytes_delivered"] == 1 << 20).all()


def test_every_plane_of_a_multi_plane_fabric_balances_over_its_own_spines(native_lib):
    """Two planes, one 400G port each per host and four 100G uplinks per leaf: ECMP puts each
    plane's flow on one uplink (100 Gb/s), adaptive routing on all four of that plane."""
    from dataclasses import replace

    from heterosim.config.cluster import parse_cluster
    from heterosim.config.experiment import default_network
    from heterosim.engine.executor import engine_config, execute_plan
    from heterosim.engine.topology import FABRIC, build_topology
    from heterosim.plan.collectives.decompose import decompose_collective

    htype = {"gpu": "B200", "gpus": 8, "fabric": "nvswitch", "nics": 2, "nic_speed": "400Gbps"}
    fabric = {"kind": "fat-tree", "planes": 2, "hosts_per_leaf": 1, "spine_speed": "100Gbps"}
    cluster = parse_cluster(
        {"host_types": {"t": htype}, "hosts": [{"type": "t", "count": 2}], "fabric": fabric}, "t"
    )
    topo = build_topology(cluster)
    plan = decompose_collective("sendrecv", 16 << 20, [0, 8], cluster).to_execution_plan(16)
    runs = {}
    for mode, transport in (("ecmp", "roce"), ("adaptive", "irn")):
        network = replace(default_network(), load_balancing=mode, transport=transport)
        runs[mode] = execute_plan(plan, topo, network, engine_config(fidelity="packet"))
    busy = {}
    for mode, result in runs.items():
        links = result.links
        fabric_dirs = topo.link_kind[links["link"]] == FABRIC
        plane = topo.node_plane[topo.link_a[links["link"]]]
        data = links["bytes"] > 1 << 20  # data, not acknowledgements
        busy[mode] = [int((fabric_dirs & data & (plane == p)).sum()) for p in (0, 1)]
        per_plane = [int(links["bytes"][fabric_dirs & (plane == p)].sum()) for p in (0, 1)]
        assert abs(per_plane[0] - per_plane[1]) < 0.02 * per_plane[0]  # half the bytes on each plane
    assert busy["ecmp"] == [2, 2]  # one uplink and one downlink per plane
    assert busy["adaptive"] == [8, 8]  # all four of each plane, up and down
    assert runs["adaptive"].makespan_ns < 0.4 * runs["ecmp"].makespan_ns
