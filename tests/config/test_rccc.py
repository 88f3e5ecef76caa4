"""network.cc: rccc, UET's receiver-credit congestion control: accepted with the UET transport
only; bad input is one line naming file and key, exit 2."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml

from heterosim.cli import main
from heterosim.config.choices import CC_TYPE_IDS, UET_CCS, UET_ONLY_CCS
from heterosim.config.experiment import default_network
from heterosim.config.fabric import check_uet
from heterosim.config.scenario import load_scenario
from heterosim.errors import UserError

REPO = Path(__file__).resolve().parents[2]
STAR = str(REPO / "topologies" / "star_8hosts_100g.yaml")


def _scenario(tmp_path: Path, network: dict) -> Path:
    data = {
        "name": "rccc",
        "cluster": STAR,
        "pattern": {"kind": "incast", "senders": [0, 1], "receiver": 4, "size": "64KiB"},
        "network": network,
        "simulation": {"stop": "1ms"},
    }
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_rccc_is_a_uet_congestion_control():
    assert "rccc" in UET_CCS and UET_CCS[0] == "nscc" and "rccc" in UET_ONLY_CCS
    assert CC_TYPE_IDS["rccc"] == "ns3::Rccc"


def test_uet_accepts_rccc(tmp_path):
    network = load_scenario(_scenario(tmp_path, {"transport": "uet", "cc": "rccc"})).network
    assert (network.transport, network.cc, network.pfc) == ("uet", "rccc", False)


@pytest.mark.parametrize("transport", ["roce", "irn"])
def test_rccc_without_uet_exits_2_with_one_line(tmp_path, capsys, transport):
    path = _scenario(tmp_path, {"transport": transport, "cc": "rccc"})
    code = main(["netbench", str(path), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert str(path) in err and "network.cc: 'rccc' is UET's receiver-credit congestion control" in err
    assert not (tmp_path / "out").exists()


def test_the_rule_holds_for_networks_built_in_code():
    with pytest.raises(UserError, match=r"^network\.cc: 'rccc' is UET's"):
        check_uet(dataclasses.replace(default_network(), cc="rccc"))
    check_uet(dataclasses.replace(default_network(), transport="uet", cc="rccc", pfc=False))
