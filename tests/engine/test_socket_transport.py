"""NCCL's socket transport over ns-3's TCP (``transport: socket``): goodput against ns-3's own bulk
TCP, NCCL's socket/thread/chunk semantics, TCP counters, a mixed RDMA + TCP incast at packet
level, the fluid model's envelope, and bad input."""

from __future__ import annotations

import numpy as np
import pytest

from heterosim.config.cluster import parse_cluster
from heterosim.config.experiment import NetworkConfig
from heterosim.engine import fluid, packet
from heterosim.engine.topology import build_topology
from heterosim.errors import UserError
from heterosim.simulate import CollectiveSpec, engine_config, simulate_collective

pytestmark = pytest.mark.ns3

MSS = 1448  # 1500-byte IP MTU - IPv4 20 - TCP 20 - timestamp option 12
WIRE = MSS + 52 + 18 + 20  # + headers, Ethernet header/FCS, preamble and inter-frame gap


def cluster(speed="10Gbps", transports=("socket", "socket")):
    """One switch, one single-GPU host per entry of ``transports``."""
    types = {
        f"t{i}": {
            "gpu": "H100-SXM",
            "gpus": 1,
            "fabric": "pcie",
            "nics": 1,
            "nic_speed": speed,
            "transport": t,
        }
        for i, t in enumerate(transports)
    }
    return parse_cluster(
        {
            "host_types": types,
            "hosts": [{"type": f"t{i}", "count": 1} for i in range(len(transports))],
            "fabric": {"kind": "fat-tree", "hosts_per_leaf": 8, "link_delay": "1us"},
        },
        "socket.yaml",
    )


def net(buffer=16 << 20, **attributes):
    return NetworkConfig(
        cc="dcqcn", mtu_bytes=4096, pfc=True, buffer_bytes=buffer, ecmp=True, attributes=attributes
    )


def bulk_reference_gbps(native_lib, speed: str, size: int, bidirectional: bool = False) -> float:
    """Goodput of an ns-3 BulkSend TCP flow (one each way if ``bidirectional``) over ns-3's
    PointToPoint devices through one router, scaled from PPP framing (2 bytes) to the fabric's
    Ethernet framing (38 bytes)."""
    ns3 = native_lib.ns3
    ref = ns3.CreateObject[ns3.TcpBulkReference]()
    ref.SetAttribute("DataRate", ns3.DataRateValue(ns3.DataRate(speed)))
    ref.SetAttribute("Bytes", ns3.UintegerValue(size))
    ref.SetAttribute("Bidirectional", ns3.BooleanValue(bidirectional))
    assert ref.Run()
    assert int(ref.GetBytesReceived()) == size * (2 if bidirectional else 1)
    return float(ref.GetGoodputBps()) * float(ref.GetFramingRatio()) / 1e9


@pytest.mark.parametrize(
    "speed,rate_gbps,size", [("10Gbps", 10, 16 << 20), ("25Gbps", 25, 32 << 20), ("100Gbps", 100, 64 << 20)]
)
def test_two_host_allreduce_reaches_bulk_tcp_goodput(native_lib, speed, rate_gbps, size):
    cl = cluster(speed)
    row = simulate_collective(cl, CollectiveSpec("allreduce", (0, 1)), size, engine_config(fidelity="packet"))
    busbw_gbps = row.busbw_GBps * 8  # 2 ranks: every byte crosses the link once each way
    one_way = bulk_reference_gbps(native_lib, speed, size)
    both_ways = bulk_reference_gbps(native_lib, speed, size, bidirectional=True)
    # ns-3's bulk TCP reaches the TCP/Ethernet line-rate goodput one way; both ways each
    # direction also carries the other's ACKs (one 90-byte frame per two segments)
    assert one_way == pytest.approx(rate_gbps * MSS / WIRE, rel=0.02)
    assert both_ways == pytest.approx(one_way * 2 * WIRE / (2 * WIRE + 90), rel=0.02)
    # the NCCL all-reduce over the socket transport loads both directions and reaches what
    # ns-3's bulk TCP reaches under the same load
    assert busbw_gbps == pytest.approx(both_ways, rel=0.02)
    assert busbw_gbps >= 0.95 * one_way
    tcp = row.tcp
    assert tcp["bytes_delivered"] == 2 * size  # every byte, both directions
    assert tcp["streams"] == tcp["connections"]  # NCCL's default: data on the control socket
    assert tcp["max_cwnd_bytes"] > 10 * MSS  # the window grew beyond its initial 10 segments
    # the fluid model of the same collective stays within its measured envelope
    flow = simulate_collective(cl, CollectiveSpec("allreduce", (0, 1)), size, engine_config(fidelity="flow"))
    assert 0.98 <= flow.busbw_GBps / row.busbw_GBps <= 1.05


