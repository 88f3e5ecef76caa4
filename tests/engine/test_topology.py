"""Topology builder: structure, oversubscription, routes (Python and C++ agree)."""

from __future__ import annotations

import numpy as np
import pytest

from heterosim.config.cluster import parse_cluster
from heterosim.engine.topology import ACCESS, FABRIC, GPU, LEAF, NIC, NVLINK, SPINE, build_topology, to_native
from heterosim.errors import UserError


def cluster(
    hosts=2,
    kind="rail-optimized",
    oversub=1,
    per_leaf=16,
    gpu="H100",
    fabric="nvswitch",
    nics=8,
    speed="400Gbps",
    spine=None,
):
    fab = {"kind": kind, "oversubscription": oversub, "hosts_per_leaf": per_leaf}
    if spine:
        fab["spine_speed"] = spine
    return parse_cluster(
        {
            "host_types": {"t": {"gpu": gpu, "gpus": 8, "fabric": fabric, "nics": nics, "nic_speed": speed}},
            "hosts": [{"type": "t", "count": hosts}],
            "fabric": fab,
        },
        "test.yaml",
    )


def kinds_on_path(topo, links):
    return [int(topo.link_kind[link]) for link in links]


def test_counts_for_two_dgx_hosts():
    topo = build_topology(cluster())
    assert (topo.node_kind == GPU).sum() == 16
    assert (topo.node_kind == NIC).sum() == 16
    assert (topo.node_kind == LEAF).sum() == 8  # one rail switch per NIC index
    # 2 hosts x 400G on each rail = 800G down; 1:1 -> two 400G uplinks -> two spines
    assert (topo.node_kind == SPINE).sum() == 2


def test_intra_host_path_uses_nvlink_only():
    topo = build_topology(cluster())
    links = topo.path_links(0, 5, 1)
    assert kinds_on_path(topo, links) == [NVLINK, NVLINK]


def test_inter_host_path_leaves_through_the_gpus_own_nic():
    topo = build_topology(cluster())
    for src, dst in [(0, 8), (3, 11), (2, 13)]:
        links = topo.path_links(src, dst, 5)
        nodes = {int(topo.link_a[k]) for k in links} | {int(topo.link_b[k]) for k in links}
        assert int(topo.gpu_nic_node[src]) in nodes and int(topo.gpu_nic_node[dst]) in nodes
        assert NVLINK not in kinds_on_path(topo, links)
        assert kinds_on_path(topo, links).count(ACCESS) == 2


def test_oversubscription_sets_uplink_count():
    # 4 hosts per leaf (fat-tree), 8 x 400G NICs each = 12.8T down; 4:1 -> 3.2T up = 8 x 400G
    topo = build_topology(cluster(hosts=8, kind="fat-tree", oversub=4, per_leaf=4))
    leaf = int(np.flatnonzero(topo.node_kind == LEAF)[0])
    up = [
        k
        for k in range(topo.num_links)
        if topo.link_kind[k] == FABRIC and leaf in (topo.link_a[k], topo.link_b[k])
    ]
    assert len(up) == 8


def test_ecmp_spreads_over_spines():
    topo = build_topology(cluster(hosts=4, per_leaf=2))
    spines_used = set()
    for h in range(64):
        for link in topo.path_links(0, 16, h):
            for end in (topo.link_a[link], topo.link_b[link]):
                if topo.node_kind[end] == SPINE:
                    spines_used.add(int(end))
    assert len(spines_used) == (topo.node_kind == SPINE).sum() > 1


def test_pcie_host_without_nvlink_routes_over_pcie():
    topo = build_topology(cluster(gpu="L40S", fabric="pcie", nics=2, speed="100Gbps"))
    links = topo.path_links(0, 7, 3)
    assert links and NVLINK not in kinds_on_path(topo, links)


def test_nvswitch_on_gpu_without_nvlink_is_an_error():
    with pytest.raises(UserError, match="no NVLink"):
        cluster(gpu="L40S", fabric="nvswitch")


@pytest.mark.ns3
def test_cpp_paths_match_python(native_lib):
    topo = build_topology(cluster(hosts=4, per_leaf=2))
    desc = to_native(topo, native_lib)
    for src, dst, h in [(0, 1, 0), (0, 16, 7), (5, 30, 11), (31, 2, 99), (8, 9, 4)]:
        assert list(desc.GetPath(src, dst, h)) == topo.path_links(src, dst, h)
