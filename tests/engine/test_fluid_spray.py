"""Fluid spraying (``FluidNetwork::Spray``): each flow split evenly over the equal-cost paths,
rates against hand-computed weighted max-min values, byte conservation on the split links,
max-min optimality on random traffic, local against whole-component refills, and ECMP unchanged."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from heterosim.config.cluster import parse_cluster
from heterosim.config.experiment import NetworkConfig
from heterosim.engine.fluid import reset_simulator, run_flows_fluid
from heterosim.engine.topology import (
    ACCESS,
    FABRIC,
    LEAF,
    NVLINK,
    PCIE,
    SPINE,
    Topology,
    build_topology,
    to_native,
)

pytestmark = pytest.mark.ns3

# tests/engine/conftest.py: fluid_network (DCQCN, 4 KiB MTU, PFC, ECMP), path_latency_ns (the
# fluid model's fixed latency of a path), shipped_topology, random_flows, start_fluid_flows
SIZE = 8 << 20
NIC_BYTES_PER_NS = 100e9 / 8e9  # the 100 Gb/s NICs and spine links of two_leaf_4spines.yaml


@pytest.fixture(scope="module")
def ecmp_network(fluid_network) -> NetworkConfig:
    """The fluid tests' network over IRN (ECMP: a flow takes one path)."""
    return replace(fluid_network, transport="irn")


@pytest.fixture(scope="module")
def spray_network(ecmp_network) -> NetworkConfig:
    return replace(ecmp_network, load_balancing="spray")


@pytest.fixture(scope="module")
def four_spines(shipped_topology) -> Topology:
    """Two leaves of four 1-GPU hosts, joined by four 100 Gb/s spines (4 equal-cost paths)."""
    return shipped_topology("two_leaf_4spines.yaml")


@pytest.fixture(scope="module")
def latency_ns(path_latency_ns):
    """Propagation + store-and-forward of one packet per hop (the paths are equal-cost)."""

    def latency(topo: Topology, src: int, dst: int, size: int) -> int:
        return path_latency_ns(topo, topo.path_links(src, dst, 0), size)

    return latency


def sprayed_shares(topo: Topology, src: int, dst: int) -> dict[int, float]:
    """Share of a flow's bytes per link direction when leaf and spine switches split evenly over
    their next hops, computed here from the Python route tables (one plane, NICs with one uplink):
    the host segments (NVLink, PCIe) carry all of it."""
    nic_a, nic_b = int(topo.gpu_nic_node[src]), int(topo.gpu_nic_node[dst])
    shares: dict[int, float] = {}

    def direction(link: int, node: int) -> int:
        return 2 * link + (0 if int(topo.link_a[link]) == node else 1)

    layer = {nic_a: 1.0}
    while set(layer) != {nic_b}:
        step: dict[int, float] = {}
        for node, part in layer.items():
            hops = topo.next_hops(node, nic_b)
            assert hops and (topo.node_kind[node] in (LEAF, SPINE) or len(hops) == 1)
            for link in hops:
                r = direction(link, node)
                shares[r] = shares.get(r, 0.0) + part / len(hops)
                other = topo.other_end(link, node)
                step[other] = step.get(other, 0.0) + part / len(hops)
        layer = step
    node = int(topo.gpu_node[src])
    for link in topo.path_links(src, dst, 0):
        if topo.link_kind[link] in (NVLINK, PCIE):
            shares[direction(link, node)] = 1.0
        node = topo.other_end(link, node)
    return shares


def test_permutation_that_collides_under_ecmp_runs_every_flow_at_line_rate_when_sprayed(
    four_spines, ecmp_network, spray_network, latency_ns, native_lib
):
    """Hosts 0-3 send to hosts 4-7 and back: under ECMP (seed 1) two flows hash onto one spine
    and share its 100 Gb/s; sprayed, each flow puts 1/4 of its rate on each of the four uplinks,
    four flows load each uplink with 4 x x / 4 = x <= 100 Gb/s, so every flow runs at 100 Gb/s."""
    topo = four_spines
    src = np.array([0, 1, 2, 3, 4, 5, 6, 7])
    dst = (src + 4) % 8
    size = np.full(8, SIZE)
    start = np.zeros(8, np.int64)
    ecmp = run_flows_fluid(topo, ecmp_network, src, dst, size, start, seed=1)
    sprayed = run_flows_fluid(topo, spray_network, src, dst, size, start, seed=1)
    ideal = math.ceil(SIZE / NIC_BYTES_PER_NS - 1e-6)
    assert ecmp["flows"]["fct_ns"].max() >= 2 * ideal  # a collision: half rate
    for i in range(8):
        assert sprayed["flows"]["fct_ns"][i] == ideal + latency_ns(topo, int(src[i]), int(dst[i]), SIZE)
    assert sprayed["network"]["bytes"] == 8 * SIZE