def run_single(size, nthreads, nsocks, speed="25Gbps"):
    topo = build_topology(cluster(speed))
    return packet.run_flows(
        topo,
        net(**{"SocketTransport::SocketNthreads": nthreads, "SocketTransport::NsocksPerThread": nsocks}),
        [0],
        [1],
        [size],
        [0],
        stop_ns=1_000_000_000,
    )


@pytest.mark.parametrize(
    "nthreads,nsocks,data_sockets,per_socket",
    [
        (0, 1, 0, None),  # NCCL's default off AWS/GCP: payload on the control socket
        (1, 4, 4, 4 << 20),  # 512 KiB requests -> 4 tasks of 128 KiB
        (2, 8, 16, 1 << 20),  # AWS: 16 sockets, tasks of max(64 KiB, 32 KiB) = 64 KiB
    ],
)
def test_nccl_socket_split(native_lib, nthreads, nsocks, data_sockets, per_socket):
    size = 16 << 20
    res = run_single(size, nthreads, nsocks)
    tcp = res["tcp"]
    streams = tcp["streams"]
    assert tcp["summary"]["data_sockets_per_connection"] == data_sockets
    assert len(streams["socket"]) == data_sockets + 1
    requests = size // (512 << 10)
    control = streams["bytes"][streams["socket"] == 0]
    data = streams["bytes"][streams["socket"] > 0]
    if data_sockets == 0:
        assert control.tolist() == [size + 4 * requests]
    else:
        assert control.tolist() == [4 * requests]  # one 4-byte size per request
        assert data.tolist() == [per_socket] * data_sockets
    assert np.array_equal(streams["bytes"], streams["received_bytes"])
    assert int(res["flows"]["bytes_delivered"][0]) == size


def test_socket_count_is_capped_as_nccl_does(native_lib):
    ns3 = native_lib.ns3
    sock = ns3.CreateObject[ns3.SocketTransport]()
    sock.SetAttribute("SocketNthreads", ns3.UintegerValue(16))
    sock.SetAttribute("NsocksPerThread", ns3.UintegerValue(8))
    assert int(sock.GetDataSockets()) == 64  # MAX_SOCKETS: 64 / 16 threads = 4 per thread


def test_mixed_rdma_tcp_incast_packet_level(native_lib):
    """RDMA senders 0, 1 and socket senders 2, 3 into GPU 4 (an RDMA host) on a small buffer."""
    topo = build_topology(cluster("100Gbps", ("rdma", "rdma", "socket", "socket", "rdma")))
    size = 8 << 20
    src, dst = [0, 1, 2, 3], [4, 4, 4, 4]
    res = packet.run_flows(
        topo,
        net(buffer=2 << 20),
        src,
        dst,
        [size] * 4,
        [0] * 4,
        stop_ns=2_000_000_000,
        sample_interval_ns=10_000,
    )
    flows, tcp = res["flows"], res["tcp"]
    # conservation: every byte injected is delivered, at every flow's receiver
    assert (flows["end_ns"] > 0).all()
    assert flows["bytes_delivered"].tolist() == [size] * 4
    assert tcp["summary"]["bytes_delivered"] == 2 * size
    # the RDMA pair ran as queue pairs, the two TCP flows as TCP connections
    assert sorted(int(x) for x in np.unique(tcp["streams"]["first_flow"])) == [2, 3]
    # TCP is the lossy class: its losses are switch drops, repaired by retransmission; RDMA
    # (lossless, PFC) loses nothing
    counters = res["counters"]
    summary = tcp["summary"]
    assert summary["fabric_drops"] > 0
    assert counters["drops"] == summary["fabric_drops"] + summary["host_drops"]
    assert summary["retransmits"] >= summary["fabric_drops"]
    assert flows["retransmits"][:2].tolist() == [0, 0]
    assert int(flows["retransmits"][2:].sum()) == summary["retransmits"]
    assert counters["pfc_pause_frames"] > 0  # the RDMA class is paused, not dropped
    # the congestion window shows TCP's reaction: grew past its initial window, then was cut
    cwnd = tcp["cwnd"]
    for stream in range(2):
        series = cwnd["cwnd_bytes"][cwnd["stream"] == stream]
        assert series.max() > 10 * MSS
        assert (np.diff(series) < 0).any()


