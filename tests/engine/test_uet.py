"""The Ultra Ethernet transport through the Python engine (network.transport: uet): ECMP switches
spray its flows by entropy, every byte arrives, the receivers' reorder counters report it, and a
run is reproducible."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from heterosim.config.scenario import load_scenario
from heterosim.errors import UserError
from heterosim.simulate.flowset import simulate_flow_set

pytestmark = pytest.mark.ns3

NETBENCH = Path(__file__).resolve().parents[2] / "workloads" / "netbench"


def _run(name: str) -> dict:
    scenario = load_scenario(NETBENCH / name, ["simulation.sample_interval=0us"])
    return simulate_flow_set(scenario).raw


def test_uet_sprays_the_permutation_over_ecmp_switches_and_delivers_every_byte(native_lib):
    raw = _run("uet_permutation.yaml")
    flows = raw["flows"]
    assert np.array_equal(flows["bytes_delivered"], flows["bytes"])
    # ECMP switches, no load balancer: only the per-packet entropy reorders packets
    assert (np.asarray(flows["out_of_order"]) > 0).all()
    assert (np.asarray(flows["max_reorder_depth"]) > 0).all()
    counters = raw["counters"]
    assert counters["pfc_pause_frames"] == 0 and counters["drops"] == 0 and counters["cnps"] == 0
    again = _run("uet_permutation.yaml")["flows"]
    assert np.array_equal(again["fct_ns"], flows["fct_ns"])
    assert np.array_equal(again["out_of_order"], flows["out_of_order"])


def test_nscc_keeps_the_lossy_incast_inside_the_buffer(native_lib):
    raw = _run("uet_lossy_incast.yaml")
    flows = raw["flows"]
    assert np.array_equal(flows["bytes_delivered"], flows["bytes"])
    counters = raw["counters"]
    assert counters["drops"] == 0 and counters["retransmits"] == 0
    assert counters["pfc_pause_frames"] == 0 and counters["ecn_marks"] > 0
    # four 2 MiB flows share one 100 Gb/s link: each takes about four times its line-rate time
    line_rate_ns = 2 * 2**20 * (1024 + 82) / 1024 * 8 / 100e9 * 1e9
    assert (np.asarray(flows["fct_ns"]) < 4.2 * line_rate_ns).all()


def _run_with(name: str, *overrides: str) -> dict:
    scenario = load_scenario(NETBENCH / name, ["simulation.sample_interval=0us", *overrides])
    return simulate_flow_set(scenario).raw


def test_trimming_stops_the_spurious_resends_of_the_permutation(native_lib):
    """No drop in the permutation: without trimming the resends are all spurious (reordering
    taken for loss); with it reordering is never a loss, so nothing is resent or trimmed."""
    plain = _run_with("uet_permutation.yaml")
    trimmed = _run_with("uet_permutation.yaml", "network.trimming=true")
    assert plain["counters"]["drops"] == 0 and plain["counters"]["retransmits"] > 0
    assert "trims" not in plain["counters"]  # runs without trimming report as before
    counters = trimmed["counters"]
    assert counters["drops"] == 0 and counters["trims"] == 0
    assert counters["retransmits"] == 0 and counters["timeouts"] == 0
    flows = trimmed["flows"]
    assert np.array_equal(flows["bytes_delivered"], flows["bytes"])


def test_trimming_turns_the_small_buffer_incast_drops_into_single_resends(native_lib):
    """A 100 KB buffer cannot hold four initial NSCC windows: without trimming the switch drops;
    with it every refused packet is trimmed and resent once, with no timeout, and the trims are
    counted at the one switch of the star."""
    small = "network.buffer=100KB"
    plain = _run_with("uet_lossy_incast.yaml", small)
    trimmed = _run_with("uet_lossy_incast.yaml", small, "network.trimming=true")
    assert plain["counters"]["drops"] > 0
    counters = trimmed["counters"]
    assert counters["drops"] == 0 and counters["trims"] > 0 and counters["timeouts"] == 0
    assert counters["retransmits"] == counters["trims"]
    assert sum(trimmed["switch_trims"].values()) == counters["trims"] and len(trimmed["switch_trims"]) == 1
    # counted at the egress port toward the receiver too (QbbNetDevice::GetTrims), no other port
    ports = trimmed["ports"]
    assert int(np.sum(ports["trims"])) == counters["trims"] == int(np.max(ports["trims"]))
    assert "trims" not in plain["ports"]  # runs without trimming report as before
    flows = trimmed["flows"]
    assert np.array_equal(flows["bytes_delivered"], flows["bytes"])
    assert np.max(flows["fct_ns"]) < np.max(plain["flows"]["fct_ns"])


def test_rccc_shares_the_lossy_incast_with_a_near_empty_queue(native_lib):
    """Receiver credit paced at the downlink's rate: the four flows finish together (equal
    shares), nothing is lost, and the queue in front of the receiver stays far below NSCC's
    (NSCC queues up to its delay target; RCCC only the initial credit's transient)."""
    nscc = _run_with("uet_lossy_incast.yaml")
    rccc = _run_with("uet_lossy_incast.yaml", "network.cc=rccc")
    flows = rccc["flows"]
    assert np.array_equal(flows["bytes_delivered"], flows["bytes"])
    assert rccc["counters"]["drops"] == 0 and rccc["counters"]["retransmits"] == 0
    fct = np.asarray(flows["fct_ns"], np.float64)
    assert fct.max() / fct.min() < 1.01
    # four 2 MiB flows share one 100 Gb/s link: each takes about four times its line-rate time
    line_rate_ns = 2 * 2**20 * (1024 + 82) / 1024 * 8 / 100e9 * 1e9
    assert (fct < 4.2 * line_rate_ns).all()

    def busiest_mean_queue(raw: dict) -> float:
        ports = raw["ports"]
        return float(ports["mean_queue_bytes"][int(np.argmax(ports["bytes_sent"]))])

    assert busiest_mean_queue(rccc) < 0.1 * busiest_mean_queue(nscc)


@pytest.mark.parametrize("override", ["network.trimming=true", "network.cc=rccc"])
def test_memo_acceleration_is_refused_with_trimming_and_rccc(native_lib, override):
    """Episode replays carry neither switch trims nor receiver credit pacers: one-line refusal."""
    scenario = load_scenario(
        NETBENCH / "uet_lossy_incast.yaml",
        ["simulation.sample_interval=0us", "simulation.packet_acceleration=memo", override],
    )
    named = r"uet_lossy_incast.yaml: simulation: packet_acceleration: 'memo' replays"
    with pytest.raises(UserError, match=named):
        simulate_flow_set(scenario)
