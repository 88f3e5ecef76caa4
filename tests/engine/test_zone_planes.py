"""Zones on multi-plane and rail-only fabrics: every plane (and rail-only rail) of a zone joined to
the same plane (rail) of the other zone, the zone link's bandwidth shared by these links."""

from __future__ import annotations

import pytest

from heterosim.config.cluster import parse_cluster
from heterosim.engine.topology import NVLINK, build_topology, to_native

LATENCY_NS = 2_000_000


def zoned(kind="rail-optimized", planes=1, nics=4, per_leaf=16):
    return parse_cluster(
        {
            "zones": ["a", "b"],
            "host_types": {
                "t": {"gpu": "H100", "gpus": 8, "fabric": "nvswitch", "nics": nics, "nic_speed": "400Gbps"}
            },
            "hosts": [{"type": "t", "count": 2, "zone": "a"}, {"type": "t", "count": 2, "zone": "b"}],
            "zone_links": [{"zones": ["a", "b"], "latency": "2ms", "bandwidth": "800Gbps"}],
            "fabric": {"kind": kind, "planes": planes, "hosts_per_leaf": per_leaf},
        },
        "z.yaml",
    )


def zone_links(topo):
    return [k for k in range(topo.num_links) if int(topo.link_delay_ns[k]) == LATENCY_NS]


@pytest.mark.parametrize(
    ("kind", "planes", "per_leaf", "joined"),
    [
        ("rail-optimized", 1, 16, 1),
        ("rail-optimized", 2, 16, 2),
        ("fat-tree", 4, 1, 4),
        ("rail-only", 2, 16, 4),  # 2 planes x 2 rails per plane (4 ports)
        ("rail-only", 1, 1, 4),  # a spine per rail in each zone
    ],
)
def test_zone_link_joins_every_plane_and_rail_sharing_its_bandwidth(kind, planes, per_leaf, joined):
    topo = build_topology(zoned(kind, planes, per_leaf=per_leaf))
    links = zone_links(topo)
    assert len(links) == joined
    assert sum(float(topo.link_rate_bps[k]) for k in links) == pytest.approx(800e9)
    for k in links:  # same plane (and rail) on both sides, zone a to zone b
        a, b = topo.node_name[int(topo.link_a[k])], topo.node_name[int(topo.link_b[k])]
        assert a.startswith("a.") and b.startswith("b.") and a[2:] == b[2:]
        assert topo.node_plane[int(topo.link_a[k])] == topo.node_plane[int(topo.link_b[k])]


@pytest.mark.parametrize("plane", [0, 1])
def test_a_flow_between_zones_crosses_its_own_planes_zone_link(plane):
    topo = build_topology(zoned(planes=2))
    path = topo.path_links(0, 16, 5, plane)  # host 0 (zone a) to host 2 (zone b)
    crossing = [k for k in path if int(topo.link_delay_ns[k]) == LATENCY_NS]
    assert len(crossing) == 1
    assert topo.node_name[int(topo.link_a[crossing[0]])] == f"a.p{plane}.spine0"
    assert float(topo.link_rate_bps[crossing[0]]) == pytest.approx(400e9)


def test_rail_only_cross_rail_flow_between_zones_goes_through_nvlink_first():
    topo = build_topology(zoned("rail-only", nics=8))
    path = topo.path_links(1, 16 + 6, 3, 0)  # GPU 1 (rail 1) to zone b's GPU 6 (rail 6)
    kinds = [int(topo.link_kind[k]) for k in path]
    assert kinds[0] == NVLINK  # PXN: to the source host's GPU on rail 6
    assert sum(int(topo.link_delay_ns[k]) == LATENCY_NS for k in path) == 1


def test_cpp_paths_match_python_across_zones_and_planes(native_lib):
    for c in (zoned(planes=2), zoned("rail-only", nics=8, per_leaf=1)):
        topo = build_topology(c)
        desc = to_native(topo, native_lib)
        for src, dst, h in [(0, 16, 3), (1, 22, 7), (9, 30, 11), (2, 3, 5)]:
            for plane in range(-1, topo.planes):
                assert list(desc.GetPath(src, dst, h, plane)) == topo.path_links(src, dst, h, plane)