def test_mixed_incast_is_deterministic(native_lib):
    topo = build_topology(cluster("100Gbps", ("rdma", "socket", "rdma")))
    runs = [
        packet.run_flows(
            topo, net(buffer=2 << 20), [0, 1], [2, 2], [4 << 20] * 2, [0, 0], stop_ns=2_000_000_000
        )
        for _ in range(2)
    ]
    assert np.array_equal(runs[0]["flows"]["end_ns"], runs[1]["flows"]["end_ns"])
    assert runs[0]["events"] == runs[1]["events"]


def test_dctcp_gets_ecn_marks(native_lib):
    topo = build_topology(cluster("25Gbps", ("socket", "socket", "socket")))
    res = packet.run_flows(
        topo,
        net(**{"SocketTransport::TcpCongestionControl": "ns3::TcpDctcp"}),
        [0, 1],
        [2, 2],
        [8 << 20] * 2,
        [0, 0],
        stop_ns=2_000_000_000,
    )
    assert res["tcp"]["summary"]["ce_marks_delivered"] > 0
    assert res["counters"]["ecn_marks"] >= res["tcp"]["summary"]["ce_marks_delivered"]
    assert res["flows"]["bytes_delivered"].tolist() == [8 << 20] * 2


def test_rdma_fabric_has_no_socket_transport(native_lib):
    topo = build_topology(cluster("100Gbps", ("rdma", "rdma")))
    res = packet.run_flows(topo, net(), [0], [1], [1 << 20], [0], stop_ns=100_000_000)
    assert "tcp" not in res


def test_fluid_socket_flow_pays_framing_handshake_and_slow_start(native_lib):
    topo = build_topology(cluster("10Gbps"))
    size = 64 << 20
    res = fluid.run_flows_fluid(topo, net(), [0], [1], [size], [0], seed=1)
    fct_ns = int(res["flows"]["end_ns"][0])
    transfer_ns = size * WIRE / MSS * 8 / 10  # wire bytes at 10 Gb/s
    # one RTT of handshake plus a few round trips of slow start: tens of microseconds here
    assert transfer_ns < fct_ns < transfer_ns + 100_000
    rdma = fluid.run_flows_fluid(
        build_topology(cluster("10Gbps", ("rdma", "rdma"))), net(), [0], [1], [size], [0], seed=1
    )
    assert int(rdma["flows"]["end_ns"][0]) < transfer_ns


def test_bad_transport_is_a_one_line_error():
    with pytest.raises(UserError) as err:
        cluster("10Gbps", ("socket", "tcp"))
    message = str(err.value)
    assert "\n" not in message
    assert "socket.yaml" in message and "transport" in message and "rdma, socket" in message


def test_bad_tcp_congestion_control_is_a_one_line_error(native_lib):
    topo = build_topology(cluster("10Gbps"))
    with pytest.raises(UserError) as err:
        packet.run_flows(
            topo,
            net(**{"SocketTransport::TcpCongestionControl": "ns3::TcpNope"}),
            [0],
            [1],
            [1 << 20],
            [0],
            stop_ns=100_000_000,
        )
    assert "\n" not in str(err.value) and "TcpCongestionControl" in str(err.value)


def test_fluid_follows_the_socket_mtu(native_lib):
    """A 9000-byte IP MTU shrinks the TCP framing overhead of the fluid socket flows too."""
    topo = build_topology(cluster("10Gbps"))
    size = 64 << 20
    jumbo = fluid.run_flows_fluid(topo, net(**{"SocketTransport::IpMtu": 9000}), [0], [1], [size], [0])
    fct_ns = int(jumbo["flows"]["end_ns"][0])
    mss = 9000 - 52
    transfer_ns = size * (mss + 90) / mss * 8 / 10
    assert transfer_ns < fct_ns < transfer_ns + 100_000


