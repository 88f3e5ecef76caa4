"""Packet-level RDMA network: goodput, incast fairness, PFC vs drops, seeds, host paths."""

from __future__ import annotations

import numpy as np
import pytest

from heterosim.config.cluster import parse_cluster
from heterosim.config.experiment import NetworkConfig
from heterosim.engine import packet
from heterosim.engine.topology import ACCESS, FABRIC, NIC, NVLINK, build_topology, to_native
from heterosim.errors import UserError

pytestmark = pytest.mark.ns3

DATA_HEADER = 62 + 20  # Eth+FCS, IPv4, UDP, BTH, ICRC, preamble/IFG (see RdmaFrameSizes)


def star(hosts=8, speed="100Gbps"):
    """One leaf, ``hosts`` single-GPU PCIe hosts with one NIC each."""
    return build_topology(
        parse_cluster(
            {
                "host_types": {
                    "n": {"gpu": "H100-SXM", "gpus": 1, "fabric": "pcie", "nics": 1, "nic_speed": speed}
                },
                "hosts": [{"type": "n", "count": hosts}],
                "fabric": {"kind": "fat-tree", "hosts_per_leaf": hosts, "link_delay": "1us"},
            },
            "star.yaml",
        )
    )


def two_leaves():
    """Four single-GPU hosts, two per leaf, two spines: ECMP between the leaves."""
    return build_topology(
        parse_cluster(
            {
                "host_types": {
                    "n": {"gpu": "H100-SXM", "gpus": 1, "fabric": "pcie", "nics": 1, "nic_speed": "100Gbps"}
                },
                "hosts": [{"type": "n", "count": 4}],
                "fabric": {
                    "kind": "fat-tree",
                    "hosts_per_leaf": 2,
                    "link_delay": "1us",
                    "oversubscription": 1,
                    "spine_speed": "100Gbps",
                },
            },
            "leaves.yaml",
        )
    )


def net(cc="dcqcn", mtu=4096, pfc=True, buffer=16 << 20, **attributes):
    return NetworkConfig(cc=cc, mtu_bytes=mtu, pfc=pfc, buffer_bytes=buffer, ecmp=True, attributes=attributes)


def path_delay_ns(topo, links, frame_bytes):
    """Propagation plus one frame's store-and-forward per link."""
    return sum(int(topo.link_delay_ns[link]) + frame_bytes * 8e9 / topo.link_rate_bps[link] for link in links)


