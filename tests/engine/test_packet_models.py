"""Packet network building blocks driven alone: DCQCN reaction point, RED ECN marker; and the
whole network under a debug build of the C++ modules."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

pytestmark = pytest.mark.ns3

LINE = 100e9
G = 5 / 1024  # Dcqcn::G default (Mellanox dce_tcp_g = 1019)
ALPHA0 = 1023 / 1024  # Dcqcn::InitialAlpha
AI, HAI = 5e6, 50e6  # Dcqcn::RateAi, RateHai (Mellanox rpg_ai_rate, rpg_hai_rate)
BYTES = 32767  # Dcqcn::ByteCounter


def advance_to(ns3, t_ns: int) -> None:
    now = int(ns3.Simulator.Now().GetNanoSeconds())
    ns3.Simulator.Stop(ns3.NanoSeconds(t_ns - now))
    ns3.Simulator.Run()
    assert int(ns3.Simulator.Now().GetNanoSeconds()) == t_ns


def test_dcqcn_reaction_point_follows_hand_computed_rates_and_alpha(native_lib):
    ns3 = native_lib.ns3
    ns3.Simulator.Destroy()
    rp = ns3.CreateObject[ns3.Dcqcn]()
    rp.SetAttribute("RateAi", ns3.DataRateValue(ns3.DataRate(int(AI))))
    rp.SetAttribute("RateHai", ns3.DataRateValue(ns3.DataRate(int(HAI))))
    rp.Start(LINE, ns3.MicroSeconds(10), 4096)
    assert rp.GetRate() == LINE and rp.GetAlpha() == ALPHA0
    assert rp.GetRateAi() == AI and rp.GetRateHai() == HAI

    # t = 10.5 us: first CNP -> immediate cut with the initial alpha; Rt keeps line rate
    advance_to(ns3, 10_500)
    rp.ReceiveCnp()
    r1 = LINE * (1 - ALPHA0 / 2)
    assert rp.GetRate() == pytest.approx(r1, rel=1e-12)
    assert rp.GetTargetRate() == LINE

    # t = 12.2 us: second CNP inside the 4 us decrease period -> no cut yet
    advance_to(ns3, 12_200)
    rp.ReceiveCnp()
    assert rp.GetRate() == pytest.approx(r1, rel=1e-12)
    alpha1 = (1 - G) * ALPHA0 + G  # period [10.5, 11.5) had a CNP
    assert rp.GetAlpha() == pytest.approx(alpha1, rel=1e-12)

    # t = 14.5 us: end of the decrease period -> cut with alpha updated to 14.5 us
    advance_to(ns3, 14_500)
    alpha2 = ((1 - G) * alpha1 + G) * (1 - G) ** 2  # [11.5,12.5) had a CNP, 2 empty periods
    r2 = r1 * (1 - alpha2 / 2)
    assert rp.GetRate() == pytest.approx(r2, rel=1e-9)
    assert rp.GetTargetRate() == LINE  # no increase since the first cut: Rt not clamped

    # t = 20 us: one byte-counter quantum -> BC stage 1 = F: additive increase (Rt capped)
    advance_to(ns3, 20_000)
    rp.OnSend(BYTES)
    rt = min(LINE + AI, LINE)
    r3 = (rt + r2) / 2
    assert rp.GetRate() == pytest.approx(r3, rel=1e-9)
    assert rp.GetByteStage() == 1 and rp.GetTimerStage() == 0

    # t = 30 us: CNP after an increase -> Rt clamped to the current rate, then cut
    advance_to(ns3, 30_000)
    rp.ReceiveCnp()
    alpha3 = alpha2 * (1 - G) ** 15  # periods [14.5, 29.5) had no CNP
    r4 = r3 * (1 - alpha3 / 2)
    assert rp.GetTargetRate() == pytest.approx(r3, rel=1e-9)
    assert rp.GetRate() == pytest.approx(r4, rel=1e-9)
    assert rp.GetByteStage() == 0 and rp.GetTimerStage() == 0

    # t = 330 us: increase timer (300 us after the last cut): T stage 1 -> additive
    advance_to(ns3, 330_001)
    rt = r3 + AI
    r5 = (rt + r4) / 2
    assert rp.GetTimerStage() == 1
    assert rp.GetRate() == pytest.approx(r5, rel=1e-9)

    # t = 400 us: a byte-counter event with both stages at F -> hyper increase, i = 1
    advance_to(ns3, 400_000)
    rp.OnSend(BYTES)
    rt = rt + HAI
    r6 = (rt + r5) / 2
    assert rp.GetTargetRate() == pytest.approx(rt, rel=1e-9)
    assert rp.GetRate() == pytest.approx(r6, rel=1e-9)
    alpha4 = ((1 - G) * alpha3 + G) * (1 - G) ** 369  # [29.5, 30.5) CNP, then 369 empty
    assert rp.GetAlpha() == pytest.approx(alpha4, rel=1e-9)
    assert rp.GetCnpCount() == 3 and rp.GetRateChanges() == 6
    rp.Dispose()
    ns3.Simulator.Destroy()


@pytest.mark.parametrize("line", [25e9, 100e9, 200e9, 400e9])
def test_dcqcn_increase_steps_fixed_by_default_or_from_the_line_rate(native_lib, line):
    """Default: the firmware's 5 / 50 Mb/s at every speed. RateAi = RateHai = 0: the HPCC
    simulator's rule (docs/network_models.md §1.6, S3 run.py) RATE_AI = 5 bw/25 Mb/s, RATE_HAI =
    50 bw/25 Mb/s; a non-zero step set beside it is taken as given."""
    ns3 = native_lib.ns3
    ns3.Simulator.Destroy()
    rp = ns3.CreateObject[ns3.Dcqcn]()
    rp.Start(line, ns3.MicroSeconds(10), 4096)
    assert (rp.GetRateAi(), rp.GetRateHai()) == (AI, HAI)
    for name in ("RateAi", "RateHai"):
        rp.SetAttribute(name, ns3.DataRateValue(ns3.DataRate(0)))
    rp.Start(line, ns3.MicroSeconds(10), 4096)
    ai, hai = 5e6 * line / 25e9, 50e6 * line / 25e9
    assert rp.GetRateAi() == pytest.approx(ai, rel=1e-12)
    assert rp.GetRateHai() == pytest.approx(hai, rel=1e-12)
    # the step is the one applied: cut, then one byte-counter event (additive increase)
    advance_to(ns3, 1000)
    rp.ReceiveCnp()
    cut = rp.GetRate()
    rp.OnSend(BYTES)
    assert rp.GetTargetRate() == pytest.approx(line, rel=1e-12)  # Rt = min(line + ai, line)
    rp.ReceiveCnp()  # within the decrease period: cut at its end, Rt clamped to Rc first
    advance_to(ns3, 5000)
    rt = (line + cut) / 2
    assert rp.GetTargetRate() == pytest.approx(rt, rel=1e-12)
    rp.OnSend(BYTES)
    assert rp.GetTargetRate() == pytest.approx(rt + ai, rel=1e-12)
    # an explicit step wins over the rule; the other one keeps following it
    rp.SetAttribute("RateAi", ns3.DataRateValue(ns3.DataRate(40_000_000)))
    rp.Start(line, ns3.MicroSeconds(10), 4096)
    assert rp.GetRateAi() == 40e6 and rp.GetRateHai() == pytest.approx(hai, rel=1e-12)
    rp.Dispose()
    ns3.Simulator.Destroy()


def test_dcqcn_without_byte_counter_stages_timer_events_as_the_hpcc_simulator(native_lib):
    """ByteCounter = 0 (S3's Mellanox model, docs/network_models.md §1.5): after a cut, timer event
    s = 0 is fast recovery, s = F (1) additive, s > F hyper by a constant RateHai; bytes sent
    never count."""
    ns3 = native_lib.ns3
    ns3.Simulator.Destroy()
    rp = ns3.CreateObject[ns3.Dcqcn]()
    rp.SetAttribute("ByteCounter", ns3.UintegerValue(0))
    rp.Start(LINE, ns3.MicroSeconds(10), 4096)
    advance_to(ns3, 1000)
    rp.ReceiveCnp()
    rc = LINE * (1 - ALPHA0 / 2)
    rp.OnSend(100 * BYTES)
    assert rp.GetRate() == pytest.approx(rc, rel=1e-12) and rp.GetByteStage() == 0
    advance_to(ns3, 301_001)  # timer event s = 0: fast recovery, Rt stays at line rate
    rc = (LINE + rc) / 2
    assert rp.GetRate() == pytest.approx(rc, rel=1e-12) and rp.GetTargetRate() == LINE
    advance_to(ns3, 302_000)  # a cut after an increase: Rt <- Rc, then Rc cut
    rp.ReceiveCnp()
    rt = rc
    rc *= 1 - rp.GetAlpha() / 2
    assert rp.GetTargetRate() == pytest.approx(rt, rel=1e-12)
    assert rp.GetRate() == pytest.approx(rc, rel=1e-12)
    for s, step in enumerate((0.0, AI, HAI, HAI)):  # timer events 300 us apart
        advance_to(ns3, 302_000 + 300_000 * (s + 1) + 1)
        rt += step
        rc = (rt + rc) / 2
        assert rp.GetTimerStage() == s + 1
        assert rp.GetTargetRate() == pytest.approx(rt, rel=1e-12)
        assert rp.GetRate() == pytest.approx(rc, rel=1e-12)
    rp.Dispose()
    ns3.Simulator.Destroy()


def test_red_marker_follows_the_red_line(native_lib):
    ns3 = native_lib.ns3
    marker = ns3.CreateObject[ns3.RedEcnMarker]()
    marker.SetStream(3)
    rate = 100_000_000_000
    kmin, kmax, pmax = 400_000, 1_600_000, 0.2  # defaults (100/400 KB per 25 Gb/s) at 100G
    assert marker.GetProbability(kmin, rate) == 0.0
    assert marker.GetProbability(kmax + 1, rate) == 1.0
    draws = 40_000
    for q in (kmin // 2, kmin + 1, 700_000, 1_000_000, 1_300_000, kmax, 3_000_000):
        expected = 0.0 if q <= kmin else (1.0 if q > kmax else pmax * (q - kmin) / (kmax - kmin))
        assert marker.GetProbability(q, rate) == pytest.approx(expected, abs=1e-12)
        marks = sum(bool(marker.ShouldMark(q, rate)) for _ in range(draws))
        sigma = math.sqrt(max(expected * (1 - expected), 1e-12) / draws)
        assert abs(marks / draws - expected) <= 5 * sigma + 1e-12, q
    # thresholds scale with the port speed: at 25 Gb/s the same queue is 4x deeper
    assert marker.GetProbability(1_000_000, 25_000_000_000) == 1.0


def test_marking_fraction_is_monotone_in_queue_depth(native_lib):
    ns3 = native_lib.ns3
    marker = ns3.CreateObject[ns3.RedEcnMarker]()
    queues = np.linspace(400_000, 1_600_000, 7)
    fractions = [np.mean([marker.ShouldMark(int(q), 100_000_000_000) for _ in range(5000)]) for q in queues]
    assert all(a <= b + 0.02 for a, b in zip(fractions, fractions[1:]))
    assert fractions[0] == 0.0 and fractions[-1] == pytest.approx(0.2, abs=0.03)


DEBUG_SCRIPT = textwrap.dedent("""
    import json
    from heterosim.config.cluster import parse_cluster
    from heterosim.config.experiment import NetworkConfig
    from heterosim.engine import native, packet
    from heterosim.engine.topology import build_topology
    assert native.build_mode() == "debug"
    topo = build_topology(parse_cluster(
        {"host_types": {"n": {"gpu": "H100-SXM", "gpus": 2, "fabric": "nvswitch", "nics": 1,
                              "nic_speed": "100Gbps"}},
         "hosts": [{"type": "n", "count": 4}],
         "fabric": {"kind": "fat-tree", "hosts_per_leaf": 2, "link_delay": "1us"}}, "d.yaml"))
    out = {}
    from heterosim.config.choices import CC_ALGORITHMS, UET_ONLY_CCS
    for cc in CC_ALGORITHMS:
        uet = cc in UET_ONLY_CCS  # the UET transport's own: lossy only
        for pfc in (False,) if uet else (True, False):
            net = NetworkConfig(cc=cc, mtu_bytes=1024, pfc=pfc, buffer_bytes=256 << 10, ecmp=True,
                                transport="uet" if uet else "roce")
            res = packet.run_flows(topo, net, [0, 2, 4, 1], [6, 6, 6, 0], [256 << 10] * 4,
                                   [0] * 4, stop_ns=100_000_000, sample_interval_ns=2000)
            out[f"{cc}-{pfc}"] = [int((res["flows"]["end_ns"] > 0).sum()), res["counters"]["drops"]]
    print(json.dumps(out))
""")


@pytest.mark.debug_build
def test_debug_build_runs_every_cc_with_and_without_pfc(tmp_path):
    env = {**os.environ, "HETEROSIM_BUILD_MODE": "debug", "HETEROSIM_CACHE_DIR": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "-c", DEBUG_SCRIPT], env=env, capture_output=True, text=True, timeout=1500
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    for key, (finished, drops) in result.items():
        assert finished == 4, key
        if key.endswith("True"):
            assert drops == 0, key
