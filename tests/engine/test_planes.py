"""Multi-plane and rail-only fabrics: structure, plane isolation, PXN routing, NCCL's
channel-to-plane mapping, bytes per plane in both network models, bad input."""

from __future__ import annotations

import numpy as np
import pytest

from heterosim.config.cluster import load_cluster, parse_cluster
from heterosim.engine.topology import ACCESS, FABRIC, GPU, LEAF, NIC, NVLINK, SPINE, build_topology, to_native
from heterosim.errors import UserError
from heterosim.plan.collectives.planes import flow_planes
from heterosim.plan.execution_plan import FLOW


def cluster(hosts=2, kind="rail-optimized", planes=1, nics=16, speed="400Gbps", per_leaf=16, gpu_nic=None):
    htype = {"gpu": "B200", "gpus": 8, "fabric": "nvswitch", "nics": nics, "nic_speed": speed}
    if gpu_nic is not None:
        htype["gpu_nic"] = gpu_nic
    return parse_cluster(
        {
            "host_types": {"t": htype},
            "hosts": [{"type": "t", "count": hosts}],
            "fabric": {"kind": kind, "planes": planes, "hosts_per_leaf": per_leaf},
        },
        "test.yaml",
    )


def path_nodes(topo, links, start):
    nodes, node = [start], start
    for link in links:
        node = topo.other_end(link, node)
        nodes.append(node)
    return nodes


def test_two_planes_are_two_disjoint_fabrics():
    topo = build_topology(cluster(planes=2))
    assert topo.planes == 2 and topo.gpu_plane_nic.shape == (16, 2)
    fabric = np.isin(topo.link_kind, (ACCESS, FABRIC))
    a, b = topo.link_a[fabric], topo.link_b[fabric]
    # no fabric link joins two planes: every switch and port sits on one plane
    assert np.all(topo.node_plane[a] == topo.node_plane[b])
    assert np.all(topo.node_plane[a] >= 0)
    for plane in (0, 1):
        leaves = (topo.node_kind == LEAF) & (topo.node_plane == plane)
        assert leaves.sum() == 8  # 8 rails per plane
        assert ((topo.node_kind == SPINE) & (topo.node_plane == plane)).sum() == 2
    # port j of a host on plane j % 2; GPU g owns ports 2g and 2g+1
    nic_names = [topo.node_name[n] for n in topo.gpu_plane_nic[3]]
    assert nic_names == ["h0.nic6", "h0.nic7"]
    assert [int(topo.node_plane[n]) for n in topo.gpu_plane_nic[3]] == [0, 1]


@pytest.mark.parametrize("plane", [0, 1])
def test_a_flow_stays_on_its_plane(plane):
    topo = build_topology(cluster(planes=2))
    for src, dst in [(0, 8), (3, 11), (2, 13)]:
        for h in range(8):
            links = topo.path_links(src, dst, h, plane)
            fabric_links = [k for k in links if topo.link_kind[k] in (ACCESS, FABRIC)]
            ends = {int(topo.link_a[k]) for k in fabric_links} | {int(topo.link_b[k]) for k in fabric_links}
            assert {int(topo.node_plane[n]) for n in ends} == {plane}
            nodes = path_nodes(topo, links, int(topo.gpu_node[src]))
            assert nodes[-1] == topo.gpu_node[dst]
            assert (
                int(topo.gpu_plane_nic[src, plane]) in nodes and int(topo.gpu_plane_nic[dst, plane]) in nodes
            )


def test_a_flow_without_plane_hashes_over_both():
    topo = build_topology(cluster(planes=2))
    seen = {topo.flow_nics(0, 8, h)[1] for h in range(64)}
    assert seen == {int(topo.gpu_plane_nic[0, 0]), int(topo.gpu_plane_nic[0, 1])}


def test_rail_only_has_no_path_between_rails_in_the_fabric():
    topo = build_topology(cluster(hosts=4, kind="rail-only", nics=8, per_leaf=2))
    # two host groups: each rail has a switch per group and its own spines; no shared spine
    assert (topo.node_kind == LEAF).sum() == 16
    spines = np.flatnonzero(topo.node_kind == SPINE)
    assert all(topo.node_name[s].startswith("rail") for s in spines)
    for s in spines:
        rail = topo.node_name[s].split(".")[0]
        for link in np.flatnonzero((topo.link_a == s) | (topo.link_b == s)):
            other = topo.other_end(int(link), int(s))
            assert topo.node_name[other].startswith(rail + ".")
    nic0, nic1 = int(topo.gpu_nic_node[0]), int(topo.gpu_nic_node[1 + 16])
    assert topo.next_hops(nic0, nic1) == []
    assert topo.next_hops(nic0, int(topo.gpu_nic_node[16])) != []


