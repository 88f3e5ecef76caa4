"""benchmarks/export_results.py turns every table of benchmarks/README.md into rows."""

from __future__ import annotations

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def load_exporter():
    spec = importlib.util.spec_from_file_location("export_results", REPO / "benchmarks" / "export_results.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_tables_keep_their_section_command_and_numbers():
    exporter = load_exporter()
    text = (
        "## Speed\n\nScript: `python3 benchmarks/bench_x.py --n 4`\n\n"
        "| case | events | wall s | note |\n|---|---:|---:|---|\n"
        "| a | 45,999,446 | 8.64 | ok |\n| b | 12 | -1.5e3 | 3 % |\n\n### Sub\n\n"
        "| x |\n|---|\n| 1 |\n"
    )
    tables = exporter.tables(text)
    assert [t["section"] for t in tables] == ["Speed", "Speed / Sub"]
    assert tables[0]["command"] == "python3 benchmarks/bench_x.py --n 4"
    assert tables[0]["rows"] == [["a", 45999446, 8.64, "ok"], ["b", 12, -1500.0, "3 %"]]


def test_every_readme_table_is_rectangular():
    exporter = load_exporter()
    tables = exporter.tables((REPO / "benchmarks" / "README.md").read_text())
    assert len(tables) > 10
    for table in tables:
        assert table["rows"], table["section"]
        assert all(len(row) == len(table["header"]) for row in table["rows"]), table["section"]
