"""Long commands say what they do on stderr (per run, with an ETA) unless --quiet, and warn when
the setting a comparison or sweep varies cannot act at its fidelity."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from heterosim.cli import main

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "workloads" / "compare" / "tiny_4gpu.yaml"  # flow fidelity
CC_WARNING = "warning: network.cc has no effect at flow fidelity"

pytestmark = pytest.mark.ns3


def test_compare_shows_each_side_and_warns_that_cc_does_nothing_at_flow(tmp_path, capsys):
    out = tmp_path / "cc"
    argv = ["compare", str(TINY), "--variant", "hpcc:network.cc=hpcc", "--no-plots", "--out", str(out)]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert err.count(CC_WARNING) == 1 and "they give the same result" in err
    assert "heterosim compare: running A = base and B = hpcc" in err
    assert "heterosim compare: [1/2]" in err and "heterosim compare: [2/2]" in err and "elapsed" in err
    comparison = json.loads((out / "comparison.json").read_text())
    assert comparison["warnings"][0].startswith("network.cc has no effect at flow fidelity")
    assert main([*argv[:-1], str(tmp_path / "quiet"), "--quiet"]) == 0
    err = capsys.readouterr().err
    assert CC_WARNING in err and "[1/2]" not in err and "running A" not in err


def test_sweep_warns_once_about_a_grid_key_without_effect(tmp_path, capsys):
    sweep = tmp_path / "cc.yaml"
    sweep.write_text(
        f"name: cc-at-flow\nexperiment: {TINY}\nfidelity: flow\nworkers: 1\n"
        "grid:\n  network.cc: [dcqcn, hpcc]\n"
    )
    assert main(["sweep", str(sweep), "--out", str(tmp_path / "out"), "--no-plots"]) == 0
    err = capsys.readouterr().err
    assert err.count(CC_WARNING) == 1
    assert "heterosim sweep: [1/2]" in err and "ETA" in err and "heterosim sweep: [2/2]" in err


def test_netbench_says_what_it_simulates_unless_quiet(tmp_path, capsys):
    scenario = REPO / "workloads" / "netbench" / "single_flow.yaml"
    assert main(["netbench", str(scenario), "--fidelity", "flow", "--out", str(tmp_path / "a")]) == 0
    assert "heterosim netbench: single" in capsys.readouterr().err
    argv = ["netbench", str(scenario), "--fidelity", "flow", "--out", str(tmp_path / "b"), "--quiet"]
    assert main(argv) == 0
    assert "heterosim netbench:" not in capsys.readouterr().err


def test_run_warns_about_an_override_without_effect(tmp_path, capsys):
    argv = ["run", str(TINY), "--set", "network.pfc=false", "--no-plots", "--quiet", "--out", str(tmp_path)]
    assert main(argv) == 0
    assert "--set network.pfc=false has no effect at flow fidelity" in capsys.readouterr().err
