"""network.load_balancing, network.transport, network.accept_reordering: parsing and the rules
joining them (heterosim.config.fabric); bad input is one line naming file and key, exit 2."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from heterosim.cli import main
from heterosim.config.choices import LOAD_BALANCING, REORDERING_LOAD_BALANCING, TRANSPORTS
from heterosim.config.experiment import default_network
from heterosim.config.fabric import check_load_balancing
from heterosim.config.network_model import FLUID, PACKET
from heterosim.config.scenario import load_scenario
from heterosim.errors import UserError

REPO = Path(__file__).resolve().parents[2]
TWO_LEAF = str(REPO / "topologies" / "two_leaf_8hosts.yaml")


@pytest.fixture
def scenario(incast_scenario: Callable[..., Path]) -> Callable[..., Path]:
    """``scenario(network, fidelity="packet")``: this module's incast, DCQCN on the two-leaf fabric."""
    return functools.partial(incast_scenario, "lb", TWO_LEAF, {"cc": "dcqcn"})


def test_defaults_are_ecmp_over_go_back_n():
    network = default_network()
    assert (network.load_balancing, network.transport, network.accept_reordering) == ("ecmp", "roce", False)
    assert network.flowlet_gap_ns == 500_000  # CONGA's flowlet timeout


def test_every_mode_with_a_reordering_transport_parses(scenario):
    for mode in LOAD_BALANCING:
        path = scenario({"load_balancing": mode, "transport": "irn", "flowlet_gap": "50us"})
        network = load_scenario(path).network
        assert (network.load_balancing, network.transport, network.flowlet_gap_ns) == (mode, "irn", 50_000)


@pytest.mark.parametrize("mode", ["ecmp", "flowlet", "adaptive_flowlet"])
def test_modes_that_keep_a_flow_on_one_path_run_over_go_back_n(scenario, mode):
    assert load_scenario(scenario({"load_balancing": mode})).network.transport == "roce"


def test_reordering_over_go_back_n_can_be_accepted(scenario):
    path = scenario({"load_balancing": "spray", "accept_reordering": True})
    assert load_scenario(path).network.accept_reordering


BAD = [
    ({"load_balancing": "conga"}, "network.load_balancing: expected one of ecmp, flowlet"),
    ({"transport": "tcp"}, "network.transport: expected one of " + ", ".join(TRANSPORTS)),
    ({"flowlet_gap": "0us"}, "network.flowlet_gap"),
    ({"accept_reordering": "yes"}, "network.accept_reordering: expected true or false"),
    *[
        ({"load_balancing": mode}, f"network.load_balancing: {mode!r} reorders packets")
        for mode in REORDERING_LOAD_BALANCING
    ],
]


@pytest.mark.parametrize("network,expected", BAD, ids=[e for _, e in BAD])
def test_bad_load_balancing_exits_2_with_one_line(scenario, tmp_path, capsys, network, expected):
    path = scenario(network)
    code = main(["netbench", str(path), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert str(path) in err and expected in err, err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("mode", ["adaptive", "adaptive_flowlet", "flowlet"])
def test_flow_fidelity_refuses_load_dependent_path_choice(scenario, tmp_path, capsys, mode):
    path = scenario({"load_balancing": mode, "transport": "irn"})
    code = main(["netbench", str(path), "--fidelity", "flow", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert f"{path}: network.load_balancing: '{mode}' needs packet fidelity" in err


def test_flow_fidelity_refuses_to_measure_spraying_over_go_back_n(scenario, tmp_path, capsys):
    path = scenario({"load_balancing": "spray", "accept_reordering": True})
    code = main(["netbench", str(path), "--fidelity", "flow", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert f"{path}: network.accept_reordering: true measures what go-back-N loses" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.ns3
def test_flow_fidelity_runs_spraying(scenario, tmp_path, capsys):
    path = scenario({"load_balancing": "spray_rr", "transport": "irn"})
    code = main(["netbench", str(path), "--fidelity", "flow", "--out", str(tmp_path / "out")])
    assert code == 0, capsys.readouterr().err


def test_experiment_file_refuses_spraying_over_go_back_n(tmp_path, capsys):
    cluster = {
        "name": "c",
        "host_types": {"h100": {"gpu": "H100-SXM", "gpus": 8, "nics": 8, "nic_speed": "400Gbps"}},
        "hosts": [{"type": "h100", "count": 2}],
    }
    experiment = {
        "model": "gpt3-6.7b",
        "training": {"global_batch": 32, "micro_batch": 1},
        "parallel": {"tp": 4, "pp": 2, "dp": 2},
        "cluster": "cluster.yaml",
        "network": {"load_balancing": "spray_rr"},
    }
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump(cluster))
    (tmp_path / "exp.yaml").write_text(yaml.safe_dump(experiment))
    code = main(["workload", str(tmp_path / "exp.yaml"), "--out", str(tmp_path / "out"), "--summary-only"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert "exp.yaml: network.load_balancing: 'spray_rr' reorders packets" in err
    assert "network.accept_reordering: true" in err


def test_the_rules_hold_for_networks_built_in_code():
    """The engine checks again (engine_config users build NetworkConfig without a file)."""
    network = dataclasses.replace(default_network(), load_balancing="spray_rr")
    with pytest.raises(UserError, match=r"^network\.load_balancing: 'spray_rr' reorders packets"):
        check_load_balancing(network, PACKET)
    check_load_balancing(dataclasses.replace(network, transport="irn"), PACKET)
    check_load_balancing(dataclasses.replace(network, transport="irn"), FLUID)
    with pytest.raises(UserError, match=r"'adaptive' needs packet fidelity \(the flow model runs ecmp"):
        check_load_balancing(dataclasses.replace(network, transport="irn", load_balancing="adaptive"), FLUID)
    with pytest.raises(UserError, match=r"^network\.accept_reordering: true measures"):
        check_load_balancing(dataclasses.replace(network, accept_reordering=True), FLUID)
    check_load_balancing(dataclasses.replace(network, accept_reordering=True), PACKET)
    check_load_balancing(default_network(), FLUID)
