"""heterosim compare: both sides run (paired seeds), deltas and ratios match each side's results."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import yaml

from heterosim.cli import main
from heterosim.errors import UserError
from heterosim.report.compare_report import COMPARED_METRICS, format_table, metric_rows
from heterosim.sweep.compare import Side, parse_variant, prepare_sides, sides_from_arguments

REPO = Path(__file__).resolve().parents[2]
TINY_A = REPO / "workloads" / "compare" / "tiny_4gpu.yaml"
TINY_B = REPO / "workloads" / "compare" / "tiny_4gpu_400g.yaml"


def _lookup(results: dict, dotted: str):
    node = results
    for part in dotted.split("."):
        node = node[part]
    return node


@pytest.fixture(scope="module")
def compared(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("compare") / "ab"
    status = main(["compare", str(TINY_A), str(TINY_B), "--out", str(out), "--no-plots"])
    assert status == 0
    return out


@pytest.mark.ns3
def test_compare_writes_both_sides_and_correct_deltas(compared: Path) -> None:
    results_a = json.loads((compared / "A" / "results.json").read_text())
    results_b = json.loads((compared / "B" / "results.json").read_text())
    comparison = json.loads((compared / "comparison.json").read_text())
    assert comparison["a"]["label"] == "tiny-4gpu-100g" and comparison["b"]["label"] == "tiny-4gpu-400g"
    assert comparison["seed"]["a"] == comparison["seed"]["b"] == results_a["sim"]["seed"]
    rows = {row["metric"]: row for row in comparison["metrics"]}
    # network.trims exists only in runs with network.trimming: a row only where a side has it
    assert set(rows) == {key for key, _, _ in COMPARED_METRICS} - {"network.trims"}
    for key, row in rows.items():
        a, b = _lookup(results_a, key), _lookup(results_b, key)
        assert row["a"] == a and row["b"] == b
        assert row["delta"] == pytest.approx(b - a, abs=1e-15)
        assert row["ratio"] == (pytest.approx(b / a) if a else None)
    with (compared / "comparison.csv").open() as handle:
        csv_rows = list(csv.DictReader(handle))
    assert [r["metric"] for r in csv_rows] == [row["metric"] for row in comparison["metrics"]]
    for r in csv_rows:
        assert float(r["delta"]) == pytest.approx(rows[r["metric"]]["delta"], abs=1e-15)
    assert (compared / "comparison.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    for side in ("A", "B"):
        assert (compared / side / "ranks.csv").exists() and (compared / side / "trace.json").exists()


@pytest.mark.ns3
def test_compare_nic_speed_changes_only_communication(compared: Path) -> None:
    """Same workload and GPUs; 4x faster NICs: compute is identical, inter-host time shrinks."""
    rows = {r["metric"]: r for r in json.loads((compared / "comparison.json").read_text())["metrics"]}
    assert rows["breakdown.compute_s"]["delta"] == 0
    assert rows["network.bytes"]["delta"] == 0 and rows["network.flows"]["delta"] == 0
    assert rows["breakdown.inter_host_comm_s"]["ratio"] < 0.5
    assert rows["iteration_time_s"]["delta"] < 0
    # the iteration shrinks by no more than the communication that was exposed on side A
    assert -rows["iteration_time_s"]["delta"] <= rows["breakdown.exposed_comm_s"]["a"] + 1e-12


def test_metric_rows_and_table() -> None:
    a = {"iteration_time_s": 2.0, "breakdown": {"compute_s": 1.0}, "network": {"drops": 0, "bytes": 10}}
    b = {"iteration_time_s": 3.0, "breakdown": {"compute_s": 1.0}, "network": {"drops": 4, "bytes": 5}}
    rows = {r["metric"]: r for r in metric_rows(a, b)}
    assert rows["iteration_time_s"]["delta"] == 1.0 and rows["iteration_time_s"]["ratio"] == 1.5
    assert rows["network.drops"]["ratio"] is None and rows["network.drops"]["delta"] == 4
    assert rows["network.bytes"]["ratio"] == 0.5
    assert "breakdown.bubble_s" not in rows  # absent on both sides
    table = format_table({"a": {"label": "x"}, "b": {"label": "y"}, "metrics": list(rows.values())})
    assert "iteration time (ms)" in table and "2000.000" in table and "+1000.000" in table


def test_parse_variant() -> None:
    assert parse_variant("hpcc:network.cc=hpcc") == ("hpcc", ["network.cc=hpcc"])
    assert parse_variant("x:network.cc=hpcc, simulation.seed=3") == (
        "x",
        ["network.cc=hpcc", "simulation.seed=3"],
    )
    name, overrides = parse_variant("l:network.attributes={a: 1, b: 2},network.pfc=false")
    assert overrides == ["network.attributes={a: 1, b: 2}", "network.pfc=false"]
    for bad in ("nocolon", ":network.cc=hpcc", "name:", "name:novalue"):
        with pytest.raises(UserError, match="--variant"):
            parse_variant(bad)


def test_sides_from_arguments() -> None:
    a, b = sides_from_arguments([str(TINY_A)], ["hpcc:network.cc=hpcc"])
    assert (a.label, a.overrides, b.label, b.overrides) == ("base", [], "hpcc", ["network.cc=hpcc"])
    with pytest.raises(UserError, match="two experiment files"):
        sides_from_arguments([str(TINY_A)], [])
    with pytest.raises(UserError, match="two experiment files"):
        sides_from_arguments([str(TINY_A), str(TINY_B)], ["x:network.cc=hpcc"])
    with pytest.raises(UserError, match="different names"):
        sides_from_arguments([str(TINY_A)], ["x:network.cc=hpcc", "x:network.cc=dcqcn"])


def test_paired_seed(tmp_path: Path) -> None:
    """B runs with A's seed unless a variant sets its own; --set applies to both sides."""
    data = yaml.safe_load(TINY_B.read_text())
    data["simulation"]["seed"] = 9
    other = tmp_path / "b.yaml"
    other.write_text(yaml.safe_dump(data))
    tasks, described = prepare_sides(Side("a", TINY_A), Side("b", other), tmp_path)
    assert [t.data["simulation"]["seed"] for t in tasks] == [1, 1]
    tasks, _ = prepare_sides(
        Side("a", TINY_A), Side("b", other), tmp_path, common=["simulation.seed=4"], fidelity="packet"
    )
    assert [t.data["simulation"]["seed"] for t in tasks] == [4, 4]
    assert [t.data["simulation"]["fidelity"] for t in tasks] == ["packet", "packet"]
    tasks, described = prepare_sides(
        Side("x", TINY_A, ["network.cc=hpcc"]), Side("y", TINY_A, ["simulation.seed=7"]), tmp_path
    )
    assert [t.data["simulation"]["seed"] for t in tasks] == [1, 7]
    assert tasks[0].data["network"]["cc"] == "hpcc" and tasks[1].data["network"]["cc"] == "dcqcn"
    assert described[0]["overrides"] == ["simulation.seed=1", "network.cc=hpcc"]


def test_invalid_side_is_one_line_error(tmp_path: Path, capsys) -> None:
    status = main(["compare", str(TINY_A), "--variant", "bad:parallel.dp=3", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert status == 2 and "Traceback" not in err
    err = err.strip().splitlines()
    assert err[-1].startswith("heterosim compare: error: ")
    assert "side B (bad)" in err[-1] and "tp*pp*dp" in err[-1]
    assert not (tmp_path / "o" / "B").exists()


def test_trims_get_a_row_when_one_side_trims():
    """A side without network.trimming has no trims: its cell is empty and there is no delta."""
    a = {"network": {"drops": 3, "retransmits": 3}}
    b = {"network": {"drops": 0, "retransmits": 5, "trims": 5}}
    rows = {row["metric"]: row for row in metric_rows(a, b)}
    assert rows["network.trims"]["a"] is None and rows["network.trims"]["b"] == 5
    assert rows["network.trims"]["delta"] is None
    assert "network.trims" not in {row["metric"] for row in metric_rows(a, a)}