def test_degraded_uplink_limits_every_flow_sprayed_over_it(
    four_spines, fluid_network, spray_network, latency_ns, native_lib
):
    """leaf0 - spine0 cut to 20 Gb/s. Flows A: 0 -> 4 and B: 1 -> 5 each put 1/4 of their rate on
    it: (xA + xB) / 4 <= 20 Gb/s, so both run at 40 Gb/s (an oblivious sprayer cannot avoid the
    slow path); flow C: 2 -> 3 stays under leaf0 and runs at its NIC's 100 Gb/s. Bytes: the
    four uplinks of leaf0 carry A + B exactly once between them, the slow one a quarter."""
    topo = four_spines
    leaf0 = next(n for n in range(topo.num_nodes) if topo.node_kind[n] == LEAF)
    uplinks = [
        link
        for link in range(topo.num_links)
        if leaf0 in (int(topo.link_a[link]), int(topo.link_b[link]))
        and SPINE in (topo.node_kind[topo.link_a[link]], topo.node_kind[topo.link_b[link]])
    ]
    assert len(uplinks) == 4
    rates = topo.link_rate_bps.copy()
    rates[uplinks[0]] = 20e9
    slow = replace(topo, link_rate_bps=rates)
    src, dst = np.array([0, 1, 2]), np.array([4, 5, 3])
    size = np.array([SIZE, SIZE, SIZE])
    out = run_flows_fluid(slow, spray_network, src, dst, size, np.zeros(3, np.int64))
    fct = out["flows"]["fct_ns"]
    t_c = math.ceil(SIZE / NIC_BYTES_PER_NS - 1e-6)
    assert fct[2] == t_c + latency_ns(slow, 2, 3, SIZE)
    t_ab = math.ceil(SIZE / (40e9 / 8e9) - 1e-6)  # 5 B/ns
    mtu = fluid_network.mtu_bytes
    for i in (0, 1):
        # the latency is that of one of the paths (the pair's hash picks it): at most the slow
        # link's store-and-forward of one packet away from the fast paths'
        fast = latency_ns(topo, int(src[i]), int(dst[i]), SIZE)
        assert 0 <= fct[i] - t_ab - fast <= mtu * 8e9 / 20e9
    # link rows are link directions 2 * link + direction (0: a -> b); leaf0 -> spine on each uplink
    carried = out["links"]["bytes"]
    leaf_to_spine = {
        link: int(carried[2 * link + (0 if int(slow.link_a[link]) == leaf0 else 1)]) for link in uplinks
    }
    assert abs(sum(leaf_to_spine.values()) - 2 * SIZE) <= len(uplinks)  # each share rounded once
    for link in uplinks:
        assert abs(leaf_to_spine[link] - 2 * SIZE / 4) <= 1
    assert out["network"]["bytes"] == 3 * SIZE


def test_sprayed_route_shares_match_an_independent_hop_by_hop_split(shipped_topology, native_lib):
    """TopologyDescription::GetSprayedDirections against the same split computed here from the
    Python route tables, on an oversubscribed 128-GPU fabric; shares add up to 1 per hop."""
    gbl = native_lib
    topo = shipped_topology("h4_128gpu.yaml")
    desc = to_native(topo, gbl)
    std = gbl.std
    for src, dst in ((0, 127), (5, 64), (17, 40)):
        directions = std.vector["unsigned int"]()
        shares = std.vector["double"]()
        assert desc.GetSprayedDirections(src, dst, 0, -1, directions, shares)
        got = dict(zip([int(d) for d in directions], [float(s) for s in shares]))
        want = sprayed_shares(topo, src, dst)
        assert set(got) == set(want)
        for r, share in want.items():
            assert got[r] == pytest.approx(share, rel=1e-12)
        assert max(got.values()) == 1.0 and min(got.values()) < 1.0  # the fabric splits it
    # a GPU pair inside one host has no sprayed route
    assert not desc.GetSprayedDirections(0, 1, 0, -1, std.vector["unsigned int"](), std.vector["double"]())


