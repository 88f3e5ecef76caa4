"""``report.html``: one self-contained page for an output folder of ``run``, ``compare`` or
``sweep``, built from the files the command wrote there.

A run's page holds its key numbers, the breakdown, its figures, the slowest collectives and the
busiest links; a comparison's page the side-by-side table, comparison.png and each figure of
side A beside side B; a sweep's page its metric plots, the statistics over seeds and one row per
variant. Images are inlined as base64 PNG and the style sheet is inline, so the page needs no
network access and no other file.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from heterosim import __version__
from heterosim.config.fields import read_text_file
from heterosim.errors import UserError
from heterosim.report.html_page import figure, grid, heading, page, paragraph, side_by_side, table
from heterosim.report.html_run import (
    RUN_FIGURES,
    count,
    ms,
    number,
    run_figure,
    run_sections,
    slowest_collectives,
)
from heterosim.report.staging import staged_output

REPORT_NAME = "report.html"
MAX_JSON_BYTES = 256 << 20  # a 10,000-variant sweep's summary.json is a few MB
MAX_VARIANT_ROWS = 500  # rows of a sweep's variant table; summary.csv holds them all


def read_json(path: Path) -> dict[str, Any]:
    """A JSON object written by HeteroSim; anything else is a one-line UserError."""
    try:
        data = json.loads(read_text_file(path, "JSON file", MAX_JSON_BYTES))
    except (ValueError, RecursionError) as exc:
        raise UserError(f"{path}: not valid JSON ({str(exc).splitlines()[0]})") from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a JSON object")
    return data


def output_kind(folder: Path) -> str:
    """'compare', 'sweep' or 'run', from the file that marks each output; else a UserError."""
    if not folder.is_dir():
        raise UserError(f"{folder}: not a folder")
    for kind, marker in (("compare", "comparison.json"), ("sweep", "summary.json"), ("run", "results.json")):
        if (folder / marker).is_file():
            return kind
    raise UserError(
        f"{folder}: no results.json, comparison.json or summary.json; "
        "expected an output folder of heterosim run, compare or sweep"
    )


def _value(value: Any, unit: str) -> str:
    if unit == "s":
        return ms(value)
    if isinstance(value, float):
        return number(value)
    return count(value)


def _ratio(value: Any) -> str:
    return f"{value:.3f}" if isinstance(value, (int, float)) else "-"


def _metric_row(row: dict[str, Any]) -> tuple[str, ...]:
    """One line of the side-by-side table: metric, A, B, B - A, B / A (times in ms)."""
    unit = row.get("unit", "")
    delta = row.get("delta")
    sign = "+" if isinstance(delta, (int, float)) and delta > 0 else ""
    name = str(row.get("label", row.get("metric", ""))) + (" (ms)" if unit == "s" else "")
    a, b = _value(row.get("a"), unit), _value(row.get("b"), unit)
    return (name, a, b, sign + _value(delta, unit), _ratio(row.get("ratio")))


def compare_page(folder: Path) -> tuple[str, list[str]]:
    """Title and body of a comparison's page."""
    comparison = read_json(folder / "comparison.json")
    side = {key: comparison.get(key) or {} for key in ("a", "b")}
    label = {key: str(side[key].get("label", key.upper())) for key in side}
    title = f"HeteroSim compare: A = {label['a']}, B = {label['b']}"
    blocks = [heading(1, title)]
    for key in ("a", "b"):
        overrides = ", ".join(map(str, side[key].get("overrides") or [])) or "none"
        experiment = side[key].get("experiment", "-")
        blocks.append(paragraph(f"{key.upper()}: {experiment}; overrides: {overrides}", "lead"))
    fidelity, seed = comparison.get("fidelity") or {}, comparison.get("seed") or {}
    blocks.append(
        paragraph(
            f"fidelity A/B: {fidelity.get('a')} / {fidelity.get('b')}; seed {seed.get('a')} / {seed.get('b')}"
        )
    )
    rows = [_metric_row(row) for row in comparison.get("metrics") or []]
    header = ("metric", f"A: {label['a']}", f"B: {label['b']}", "B - A", "B / A")
    blocks += [heading(2, "Side by side", "side-by-side"), table(header, rows, numeric=(1, 2, 3, 4))]
    blocks.append(paragraph(str(comparison.get("definition", ""))))
    if (folder / "comparison.png").is_file():
        blocks.append(figure(folder / "comparison.png", "iteration time and its breakdown, A vs B"))
    sides = {key: folder / str(side[key].get("dir", key.upper())) for key in ("a", "b")}
    for name, section, _ in RUN_FIGURES:
        shown = {key: run_figure(sides[key], name, f"{key.upper()}: {label[key]}") for key in sides}
        if any(shown.values()):
            blocks += [heading(2, section, name.removesuffix(".png")), side_by_side(shown["a"], shown["b"])]
    blocks.append(heading(2, "Slowest collectives", "slowest-collectives"))
    for key in ("a", "b"):
        blocks += [heading(3, f"{key.upper()}: {label[key]}"), slowest_collectives(sides[key]) or "-"]
    return title, blocks


def _grid_text(sweep: dict[str, Any]) -> str:
    grid = sweep.get("grid") or {}
    return "; ".join(f"{key}: {', '.join(map(str, values))}" for key, values in grid.items()) or "-"


