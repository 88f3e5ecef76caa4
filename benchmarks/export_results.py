"""Write every result table of benchmarks/README.md and benchmarks/HISTORY.md in machine-readable form.

    python3 benchmarks/export_results.py

writes ``benchmarks/results.json`` (every table with its file, section, the script or command the
section names, its header and rows; cells that are plain numbers become numbers) and one CSV per
table in ``benchmarks/results/``, named after its section: README.md's (today's figures) as
``current-<section>-N.csv``, HISTORY.md's (the journal) as ``<section>-N.csv``. The two pages
stay the record written by hand with each measurement's command; run this after editing them.
"""

from __future__ import annotations

import csv
import json
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")


def cell(text: str) -> str | int | float:
    """A table cell: a number when it is only a number (thousands separators allowed)."""
    plain = text.strip().replace(",", "")
    if NUMBER.match(plain):
        return int(plain) if re.fullmatch(r"[+-]?\d+", plain) else float(plain)
    return text.strip()


def split_row(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def tables(markdown: str) -> list[dict]:
    """Every pipe table with the headings above it and the last command line named before it."""
    out: list[dict] = []
    headings: list[str] = []
    command = None
    lines = markdown.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        heading = re.match(r"^(#+)\s+(.*)", line)
        if heading:
            level = len(heading.group(1))
            headings = [*headings[: level - 2], heading.group(2).strip()]
        script = re.search(r"`((?:python3?|heterosim|PYTHONPATH=\S+ python3?) [^`]+)`", line)
        if script:
            command = script.group(1)
        if line.startswith("|") and i + 1 < len(lines) and re.match(r"^\|[\s:|-]+\|$", lines[i + 1]):
            header = split_row(line)
            rows = []
            i += 2
            while i < len(lines) and lines[i].startswith("|"):
                rows.append([cell(c) for c in split_row(lines[i])])
                i += 1
            out.append({"section": " / ".join(headings), "command": command, "header": header, "rows": rows})
            continue
        i += 1
    return out


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:80] or "table"


SOURCES = (("README.md", "current-"), ("HISTORY.md", ""))  # file, CSV name prefix


def main() -> int:
    found = []
    for name, prefix in SOURCES:
        path = HERE / name
        if path.is_file():
            found += [
                {"source": f"benchmarks/{name}", "prefix": prefix, **t} for t in tables(path.read_text())
            ]
    exported = [{k: v for k, v in table.items() if k != "prefix"} for table in found]
    (HERE / "results.json").write_text(
        json.dumps({"sources": [f"benchmarks/{name}" for name, _ in SOURCES], "tables": exported}, indent=1)
        + "\n"
    )
    folder = HERE / "results"
    folder.mkdir(exist_ok=True)
    for old in folder.glob("*.csv"):
        old.unlink()
    seen: dict[str, int] = {}
    for table in found:
        name = table["prefix"] + slug(table["section"])
        seen[name] = seen.get(name, 0) + 1
        with (folder / f"{name}-{seen[name]}.csv").open("w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(table["header"])
            writer.writerows(table["rows"])
    print(f"{len(found)} tables -> {HERE / 'results.json'} and {folder}/", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
