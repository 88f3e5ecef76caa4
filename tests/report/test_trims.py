"""Trimmed packets in the outputs of ``heterosim run`` (network.trimming, UET, packet fidelity):
the total and per switch in results.json ``network``, per port in links.csv; each switch's count
is its ports', each trim is resent once, and a run without trimming drops instead."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from heterosim.cli import main

pytestmark = pytest.mark.ns3

# 8 hosts under two leaves, DP 8 with a tree all-reduce into 32 KiB switch buffers
EXPERIMENT = Path(__file__).resolve().parents[1] / "data" / "trim_tree_8gpu.yaml"


def _run(tmp_path: Path, trimming: bool) -> tuple[dict, list[dict], list[dict]]:
    out = tmp_path / f"trimming-{trimming}"
    sets = ["--set", f"network.trimming={str(trimming).lower()}"]
    assert main(["run", str(EXPERIMENT), *sets, "--out", str(out), "--no-plots", "--quiet"]) == 0
    results = json.loads((out / "results.json").read_text())
    links = list(csv.DictReader((out / "links.csv").open()))
    flows = list(csv.DictReader((out / "flows.csv").open()))
    return results["network"], links, flows


def test_trims_per_switch_and_port_add_up_and_each_is_resent_once(tmp_path, native_lib):
    network, links, flows = _run(tmp_path, trimming=True)
    switches = network["switch_trims"]
    assert network["trims"] > 0 and network["drops"] == 0
    assert set(switches) == {"leaf0", "leaf1"}  # both leaves take a parent's two children
    assert sum(switches.values()) == network["trims"] == sum(int(row["trims"]) for row in links)
    for name, count in switches.items():  # a switch's trims are those of its egress ports
        assert count == sum(int(row["trims"]) for row in links if row["name"].startswith(f"{name}->"))
    trimmed = [row for row in links if int(row["trims"])]
    assert all(row["name"].split("->")[0] in switches for row in trimmed)  # never at a NIC
    # every trimmed packet is NACKed and resent once (no timeout): resends = trims, and no more
    # packets are trimmed than sent (each flow's MTU packets plus its resends)
    assert network["retransmits"] == network["trims"] == sum(int(f["retransmits"]) for f in flows)
    sent = sum(-(-int(f["bytes"]) // 1024) + int(f["retransmits"]) for f in flows)
    assert network["trims"] <= sent


def test_without_trimming_nothing_is_trimmed_and_the_overflow_drops(tmp_path, native_lib):
    network, links, _ = _run(tmp_path, trimming=False)
    assert "trims" not in network and "switch_trims" not in network  # as before trimming existed
    assert "trims" not in links[0]
    assert network["drops"] > 0