def test_sprayed_allocation_is_weighted_max_min_fair_on_random_flows(
    spray_network, shipped_topology, start_fluid_flows, native_lib
):
    """Every sprayed flow has a saturated link direction on which no flow is faster, with a link's
    load the sum of rate x share of the flows on it (weighted max-min optimality)."""
    gbl = native_lib
    ns3 = gbl.ns3
    topo = shipped_topology("h4_128gpu.yaml")
    rng = np.random.default_rng(5)
    n = 200
    hosts = rng.integers(0, 16, n)
    src = (hosts * 8 + rng.integers(0, 8, n)).astype(np.uint32)
    dst = ((((hosts + rng.integers(1, 16, n)) % 16) * 8) + rng.integers(0, 8, n)).astype(np.uint32)
    src, dst = np.concatenate([src, src[:20]]), np.concatenate([dst, dst[:20]])  # 20 pairs twice
    n += 20
    net = start_fluid_flows(topo, spray_network, 2, src, dst, 1 << 30)
    ns3.Simulator.Stop(ns3.NanoSeconds(1))
    ns3.Simulator.Run()
    rates = np.array([net.GetFlowRateBps(i) for i in range(n)])
    assert np.all(rates > 0)
    # one stored route per GPU pair, however many flows it carries
    assert int(net.GetSprayRoutes()) == len(set(zip(src.tolist(), dst.tolist())))
    on: dict[int, dict[int, float]] = {}
    for i in range(n):
        for r, share in sprayed_shares(topo, int(src[i]), int(dst[i])).items():
            on.setdefault(r, {})[i] = share
    load = {r: sum(rates[i] * w for i, w in flows.items()) for r, flows in on.items()}
    capacity = {r: float(topo.link_rate_bps[r // 2]) for r in on}
    for r in on:
        assert load[r] <= capacity[r] * (1 + 1e-9)
    for i in range(n):
        assert any(
            math.isclose(load[r], capacity[r], rel_tol=1e-9) and rates[i] >= max(rates[list(f)]) * (1 - 1e-9)
            for r, f in on.items()
            if i in f
        ), f"flow {i} has no bottleneck"
    reset_simulator(gbl)


def test_sprayed_local_recomputation_matches_whole_component_refill(
    spray_network, shipped_topology, random_flows, native_lib
):
    """With shares, LocalRecompute still gives the finish times of whole-component refills."""
    topo = shipped_topology("h4_128gpu.yaml")
    src, dst, size, start = random_flows(128, 1500)
    ends = {}
    for local in ("true", "false"):
        network = replace(spray_network, attributes={"FluidNetwork::LocalRecompute": local})
        out = run_flows_fluid(topo, network, src, dst, size, start, seed=3)
        ends[local] = out["flows"]["end_ns"]
        assert np.all(ends[local] > start)
        # bytes conserved: every flow delivered, each GPU's NIC uplink carried what it sent
        assert out["network"]["bytes"] == int(size.sum())
    assert np.abs(ends["true"] - ends["false"]).max() <= 1


def test_uet_sprays_at_flow_fidelity_like_spray(four_spines, ecmp_network, spray_network, native_lib):
    """transport: uet (per-packet entropy over ECMP switches) runs as spraying in the fluid model."""
    topo = four_spines
    src = np.array([0, 1, 2, 3])
    dst = src + 4
    start = np.zeros(4, np.int64)
    size = np.full(4, SIZE)
    uet = replace(ecmp_network, transport="uet", cc="nscc", pfc=False)
    a = run_flows_fluid(topo, uet, src, dst, size, start)
    b = run_flows_fluid(topo, spray_network, src, dst, size, start)
    assert np.array_equal(a["flows"]["end_ns"], b["flows"]["end_ns"])


def test_a_spine_link_down_moves_sprayed_flows_onto_the_spines_left(
    four_spines, spray_network, latency_ns, start_fluid_flows, native_lib
):
    """Four flows leaf0 -> leaf1 sprayed at 100 Gb/s each; at 100 us leaf0 - spine0 goes down and
    the routes are recomputed: each flow now splits over three spines, 4 x x / 3 <= 100 Gb/s, so
    every flow runs at 75 Gb/s for the rest of its bytes."""
    gbl = native_lib
    ns3 = gbl.ns3
    topo = four_spines
    leaf0 = next(n for n in range(topo.num_nodes) if topo.node_kind[n] == LEAF)
    uplink = next(
        link
        for link in range(topo.num_links)
        if {int(topo.node_kind[topo.link_a[link]]), int(topo.node_kind[topo.link_b[link]])} == {LEAF, SPINE}
        and leaf0 in (int(topo.link_a[link]), int(topo.link_b[link]))
    )
    n = 4
    ids = np.arange(n, dtype=np.uint32)
    src = np.arange(n, dtype=np.uint32)
    net = start_fluid_flows(topo, spray_network, 1, src, src + 4, SIZE)
    cut = 100_000
    ns3.Simulator.Stop(ns3.NanoSeconds(cut))
    ns3.Simulator.Run()
    assert [net.GetFlowRateBps(i) for i in range(n)] == pytest.approx([100e9] * n, rel=1e-9)
    net.SetLinkUp(uplink, False)
    assert net.Reroute() == n
    ns3.Simulator.Stop(ns3.NanoSeconds(1))
    ns3.Simulator.Run()
    assert [net.GetFlowRateBps(i) for i in range(n)] == pytest.approx([75e9] * n, rel=1e-9)
    ns3.Simulator.Run()
    end = np.empty(n, np.int64)
    net.CopyFinishTimes(n, ids, end)
    left = SIZE - cut * NIC_BYTES_PER_NS
    for i in range(n):
        expected = cut + left / (75e9 / 8e9) + latency_ns(topo, i, i + 4, SIZE)
        assert abs(int(end[i]) - expected) <= 2
    assert int(net.GetBytesDelivered()) == n * SIZE
    reset_simulator(gbl)


def test_a_sprayed_flow_stays_on_its_plane(native_lib):
    """On a two-plane fabric the split covers the spines of the flow's plane only."""
    gbl = native_lib
    htype = {"gpu": "B200", "gpus": 8, "fabric": "nvswitch", "nics": 8, "nic_speed": "400Gbps"}
    cluster = parse_cluster(
        {
            "host_types": {"t": htype},
            "hosts": [{"type": "t", "count": 4}],
            "fabric": {"kind": "fat-tree", "planes": 2, "hosts_per_leaf": 2},
        },
        "planes.yaml",
    )
    topo = build_topology(cluster)
    desc = to_native(topo, gbl)
    for plane in (0, 1):
        directions = gbl.std.vector["unsigned int"]()
        shares = gbl.std.vector["double"]()
        assert desc.GetSprayedDirections(0, 31, 0, plane, directions, shares)
        fabric = [int(d) // 2 for d in directions if topo.link_kind[int(d) // 2] in (ACCESS, FABRIC)]
        spines = {
            end
            for link in fabric
            for end in (int(topo.link_a[link]), int(topo.link_b[link]))
            if topo.node_kind[end] == SPINE
        }
        assert len(spines) > 1  # split over several spines
        ends = {
            int(topo.node_plane[end])
            for link in fabric
            for end in (int(topo.link_a[link]), int(topo.link_b[link]))
        }
        assert ends == {plane}
        # the two NIC links carry the whole flow, the directions into the spines one flow between them
        got = {int(d): float(x) for d, x in zip(directions, shares)}
        assert sum(x for d, x in got.items() if topo.link_kind[d // 2] == ACCESS) == 2.0
        into_spines = [
            x
            for d, x in got.items()
            if topo.node_kind[topo.link_b[d // 2] if d % 2 == 0 else topo.link_a[d // 2]] == SPINE
        ]
        assert len(into_spines) == len(spines) and sum(into_spines) == pytest.approx(1.0, rel=1e-12)
