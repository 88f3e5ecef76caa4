"""network.trimming: off by default; on only with the UET transport at packet fidelity (the
rules of heterosim.config.fabric); bad input is one line naming file and key, exit 2."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml

from heterosim.cli import main
from heterosim.config.experiment import default_network
from heterosim.config.fabric import check_load_balancing, check_uet
from heterosim.config.network_model import FLUID, PACKET
from heterosim.config.scenario import load_scenario
from heterosim.errors import UserError

REPO = Path(__file__).resolve().parents[2]
STAR = str(REPO / "topologies" / "star_8hosts_100g.yaml")


def _scenario(tmp_path: Path, network: dict, fidelity: str = "packet") -> Path:
    data = {
        "name": "trim",
        "cluster": STAR,
        "pattern": {"kind": "incast", "senders": [0, 1], "receiver": 4, "size": "64KiB"},
        "network": network,
        "simulation": {"stop": "1ms", "fidelity": fidelity},
    }
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_trimming_is_off_by_default_and_on_when_asked(tmp_path):
    assert default_network().trimming is False
    assert load_scenario(_scenario(tmp_path, {"transport": "uet"})).network.trimming is False
    network = load_scenario(_scenario(tmp_path, {"transport": "uet", "trimming": True})).network
    assert (network.transport, network.pfc, network.trimming) == ("uet", False, True)


BAD = [
    (
        {"transport": "roce", "pfc": True, "trimming": True},
        "packet",
        "network.trimming: true needs network.transport: 'uet' (the transport that NACKs trimmed "
        "packets); got transport 'roce' with PFC on, where switches never drop",
    ),
    (
        {"transport": "irn", "pfc": False, "trimming": True},
        "packet",
        "network.trimming: true needs network.transport: 'uet'",
    ),
    ({"transport": "uet", "trimming": True}, "flow", "network.trimming: true cuts packets at the switches"),
    ({"transport": "uet", "trimming": "sometimes"}, "packet", "network.trimming: expected"),
]


@pytest.mark.parametrize("network,fidelity,expected", BAD, ids=[e for _, _, e in BAD])
def test_bad_trimming_exits_2_with_one_line(tmp_path, capsys, network, fidelity, expected):
    path = _scenario(tmp_path, network, fidelity)
    code = main(["netbench", str(path), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert expected in err, err
    assert not (tmp_path / "out").exists()


def test_an_override_that_trims_a_roce_experiment_is_refused(tmp_path, capsys):
    experiment = REPO / "workloads" / "examples" / "roce_vs_uet_roce.yaml"
    code = main(["run", str(experiment), "--set", "network.trimming=true", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert "network.trimming: true needs network.transport: 'uet'" in err
    assert not (tmp_path / "o").exists()


def test_the_rules_hold_for_networks_built_in_code():
    """The engine checks again (engine_config() users build NetworkConfig without a file)."""
    uet = dataclasses.replace(default_network(), transport="uet", cc="nscc", pfc=False, trimming=True)
    check_uet(uet)
    check_load_balancing(uet, PACKET)
    with pytest.raises(UserError, match=r"^network\.trimming: true cuts packets"):
        check_load_balancing(uet, FLUID)
    with pytest.raises(UserError, match=r"^network\.trimming: true needs network\.transport: 'uet'"):
        check_uet(dataclasses.replace(default_network(), trimming=True))