@pytest.mark.parametrize("per_leaf", [16, 1])
def test_rail_only_cross_rail_path_goes_through_nvlink_to_the_right_rail(per_leaf):
    topo = build_topology(cluster(hosts=2, kind="rail-only", nics=8, per_leaf=per_leaf))
    src, dst = 1, 8 + 5  # GPU 1 of host 0 (rail 1) to GPU 5 of host 1 (rail 5)
    for h in range(4):
        links = topo.path_links(src, dst, h)
        kinds = [int(topo.link_kind[k]) for k in links]
        assert kinds[:2] == [NVLINK, NVLINK]  # GPU 1 -> NVSwitch -> GPU 5 of host 0
        nodes = path_nodes(topo, links, int(topo.gpu_node[src]))
        assert nodes[2] == topo.gpu_node[5]
        assert int(topo.gpu_nic_node[5]) in nodes  # leaves by rail 5's NIC
        fabric_nodes = [n for n in nodes if topo.node_kind[n] in (LEAF, SPINE)]
        assert fabric_nodes and all(topo.node_name[n].startswith("rail5.") for n in fabric_nodes)
        assert NVLINK not in kinds[2:]  # no second NVLink hop at the receiver
    same_rail = topo.path_links(1, 9, 0)
    assert NVLINK not in [int(topo.link_kind[k]) for k in same_rail]


def test_rail_optimized_cross_rail_path_takes_the_spine_not_nvlink():
    topo = build_topology(cluster(hosts=2, nics=8))
    kinds = [int(topo.link_kind[k]) for k in topo.path_links(1, 13, 0)]
    assert NVLINK not in kinds and FABRIC in kinds


def test_cpp_paths_match_python_on_planes_and_rail_only(native_lib):
    for c in (
        cluster(planes=2),
        cluster(hosts=4, kind="rail-only", nics=8, per_leaf=2),
        cluster(planes=4, nics=32),
    ):
        topo = build_topology(c)
        desc = to_native(topo, native_lib)
        assert desc.GetNPlanes() == topo.planes
        for src, dst, h in [(0, 9, 3), (1, 13, 7), (6, 8, 11), (2, 3, 5), (7, 14, 2)]:
            if dst >= len(topo.gpu_node):
                continue
            for plane in range(-1, topo.planes):
                assert list(desc.GetPath(src, dst, h, plane)) == topo.path_links(src, dst, h, plane)


def test_nccl_channels_round_robin_over_a_gpus_planes():
    from heterosim.plan.collectives.decompose import decompose_collective

    c = cluster(planes=2)
    coll = decompose_collective(
        "allreduce", 64 << 20, list(range(16)), c, algorithm="ring", protocol="simple"
    )
    plan = coll.to_execution_plan(16)
    planes = flow_planes(plan.kind, plan.gpu, plan.dst, plan.channel, plan.collective, c.gpu_host, 2)
    assert planes is not None
    flows = plan.kind == FLOW
    cross = flows & (c.gpu_host[np.maximum(plan.gpu, 0)] != c.gpu_host[np.maximum(plan.dst, 0)])
    assert np.all(planes[flows & ~cross] == -1)  # intra-host flows use no NIC
    assert coll.channels == 32  # 2 channels per NIC port NCCL sees (16 per host)
    for gpu in range(16):
        mine = cross & (plan.gpu == gpu)
        channels = np.unique(plan.channel[mine])
        # channel c leaves a host at GPU (c +- 1) % 8: 4 channels per GPU, 8 apart, planes 0 1 0 1
        assert channels.tolist() == [int(channels[0]) + 8 * k for k in range(4)]
        for k, ch in enumerate(channels):
            assert set(planes[mine & (plan.channel == ch)]) == {k % 2}
    assert flow_planes(plan.kind, plan.gpu, plan.dst, plan.channel, plan.collective, c.gpu_host, 1) is None


