"""Congestion behaviour of the packet network: DCQCN holding an incast at its fair share,
no spurious retransmits on a lossless fabric, PFC's per-ingress-port sharing, mixed NIC speeds."""

from __future__ import annotations

import numpy as np
import pytest

from heterosim.config.cluster import parse_cluster
from heterosim.config.experiment import NetworkConfig
from heterosim.engine import packet
from heterosim.engine.topology import ACCESS, build_topology, to_native

pytestmark = pytest.mark.ns3

EFFICIENCY = 1024 / (1024 + 62 + 20)  # 1 KiB payload: RoCEv2 headers + preamble/IFG
G = 5 / 1024  # Dcqcn::G default


def two_leaves_400g_spine():
    """topologies/two_leaf_8hosts.yaml: 8 hosts with 100G NICs, two leaves, one 400G spine."""
    return build_topology(
        parse_cluster(
            {
                "host_types": {
                    "n": {"gpu": "H100-SXM", "gpus": 1, "fabric": "pcie", "nics": 1, "nic_speed": "100Gbps"}
                },
                "hosts": [{"type": "n", "count": 8}],
                "fabric": {
                    "kind": "fat-tree",
                    "hosts_per_leaf": 4,
                    "link_delay": "1us",
                    "oversubscription": 1,
                    "spine_speed": "400Gbps",
                },
            },
            "two_leaf.yaml",
        )
    )


def star_mixed():
    """topologies/star_mixed_nics.yaml: GPUs 0, 3, 4 have 400G NICs, GPUs 1, 2 100G."""
    return build_topology(
        parse_cluster(
            {
                "host_types": {
                    "fast": {
                        "gpu": "H100-SXM",
                        "gpus": 1,
                        "fabric": "pcie",
                        "nics": 1,
                        "nic_speed": "400Gbps",
                    },
                    "slow": {
                        "gpu": "H100-SXM",
                        "gpus": 1,
                        "fabric": "pcie",
                        "nics": 1,
                        "nic_speed": "100Gbps",
                    },
                },
                "hosts": [
                    {"type": "fast", "count": 1},
                    {"type": "slow", "count": 2},
                    {"type": "fast", "count": 2},
                ],
                "fabric": {"kind": "fat-tree", "hosts_per_leaf": 8, "link_delay": "1us"},
            },
            "mixed.yaml",
        )
    )


def net(cc, buffer, pfc=True, **attributes):
    return NetworkConfig(
        cc=cc, mtu_bytes=1024, pfc=pfc, buffer_bytes=buffer, ecmp=True, attributes=attributes
    )


def window(res):
    """Second half of the interval during which every flow is active."""
    start, end = int(res["flows"]["start_ns"].max()), int(res["flows"]["end_ns"].min())
    return (start + end) // 2, end


def acked_rates(res, flows):
    """Goodput (bit/s, acknowledged payload) of each flow over :func:`window`."""
    t0, t1 = window(res)
    rate = res["series"]["rate"]
    out = []
    for f in flows:
        sel = rate["flow"] == f
        t, acked = rate["time_ns"][sel], rate["acked_bytes"][sel].astype(float)
        a0, a1 = np.interp([t0, t1], t, acked)
        out.append((a1 - a0) * 8 / ((t1 - t0) * 1e-9))
    return np.array(out)


def port_queue(res, port, t0, t1):
    q = res["series"]["queue"]
    sel = (q["port"] == port) & (q["time_ns"] >= t0) & (q["time_ns"] < t1)
    return q["bytes"][sel].astype(float)


