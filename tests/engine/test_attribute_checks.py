"""ns-3 attribute values are checked before ns-3 parses them; netbench flow fidelity stops at
simulation.stop; degenerate networks are warned about and the warning recorded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from heterosim.cli import main
from heterosim.engine.attributes import checked_attribute_text
from heterosim.errors import UserError

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "tests" / "data" / "tiny_experiment.yaml"


@pytest.mark.parametrize(
    "name, value, fragment",
    [
        ("EcnKmin", "abc", "expected a non-negative integer"),  # ns-3 would abort: not properly formatted
        ("Dcqcn::AlphaUpdateInterval", "soon", "expected a time"),  # ns-3 would abort: Can't Parse Time
        ("EcnPmax", 2.0, "outside the range RedEcnMarker accepts"),  # ns-3's own checker: [0, 1]
        ("EcnPmax", "nan", "finite"),
        ("Dcqcn::RateAi", "1e-30bps", "outside 1Kbps..1000Tbps"),
        ("Dcqcn::RateAi", "1e400Gbps", "finite"),
        ("EcnKmn", 1, "not an attribute of"),
        ("FluidNetwork::Nope", 1, "not an attribute of"),
    ],
)
def test_bad_attribute_is_a_user_error_naming_it(native_lib, name, value, fragment):
    with pytest.raises(UserError, match=fragment) as raised:
        checked_attribute_text(native_lib.ns3, name, value)
    assert str(raised.value).startswith(f"network: attributes: {name}: ")


def test_good_values_in_canonical_form(native_lib):
    ns3 = native_lib.ns3
    assert checked_attribute_text(ns3, "Dcqcn::AlphaUpdateInterval", "55us") == "55000ns"
    assert checked_attribute_text(ns3, "Dcqcn::RateAi", "0bps") == "0bps"
    assert checked_attribute_text(ns3, "EcnKmin", 200000) == "200000"
    assert checked_attribute_text(ns3, "EcnScaleWithRate", False) == "false"


@pytest.mark.parametrize("fidelity", ["flow", "packet"])
@pytest.mark.parametrize("attribute", ["{EcnKmn: 1}", "{Dcqcn::AlphaUpdateInterval: soon}"])
def test_bad_attribute_in_a_run_is_one_line_at_either_fidelity(
    native_lib, tmp_path, capsys, fidelity, attribute
):
    code = main(
        [
            "run",
            str(TINY),
            "--out",
            str(tmp_path / "o"),
            "--no-plots",
            "--quiet",
            "--fidelity",
            fidelity,
            "--until",
            "1ms",
            "--set",
            f"network.attributes={attribute}",
        ]
    )
    err = [ln for ln in capsys.readouterr().err.strip().splitlines() if "note:" not in ln]
    assert code == 2 and len(err) == 1 and "network: attributes:" in err[0], err
    assert not (tmp_path / "o").exists()


def _scenario(tmp_path: Path, **changes) -> Path:
    scenario = yaml.safe_load((REPO / "workloads" / "netbench" / "single_flow.yaml").read_text())
    scenario["cluster"] = str(REPO / "topologies" / "two_leaf_8hosts.yaml")
    scenario.update(changes)
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(scenario))
    return path


def test_netbench_flow_fidelity_stops_at_simulation_stop(native_lib, tmp_path):
    """A 64 MiB flow at 100 Gb/s needs more than 5.4 ms (payload alone); stopped at 2 ms it is
    unfinished, with a 20 ms stop it finishes."""
    path = _scenario(tmp_path, simulation={"stop": "2ms", "fidelity": "flow"})
    assert main(["netbench", str(path), "--out", str(tmp_path / "o")]) == 0
    results = json.loads((tmp_path / "o" / "results.json").read_text())
    assert results["sim"]["sim_end_s"] <= 2e-3 + 1e-12
    assert results["summary"]["unfinished_flows"] == 1
    path = _scenario(tmp_path, simulation={"stop": "20ms", "fidelity": "flow"})
    assert main(["netbench", str(path), "--out", str(tmp_path / "o2")]) == 0
    done = json.loads((tmp_path / "o2" / "results.json").read_text())
    assert done["summary"]["unfinished_flows"] == 0 and 5e-3 < done["flows"][0]["fct_s"] < 20e-3


def test_ecn_threshold_above_buffer_is_warned_and_recorded(native_lib, tmp_path, capsys):
    path = _scenario(
        tmp_path,
        network={"cc": "dcqcn", "pfc": False, "buffer": "256KiB"},
        simulation={"stop": "20ms", "fidelity": "flow"},
    )
    assert main(["netbench", str(path), "--out", str(tmp_path / "o")]) == 0
    warnings = [ln for ln in capsys.readouterr().err.splitlines() if "warning: network.buffer" in ln]
    assert len(warnings) == 1 and "EcnKmin 391KiB of 100Gbps ports" in warnings[0]
    results = json.loads((tmp_path / "o" / "results.json").read_text())
    assert results["warnings"] and "never sees a mark" in results["warnings"][0]
    # a buffer above the threshold of its fastest (400 Gb/s spine) ports: no warning
    path = _scenario(
        tmp_path,
        network={"cc": "dcqcn", "pfc": False, "buffer": "4MiB"},
        simulation={"stop": "20ms", "fidelity": "flow"},
    )
    assert main(["netbench", str(path), "--out", str(tmp_path / "o3")]) == 0
    assert json.loads((tmp_path / "o3" / "results.json").read_text())["warnings"] == []


def test_nic_speed_outside_physical_range_never_reaches_ns3(tmp_path, capsys):
    for speed in ("1e-30bps", "1e400Gbps", "1bps"):
        code = main(
            [
                "run",
                str(TINY),
                "--out",
                str(tmp_path / "o"),
                "--no-plots",
                "--quiet",
                "--set",
                f"cluster.host_types.h100.nic_speed={speed}",
            ]
        )
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and len(err) == 1 and "nic_speed" in err[0], err


def test_degenerate_scenarios_are_warned_about(tmp_path):
    """PFC that can never pause, a flow that cannot finish before simulation.stop even alone at
    its NIC speed, and more than a million samples per series: one line each, in ``warnings``."""
    from heterosim.config.scenario import load_scenario

    xoff = load_scenario(
        _scenario(
            tmp_path,
            network={
                "cc": "dcqcn",
                "pfc": True,
                "buffer": "1MiB",
                "attributes": {"PfcDynamicThreshold": False, "PfcStaticXoff": 2_000_000},
            },
        )
    )
    assert [w for w in xoff.warnings if w.startswith("PfcStaticXoff")] == [
        "PfcStaticXoff 1.91MiB is above network.buffer 1MiB: PFC never pauses and the switch drops instead"
    ]
    below = load_scenario(
        _scenario(
            tmp_path,
            network={
                "cc": "dcqcn",
                "pfc": True,
                "buffer": "4MiB",
                "attributes": {"PfcDynamicThreshold": False},
            },
        )
    )
    assert not [w for w in below.warnings if "PfcStaticXoff" in w]  # the default 1 MB fits 4 MiB
    # 64 MiB at 100 Gb/s takes 5.37 ms alone: a 2 ms stop cannot see it finish, 20 ms can
    late = load_scenario(_scenario(tmp_path, simulation={"stop": "2ms", "fidelity": "flow"}))
    warned = [w for w in late.warnings if "cannot finish" in w]
    assert len(warned) == 1 and warned[0].startswith("1 flow(s) cannot finish before simulation.stop 2ms")
    assert "flow 0 needs 5.369ms" in warned[0]
    assert not load_scenario(_scenario(tmp_path, simulation={"stop": "20ms", "fidelity": "flow"})).warnings
    samples = load_scenario(_scenario(tmp_path, simulation={"stop": "2s", "sample_interval": "1us"}))
    assert [w for w in samples.warnings if "samples per series" in w] == [
        "simulation.sample_interval 1us records 2,000,000 samples per series up to 2s (more than "
        "1,000,000); a longer interval keeps the outputs small"
    ]
    with pytest.raises(UserError, match="more than 10,000,000 samples per series"):
        load_scenario(_scenario(tmp_path, simulation={"stop": "11s", "sample_interval": "1us"}))


@pytest.mark.parametrize("fidelity", ["flow", "packet"])
@pytest.mark.parametrize(
    "attribute, fragment",
    [
        ("{SocketTransport::TcpCongestionControl: ns3::TcpBogus}", "derived from ns3::TcpCongestionOps"),
        ("{SocketTransport::TcpCongestionControl: ns3::Node}", "derived from ns3::TcpCongestionOps"),
        ("{SocketTransport::TcpCongestionControl: ''}", "derived from ns3::TcpCongestionOps"),
        ("{SocketTransport::HostQueueDisc: ns3::Nope}", "derived from ns3::QueueDisc or none"),
        ("{SocketTransport::TcpInitialCwnd: -3}", "expected a non-negative integer"),
        ("{SocketTransport::IpMtu: 10}", "outside the range SocketTransport accepts"),
    ],
)
def test_socket_attributes_are_checked_by_type_id_at_either_fidelity(
    native_lib, tmp_path, capsys, fidelity, attribute, fragment
):
    """A TypeId-valued attribute names a registered class of the right base (ns-3's registry),
    whatever the fidelity; every message starts with the file and the attribute."""
    code = main(
        ["run", str(TINY), "--out", str(tmp_path / "o"), "--no-plots", "--quiet", "--fidelity", fidelity]
        + ["--until", "1ms", "--set", f"network.attributes={attribute}"]
    )
    err = [ln for ln in capsys.readouterr().err.strip().splitlines() if "note:" not in ln]
    assert code == 2 and len(err) == 1, err
    name = attribute.strip("{}").split(":")[0] + "::" + attribute.strip("{}").split("::")[1].split(":")[0]
    assert f"{TINY}: network: attributes: {name}: " in err[0] and fragment in err[0], err
    assert not (tmp_path / "o").exists()


def test_a_registered_tcp_congestion_control_is_accepted(native_lib):
    text = checked_attribute_text(native_lib.ns3, "SocketTransport::TcpCongestionControl", "ns3::TcpDctcp")
    assert text == "ns3::TcpDctcp"
    assert checked_attribute_text(native_lib.ns3, "SocketTransport::HostQueueDisc", "none") == "none"
