"""Fluid network: max-min rates against hand-computed values, re-allocation, conservation,
max-min optimality on random traffic, and the same routes as the Python topology."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from heterosim.config.cluster import parse_cluster
from heterosim.engine.fluid import create_fluid_network, reset_simulator, run_flows_fluid
from heterosim.engine.topology import build_topology, to_native
from heterosim.errors import UserError

pytestmark = pytest.mark.ns3

# tests/engine/conftest.py: fluid_network (DCQCN, 4 KiB MTU, PFC, ECMP), path_latency_ns (the
# fluid model's fixed latency of a path), shipped_topology, random_flows, start_fluid_flows


@pytest.fixture(scope="module")
def two_hosts(shipped_topology):
    return shipped_topology("two_host_h100.yaml")


@pytest.fixture(scope="module")
def mixed_nics():
    """One leaf; host 0 has two GPUs behind one 400G NIC, host 1 a 100G NIC, host 2 a 400G NIC."""

    def host(speed):
        return {"gpu": "H100", "gpus": 2, "fabric": "pcie", "nics": 1, "nic_speed": speed}

    cluster = parse_cluster(
        {
            "host_types": {"fast": host("400Gbps"), "slow": host("100Gbps")},
            "hosts": [
                {"type": "fast", "count": 1},
                {"type": "slow", "count": 1},
                {"type": "fast", "count": 1},
            ],
            "fabric": {"kind": "fat-tree", "link_delay": "1us"},
        },
        "mixed.yaml",
    )
    return build_topology(cluster)


@pytest.fixture
def hashes(two_hosts, fluid_network, native_lib):
    """The fluid network's ECMP hash of each flow ``i`` = ``src[i]`` -> ``dst[i]`` on two_hosts."""

    def flow_hashes(seed: int, src, dst) -> list[int]:
        reset_simulator(native_lib)
        net = create_fluid_network(native_lib, to_native(two_hosts, native_lib), fluid_network, seed)
        return [int(net.FlowHash(i, int(s), int(d))) for i, (s, d) in enumerate(zip(src, dst))]

    return flow_hashes


def test_lone_flow_takes_bottleneck_rate_plus_path_latency(
    two_hosts, fluid_network, path_latency_ns, native_lib
):
    size = 1_000_000
    out = run_flows_fluid(two_hosts, fluid_network, [0], [8], [size], [0])
    links = two_hosts.path_links(0, 8, 0)
    bottleneck = min(two_hosts.link_rate_bps[k] for k in links)  # the 400G NIC
    assert bottleneck == 400e9
    assert out["flows"]["fct_ns"][0] == 20_000 + path_latency_ns(two_hosts, links, size)


def test_two_flows_sharing_a_link_get_half_each(
    two_hosts, fluid_network, path_latency_ns, hashes, native_lib
):
    # GPU 0 and GPU 1 both send to GPU 8: they share the rail switch -> h1.nic0 link
    size = 1_000_000
    out = run_flows_fluid(two_hosts, fluid_network, [0, 1], [8, 8], [size, size], [0, 0])
    for i, src in enumerate((0, 1)):
        links = two_hosts.path_links(src, 8, hashes(1, [0, 1], [8, 8])[i])
        # 200 Gb/s each = 25 B/ns
        assert out["flows"]["fct_ns"][i] == 40_000 + path_latency_ns(two_hosts, links, size)


def test_flow_bottlenecked_elsewhere_leaves_its_share_and_rates_are_reallocated(
    mixed_nics, fluid_network, path_latency_ns, native_lib
):
    # f1: GPU 0 -> GPU 2 (100G NIC); f2: GPU 1 -> GPU 4 (400G). Both leave through host 0's one
    # 400G NIC. Max-min: f1 = 100G (its own bottleneck), f2 = 300G; when f1's transfer ends f2
    # gets the full 400G.
    s1, s2 = 1_250_000, 5_000_000
    out = run_flows_fluid(mixed_nics, fluid_network, [0, 1], [2, 4], [s1, s2], [0, 0])
    p1, p2 = mixed_nics.path_links(0, 2, 0), mixed_nics.path_links(1, 4, 0)
    assert set(p1) & set(p2)
    t1 = s1 / 12.5  # 100 Gb/s = 12.5 B/ns -> 100 us
    assert out["flows"]["fct_ns"][0] == t1 + path_latency_ns(mixed_nics, p1, s1)
    moved = 37.5 * t1  # 300 Gb/s until f1's transfer ends
    t2 = t1 + (s2 - moved) / 50.0
    assert out["flows"]["fct_ns"][1] == t2 + path_latency_ns(mixed_nics, p2, s2)
    # bytes on host 0's uplink = both flows; on the 100G NIC's downlink = f1 only
    links = out["links"]
    shared = (set(p1) & set(p2)).pop()
    row = np.flatnonzero(links["link"] == shared)
    assert links["bytes"][row].sum() == s1 + s2


