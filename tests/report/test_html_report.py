"""report.html: one self-contained page per run, compare and sweep output folder."""

from __future__ import annotations

import base64
import csv
import json
import shutil
from html.parser import HTMLParser
from pathlib import Path

from heterosim.cli import main
from heterosim.report.html_report import build_report, write_report
from heterosim.report.staging import MANIFEST

REPO = Path(__file__).resolve().parents[2]
TINY_A = REPO / "workloads" / "compare" / "tiny_4gpu.yaml"
VOID = {"meta", "img", "br", "hr", "link", "input"}


class Page(HTMLParser):
    """What a browser would fetch and show: headings, image sources, links, the tag nesting."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.open: list[str] = []
        self.headings: list[str] = []
        self.images: list[str] = []
        self.references: list[str] = []
        self.tags: set[str] = set()
        self._heading: list[str] | None = None
        self.feed(text)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        values = dict(attrs)
        if tag == "img":
            self.images.append(values.get("src") or "")
        self.references += [v or "" for k, v in attrs if k in ("href", "src", "action")]
        if tag in ("h1", "h2", "h3"):
            self._heading = []
        if tag not in VOID:
            self.open.append(tag)

    def handle_endtag(self, tag: str) -> None:
        assert self.open and self.open[-1] == tag, f"</{tag}> closes <{self.open[-1] if self.open else None}>"
        self.open.pop()
        if tag in ("h1", "h2", "h3") and self._heading is not None:
            self.headings.append("".join(self._heading))
            self._heading = None

    def handle_data(self, data: str) -> None:
        if self._heading is not None:
            self._heading.append(data)


def embedded_pngs(page: Page) -> list[bytes]:
    prefix = "data:image/png;base64,"
    assert all(src.startswith(prefix) for src in page.images)
    return [base64.b64decode(src[len(prefix) :]) for src in page.images]


def check_self_contained(path: Path) -> Page:
    """The page parses with every tag closed, and fetches nothing: no scripts, no style sheets or
    images from elsewhere, no web address at all."""
    text = path.read_text(encoding="utf-8")
    page = Page(text)
    assert page.open == [], f"unclosed tags {page.open}"
    assert not page.tags & {"script", "link", "iframe", "object", "embed"}
    assert "http://" not in text and "https://" not in text
    assert all(ref.startswith(("data:image/png;base64,", "#")) for ref in page.references)
    return page


def pngs_of(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.png"))


def test_run_page_holds_every_figure_its_numbers_and_the_slowest_collectives(report_outputs):
    folder = report_outputs["run"]
    page = check_self_contained(folder / "report.html")
    figures = pngs_of(folder)
    assert {p.name for p in figures} == {
        "breakdown.png",
        "timeline.png",
        "link_utilization.png",
        "queues.png",
    }
    assert sorted(embedded_pngs(page)) == sorted(p.read_bytes() for p in figures)  # byte for byte
    for title in (
        "Key numbers",
        "Breakdown",
        "Timeline",
        "Link utilization",
        "Queues",
        "Slowest collectives",
    ):
        assert title in page.headings
    text = (folder / "report.html").read_text()
    results = json.loads((folder / "results.json").read_text())
    assert f"{results['iteration_time_s'] * 1e3:.3f}" in text
    with (folder / "collectives.csv").open() as handle:
        slowest = max(float(row["time_s"]) for row in csv.DictReader(handle))
    assert f"{slowest * 1e3:.3f}" in text
    # base64 costs 4/3 of the images; the rest (tables, style) stays small
    size = (folder / "report.html").stat().st_size
    assert size < sum(p.stat().st_size for p in figures) * 4 / 3 + 64_000
    assert "report.html" in json.loads((folder / MANIFEST).read_text())["files"]


def test_compare_page_holds_the_table_and_both_sides_figures(report_outputs):
    folder = report_outputs["compare"]
    page = check_self_contained(folder / "report.html")
    figures = [*pngs_of(folder), *pngs_of(folder / "A"), *pngs_of(folder / "B")]
    assert len(figures) == 1 + 3 + 3  # comparison.png; flow fidelity writes no queues.png
    assert sorted(embedded_pngs(page)) == sorted(p.read_bytes() for p in figures)
    assert {"Side by side", "Breakdown", "Timeline", "Link utilization", "Slowest collectives"} <= set(
        page.headings
    )
    comparison = json.loads((folder / "comparison.json").read_text())
    iteration = comparison["metrics"][0]
    assert iteration["metric"] == "iteration_time_s"
    text = (folder / "report.html").read_text()
    assert f"{iteration['a'] * 1e3:.3f}" in text and f"{iteration['b'] * 1e3:.3f}" in text
    assert f"{iteration['ratio']:.3f}" in text


def test_sweep_page_holds_its_plots_and_one_row_per_variant(report_outputs):
    folder = report_outputs["sweep"]
    page = check_self_contained(folder / "report.html")
    assert sorted(embedded_pngs(page)) == sorted(p.read_bytes() for p in pngs_of(folder))
    assert {"Metrics", "Over seeds", "Variants"} <= set(page.headings)
    text = (folder / "report.html").read_text()
    for row in json.loads((folder / "summary.json").read_text())["rows"]:
        assert f"<td>{row['id']}</td>" in text


def test_report_command_rewrites_the_page_and_a_later_run_removes_a_stale_one(
    report_outputs, tmp_path, capsys
):
    folder = tmp_path / "run"
    shutil.copytree(report_outputs["run"], folder)
    (folder / "report.html").unlink()
    assert main(["report", str(folder)]) == 0
    assert capsys.readouterr().out.startswith(f"report in       {folder}/report.html (")
    check_self_contained(folder / "report.html")
    # the page is HeteroSim's output: a new run into the folder without --report takes it away
    assert main(["run", str(TINY_A), "--out", str(folder), "--quiet", "--no-plots"]) == 0
    assert not (folder / "report.html").exists()


def test_text_from_the_results_is_escaped(report_outputs, tmp_path):
    folder = tmp_path / "run"
    shutil.copytree(report_outputs["run"], folder)
    results = json.loads((folder / "results.json").read_text())
    results["experiment"]["name"] = '<img src="https://example.org/x.png">'
    results["warnings"] = ["<script>alert(1)</script>"]
    (folder / "results.json").write_text(json.dumps(results))
    text = build_report(folder)
    page = Page(text)
    assert page.open == [] and "script" not in page.tags
    assert all(src.startswith("data:image/png;base64,") for src in page.images)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert write_report(folder).read_text(encoding="utf-8") == text


def test_a_folder_that_is_no_output_is_one_line_exit_2(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("mine\n")
    assert main(["report", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no results.json, comparison.json or summary.json" in err[0]
    assert main(["report", str(tmp_path / "missing")]) == 2
    assert "not a folder" in capsys.readouterr().err
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "results.json").write_text("{not json")
    assert main(["report", str(broken)]) == 2
    assert "results.json: not valid JSON" in capsys.readouterr().err
