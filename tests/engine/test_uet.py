"""The Ultra Ethernet transport through the Python engine (network.transport: uet): ECMP switches
spray its flows by entropy, every byte arrives, the receivers' reorder counters report it, and a
run is reproducible."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from heterosim.config.scenario import load_scenario
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