def test_netbench_writes_tcp_outputs(native_lib, repo_root, tmp_path):
    from heterosim.config.scenario import load_scenario
    from heterosim.simulate import run_netbench

    scenario = load_scenario(repo_root / "workloads" / "netbench" / "mixed_rdma_tcp_incast.yaml")
    results = run_netbench(scenario, tmp_path / "out")
    tcp = results["network"]["tcp"]
    assert tcp["connections"] == 2 and tcp["retransmits"] > 0
    assert results["summary"]["delivered_bytes"] == results["summary"]["injected_bytes"]
    rows = (tmp_path / "out" / "tcp_connections.csv").read_text().splitlines()
    assert rows[0].startswith("stream,first_flow,src_node,dst_node,socket,bytes")
    assert len(rows) == 3
    cwnd = (tmp_path / "out" / "cwnd.csv").read_text().splitlines()
    assert cwnd[0] == "time_s,stream,cwnd_bytes" and len(cwnd) > 10
    # the TCP flows have goodput samples too, so fairness covers all four flows
    rates = (tmp_path / "out" / "rates.csv").read_text().splitlines()[1:]
    assert {int(row.split(",")[1]) for row in rates} == {0, 1, 2, 3}
    assert results["fairness_jain"] is not None


def test_lossy_priority_on_a_lossless_switch(native_lib):
    """SwitchMmu::LossyPriorities: the masked class never pauses and drops past its threshold,
    the other classes keep PFC."""
    ns3 = native_lib.ns3
    mmu = ns3.CreateObject[ns3.SwitchMmu]()
    mmu.SetAttribute("LossyPriorities", ns3.UintegerValue(1 << 0))
    mmu.SetAttribute("PfcDynamicThreshold", ns3.BooleanValue(False))
    mmu.SetAttribute("PfcStaticXoff", ns3.UintegerValue(20_000))
    import cppyy

    rates = cppyy.gbl.std.vector["uint64_t"]([100_000_000_000] * 2)
    headroom = cppyy.gbl.std.vector["uint64_t"]([100_000] * 2)
    mmu.Configure(rates, headroom, True, 1 << 20)
    lossy = sum(bool(mmu.Admit(0, 0, 1000)) for _ in range(100))
    lossless = sum(bool(mmu.Admit(1, 3, 1000)) for _ in range(100))
    assert lossy == 24  # 4000-byte reserve + 20 kB of shared use, then drops
    assert lossless == 100  # beyond the threshold into headroom, never dropped
    assert not mmu.ShouldPause(0, 0)
    assert mmu.ShouldPause(1, 3)


