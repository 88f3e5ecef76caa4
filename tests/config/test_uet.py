"""network.transport: uet: its defaults (NSCC, PFC off) and the rules joining it to network.cc,
network.pfc and the fidelity (heterosim.config.fabric); bad input is one line naming file and
key, exit 2."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from pathlib import Path

import pytest

from heterosim.cli import main
from heterosim.config.choices import CC_TYPE_IDS, REORDERING_TRANSPORTS, TRANSPORTS, UET_CCS
from heterosim.config.experiment import default_network, load_experiment
from heterosim.config.fabric import check_load_balancing, check_uet
from heterosim.config.network_model import FLUID, PACKET
from heterosim.config.scenario import load_scenario
from heterosim.errors import UserError

REPO = Path(__file__).resolve().parents[2]
STAR = str(REPO / "topologies" / "star_8hosts_100g.yaml")


@pytest.fixture
def scenario(incast_scenario: Callable[..., Path]) -> Callable[..., Path]:
    """``scenario(network, fidelity="packet")``: this module's incast, UET on the 8-host star."""
    return functools.partial(incast_scenario, "uet", STAR, {"transport": "uet"})


def test_uet_is_a_reordering_transport_with_its_own_cc():
    assert "uet" in TRANSPORTS and "uet" in REORDERING_TRANSPORTS
    assert UET_CCS[0] == "nscc" and CC_TYPE_IDS["nscc"] == "ns3::Nscc"


def test_uet_defaults_to_nscc_on_a_lossy_fabric(scenario):
    network = load_scenario(scenario({})).network
    assert (network.transport, network.cc, network.pfc) == ("uet", "nscc", False)


def test_uet_sprays_over_ecmp_and_needs_no_reordering_permission(scenario):
    network = load_scenario(scenario({"pfc": False, "load_balancing": "spray"})).network
    assert (network.load_balancing, network.accept_reordering) == ("spray", False)


def test_other_transports_keep_their_defaults():
    network = default_network()
    assert (network.transport, network.cc, network.pfc) == ("roce", "dcqcn", True)


BAD = [
    ({"pfc": True}, "network.pfc: true contradicts network.transport: 'uet'"),
    ({"cc": "dcqcn"}, "network.cc: 'dcqcn' is not a congestion control of network.transport: 'uet'"),
    ({"cc": "none"}, "network.cc: 'none' is not a congestion control of network.transport: 'uet'"),
    ({"cc": "swift"}, "network.cc: expected one of"),
]


@pytest.mark.parametrize("network,expected", BAD, ids=[e for _, e in BAD])
def test_bad_uet_settings_exit_2_with_one_line(scenario, tmp_path, capsys, network, expected):
    path = scenario(network)
    code = main(["netbench", str(path), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert str(path) in err and expected in err, err
    assert not (tmp_path / "out").exists()


def test_an_override_that_makes_a_pfc_file_uet_is_refused(scenario, tmp_path, capsys):
    path = scenario({"transport": "roce", "pfc": True})
    code = main(["netbench", str(path), "--set", "network.transport=uet", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert "network.pfc: true contradicts network.transport: 'uet'" in err


@pytest.mark.ns3
def test_flow_fidelity_runs_uet_as_spraying(scenario, tmp_path, capsys):
    code = main(["netbench", str(scenario({}, "flow")), "--out", str(tmp_path / "out")])
    assert code == 0, capsys.readouterr().err


def test_flow_fidelity_refuses_uet_over_adaptive_switches(scenario, tmp_path, capsys):
    path = scenario({"load_balancing": "adaptive"}, "flow")
    code = main(["netbench", str(path), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert "network.load_balancing: 'adaptive' needs packet fidelity" in err


def test_the_rules_hold_for_networks_built_in_code():
    """The engine checks again (engine_config() users build NetworkConfig without a file)."""
    network = dataclasses.replace(default_network(), transport="uet", cc="nscc", pfc=False)
    check_uet(network)
    check_load_balancing(network, PACKET)
    with pytest.raises(UserError, match=r"^network\.pfc: true contradicts"):
        check_uet(dataclasses.replace(network, pfc=True))
    with pytest.raises(UserError, match=r"^network\.cc: 'hpcc' is not"):
        check_uet(dataclasses.replace(network, cc="hpcc"))
    check_load_balancing(network, FLUID)  # runs as spraying in the fluid model
    with pytest.raises(UserError, match="'flowlet' needs packet fidelity"):
        check_load_balancing(dataclasses.replace(network, load_balancing="flowlet"), FLUID)


def test_the_roce_vs_uet_example_pair_differs_only_in_the_network():
    examples = REPO / "workloads" / "examples"
    roce = load_experiment(examples / "roce_vs_uet_roce.yaml")
    uet = load_experiment(examples / "roce_vs_uet_uet.yaml")
    assert (roce.network.transport, roce.network.cc, roce.network.pfc) == ("roce", "dcqcn", True)
    assert (uet.network.transport, uet.network.cc, uet.network.pfc) == ("uet", "nscc", False)
    assert (roce.model, roce.training, roce.parallel) == (uet.model, uet.training, uet.parallel)
    assert roce.cluster == uet.cluster and roce.simulation == uet.simulation