def test_dcqcn_incast_holds_rates_at_fair_share_without_pfc(native_lib):
    """4-to-1 incast across a 400G spine (workloads/netbench/incast_4to1.yaml), PFC on.

    Before the fix (CNP interval 50 us against the Mellanox 1 us alpha period, alpha decayed
    to ~0.02 between CNPs) the DCQCN rates stayed at ~90 Gb/s, the bottleneck queue sat at the
    spine port's XOFF point (5.4 MiB) and DCQCN sent 2554 pause frames, like cc none (2568).
    Measured now: mean CC rates over the second half 23.4 / 25.5 / 19.5 / 22.8 Gb/s (fair
    share 25), 0 pause frames, bottleneck queue mean ~0.5 MB (Kmin 0.4 MB, Kmax 1.6 MB).
    """
    topo = two_leaves_400g_spine()
    args = ([0, 1, 2, 3], [4] * 4, [16 << 20] * 4, [0] * 4)
    dcqcn = packet.run_flows(
        topo, net("dcqcn", 16 << 20), *args, stop_ns=50_000_000, sample_interval_ns=10_000
    )
    none = packet.run_flows(topo, net("none", 16 << 20), *args, stop_ns=50_000_000)
    assert (dcqcn["flows"]["end_ns"] > 0).all() and dcqcn["counters"]["drops"] == 0
    t0, t1 = window(dcqcn)
    rate = dcqcn["series"]["rate"]
    sel = (rate["time_ns"] >= t0) & (rate["time_ns"] < t1)
    fair = 100e9 / 4  # the CC rate counts wire bytes, like the link
    means = np.array([rate["rate_bps"][sel & (rate["flow"] == f)].mean() for f in range(4)])
    assert abs(means.mean() - fair) <= 0.10 * fair, means
    assert (np.abs(means - fair) <= 0.30 * fair).all(), means
    # DCQCN, not PFC, does the work
    assert none["counters"]["pfc_pause_frames"] > 1000
    assert dcqcn["counters"]["pfc_pause_frames"] <= none["counters"]["pfc_pause_frames"] / 20
    # the bottleneck queue stays in the marking band instead of at the PFC threshold
    ports = dcqcn["ports"]
    nic4 = int(topo.gpu_nic_node[4])
    access = (ports["node"] == nic4) & (topo.link_kind[ports["link"]] == ACCESS)
    nic_link = ports["link"][access][0]
    bottleneck = int(np.flatnonzero((ports["link"] == nic_link) & (ports["node"] != nic4))[0])
    kmax = 1_600_000  # 400 KB per 25 Gb/s at 100 Gb/s
    q = port_queue(dcqcn, bottleneck, t0, t1)
    assert len(q) > 50
    assert q.mean() <= kmax and q.max() <= 1.5 * kmax
    assert none["ports"]["max_queue_bytes"][bottleneck] > 3 * kmax
    # the bottleneck stays busy: acknowledged goodput >= 85 % of payload line rate
    assert acked_rates(dcqcn, range(4)).sum() >= 0.85 * EFFICIENCY * 100e9
    # the NP sends at most one CNP per queue pair per CnpInterval (4 us)
    fct = dcqcn["flows"]["fct_ns"]
    assert (dcqcn["flows"]["cnps"] <= fct // 4000 + 1).all()


@pytest.mark.parametrize(
    "cnp_us, alpha_us, expected",
    [
        (4, 1, G * (1 - G) ** 3 / (1 - (1 - G) ** 4)),  # Mellanox pair: alpha* ~ 0.25
        (50, 55, 1.0),  # DCQCN paper pair (K > N): alpha -> 1
        (50, 1, G * (1 - G) ** 49 / (1 - (1 - G) ** 50)),  # the old mismatch: alpha* ~ 0.018
    ],
)
def test_dcqcn_alpha_under_sustained_cnps_reaches_its_fixed_point(native_lib, cnp_us, alpha_us, expected):
    ns3 = native_lib.ns3
    ns3.Simulator.Destroy()
    rp = ns3.CreateObject[ns3.Dcqcn]()
    rp.SetAttribute("AlphaUpdateInterval", ns3.TimeValue(ns3.MicroSeconds(alpha_us)))
    rp.Start(100e9, ns3.MicroSeconds(10), 1024)
    period = cnp_us * 1000
    t = 0
    for _ in range(3000):  # 3000 CNPs: (1-g)^3000 ~ 4e-7 of the start value left
        t += period
        ns3.Simulator.Stop(ns3.NanoSeconds(period))
        ns3.Simulator.Run()
        rp.ReceiveCnp()
    # sample alpha just before the next CNP: k - 1 decays after the last rise
    ns3.Simulator.Stop(ns3.NanoSeconds(period - 1))
    ns3.Simulator.Run()
    assert rp.GetAlpha() == pytest.approx(expected, rel=0.02, abs=1e-3)
    rp.Dispose()
    ns3.Simulator.Destroy()


def test_lossless_fabric_never_retransmits(native_lib):
    """Senders join a 100G bottleneck 1 ms apart without CC (the pattern of
    workloads/netbench/dcqcn_convergence.yaml): PFC builds a multi-MB queue (hundreds of us of
    queueing delay) and pauses the senders for long stretches. With the former RTO (320 us,
    also counting paused time) this run timed out and went back N: 1696 retransmits, 2
    timeouts, 0 drops (the DCQCN scenario showed 2918). A lossless fabric must show none."""
    topo = build_topology(
        parse_cluster(
            {
                "host_types": {
                    "n": {"gpu": "H100-SXM", "gpus": 1, "fabric": "pcie", "nics": 1, "nic_speed": "100Gbps"}
                },
                "hosts": [{"type": "n", "count": 8}],
                "fabric": {"kind": "fat-tree", "hosts_per_leaf": 8, "link_delay": "1us"},
            },
            "s.yaml",
        )
    )
    args = ([0, 1, 2, 3], [4] * 4, [32 << 20] * 4, [0, 1_000_000, 2_000_000, 3_000_000])
    res = packet.run_flows(topo, net("none", 16 << 20), *args, stop_ns=60_000_000)
    assert (res["flows"]["end_ns"] > 0).all()
    c = res["counters"]
    assert c["pfc_pause_frames"] > 0
    assert c["drops"] == 0 and c["retransmits"] == 0 and c["timeouts"] == 0
    # the queue really held more than 320 us of data at 100 Gb/s
    assert res["ports"]["max_queue_bytes"].max() > 320e-6 * 100e9 / 8


def _mixed_speed_ring(rto: str | None):
    """Three 10G hosts and one 50G host, a ring in both directions, 4 flows per neighbour pair,
    DCQCN, PFC, 32 MiB buffer (the shape of the AMP cluster's gradient all-reduce)."""
    topo = build_topology(
        parse_cluster(
            {
                "host_types": {
                    "slow": {
                        "gpu": "H100-SXM",
                        "gpus": 1,
                        "fabric": "pcie",
                        "nics": 1,
                        "nic_speed": "10Gbps",
                    },
                    "fast": {
                        "gpu": "H100-SXM",
                        "gpus": 1,
                        "fabric": "pcie",
                        "nics": 1,
                        "nic_speed": "50Gbps",
                    },
                },
                "hosts": [{"type": "slow", "count": 3}, {"type": "fast", "count": 1}],
                "fabric": {"kind": "fat-tree", "hosts_per_leaf": 4, "link_delay": "1us"},
            },
            "m.yaml",
        )
    )
    src = [i for i in range(4) for _ in range(4) for _ in range(2)]
    dst = [(i + step) % 4 for i in range(4) for _ in range(4) for step in (1, 3)]
    extra = {} if rto is None else {"Rto": rto}
    return packet.run_flows(
        topo,
        net("dcqcn", 32 << 20, **extra),
        src,
        dst,
        [8 << 20] * len(src),
        [0] * len(src),
        stop_ns=2_000_000_000,
    )


def test_slow_nics_under_dcqcn_never_time_out_with_nccl_timeout(native_lib):
    """At 10 Gb/s the queues of a lossless fabric hold more than 4.096 us * 2^10 (4.2 ms) of
    data: with that RTO this ring went back N without a single drop (the AMP cluster's 10G hosts
    showed 71 k retransmits and 144 timeouts, 0 drops, and a 7.8 % longer iteration). With
    NCCL's timeout (2^20, the default) none."""
    old = _mixed_speed_ring("4194304ns")
    new = _mixed_speed_ring(None)
    for res in (old, new):
        assert (res["flows"]["end_ns"] > 0).all() and res["counters"]["drops"] == 0
        assert res["counters"]["pfc_pause_frames"] > 0
    assert old["counters"]["timeouts"] > 0 and old["counters"]["retransmits"] > 0
    assert new["counters"]["timeouts"] == 0 and new["counters"]["retransmits"] == 0
    assert new["flows"]["end_ns"].max() < old["flows"]["end_ns"].max()


def _unfairness(scaling: bool):
    """workloads/netbench/pfc_unfairness.yaml: local GPU 5 + remote GPUs 0-2 -> GPU 4."""
    topo = two_leaves_400g_spine()
    res = packet.run_flows(
        topo,
        net("none", 2 << 20, PfcAlphaSpeedScaling=scaling),
        [5, 0, 1, 2],
        [4] * 4,
        [16 << 20] * 4,
        [0] * 4,
        stop_ns=50_000_000,
        sample_interval_ns=10_000,
    )
    assert res["counters"]["drops"] == 0 and res["counters"]["pfc_pause_frames"] > 0
    rates = acked_rates(res, range(4))
    return rates / rates.sum()


def test_pfc_shares_the_bottleneck_per_ingress_port(native_lib):
    """The egress FIFO holds about each paused ingress port's XOFF threshold, so the split is
    per ingress port in proportion to the thresholds. Equal thresholds: the local sender gets
    ~1/2 and each sender behind the spine port ~1/6 (measured 0.43 / 0.19 each). Speed-scaled
    alpha (400G spine port: 4x the 100G port's) gives the local port 1/5 (measured 0.20)."""
    equal = _unfairness(False)
    assert equal[0] >= 0.40
    assert (equal[1:] <= 0.21).all() and np.ptp(equal[1:]) <= 0.01
    scaled = _unfairness(True)
    assert scaled[0] == pytest.approx(1 / 5, abs=0.03)
    assert np.ptp(scaled[1:]) <= 0.01


def test_mixed_nic_speeds_pace_at_line_rate_and_share_per_threshold(native_lib):
    """A 100G and two 400G senders to a 400G receiver. Alone, each sender reaches its own
    line rate (no pacing artefact for either speed). Together, with PFC and one FIFO, the
    shares follow the ingress thresholds: equal alpha gives ~max-min (100 / 150 / 150 wire,
    measured 91.5 / 139.5 / 139.4 Gb/s goodput), speed-scaled alpha 1 : 4 : 4 (measured
    41 / 165 / 165)."""
    topo = star_mixed()
    for src, line in ((1, 100e9), (3, 400e9)):
        res = packet.run_flows(topo, net("none", 32 << 20), [src], [0], [8 << 20], [0], stop_ns=10_000_000)
        goodput = (8 << 20) * 8 / (res["flows"]["fct_ns"][0] * 1e-9)
        assert goodput == pytest.approx(EFFICIENCY * line, rel=0.03)
    args = ([1, 3, 4], [0] * 3, [16 << 20] * 3, [0] * 3)
    for scaling, expected in ((False, [100e9, 150e9, 150e9]), (True, [400e9 / 9, 1600e9 / 9, 1600e9 / 9])):
        res = packet.run_flows(
            topo,
            net("none", 32 << 20, PfcAlphaSpeedScaling=scaling),
            *args,
            stop_ns=20_000_000,
            sample_interval_ns=10_000,
        )
        assert res["counters"]["drops"] == 0
        rates = acked_rates(res, range(3))
        assert rates == pytest.approx(EFFICIENCY * np.array(expected), rel=0.10), rates


def _dcqcn_steps(native_lib, **attributes):
    """(RateAi, RateHai) in use by a flow from a 100G NIC (GPU 1) and one from a 400G NIC
    (GPU 3) of :func:`star_mixed`, both to GPU 0."""
    ns3 = native_lib.ns3
    ns3.Simulator.Destroy()
    topo = star_mixed()
    network = packet.create_packet_network(
        native_lib, to_native(topo, native_lib), net("dcqcn", 32 << 20, **attributes), seed=1
    )
    network.ScheduleFlows(
        2,
        np.arange(2, dtype=np.uint32),
        np.array([1, 3], np.uint32),
        np.zeros(2, np.uint32),
        np.full(2, 1 << 20, np.uint64),
        np.zeros(2, np.int64),
        np.full(2, 3, np.uint8),
    )
    ns3.Simulator.Stop(ns3.MicroSeconds(5))
    ns3.Simulator.Run()
    steps = []
    for flow in range(2):
        cc = ns3.DynamicCast[ns3.Dcqcn](network.GetFlowCc(flow))
        steps.append((cc.GetRateAi(), cc.GetRateHai()))
    network.Dispose()
    ns3.Simulator.Destroy()
    return steps


def test_dcqcn_line_rate_steps_follow_each_nic_speed_and_explicit_values_win(native_lib):
    """Default: the firmware's fixed 5 / 50 Mb/s on every NIC. RateAi = RateHai = 0 in
    network.attributes: each queue pair takes its own NIC's speed through the HPCC simulator's
    rule (5 / 50 Mb/s per 25 Gb/s); a non-zero step given beside it wins."""
    assert _dcqcn_steps(native_lib) == [(5e6, 50e6)] * 2
    scaled = {"RateAi": "0bps", "Dcqcn::RateHai": "0bps"}
    assert _dcqcn_steps(native_lib, **scaled) == [(20e6, 200e6), (80e6, 800e6)]
    assert _dcqcn_steps(native_lib, RateAi="0bps", RateHai="100Mbps") == [(20e6, 100e6), (80e6, 100e6)]
    # the rule itself is an attribute too
    assert _dcqcn_steps(native_lib, **scaled, **{"Dcqcn::RateAiFraction": 1e-4}) == [
        (10e6, 200e6),
        (40e6, 800e6),
    ]