def sweep_page(folder: Path) -> tuple[str, list[str]]:
    """Title and body of a sweep's page."""
    summary = read_json(folder / "summary.json")
    sweep = read_json(folder / "sweep.json") if (folder / "sweep.json").is_file() else {}
    title = f"HeteroSim sweep: {sweep.get('name', folder.name)}"
    status = ", ".join(f"{n} {name}" for name, n in sorted((summary.get("status") or {}).items()))
    fixed = ", ".join(f"{k}={v}" for k, v in (sweep.get("set") or {}).items()) or "none"
    base = f"base experiment: {sweep.get('experiment', '-')}; fidelity {sweep.get('fidelity') or 'as set'}"
    blocks = [heading(1, title), paragraph(f"{base}; fixed overrides: {fixed}", "lead")]
    blocks.append(
        paragraph(f"grid: {_grid_text(sweep)}; {summary.get('variants', 0)} variants ({status})", "lead")
    )
    metrics = [str(m) for m in summary.get("metrics") or []]
    plots = [folder / str(name) for name in summary.get("plots") or [] if (folder / str(name)).is_file()]
    if plots:
        blocks.append(heading(2, "Metrics", "metrics"))
        blocks.append(grid([figure(path, "mean over seeds, error bars from min to max") for path in plots]))
    groups = summary.get("groups") or []
    params = sorted({key for group in groups for key in (group.get("params") or {})})
    group_rows = []
    for group in groups:
        stats = group.get("stats") or {}
        cells = [str((group.get("params") or {}).get(key, "")) for key in params]
        cells.append(f"{group.get('ok', 0)} / {group.get('variants', 0)}")
        for metric in metrics:
            s = stats.get(metric) or {}
            unit = "s" if metric.endswith("_s") else ""
            cells.append(
                f"{_value(s.get('mean'), unit)} ({_value(s.get('min'), unit)}..{_value(s.get('max'), unit)})"
            )
        group_rows.append(cells)
    if group_rows:
        header = [*params, "ok / variants", *(m + (" (ms)" if m.endswith("_s") else "") for m in metrics)]
        blocks += [
            heading(2, "Over seeds", "over-seeds"),
            table(header, group_rows, numeric=range(len(params) + 1, len(header))),
        ]
        blocks.append(paragraph("mean (min..max) over the seeds of each combination, successful runs only"))
    blocks += _variant_table(summary, metrics, [str(key) for key in sweep.get("grid") or {}])
    return title, blocks


def _variant_table(summary: dict[str, Any], metrics: list[str], params: list[str]) -> list[str]:
    """One row per variant (the first MAX_VARIANT_ROWS): its grid values and metrics."""
    rows = summary.get("rows") or []
    shown_metrics = list(dict.fromkeys(["iteration_time_s", "breakdown.exposed_comm_s", *metrics]))
    header = [
        "id",
        "status",
        *params,
        *(m + (" (ms)" if m.endswith("_s") else "") for m in shown_metrics),
        "error",
    ]
    body = [
        [
            row.get("id", ""),
            row.get("status", ""),
            *(row.get(key, "") for key in params),
            *(_value(row.get(m), "s" if m.endswith("_s") else "") for m in shown_metrics),
            row.get("error", ""),
        ]
        for row in rows[:MAX_VARIANT_ROWS]
    ]
    first = 2 + len(params)
    blocks = [
        heading(2, "Variants", "variants"),
        table(header, body, numeric=range(first, first + len(shown_metrics))),
    ]
    if len(rows) > MAX_VARIANT_ROWS:
        blocks.append(
            paragraph(f"the first {MAX_VARIANT_ROWS} of {len(rows)} variants; summary.csv holds all")
        )
    return blocks


def run_page(folder: Path) -> tuple[str, list[str]]:
    """Title and body of a run's page."""
    results = read_json(folder / "results.json")
    experiment = results.get("experiment") or {}
    title = f"HeteroSim run: {experiment.get('name', folder.name)}"
    sim = results.get("sim") or {}
    lead = (
        f"{experiment.get('source') or '-'}; {sim.get('fidelity', '-')} fidelity, seed {sim.get('seed', '-')}"
    )
    overrides = experiment.get("overrides") or []
    if overrides:
        lead += f"; overrides: {', '.join(map(str, overrides))}"
    return title, [heading(1, title), paragraph(lead, "lead"), *run_sections(folder, results)]


def build_report(folder: Path | str) -> str:
    """The HTML page of an output folder of run, compare or sweep."""
    folder = Path(folder)
    builders = {"compare": compare_page, "sweep": sweep_page, "run": run_page}
    title, body = builders[output_kind(folder)](folder)
    return page(title, body, f"written by heterosim {__version__} from {folder.resolve()}")


def write_report(folder: Path | str) -> Path:
    """Write ``folder/report.html`` beside the outputs it shows (listed in the folder's manifest)."""
    folder = Path(folder)
    text = build_report(folder)
    with staged_output(folder, replace=False) as stage:
        (stage / REPORT_NAME).write_text(text, encoding="utf-8")
    return folder / REPORT_NAME


def add_report_option(parser: argparse.ArgumentParser) -> None:
    """``--report``: write report.html into the output folder at the end."""
    parser.add_argument(
        "--report",
        action="store_true",
        help=f"also write {REPORT_NAME}, one self-contained page of the results (as `heterosim report OUT`)",
    )


def report_when_asked(asked: bool, folder: Path | str) -> None:
    """Write the folder's report.html when ``--report`` was given and say where it is."""
    if asked:
        path = write_report(folder)
        print(f"report in       {path} ({path.stat().st_size / 1024:.0f} KiB)")
