"""benchmarks/README.md is today's page (short, every figure with its command); export_results.py
turns every table of it and of the journal, benchmarks/HISTORY.md, into rows."""

from __future__ import annotations

import importlib.util
import re
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


def test_every_table_is_rectangular():
    exporter = load_exporter()
    for name in ("README.md", "HISTORY.md"):
        tables = exporter.tables((REPO / "benchmarks" / name).read_text())
        assert len(tables) > 10, name
        for table in tables:
            assert table["rows"], table["section"]
            assert all(len(row) == len(table["header"]) for row in table["rows"]), table["section"]


def test_the_page_is_short_and_every_section_names_its_command():
    text = (REPO / "benchmarks" / "README.md").read_text()
    assert len(text.splitlines()) < 400
    sections = re.split(r"^## ", text, flags=re.M)[1:]
    assert len(sections) > 10
    for section in sections:
        title = section.splitlines()[0]
        assert re.search(r"`(?:[A-Z_]+=\S+ )*(?:nice )?(?:python3?|heterosim) [^`]+`", section), title


def test_each_benchmark_appears_once():
    text = (REPO / "benchmarks" / "README.md").read_text()
    titles = re.findall(r"^## (.+)$", text, flags=re.M)
    assert len(titles) == len(set(titles))