def test_bandwidth_nccl_sees_counts_every_port():
    from heterosim.plan.collectives.commview import comm_view

    one = comm_view(list(range(16)), cluster(planes=1, nics=8, speed="800Gbps"))
    two = comm_view(list(range(16)), cluster(planes=2, nics=16, speed="400Gbps"))
    assert one.inter_gbps == two.inter_gbps == 800.0  # 8 x 800G = 16 x 400G = 800 GB/s
    assert two.nics_per_host == 16


@pytest.mark.parametrize(
    "fabric, nics, message",
    [
        ({"planes": 3}, 8, "test.yaml: fabric.planes: 3 planes do not divide host type t's 8 NICs"),
        ({"planes": 0}, 8, "test.yaml: fabric.planes:"),
        ({"planes": "two"}, 8, "test.yaml: fabric.planes: expected an integer"),
        ({"kind": "rail-less"}, 8, "test.yaml: fabric.kind:"),
    ],
)
def test_bad_plane_input_is_one_line(fabric, nics, message):
    data = {
        "host_types": {"t": {"gpu": "H100", "gpus": 8, "nics": nics, "nic_speed": "400Gbps"}},
        "hosts": [{"type": "t", "count": 2}],
        "fabric": fabric,
    }
    with pytest.raises(UserError) as err:
        parse_cluster(data, "test.yaml")
    text = str(err.value)
    assert text.startswith(message) and "\n" not in text


def test_explicit_gpu_nic_takes_its_port_group():
    c = cluster(planes=2, gpu_nic=[0, 0, 2, 2, 4, 4, 7, 6])
    assert c.gpu_plane_nics[:8].tolist() == [[0, 1]] * 2 + [[2, 3]] * 2 + [[4, 5]] * 2 + [[6, 7]] * 2


@pytest.mark.parametrize(
    "name, planes, gpus",
    [
        ("b200_800g_128gpu", 1, 128),
        ("b200_2plane_128gpu", 2, 128),
        ("b200_4plane_128gpu", 4, 128),
        ("b200_800g_1024gpu", 1, 1024),
        ("b200_2plane_1024gpu", 2, 1024),
        ("b200_4plane_1024gpu", 4, 1024),
        ("rail_only_128gpu", 1, 128),
    ],
)
def test_presets_load(name, planes, gpus, repo_root):
    c = load_cluster(repo_root / "topologies" / f"{name}.yaml")
    assert c.fabric.planes == planes and c.world_size == gpus
    per_gpu = c.host(0).nics * c.host(0).nic_speed_bps / c.host(0).gpus
    assert per_gpu == 800e9  # every preset gives a GPU 800 Gb/s of scale-out bandwidth
    if gpus == 128:
        topo = build_topology(c)
        assert (topo.node_kind == NIC).sum() == 16 * c.host(0).nics
        assert set(np.unique(topo.node_plane[topo.node_kind == NIC])) == set(range(planes))
        assert (topo.node_kind == GPU).sum() == gpus


def _run_allreduce(c, fidelity, size=64 << 20, ranks=None):
    from heterosim.config.experiment import default_network
    from heterosim.engine.executor import engine_config, execute_plan
    from heterosim.plan.collectives.decompose import decompose_collective

    topo = build_topology(c)
    ranks = list(range(c.world_size)) if ranks is None else ranks
    coll = decompose_collective("allreduce", size, ranks, c, algorithm="ring", protocol="simple")
    plan = coll.to_execution_plan(c.world_size)
    result = execute_plan(plan, topo, default_network(), engine_config(fidelity=fidelity))
    return topo, plan, coll, result


@pytest.mark.parametrize("fidelity", ["flow", "packet"])
def test_bytes_per_plane_are_the_bytes_of_the_flows_on_that_plane(native_lib, fidelity):
    c = cluster(planes=2)
    topo, plan, _, result = _run_allreduce(c, fidelity)
    assert not result.partial
    planes = flow_planes(plan.kind, plan.gpu, plan.dst, plan.channel, plan.collective, c.gpu_host, 2)
    assert planes is not None
    links = result.links
    access = topo.link_kind[links["link"]] == ACCESS
    link_plane = topo.node_plane[topo.link_a[links["link"]]]
    carried = [int(links["bytes"][access & (link_plane == p)].sum()) for p in (0, 1)]
    # every flow between hosts crosses one access link up (its sender's port) and one down
    sent = [2 * int(plan.bytes[planes == p].sum()) for p in (0, 1)]
    assert sent[0] == sent[1] > 0  # NCCL's round-robin: half the channels on each plane
    if fidelity == "flow":
        assert carried == sent
    else:  # frames add headers and acknowledgements travel back: a few percent more
        for p in (0, 1):
            assert sent[p] <= carried[p] <= 1.06 * sent[p]
    fabric_links = np.isin(topo.link_kind[links["link"]], (ACCESS, FABRIC))
    assert int(links["bytes"][fabric_links & (link_plane < 0)].sum()) == 0