def test_single_64mib_flow_goodput_and_fct(native_lib):
    topo = star(2)
    size, mtu = 64 << 20, 4096
    res = packet.run_flows(topo, net(mtu=mtu), [0], [1], [size], [0], stop_ns=50_000_000)
    fct = int(res["flows"]["fct_ns"][0])
    assert fct > 0
    packets = -(-size // mtu)
    efficiency = mtu / (mtu + DATA_HEADER)
    goodput = size * 8 / (fct * 1e-9)
    assert goodput >= 0.95 * efficiency * 100e9
    ideal_goodput = efficiency * 100e9
    expected = size * 8 / ideal_goodput * 1e9 + path_delay_ns(topo, topo.path_links(0, 1), mtu + DATA_HEADER)
    assert abs(fct - expected) <= 0.02 * expected
    # every payload byte crossed the bottleneck once, with its headers
    assert res["flows"]["bytes_delivered"][0] == size
    assert res["counters"]["drops"] == 0 and res["counters"]["retransmits"] == 0
    nic0 = int(topo.gpu_nic_node[0])
    ports = res["ports"]
    nic_up = (ports["node"] == nic0) & np.isin(topo.link_kind[ports["link"]], (ACCESS,))
    assert int(ports["bytes_sent"][nic_up].sum()) == size + packets * DATA_HEADER


def jain(x):
    x = np.asarray(x, dtype=float)
    return x.sum() ** 2 / (len(x) * (x * x).sum())


def second_half_rates(res, flows):
    """Per-flow throughput (bit/s) over the second half of the time all flows were active."""
    rate = res["series"]["rate"]
    end = int(res["flows"]["end_ns"].min())
    t0, t1 = end // 2, end
    out = []
    for f in flows:
        sel = rate["flow"] == f
        t, acked = rate["time_ns"][sel], rate["acked_bytes"][sel].astype(float)
        a0 = np.interp(t0, t, acked)
        a1 = np.interp(min(t1, t[-1]), t, acked)
        out.append((a1 - a0) * 8 / ((min(t1, t[-1]) - t0) * 1e-9))
    return np.array(out), (t0, t1)


def test_incast_4_to_1_dcqcn_is_fair_full_and_lossless(native_lib):
    topo = star(8)
    res = packet.run_flows(
        topo,
        net(mtu=1024),
        [0, 1, 2, 3],
        [4] * 4,
        [16 << 20] * 4,
        [0] * 4,
        stop_ns=50_000_000,
        sample_interval_ns=10_000,
    )
    assert (res["flows"]["end_ns"] > 0).all()
    rates, (t0, t1) = second_half_rates(res, range(4))
    assert jain(rates) >= 0.95
    # utilisation of the bottleneck (leaf -> NIC of GPU 4), wire bytes over the same window
    q = res["series"]["queue"]
    ports = res["ports"]
    nic4 = int(topo.gpu_nic_node[4])
    bottleneck = np.flatnonzero(
        (ports["node"] != nic4)
        & (topo.link_kind[ports["link"]] == ACCESS)
        & ((topo.link_a[ports["link"]] == nic4) | (topo.link_b[ports["link"]] == nic4))
    )
    assert len(bottleneck) == 1
    sel = q["port"] == bottleneck[0]
    tx = np.interp([t0, t1], q["time_ns"][sel], q["tx_bytes"][sel].astype(float))
    utilisation = (tx[1] - tx[0]) * 8 / ((t1 - t0) * 1e-9) / 100e9
    assert utilisation >= 0.90
    assert res["counters"]["drops"] == 0
    assert res["counters"]["cnps"] > 0 and res["counters"]["ecn_marks"] > 0


def test_pfc_off_small_buffer_drops_retransmits_and_delivers_everything(native_lib):
    topo = star(8)
    size = 2 << 20
    res = packet.run_flows(
        topo,
        net(cc="none", mtu=1024, pfc=False, buffer=512 << 10),
        [0, 1, 2, 3],
        [4] * 4,
        [size] * 4,
        [0] * 4,
        stop_ns=200_000_000,
    )
    c = res["counters"]
    assert c["drops"] > 0 and c["retransmits"] > 0 and c["pfc_pause_frames"] == 0
    assert (res["flows"]["end_ns"] > 0).all()
    assert (res["flows"]["bytes_delivered"] == size).all()
    # conservation: the receiver's NIC link carried every payload byte at least once
    ports = res["ports"]
    nic4 = int(topo.gpu_nic_node[4])
    into_nic4 = (
        (ports["node"] != nic4)
        & (topo.link_kind[ports["link"]] == ACCESS)
        & ((topo.link_a[ports["link"]] == nic4) | (topo.link_b[ports["link"]] == nic4))
    )
    assert int(ports["bytes_sent"][into_nic4].sum()) >= 4 * size
    assert int(ports["drops"].sum()) == c["drops"]


def test_pfc_on_small_buffer_pauses_instead_of_dropping(native_lib):
    topo = star(8)
    res = packet.run_flows(
        topo,
        net(cc="none", mtu=1024, pfc=True, buffer=1 << 20),
        [0, 1, 2, 3],
        [4] * 4,
        [2 << 20] * 4,
        [0] * 4,
        stop_ns=50_000_000,
    )
    c = res["counters"]
    assert c["drops"] == 0 and c["retransmits"] == 0 and c["pfc_pause_frames"] > 0
    assert (res["flows"]["end_ns"] > 0).all()
    assert int(res["ports"]["paused_ns"].sum()) > 0


@pytest.mark.parametrize("cc", ["dcqcn", "hpcc", "timely", "dctcp", "none"])
def test_every_congestion_control_completes_an_incast_losslessly(native_lib, cc):
    topo = star(4)
    size = 2 << 20
    res = packet.run_flows(
        topo, net(cc=cc, mtu=1024), [0, 1, 2], [3] * 3, [size] * 3, [0] * 3, stop_ns=50_000_000
    )
    assert (res["flows"]["bytes_delivered"] == size).all()
    assert res["counters"]["drops"] == 0
    if cc != "none":
        assert int(res["flows"]["rate_changes"].sum()) > 0


def test_hpcc_keeps_queues_shorter_than_no_congestion_control(native_lib):
    topo = star(4)
    args = ([0, 1, 2], [3] * 3, [4 << 20] * 3, [0] * 3)
    hpcc = packet.run_flows(topo, net(cc="hpcc", mtu=1024), *args, stop_ns=50_000_000)
    none = packet.run_flows(topo, net(cc="none", mtu=1024), *args, stop_ns=50_000_000)
    assert hpcc["ports"]["max_queue_bytes"].max() < none["ports"]["max_queue_bytes"].max() / 4


def _run_leaves(seed):
    topo = two_leaves()
    # one flow at a time, each from leaf 0 to leaf 1: no contention, only the path differs
    src, dst = [0, 1, 0, 1, 0, 1], [2, 3, 3, 2, 2, 3]
    start = [i * 200_000 for i in range(6)]
    return topo, packet.run_flows(
        topo, net(), src, dst, [256 << 10] * 6, start, stop_ns=10_000_000, seed=seed
    )


def test_same_seed_gives_identical_results(native_lib):
    topo = star(8)
    args = ([0, 1, 2, 3], [4] * 4, [1 << 20] * 4, [0] * 4)
    a = packet.run_flows(topo, net(mtu=1024), *args, stop_ns=20_000_000, sample_interval_ns=5000)
    b = packet.run_flows(topo, net(mtu=1024), *args, stop_ns=20_000_000, sample_interval_ns=5000)
    assert a["counters"] == b["counters"] and a["events"] == b["events"]
    for group in ("ports", "flows"):
        for key in a[group]:
            assert np.array_equal(a[group][key], b[group][key]), (group, key)
    for series in ("queue", "rate"):
        for key in a["series"][series]:
            assert np.array_equal(a["series"][series][key], b["series"][series][key])


def test_seed_changes_ecmp_choices_and_marking_draws(native_lib):
    # one leaf, no ECMP choice: a different seed draws other RED marking decisions (a new
    # replication of the same incast), and every byte is still delivered
    topo = star(8)
    args = ([0, 1, 2, 3], [4] * 4, [1 << 20] * 4, [0] * 4)
    a = packet.run_flows(topo, net(mtu=1024), *args, stop_ns=20_000_000, seed=1)
    b = packet.run_flows(topo, net(mtu=1024), *args, stop_ns=20_000_000, seed=7)
    again = packet.run_flows(topo, net(mtu=1024), *args, stop_ns=20_000_000, seed=7)
    assert a["counters"]["ecn_marks"] > 0 and b["counters"]["ecn_marks"] > 0
    assert a["counters"]["ecn_marks"] != b["counters"]["ecn_marks"]
    assert b["counters"] == again["counters"]
    assert a["counters"]["bytes"] == b["counters"]["bytes"]
    np.testing.assert_array_equal(a["flows"]["bytes_delivered"], b["flows"]["bytes_delivered"])
    # without marking (ECN off) the seed changes nothing on one leaf
    c = packet.run_flows(
        topo, net(mtu=1024, **{"PacketNetwork::EcnEnabled": "false"}), *args, stop_ns=20_000_000, seed=1
    )
    d = packet.run_flows(
        topo, net(mtu=1024, **{"PacketNetwork::EcnEnabled": "false"}), *args, stop_ns=20_000_000, seed=7
    )
    assert c["counters"] == d["counters"]
    assert np.array_equal(c["flows"]["end_ns"], d["flows"]["end_ns"])
    # with two spines the seed moves flows between them; isolated flows keep their FCTs
    topo, r1 = _run_leaves(1)
    _, r2 = _run_leaves(2)
    spine_links = np.flatnonzero(topo.link_kind == FABRIC)
    used1 = r1["ports"]["bytes_sent"][np.isin(r1["ports"]["link"], spine_links)]
    used2 = r2["ports"]["bytes_sent"][np.isin(r2["ports"]["link"], spine_links)]
    assert not np.array_equal(used1, used2)
    assert used1.sum() == used2.sum()
    # equal up to the sub-ns serialisation remainder each port carries from frame to frame
    assert np.abs(r1["flows"]["fct_ns"] - r2["flows"]["fct_ns"]).max() <= 2


def test_packets_follow_the_topology_paths(native_lib):
    topo = two_leaves()
    gbl = native_lib
    gbl.ns3.Simulator.Destroy()
    desc = to_native(topo, gbl)
    netw = packet.create_packet_network(gbl, desc, net(), seed=3)
    src, dst = np.array([0, 1], np.uint32), np.array([2, 3], np.uint32)
    ids = np.arange(2, dtype=np.uint32)
    netw.ScheduleFlows(
        2,
        ids,
        src,
        dst,
        np.array([1 << 20] * 2, np.uint64),
        np.array([0, 0], np.int64),
        np.array([3, 3], np.uint8),
    )
    gbl.ns3.Simulator.Run()
    stats = packet.collect_packet_stats(netw)
    used = set()
    for f in range(2):
        used |= {int(x) for x in netw.GetFlowPath(f)}
    ports = stats["ports"]
    data_ports = ports["bytes_sent"] > (1 << 20)
    fabric = np.isin(topo.link_kind[ports["link"]], (ACCESS, FABRIC))
    assert set(ports["link"][data_ports & fabric].tolist()) == used
    netw.Dispose()
    gbl.ns3.Simulator.Destroy()


def test_two_host_nvswitch_intra_host_never_touches_the_nic(native_lib):
    topo = build_topology(
        parse_cluster(
            {
                "host_types": {
                    "h": {
                        "gpu": "H100-SXM",
                        "gpus": 8,
                        "fabric": "nvswitch",
                        "nics": 8,
                        "nic_speed": "400Gbps",
                    }
                },
                "hosts": [{"type": "h", "count": 2}],
                "fabric": {"kind": "rail-optimized", "link_delay": "1us"},
            },
            "dgx.yaml",
        )
    )
    size = 4 << 20
    intra = packet.run_flows(topo, net(), [0], [5], [size], [0], stop_ns=10_000_000)
    inter = packet.run_flows(topo, net(), [0], [8], [size], [0], stop_ns=10_000_000)
    for res in (intra, inter):
        assert res["flows"]["end_ns"][0] > 0

    def nic_bytes(res):
        ports = res["ports"]
        return int(ports["bytes_sent"][topo.node_kind[ports["node"]] == NIC].sum())

    def nvlink_bytes(res):
        ports = res["ports"]
        return int(ports["bytes_sent"][topo.link_kind[ports["link"]] == NVLINK].sum())

    assert nic_bytes(intra) == 0 and nvlink_bytes(intra) >= 2 * size
    assert nic_bytes(inter) >= size and nvlink_bytes(inter) == 0
    nic_src = int(topo.gpu_nic_node[0])
    ports = inter["ports"]
    assert int(ports["bytes_sent"][ports["node"] == nic_src].sum()) >= size
    # the intra-host copy runs at NVLink speed: far faster than the 400G NIC could
    assert intra["flows"]["fct_ns"][0] < inter["flows"]["fct_ns"][0] / 4


def test_bad_inputs_are_user_errors(native_lib):
    topo = star(2)
    with pytest.raises(UserError, match="NoSuchAttribute"):
        packet.run_flows(topo, net(NoSuchAttribute=1), [0], [1], [1000], [0], stop_ns=1000)
    with pytest.raises(UserError, match="RateAi"):
        packet.run_flows(topo, net(RateAi="fast"), [0], [1], [1000], [0], stop_ns=1000)
    with pytest.raises(UserError, match="GPU 9"):
        packet.run_flows(topo, net(), [0], [9], [1000], [0], stop_ns=1000)
    with pytest.raises(UserError, match="buffer"):
        packet.run_flows(topo, net(buffer=64 << 10), [0], [1], [1000], [0], stop_ns=1000)
    with pytest.raises(UserError, match="size"):
        packet.run_flows(topo, net(), [0], [1], [0], [0], stop_ns=1000)


def test_attribute_overrides_reach_the_components(native_lib):
    topo = star(4)
    args = ([0, 1, 2], [3] * 3, [1 << 20] * 3, [0] * 3)
    base = packet.run_flows(topo, net(mtu=1024), *args, stop_ns=20_000_000)
    off = packet.run_flows(topo, net(mtu=1024, EcnEnabled=False), *args, stop_ns=20_000_000)
    assert base["counters"]["ecn_marks"] > 0 and off["counters"]["ecn_marks"] == 0
    # ACK every 4 packets: a quarter of the ACK frames on the receiver's uplink
    acks = packet.run_flows(
        topo, net(mtu=1024, **{"RdmaNic::AckInterval": 4}), [0], [1], [1 << 20], [0], stop_ns=20_000_000
    )
    one = packet.run_flows(topo, net(mtu=1024), [0], [1], [1 << 20], [0], stop_ns=20_000_000)
    nic1 = int(topo.gpu_nic_node[1])

    def frames_from(res):
        p = res["ports"]
        return int(p["frames_sent"][(p["node"] == nic1) & (topo.link_kind[p["link"]] == ACCESS)].sum())

    assert frames_from(one) == 1024 and frames_from(acks) == 256
