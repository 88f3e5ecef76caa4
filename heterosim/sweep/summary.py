"""Sweep summary: one CSV row per variant, seed statistics per parameter combination, and plots.

Plots show a metric against each swept parameter (seed excluded): one line per combination of
the other parameters, the mean over seeds as the point and the spread over seeds (min to max)
as error bars. With only a seed in the grid, the metric is plotted against the seed.
"""

from __future__ import annotations

import csv
import json
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from heterosim.report.compare_report import job_metrics, lookup
from heterosim.report.staging import write_file_atomically
from heterosim.sweep.grid import SEED_KEY, Variant, format_value

SUMMARY_METRICS = (
    "iteration_time_s",
    "breakdown.compute_s",
    "breakdown.exposed_comm_s",
    "breakdown.bubble_s",
    "breakdown.intra_host_comm_s",
    "breakdown.inter_host_comm_s",
    "throughput.tokens_per_s",
    "throughput.tflops_per_gpu",
    "network.flows",
    "network.bytes",
    "network.drops",
    "network.retransmits",
    "network.pfc_pause_frames",
    "network.ecn_marks",
    "network.cnps",
    "sim.events",
    "sim.wall_s",
)


def metric_values(results: dict[str, Any], metrics: Sequence[str] = SUMMARY_METRICS) -> dict[str, Any]:
    """The flat metrics of one results.json (for the store and the summary); a several-jobs run
    adds each job's iteration time and exposed communication (``jobs.<i>.*``)."""
    per_job = [key for key, _, _ in job_metrics(results)]
    return {m: lookup(results, m) for m in dict.fromkeys([*SUMMARY_METRICS, *per_job, *metrics])}


def summary_rows(
    variants: Sequence[Variant], records: dict[str, dict[str, Any]], metrics: Sequence[str]
) -> list[dict[str, Any]]:
    """One row per variant of the current grid, in grid order; ``pending`` where not run yet."""
    rows = []
    for variant in variants:
        record = records.get(variant.id, {})
        values = record.get("metrics") or {}
        row: dict[str, Any] = {"id": variant.id, "status": record.get("status", "pending")}
        row.update({key: format_value(value) for key, value in variant.point.items()})
        row.update({m: values.get(m) for m in dict.fromkeys([*SUMMARY_METRICS, *metrics])})
        row["error"] = record.get("error") or ""
        rows.append(row)
    return rows


def _stats(values: list[float]) -> dict[str, float]:
    n = len(values)
    mean = sum(values) / n
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else 0.0
    return {"mean": mean, "min": min(values), "max": max(values), "std": std}


def seed_groups(
    variants: Sequence[Variant], records: dict[str, dict[str, Any]], metrics: Sequence[str]
) -> list[dict[str, Any]]:
    """Statistics over seeds (successful runs only) per combination of the other grid values."""
    groups: dict[str, dict[str, Any]] = {}
    for variant in variants:
        params = {k: v for k, v in variant.point.items() if k != SEED_KEY}
        key = json.dumps(params, sort_keys=True, default=str)
        group = groups.setdefault(key, {"params": params, "variants": 0, "ok": 0, "values": {}})
        group["variants"] += 1
        record = records.get(variant.id)
        if not record or record.get("status") != "ok":
            continue
        group["ok"] += 1
        for metric in metrics:
            value = (record.get("metrics") or {}).get(metric)
            if isinstance(value, (int, float)):
                group["values"].setdefault(metric, []).append(float(value))
    out = []
    for group in groups.values():
        stats = {m: _stats(v) for m, v in group.pop("values").items() if v}
        group["params"] = {k: format_value(v) for k, v in group["params"].items()}
        out.append({**group, "stats": stats})
    return out


def _atomic_text(path: Path, text: str) -> None:
    write_file_atomically(path, text)


def write_summary_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    import io

    buffer = io.StringIO()
    if rows:
        writer = csv.DictWriter(buffer, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows({k: ("" if v is None else v) for k, v in row.items()} for row in rows)
    _atomic_text(path, buffer.getvalue())


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_")


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def plot_metric_vs_parameter(
    path: Path, variants: Sequence[Variant], records: dict[str, dict[str, Any]], metric: str, parameter: str
) -> bool:
    """Metric (mean over seeds, min..max error bars) against one grid key; False if nothing to plot."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x_values: list[Any] = []
    for variant in variants:
        value = variant.point[parameter]
        if value not in x_values:
            x_values.append(value)
    numeric = all(_is_number(v) for v in x_values)
    series: dict[str, dict[int, list[float]]] = {}
    for variant in variants:
        record = records.get(variant.id)
        if not record or record.get("status") != "ok":
            continue
        value = (record.get("metrics") or {}).get(metric)
        if not _is_number(value):
            continue
        assert value is not None
        others = {k: v for k, v in variant.point.items() if k not in (parameter, SEED_KEY)}
        name = ", ".join(f"{k}={format_value(v)}" for k, v in others.items()) or metric
        series.setdefault(name, {}).setdefault(x_values.index(variant.point[parameter]), []).append(value)
    if not series:
        return False
    scale, unit = (1e3, " (ms)") if metric.endswith("_s") else (1.0, "")
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for name, points in series.items():
        idx = sorted(points)
        xs = [x_values[i] if numeric else i for i in idx]
        means = [sum(points[i]) / len(points[i]) * scale for i in idx]
        lower = [m - min(points[i]) * scale for m, i in zip(means, idx)]
        upper = [max(points[i]) * scale - m for m, i in zip(means, idx)]
        ax.errorbar(xs, means, yerr=[lower, upper], marker="o", capsize=4, label=name)
    if not numeric:
        ax.set_xticks(range(len(x_values)), [format_value(v) for v in x_values], rotation=20)
    ax.set_xlabel(parameter)
    ax.set_ylabel(metric + unit)
    seeds = parameter != SEED_KEY and any(SEED_KEY in v.point for v in variants)
    ax.set_title(
        f"{metric} vs {parameter}" + (" (mean over seeds, bars: min..max)" if seeds else ""), fontsize=10
    )
    ax.grid(alpha=0.3)
    if len(series) > 1 or seeds:
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def write_summary(
    out_dir: Path,
    variants: Sequence[Variant],
    records: dict[str, dict[str, Any]],
    metrics: Sequence[str],
    plots: bool = True,
) -> dict[str, Any]:
    """Write summary.csv, summary.json and the plots; return summary.json's content."""
    out_dir = Path(out_dir)
    rows = summary_rows(variants, records, metrics)
    write_summary_csv(out_dir / "summary.csv", rows)
    counts: dict[str, int] = {}
    for row in rows:
        counts[row["status"]] = counts.get(row["status"], 0) + 1
    plot_files = []
    if plots and variants:
        parameters = [k for k in variants[0].point if k != SEED_KEY] or list(variants[0].point)
        for metric in metrics:
            for parameter in parameters:
                name = f"{_slug(metric)}_vs_{_slug(parameter)}.png"
                if plot_metric_vs_parameter(out_dir / name, variants, records, metric, parameter):
                    plot_files.append(name)
    summary = {
        "variants": len(rows),
        "status": counts,
        "metrics": list(metrics),
        "groups": seed_groups(variants, records, metrics),
        "rows": rows,
        "plots": plot_files,
    }
    _atomic_text(out_dir / "summary.json", json.dumps(summary, indent=2, sort_keys=True, default=str))
    return summary