def test_link_bytes_are_conserved_on_random_traffic(fluid_network, shipped_topology, hashes, native_lib):
    topo = shipped_topology("mixed_16gpu.yaml")
    rng = np.random.default_rng(3)
    n = 300
    src = rng.integers(0, 16, n)
    dst = (src + rng.integers(1, 16, n)) % 16
    size = rng.integers(1, 8 << 20, n)
    start = rng.integers(0, 200_000, n)
    out = run_flows_fluid(topo, fluid_network, src, dst, size, start, seed=5)
    assert np.all(out["flows"]["end_ns"] > start)
    expected = np.zeros(2 * topo.num_links, np.int64)
    for i, h in enumerate(hashes(5, src, dst)):
        node = int(topo.gpu_node[src[i]])
        for link in topo.path_links(int(src[i]), int(dst[i]), h):  # Python routes = C++ routes
            direction = 0 if int(topo.link_a[link]) == node else 1
            expected[2 * link + direction] += size[i]
            node = topo.other_end(link, node)
    np.testing.assert_array_equal(out["links"]["bytes"], expected)
    assert out["network"]["bytes"] == size.sum()
    assert np.all(out["links"]["utilization"] <= 1.0 + 1e-9)
    assert np.all(out["links"]["busy_ns"] <= out["sim_end_ns"])


