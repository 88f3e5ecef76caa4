"""Inside a host as NCCL sees it: path types, P2P / SHM / NET choice, SHM routes and bandwidth."""

from __future__ import annotations

import pytest

from heterosim.cli import main
from heterosim.config.cluster import load_cluster, parse_cluster
from heterosim.config.network_model import FLUID
from heterosim.engine.topology import GPU, PCIE_ROOT, build_topology
from heterosim.errors import UserError
from heterosim.plan import host_paths


def host(gpu="A100-80GB-PCIe", gpus=8, **keys):
    spec = {"gpu": gpu, "gpus": gpus, "fabric": "pcie", "nics": 1, "nic_speed": "25Gbps", **keys}
    cluster = parse_cluster({"host_types": {"t": spec}, "hosts": [{"type": "t", "count": 1}]}, "c.yaml")
    return cluster, cluster.host(0)


def test_path_types_follow_switches_and_sockets():
    _, h = host(pcie_switches=4, sockets=2)  # GPUs 0-1 | 2-3 on socket 0, 4-5 | 6-7 on socket 1
    assert host_paths.path_type(h, 0, 1) == "PIX"
    assert host_paths.path_type(h, 0, 2) == "PHB"
    assert host_paths.path_type(h, 0, 4) == "SYS"
    assert host_paths.path_type(h, 3, 3) == "LOC"


def test_p2p_only_up_to_pxb_by_default_then_shm():
    """paths.cc: p2pLevel = PATH_PXB; beyond it NCCL diverts the pair through the CPU (SHM)."""
    _, h = host(pcie_switches=4, sockets=2)
    assert host_paths.transport(h, 0, 1) == "p2p"
    assert host_paths.transport(h, 0, 2) == "shm"
    assert host_paths.transport(h, 0, 7) == "shm"


def test_p2p_level_override_and_amd_rule():
    _, h = host(pcie_switches=4, sockets=2, p2p_level="SYS")
    assert host_paths.transport(h, 0, 7) == "p2p"
    _, h = host(pcie_switches=4, sockets=2, p2p_level="LOC")
    assert host_paths.transport(h, 0, 1) == "shm"
    # AMD x86 with <= 2 GPUs: P2P across the CPU (PATH_SYS)
    _, amd2 = host(gpus=2, pcie_switches=2, cpu="amd")
    assert host_paths.transport(amd2, 0, 1) == "p2p"
    _, amd8 = host(pcie_switches=4, cpu="amd")
    assert host_paths.transport(amd8, 0, 2) == "shm"


def test_geforce_uses_shm_even_on_one_switch_but_p2p_over_a_bridge():
    _, h = host(gpu="RTX-3090", pcie_switches=1)
    assert {t for row in host_paths.transport_matrix(h) for t in row} == {"-", "shm"}
    _, bridged = host(gpu="RTX-3090", pcie_switches=1, nvlink_bridges=True)
    assert host_paths.transport(bridged, 0, 1) == "p2p"  # NVLink bridge pair
    assert host_paths.transport(bridged, 1, 2) == "shm"


def test_net_inside_a_host_only_when_the_nic_is_faster_than_the_gpu_path():
    """ncclTopoCheckNet: NET when both GPUs reach a NIC faster than each other (GPUDirect RDMA)."""
    _, slow_link = host(pcie_switches=2, sockets=2, socket_link_bw="40Gbps", nic_speed="400Gbps")
    assert host_paths.transport(slow_link, 0, 7) == "net"  # 5 GB/s across sockets < NIC
    _, geforce = host(
        gpu="RTX-4090", pcie_switches=2, sockets=2, socket_link_bw="40Gbps", nic_speed="400Gbps"
    )
    assert host_paths.transport(geforce, 0, 7) == "shm"  # no peer access: no GPUDirect RDMA


def test_p2p_on_a_family_without_it_is_a_one_line_error():
    with pytest.raises(UserError) as err:
        host(gpu="RTX-4090", p2p=True)
    msg = str(err.value)
    assert "\n" not in msg and "host_types.t.p2p" in msg and "RTX-4090" in msg


