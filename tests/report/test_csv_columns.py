"""Each CSV's columns are defined once in its writer; docs/results.md (the contract) lists them in
the same order."""

from __future__ import annotations

from pathlib import Path

from heterosim.report import netbench_report, run_report

RESULTS_MD = Path(__file__).resolve().parents[2] / "docs" / "results.md"


def documented(columns: tuple[str, ...]) -> bool:
    """``columns`` appear in docs/results.md as one comma-separated list, in order."""
    text = " ".join(RESULTS_MD.read_text().split())
    return f"`{', '.join(columns)}" in text


def test_run_csv_columns_are_the_documented_ones():
    assert documented(run_report.COLLECTIVE_COLUMNS)
    assert documented(run_report.FLOW_COLUMNS)
    # ranks.csv: the ranks[] rows of results.json, in their documented order, less gpu_index and tp
    (row,) = [line for line in RESULTS_MD.read_text().splitlines() if line.startswith("| `ranks[]`")]
    keys = [part.strip(" `|") for part in row.split("per rank:")[1].split(",")]
    assert [k for k in keys if k in run_report.RANK_COLUMNS] == list(run_report.RANK_COLUMNS)


def test_netbench_flow_columns_are_the_documented_ones():
    assert documented(netbench_report.FLOW_COLUMNS)


def test_the_check_sees_a_column_out_of_order():
    swapped = (run_report.FLOW_COLUMNS[1], run_report.FLOW_COLUMNS[0], *run_report.FLOW_COLUMNS[2:])
    assert not documented(swapped)