def test_allocation_is_max_min_fair_on_random_flows(
    native_lib, fluid_network, shipped_topology, start_fluid_flows
):
    """Every flow has a saturated link on which no other flow gets more (max-min optimality)."""
    gbl = native_lib
    ns3 = gbl.ns3
    topo = shipped_topology("mixed_16gpu.yaml")
    rng = np.random.default_rng(11)
    n = 120
    src = rng.integers(0, 16, n).astype(np.uint32)
    dst = ((src + rng.integers(1, 16, n)) % 16).astype(np.uint32)
    net = start_fluid_flows(topo, fluid_network, 2, src, dst, 1 << 30)
    ns3.Simulator.Stop(ns3.NanoSeconds(1))
    ns3.Simulator.Run()
    rates = np.array([net.GetFlowRateBps(i) for i in range(n)])
    flows_on: dict[int, list[int]] = {}
    for i in range(n):
        node = int(topo.gpu_node[src[i]])
        flow_hash = int(net.FlowHash(i, int(src[i]), int(dst[i])))
        for link in topo.path_links(int(src[i]), int(dst[i]), flow_hash):
            direction = 0 if int(topo.link_a[link]) == node else 1
            flows_on.setdefault(2 * link + direction, []).append(i)
            node = topo.other_end(link, node)
    load = {r: rates[f].sum() for r, f in flows_on.items()}
    for r in flows_on:
        assert load[r] <= topo.link_rate_bps[r // 2] * (1 + 1e-9)
    for i in range(n):
        assert any(
            math.isclose(load[r], topo.link_rate_bps[r // 2], rel_tol=1e-9)
            and rates[i] >= rates[f].max() * (1 - 1e-9)
            for r, f in flows_on.items()
            if i in f
        ), f"flow {i} has no bottleneck link"
    reset_simulator(gbl)


def test_unroutable_and_bad_flows_are_reported(two_hosts, fluid_network, native_lib):
    with pytest.raises(UserError, match="two different GPUs"):
        run_flows_fluid(two_hosts, fluid_network, [3], [3], [10], [0])
    with pytest.raises(UserError, match="out of range"):
        run_flows_fluid(two_hosts, fluid_network, [0], [40], [10], [0])
    import copy

    broken = copy.copy(two_hosts)
    keep = two_hosts.route_dst != int(two_hosts.gpu_nic_node[8])
    counts = np.diff(two_hosts.route_ptr)
    broken.route_node, broken.route_dst = two_hosts.route_node[keep], two_hosts.route_dst[keep]
    ptr = two_hosts.route_ptr
    broken.route_link = np.concatenate(
        [two_hosts.route_link[ptr[e] : ptr[e + 1]] for e in np.flatnonzero(keep)]
    ).astype(np.int32)
    broken.route_ptr = np.concatenate([[0], np.cumsum(counts[keep])]).astype(np.int64)
    with pytest.raises(UserError, match="flow 1 from GPU 0 to GPU 8 has no route"):
        run_flows_fluid(broken, fluid_network, [0, 0], [1, 8], [10, 10], [0, 0])


def test_header_bytes_attribute_scales_payload_capacity(two_hosts, fluid_network, native_lib):
    size = 1_000_000
    mtu = fluid_network.mtu_bytes
    base = run_flows_fluid(two_hosts, fluid_network, [0], [8], [size], [0])["flows"]["fct_ns"][0]
    headers = replace(fluid_network, attributes={"FluidNetwork::HeaderBytes": 64})
    slower = run_flows_fluid(two_hosts, headers, [0], [8], [size], [0])["flows"]["fct_ns"][0]
    assert slower - base == pytest.approx(20_000 * 64 / mtu, abs=1)


@pytest.mark.parametrize("cluster", ["mixed_16gpu.yaml", "h4_128gpu.yaml"])
def test_local_recomputation_matches_whole_component_refill(
    cluster, fluid_network, shipped_topology, random_flows, native_lib
):
    """LocalRecompute (re-fill only the affected flows, then verify) gives the same finish times
    as re-filling the whole connected component on every change; random arrivals and sizes on an
    oversubscribed fabric make rates interact across many links."""
    topo = shipped_topology(cluster)
    src, dst, size, start = random_flows(len(topo.gpu_node), 3000)
    ends = {}
    for local in ("true", "false"):
        network = replace(fluid_network, attributes={"FluidNetwork::LocalRecompute": local})
        out = run_flows_fluid(topo, network, src, dst, size, start, seed=3)
        ends[local] = out["flows"]["end_ns"]
        assert np.all(ends[local] > start)
    # the two fill the same max-min problem in a different order: equal up to 1 ns of rounding
    assert np.abs(ends["true"] - ends["false"]).max() <= 1


def test_flow_hash_is_the_packet_networks(fluid_network, shipped_topology, native_lib):
    """Both network models route a flow over the same links: the fluid model's ECMP hash is
    TopologyDescription::FlowHash of (seed, flow, src, dst) with the packet network's data salt,
    and with ECMP off every flow takes the first path, as in the packet network."""
    from heterosim.engine import native

    gbl = native.load()
    reset_simulator(gbl)
    desc = to_native(shipped_topology("mixed_16gpu.yaml"), gbl)
    ns3 = gbl.ns3
    pairs = [(0, 9), (3, 12), (15, 1), (7, 8)]
    for seed in (1, 7):
        net = create_fluid_network(gbl, desc, fluid_network, seed)
        for flow, (s, d) in enumerate(pairs):
            assert int(net.FlowHash(flow, s, d)) == int(ns3.TopologyDescription.FlowHash(seed, flow, s, d, 0))
        # the hash depends on the endpoints, not only on the flow id
        assert len({int(net.FlowHash(0, s, d)) for s, d in pairs}) == len(pairs)
    net = create_fluid_network(gbl, desc, replace(fluid_network, ecmp=False), 1)
    assert all(int(net.FlowHash(flow, s, d)) == 0 for flow, (s, d) in enumerate(pairs))


def test_roce_frame_overhead_slows_network_links_only(two_hosts, fluid_network, native_lib):
    """frame_overhead roce: an inter-host flow moves at NIC rate x 4096 / (4096 + 82 + 86)
    (data header with preamble/IFG and one ACK frame per data packet); an intra-host NVLink flow
    keeps its rate."""
    from heterosim.config.experiment import _network
    from heterosim.config.fields import Section
    from heterosim.engine.fluid import ROCE_OVERHEAD_BYTES

    assert ROCE_OVERHEAD_BYTES == 168
    roce = replace(fluid_network, frame_overhead="roce")
    assert _network(Section({}, "t.yaml")).frame_overhead == "roce"  # experiments' default
    size = 64 << 20
    for dst, framed in ((8, True), (1, False)):
        base = run_flows_fluid(two_hosts, fluid_network, [0], [dst], [size], [0])["flows"]["fct_ns"][0]
        slow = run_flows_fluid(two_hosts, roce, [0], [dst], [size], [0])["flows"]["fct_ns"][0]
        if framed:
            nic = float(two_hosts.link_rate_bps.min())  # the 400G NIC is the bottleneck
            payload_s = size * 8 / nic
            assert slow - base == pytest.approx(payload_s * 1e9 * 168 / 4096, rel=0.01)
        else:
            assert slow == base