def test_exit_status_2_for_p2p_on_geforce(tmp_path, capsys):
    path = tmp_path / "c.yaml"
    path.write_text(
        "host_types: {t: {gpu: RTX-3090, gpus: 8, fabric: pcie, nics: 1, nic_speed: 10Gbps, p2p: true}}\n"
        "hosts: [{type: t, count: 1}]\n"
    )
    rc = main(["collective", "--cluster", str(path), "--size", "1MiB", "--ranks", "0-7"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "p2p" in err[0]


def _nodes_on(topo, links):
    return {topo.node_name[int(topo.link_a[k])] for k in links} | {
        topo.node_name[int(topo.link_b[k])] for k in links
    }


def test_shm_route_goes_through_the_receivers_cpu_even_on_one_switch():
    cluster, _ = host(gpu="RTX-3090", pcie_switches=2, sockets=2)
    topo = build_topology(cluster)
    same_switch = _nodes_on(topo, topo.path_links(0, 1))
    assert "h0.cpu0" in same_switch and "h0.pcie0.up" in same_switch and "h0.pcie0.down" in same_switch
    across = topo.path_links(0, 7)
    names = _nodes_on(topo, across)
    assert {"h0.cpu0", "h0.cpu1", "h0.pcie1.down"} <= names
    # the copy crosses PCIe up, the socket link once, PCIe down: 5 links (two PCIe crossings)
    assert len(across) == 5


def test_p2p_host_keeps_the_switch_turnaround():
    cluster, _ = host(pcie_switches=2)
    topo = build_topology(cluster)
    assert _nodes_on(topo, topo.path_links(0, 1)) == {"h0.gpu0", "h0.gpu1", "h0.pcie0"}
    assert (topo.node_kind == PCIE_ROOT).sum() == 1 and (topo.node_kind == GPU).sum() == 8


def test_ring_intra_bandwidth_shares_switch_uplinks_without_p2p():
    _, geforce = host(gpu="RTX-3090", pcie_switches=2)
    assert host_paths.ring_intra_gbps(geforce, list(range(8))) == pytest.approx(24.0 / 4)
    _, a100 = host(pcie_switches=2)
    assert host_paths.ring_intra_gbps(a100, list(range(8))) == pytest.approx(24.0)
    _, two_socket = host(gpu="RTX-3090", pcie_switches=8, sockets=2)  # SKL QPI: NCCL's 10 GB/s
    assert host_paths.ring_intra_gbps(two_socket, list(range(8))) == pytest.approx(10.0)


def test_workstation_presets_load(repo_root):
    for path in sorted((repo_root / "topologies" / "workstations").glob("*.yaml")):
        cluster = load_cluster(path)
        topo = build_topology(cluster)
        assert topo.num_nodes > cluster.world_size


@pytest.mark.ns3
@pytest.mark.parametrize("gpus", [8, 4])
def test_shm_allreduce_is_bounded_by_host_memory(native_lib, repo_root, gpus):
    """SHM model: each byte is written to and read from the receiver's DRAM, so a socket's SHM
    traffic is at most memory_bw / 2 (307.2 GB/s -> 153.6), shared by its 4 receiving GPUs:
    ring bus bandwidth 38.4 GB/s (links: PCIe Gen5 x16 63 GB/s, UPI 128 GB/s, not binding). With
    8 GPUs on two sockets and with GPUs 0-3 on socket 0 alone (NVIDIA/nccl #1639's two runs) the
    socket has the same 4 receivers, so the same bound."""
    from heterosim.simulate import CollectiveSpec, engine_config, simulate_collective_sizes

    cluster = load_cluster(repo_root / "topologies" / "workstations" / "rtx5090_8gpu_2socket.yaml")
    spec = CollectiveSpec(
        "allreduce", tuple(range(gpus)), algorithm="auto", protocol="auto", channels=0, root=0
    )
    (row,) = simulate_collective_sizes(cluster, spec, [1 << 30], engine_config(fidelity="flow"))
    assert row.busbw_GBps == pytest.approx(307.2 / 2 / 4, rel=0.02)


def test_rings_cross_the_socket_link_once_per_direction(repo_root):
    """NCCL's ring search ranks a SYS path (min of PCIe and the inter-CPU figure) below PHB, so
    a ring keeps each socket's GPUs together: on the two-socket RTX 5090 server every channel's
    ring leaves socket 0 once and socket 1 once, whatever GPU the channel starts at."""
    import numpy as np

    from heterosim.plan.collectives.commview import comm_view
    from heterosim.plan.collectives.ring import ring_orders

    cluster = load_cluster(repo_root / "topologies" / "workstations" / "rtx5090_8gpu_2socket.yaml")
    h = cluster.host(0)
    socket = np.array([host_paths.socket_of_gpu(h, g) for g in range(h.gpus)])
    orders = ring_orders(comm_view(list(range(8)), cluster), 8)
    src, dst = socket[orders], socket[np.roll(orders, -1, axis=1)]
    assert np.all(((src == 0) & (dst == 1)).sum(axis=1) == 1)
    assert np.all(((src == 1) & (dst == 0)).sum(axis=1) == 1)


@pytest.mark.ns3
def test_shm_pair_on_one_switch_is_half_as_fast_as_across_sockets(native_lib, repo_root):
    """NVIDIA/nccl #1309 (two RTX 4090): without P2P a pair under one PCIe switch is slower than a
    pair on two sockets, the maintainer's reason being "a 2x increase in load on the PCI link to
    the CPU": both copies share the switch uplink each way (31.5 / 2 GB/s), while the pair on two
    sockets has an uplink each and a UPI link (38.4 GB/s) that does not bind."""
    from heterosim.simulate import CollectiveSpec, engine_config, simulate_collective_sizes

    cluster = load_cluster(repo_root / "topologies" / "workstations" / "rtx4090_8gpu_2switch.yaml")
    uplink = cluster.host(0).pcie_bps / 8e9

    def busbw(ranks):
        (row,) = simulate_collective_sizes(
            cluster, CollectiveSpec("allreduce", ranks), [1 << 28], engine_config(FLUID.name)
        )
        return row.busbw_GBps

    same_switch, across = busbw((0, 1)), busbw((0, 4))
    assert same_switch == pytest.approx(uplink / 2, rel=0.02)
    assert across == pytest.approx(uplink, rel=0.02)


def test_bridged_pair_routes_over_its_nvlink_bridge():
    from heterosim.engine.topology import NVLINK

    cluster, h = host(gpu="RTX-3090", pcie_switches=2, nvlink_bridges=True)
    topo = build_topology(cluster)
    (link,) = topo.path_links(0, 1)
    assert int(topo.link_kind[link]) == NVLINK
    assert float(topo.link_rate_bps[link]) == pytest.approx(h.nvlink_effective_bps)
    assert "h0.cpu0" in _nodes_on(topo, topo.path_links(1, 2))  # not bridged: SHM through the CPU
