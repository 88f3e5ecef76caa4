"""docs/python_api.md: every example runs as written (in order, one namespace), and the rows and
the DataFrame hold what results.json holds."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from heterosim import api
from heterosim.errors import UserError

REPO = Path(__file__).resolve().parent.parent
PAGE = REPO / "docs" / "python_api.md"
HAS_PANDAS = importlib.util.find_spec("pandas") is not None


def code_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", PAGE.read_text(), flags=re.S)


def test_the_page_has_its_examples():
    assert len(code_blocks()) >= 5


@pytest.mark.ns3
def test_every_example_on_the_page_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # the examples write out/... under the working folder
    namespace: dict = {}
    for block in code_blocks():
        if "rows_to_dataframe" in block and not HAS_PANDAS:
            continue
        exec(compile(block, str(PAGE), "exec"), namespace)
    printed = capsys.readouterr().out
    results, rows = namespace["results"], namespace["rows"]
    assert f"{results['iteration_time_s'] * 1e3:.3f} ms per iteration" in printed
    assert "refused: " in printed and "results.json" in printed
    assert results["sim"]["fidelity"] == "flow"
    for row in rows:  # a row holds the run's own numbers
        assert row["network.flows"] > 0 and row["iteration_time_s"] > row["breakdown.compute_s"] > 0
    assert (tmp_path / "out" / "notebook-default" / "results.json").is_file()


def test_a_row_is_the_labels_then_the_results_keys():
    results = {"iteration_time_s": 0.5, "breakdown": {"compute_s": 0.2}, "network": {"flows": 7}}
    row = api.result_row(results, tp=2)
    assert list(row)[:2] == ["tp", "iteration_time_s"] and len(row) == 1 + len(api.ROW_METRICS)
    assert row["breakdown.compute_s"] == 0.2 and row["network.flows"] == 7 and row["sim.events"] is None


@pytest.mark.skipif(HAS_PANDAS, reason="pandas is installed")
def test_without_pandas_the_dataframe_helper_says_so():
    with pytest.raises(UserError, match="needs pandas"):
        api.rows_to_dataframe([{"a": 1}])