def test_run_with_a_socket_host_reports_tcp(native_lib, repo_root, tmp_path):
    """The tiny experiment with its A100 host on plain Ethernet: every inter-host byte is TCP."""
    import csv
    import json

    from heterosim.cli import main

    out = tmp_path / "run"
    assert (
        main(
            [
                "run",
                str(repo_root / "tests" / "data" / "tiny_experiment.yaml"),
                "--fidelity",
                "packet",
                "--set",
                "cluster=../../topologies/mixed_transport_16gpu.yaml",
                "--out",
                str(out),
                "--quiet",
                "--no-plots",
            ]
        )
        == 0
    )
    results = json.loads((out / "results.json").read_text())
    tcp = results["network"]["tcp"]
    with (out / "flows.csv").open() as handle:
        flows = list(csv.DictReader(handle))
    inter_host = sum(int(f["bytes"]) for f in flows if int(f["src_gpu"]) // 8 != int(f["dst_gpu"]) // 8)
    assert inter_host > 0 and tcp["bytes_delivered"] == inter_host
    assert tcp["messages"] == sum(1 for f in flows if int(f["src_gpu"]) // 8 != int(f["dst_gpu"]) // 8)
    rows = (out / "tcp_connections.csv").read_text().splitlines()
    assert len(rows) == tcp["streams"] + 1
    assert (out / "cwnd.csv").exists()


def test_tcp_recovers_from_link_faults(native_lib):
    """Random loss on the sender's access link, then the link down for 0.5 ms: TCP retransmits
    (fast recovery, then one RTO for the frames lost while down) and delivers every byte."""
    from heterosim.engine.topology import ACCESS, to_native

    ns3 = native_lib.ns3
    topo = build_topology(cluster("25Gbps"))
    access = [i for i in range(topo.num_links) if topo.link_kind[i] == ACCESS]
    size = 16 << 20
    ns3.Simulator.Destroy()
    try:
        network = packet.create_packet_network(native_lib, to_native(topo, native_lib), net(), 1)
        one = np.array([0], np.uint32)
        network.ScheduleFlows(
            1,
            one,
            one,
            np.array([1], np.uint32),
            np.array([size], np.uint64),
            np.array([0], np.int64),
            np.array([3], np.uint8),
        )
        network.SetStopAfterFlows(1)
        network.SetLinkLoss(access[0], 1e-3, 1.0)
        for until_ns, up in ((1_000_000, False), (500_000, True), (3_000_000_000, None)):
            ns3.Simulator.Stop(ns3.NanoSeconds(until_ns))
            ns3.Simulator.Run()
            if up is not None:
                network.SetLinkUp(access[0], up)
                network.Reroute()
        end = np.full(1, -1, np.int64)
        network.CopyFinishTimes(1, one, end)
        stats = packet.collect_packet_stats(network)
        network.Dispose()
    finally:
        ns3.Simulator.Destroy()
    tcp = stats["tcp"]["summary"]
    assert end[0] > 0 and tcp["bytes_delivered"] == size
    assert tcp["fabric_drops"] > 0 and tcp["retransmits"] > 0
    assert tcp["fast_recoveries"] > 0 and tcp["timeouts"] >= 1
    assert stats["counters"]["drops"] == tcp["fabric_drops"] + tcp["host_drops"]


def test_messages_after_idle_finish_without_timeouts(native_lib):
    """Regression (amp-het-gpt2-t1p4d4-mbs4 stalled at packet fidelity): the AMP pipeline's
    pattern, 4 GPU pairs from a 10 Gb/s host to a 50 Gb/s host, one 10 MiB message per pair
    and a second on the same connection after 300 ms idle (longer than the 200 ms minimum RTO).
    With the receivers' delayed-ACK timeout equal to the minimum RTO (ns-3's 200 ms default),
    each first message's last segment waited for a spurious RTO, which left the window at one
    segment, and the second messages then moved one segment per RTO."""
    host = {"gpu": "H100-SXM", "gpus": 4, "fabric": "pcie", "nics": 1, "transport": "socket"}
    types = {name: {**host, "nic_speed": speed} for name, speed in (("p3", "10Gbps"), ("g4", "50Gbps"))}
    topo = build_topology(
        parse_cluster(
            {
                "host_types": types,
                "hosts": [{"type": "p3", "count": 1}, {"type": "g4", "count": 1}],
                "fabric": {"kind": "fat-tree", "hosts_per_leaf": 8, "link_delay": "1us"},
            },
            "socket.yaml",
        )
    )
    size, gap = 10 << 20, 300_000_000
    start = np.array([0] * 4 + [gap] * 4)
    res = packet.run_flows(
        topo, net(), [0, 1, 2, 3] * 2, [4, 5, 6, 7] * 2, [size] * 8, start.tolist(), stop_ns=1_000_000_000
    )
    flows, tcp = res["flows"], res["tcp"]
    # conservation: every message delivered, on one connection per GPU pair
    assert (flows["end_ns"] > 0).all()
    assert flows["bytes_delivered"].tolist() == [size] * 8
    assert tcp["summary"]["bytes_delivered"] == 8 * size and tcp["summary"]["connections"] == 4
    streams = tcp["streams"]
    assert np.array_equal(streams["bytes"], streams["received_bytes"])
    # nothing is lost here, so no retransmission timer may fire
    assert tcp["summary"]["timeouts"] == 0 and tcp["summary"]["retransmits"] == 0
    # the second messages run at the speed of the first (10 MiB at 10 Gb/s: ~9 ms alone)
    fct = flows["end_ns"] - start
    assert fct[4:].max() <= 1.05 * fct[:4].max()


@pytest.mark.parametrize(
    "attributes", [{"SocketTransport::TcpDelAckTimeout": "200ms"}, {"SocketTransport::TcpMinRto": "40ms"}]
)
def test_delayed_ack_timeout_must_be_shorter_than_min_rto(native_lib, attributes):
    topo = build_topology(cluster("10Gbps"))
    with pytest.raises(UserError) as err:
        packet.run_flows(topo, net(**attributes), [0], [1], [1 << 20], [0], stop_ns=100_000_000)
    message = str(err.value)
    assert "\n" not in message
    assert "SocketTransport::TcpDelAckTimeout" in message and "TcpMinRto" in message
