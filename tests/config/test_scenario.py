"""Netbench scenario files: patterns expand to the right flows, bad input is one line naming file
and key (exit status 2 through the CLI)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from heterosim.cli import main
from heterosim.config.scenario import DEFAULT_PRIORITY, load_scenario, parse_cc_option
from heterosim.errors import UserError

REPO = Path(__file__).resolve().parents[2]
TWO_LEAF = str(REPO / "topologies" / "two_leaf_8hosts.yaml")


def write(tmp_path: Path, data: dict, name: str = "scenario.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data))
    return path


def base(**changes) -> dict:
    data = {
        "name": "t",
        "cluster": TWO_LEAF,
        "pattern": {"kind": "incast", "senders": [0, 1, 2], "receiver": 4, "size": "1MiB"},
        "network": {"cc": "dcqcn", "mtu": "1KiB"},
        "simulation": {"stop": "5ms", "sample_interval": "10us"},
    }
    data.update(changes)
    return data


def test_incast_pattern_expands_to_one_flow_per_sender(tmp_path):
    scenario = load_scenario(write(tmp_path, base()))
    flows = scenario.flows
    assert list(flows.src) == [0, 1, 2] and list(flows.dst) == [4, 4, 4]
    assert list(flows.size_bytes) == [2**20] * 3
    assert list(flows.start_ns) == [0, 0, 0]
    assert not flows.explicit_priority and set(flows.priority) == {DEFAULT_PRIORITY}
    assert scenario.network.cc == "dcqcn" and scenario.network.mtu_bytes == 1024
    assert scenario.simulation.stop_ns == 5_000_000 and scenario.simulation.fidelity == "packet"


def test_stagger_and_range_strings(tmp_path):
    pattern = {
        "kind": "incast",
        "senders": "0-3",
        "receiver": 5,
        "size": "4KiB",
        "start": "2us",
        "stagger": "1us",
        "priority": 1,
    }
    flows = load_scenario(write(tmp_path, base(pattern=pattern))).flows
    assert list(flows.src) == [0, 1, 2, 3]
    assert list(flows.start_ns) == [2000, 3000, 4000, 5000]
    assert flows.explicit_priority and set(flows.priority) == {1}


def test_all_to_all_has_every_ordered_pair(tmp_path):
    pattern = {"kind": "all-to-all", "gpus": [0, 2, 5, 7], "size": "4KiB"}
    flows = load_scenario(write(tmp_path, base(pattern=pattern))).flows
    pairs = set(zip(flows.src.tolist(), flows.dst.tolist()))
    assert len(flows) == 4 * 3 and len(pairs) == 12
    assert all(s != d for s, d in pairs)


def test_permutation_is_a_seeded_derangement(tmp_path):
    pattern = {"kind": "permutation", "gpus": "0-7", "size": "4KiB"}
    first = load_scenario(write(tmp_path, base(pattern=pattern))).flows
    again = load_scenario(write(tmp_path, base(pattern=pattern), "b.yaml")).flows
    assert sorted(first.src.tolist()) == list(range(8))
    assert sorted(first.dst.tolist()) == list(range(8))  # every GPU receives exactly once
    assert not np.any(first.src == first.dst)
    assert np.array_equal(first.dst, again.dst)
    other = [
        load_scenario(write(tmp_path, base(pattern=pattern), "c.yaml"), [f"simulation.seed={seed}"]).flows.dst
        for seed in range(2, 6)
    ]
    assert any(not np.array_equal(first.dst, dst) for dst in other)


def test_one_to_one_and_explicit_flows(tmp_path):
    pattern = {"kind": "one-to-one", "senders": [0, 1], "receivers": [6, 7], "size": "8KiB"}
    flows = load_scenario(write(tmp_path, base(pattern=pattern))).flows
    assert list(zip(flows.src.tolist(), flows.dst.tolist())) == [(0, 6), (1, 7)]
    explicit = [
        {"src": 3, "dst": 0, "size": "1MiB", "start": "1us", "priority": 2},
        {"src": 1, "dst": 2, "size": 4096},
    ]
    data = base(flows=explicit)
    del data["pattern"]
    flows = load_scenario(write(tmp_path, data)).flows
    assert list(flows.size_bytes) == [2**20, 4096] and list(flows.start_ns) == [1000, 0]
    assert list(flows.priority) == [2, DEFAULT_PRIORITY] and flows.explicit_priority


def test_cluster_path_is_relative_to_the_scenario_and_inline_works(tmp_path):
    (tmp_path / "topo").mkdir()
    (tmp_path / "topo" / "c.yaml").write_text(Path(TWO_LEAF).read_text())
    (tmp_path / "scen").mkdir()
    scenario = load_scenario(write(tmp_path / "scen", base(cluster="../topo/c.yaml")))
    assert scenario.cluster.world_size == 8
    inline = yaml.safe_load(Path(TWO_LEAF).read_text())
    assert load_scenario(write(tmp_path, base(cluster=inline))).cluster.num_hosts == 8


def test_overrides_and_compare_cc(tmp_path):
    path = write(tmp_path, base(compare_cc=["hpcc", "dcqcn"]))
    scenario = load_scenario(path, ["network.cc=timely", "network.pfc=false"])
    assert scenario.network.cc == "timely" and scenario.network.pfc is False
    assert scenario.compare_cc == ("hpcc", "dcqcn")
    assert parse_cc_option("dcqcn, none") == ("dcqcn", "none")
    with pytest.raises(UserError, match="--compare-cc: unknown CC 'reno'"):
        parse_cc_option("dcqcn,reno")


def test_shipped_scenarios_load():
    files = sorted((REPO / "workloads" / "netbench").glob("*.yaml"))
    assert len(files) >= 6
    for path in files:
        scenario = load_scenario(path)
        assert len(scenario.flows) >= 1
        assert int(scenario.flows.dst.max()) < scenario.cluster.world_size


BAD = [
    (
        dict(pattern={"kind": "incast", "senders": [0, 1], "receiver": 8, "size": "1MiB"}),
        "pattern.receiver: GPU 8 out of range 0..7",
    ),
    (
        dict(pattern={"kind": "incast", "senders": [0, 9], "receiver": 4, "size": "1MiB"}),
        "pattern.senders[1]: GPU 9 out of range",
    ),
    (
        dict(pattern={"kind": "incast", "senders": [0, 4], "receiver": 4, "size": "1MiB"}),
        "pattern.receiver: GPU 4 is also a sender",
    ),
    (
        dict(pattern={"kind": "broadcast", "senders": [0], "receiver": 4, "size": "1MiB"}),
        "pattern.kind: expected one of incast, one-to-one, all-to-all, permutation",
    ),
    (
        dict(pattern={"kind": "incast", "senders": [0], "receiver": 4, "size": "lots"}),
        "pattern.size: expected a size",
    ),
    (
        dict(pattern={"kind": "incast", "senders": [0], "receiver": 4, "size": "1MiB", "sise": 1}),
        "pattern.sise: unknown key",
    ),
    (
        dict(pattern={"kind": "incast", "senders": [0, 0], "receiver": 4, "size": "1MiB"}),
        "pattern.senders: GPU 0 is listed twice",
    ),
    (
        dict(pattern={"kind": "incast", "senders": [0], "receiver": 4, "size": "1MiB", "priority": 9}),
        "pattern.priority: expected an integer <= 7",
    ),
    (
        dict(pattern={"kind": "one-to-one", "senders": [0, 1], "receivers": [4], "size": "1MiB"}),
        "pattern.receivers: expected 2 receivers",
    ),
    (dict(flows=[{"src": 1, "dst": 1, "size": "1MiB"}]), "flows[0].dst: GPU 1 cannot send to itself"),
    (dict(network={"cc": "reno"}), "network.cc: expected one of dcqcn"),
    (dict(simulation={"stop": "1ms", "fidelity": "exact"}), "simulation.fidelity: expected one of"),
    (dict(simulation={"stop": "ten"}), "simulation.stop: expected a time"),
    (dict(cluster="missing.yaml"), "cluster: cluster file not found"),
    (dict(compare_cc=["dcqcn", "cubic"]), "compare_cc: unknown CC 'cubic'"),
    (dict(fairness_flows=[0, 5]), "fairness_flows[1]: expected a flow id in 0..2"),
    (dict(colour="red"), "colour: unknown key"),
]


@pytest.mark.parametrize("changes,expected", BAD, ids=[e for _, e in BAD])
def test_malformed_scenarios_exit_2_with_one_line_naming_file_and_key(tmp_path, capsys, changes, expected):
    data = base(**changes)
    if "flows" in changes:
        del data["pattern"]
    path = write(tmp_path, data)
    code = main(["netbench", str(path), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1, err
    assert str(path) in err and expected in err, err
    assert not (tmp_path / "out").exists()


def test_pattern_and_flows_together_and_neither(tmp_path, capsys):
    path = write(tmp_path, base(flows=[{"src": 0, "dst": 1, "size": "1MiB"}]))
    assert main(["netbench", str(path)]) == 2
    assert "flows: give either pattern or flows, not both" in capsys.readouterr().err
    data = base()
    del data["pattern"]
    assert main(["netbench", str(write(tmp_path, data))]) == 2
    assert "pattern: missing" in capsys.readouterr().err


def test_stop_before_last_start_is_an_error(tmp_path):
    pattern = {"kind": "incast", "senders": [0, 1], "receiver": 4, "size": "1MiB", "start": "2ms"}
    with pytest.raises(UserError, match="simulation.stop: stops at 1000000 ns, before"):
        load_scenario(write(tmp_path, base(pattern=pattern, simulation={"stop": "1ms"})))