@pytest.mark.parametrize("fidelity", ["flow", "packet"])
def test_two_planes_of_400g_match_one_plane_of_800g_for_a_ring_between_nics(native_lib, fidelity):
    """One GPU per host: the ring is NIC-bound. NCCL sees 2 ports per GPU on 2 planes and
    builds twice the channels (2 per port), half on each plane: the GPU's 800 Gb/s is used
    either way, so the times agree within a few percent (a 400G port serialises each frame
    twice as long: a little more latency per hop)."""
    one = cluster(planes=1, nics=8, speed="800Gbps")
    two = cluster(planes=2, nics=16, speed="400Gbps")
    ranks = [0, 8]
    _, _, coll1, r1 = _run_allreduce(one, fidelity, 256 << 20, ranks)
    _, _, coll2, r2 = _run_allreduce(two, fidelity, 256 << 20, ranks)
    assert coll2.channels == 2 * coll1.channels
    # the NIC bound: each GPU sends and receives (n-1)/n x 2 x S over 800 Gb/s = 100 GB/s
    bound_ns = 256 * 2**20 / 100.0
    for r in (r1, r2):
        assert bound_ns < r.makespan_ns < 1.15 * bound_ns
    assert abs(r2.makespan_ns - r1.makespan_ns) < 0.03 * r1.makespan_ns


@pytest.mark.parametrize("fidelity", ["flow", "packet"])
def test_one_plane_of_two_carries_the_traffic_of_a_single_channel(native_lib, fidelity):
    """With one channel NCCL uses one port: on 2 x 400G planes it gets half of 1 x 800G."""
    from heterosim.config.experiment import default_network
    from heterosim.engine.executor import engine_config, execute_plan
    from heterosim.plan.collectives.decompose import decompose_collective

    times = []
    for c in (cluster(planes=1, nics=8, speed="800Gbps"), cluster(planes=2, nics=16, speed="400Gbps")):
        coll = decompose_collective(
            "allreduce", 64 << 20, [0, 8], c, algorithm="ring", protocol="simple", channels=1
        )
        result = execute_plan(
            coll.to_execution_plan(16), build_topology(c), default_network(), engine_config(fidelity=fidelity)
        )
        times.append(result.makespan_ns)
    assert 1.8 < times[1] / times[0] < 2.1


@pytest.mark.parametrize("fidelity", ["flow", "packet"])
def test_rail_only_cross_rail_traffic_is_carried_by_nvlink(native_lib, fidelity):
    from heterosim.config.experiment import default_network
    from heterosim.engine.executor import engine_config, execute_plan
    from heterosim.plan.collectives.decompose import decompose_collective

    c = cluster(hosts=2, kind="rail-only", nics=8, speed="400Gbps")
    topo = build_topology(c)
    coll = decompose_collective("sendrecv", 16 << 20, [1, 13], c)  # GPU 1 (rail 1) -> GPU 13 (rail 5)
    result = execute_plan(
        coll.to_execution_plan(16), topo, default_network(), engine_config(fidelity=fidelity)
    )
    assert not result.partial
    links = result.links
    moved = {topo.node_name[int(topo.link_b[k])] for k, b in zip(links["link"], links["bytes"]) if b > 0}
    assert "rail5.g0" in moved and "rail1.g0" not in moved


@pytest.mark.parametrize("planes", [2, 4])
def test_p2p_transfers_use_two_channels_per_peer_and_alltoall_every_plane(planes):
    from heterosim.plan.collectives.decompose import decompose_collective

    c = cluster(planes=planes, nics=8 * planes, speed=f"{800 // planes}Gbps")
    send = decompose_collective("sendrecv", 8 << 20, [0, 8], c).to_execution_plan(16)
    p = flow_planes(send.kind, send.gpu, send.dst, send.channel, send.collective, c.gpu_host, planes)
    assert p is not None
    on = send.kind == FLOW
    assert sorted(set(p[on].tolist())) == [0, 1]  # NCCL_NCHANNELS_PER_NET_PEER = 2 ports
    assert int(send.bytes[on & (p == 0)].sum()) == int(send.bytes[on & (p == 1)].sum())
    ranks = [0, 8, 1, 9]  # two GPUs on each host: three peers each, two of them remote
    a2a = decompose_collective("alltoall", 8 << 20, ranks, c).to_execution_plan(16)
    p = flow_planes(a2a.kind, a2a.gpu, a2a.dst, a2a.channel, a2a.collective, c.gpu_host, planes)
    assert p is not None
    for gpu in ranks:
        mine = (a2a.kind == FLOW) & (a2a.gpu == gpu) & (p >= 0)
        assert len(set(p[mine].tolist())) == min(planes, 2)  # two remote peers, one channel each


def test_one_plane_plans_are_unchanged_by_the_plane_rules():
    from heterosim.plan.collectives.decompose import decompose_collective

    plan = decompose_collective("alltoall", 8 << 20, list(range(16)), cluster(planes=1, nics=8))
    assert np.all(plan.channel[plan.kind == FLOW] == 0)


@pytest.mark.parametrize("fidelity", ["flow", "packet"])
def test_a_send_between_hosts_uses_both_planes(native_lib, fidelity):
    from heterosim.config.experiment import default_network
    from heterosim.engine.executor import engine_config, execute_plan
    from heterosim.plan.collectives.decompose import decompose_collective

    times = []
    for c in (cluster(planes=1, nics=8, speed="800Gbps"), cluster(planes=2, nics=16, speed="400Gbps")):
        coll = decompose_collective("sendrecv", 64 << 20, [0, 8], c)
        result = execute_plan(
            coll.to_execution_plan(16), build_topology(c), default_network(), engine_config(fidelity=fidelity)
        )
        times.append(result.makespan_ns)
    # 64 MiB over 800 Gb/s (100 GB/s) in either case: two 400G ports carry half each
    assert times[0] > 64 * 2**20 / 100.0
    assert abs(times[1] - times[0]) < 0.05 * times[0]


def _link(topo, a, b):
    names = {name: i for i, name in enumerate(topo.node_name)}
    x, y = names[a], names[b]
    return int(
        np.flatnonzero(((topo.link_a == x) & (topo.link_b == y)) | ((topo.link_a == y) & (topo.link_b == x)))[
            0
        ]
    )


def test_a_lasting_outage_on_one_plane_partitions_only_what_it_cuts_off():
    from heterosim.engine.faults import _cut_off_hosts

    topo = build_topology(cluster(hosts=4, planes=2, per_leaf=2))  # 2 uplinks per rail switch
    # the planes are separate components from the start: that is no partition
    assert _cut_off_hosts(topo, set()) == []
    # one uplink of plane 1: other spines remain
    assert _cut_off_hosts(topo, {_link(topo, "p1.rail0.g0", "p1.spine0")}) == []
    # host 1's port 3 (plane 1): that port is cut off from its plane
    assert _cut_off_hosts(topo, {_link(topo, "h1.nic3", "p1.rail1.g0")}) == [1]
    rail_only = build_topology(cluster(hosts=4, kind="rail-only", nics=8, per_leaf=2))
    assert _cut_off_hosts(rail_only, set()) == []
    assert _cut_off_hosts(rail_only, {_link(rail_only, "h2.nic5", "rail5.g1")}) == [2]


@pytest.mark.parametrize(
    "fabric, key",
    [({"planes": 3}, "fabric.planes: 3 planes do not divide"), ({"kind": "rail-less"}, "fabric.kind:")],
)
def test_the_cli_refuses_a_bad_fabric_with_exit_2_and_one_line(tmp_path, capsys, fabric, key):
    import yaml

    from heterosim.cli import main

    path = tmp_path / "bad.yaml"
    data = {
        "host_types": {"t": {"gpu": "B200", "gpus": 8, "nics": 8, "nic_speed": "400Gbps"}},
        "hosts": [{"type": "t", "count": 2}],
        "fabric": fabric,
    }
    path.write_text(yaml.safe_dump(data))
    code = main(["collective", "--cluster", str(path), "--op", "allreduce", "--size", "1MiB"])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1 and f"{path}: {key}" in err and "Traceback" not in err
