"""What ``heterosim validate`` writes: results.json and parity.png (predicted vs measured)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from heterosim import __version__
from heterosim.validate.budget import CSV_COLUMNS, csv_row, error_budget
from heterosim.validate.cases import Case
from heterosim.validate.predict import Prediction
from heterosim.validate.stats import error_pct, statistics_class


def write_results(
    out: Path, rows: list[dict[str, Any]], groups: dict[str, Any], meta: dict[str, Any]
) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    doc = {"version": __version__, **meta, "groups": groups, "cases": rows}
    path = out / "results.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(doc, indent=2) + "\n")
    tmp.replace(path)
    return path


def write_parity_plot(out: Path, rows: list[dict[str, Any]]) -> Path:
    """Predicted vs measured on log axes, one colour per group; hollow = flagged/calibration.

    Quantities of different units share the axes (each point is in its own case's units); the
    diagonal is y = x, the band +-10 %.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = out / "parity.png"
    done = [r for r in rows if r.get("predicted") is not None]
    fig, ax = plt.subplots(figsize=(6.5, 6))
    groups = sorted({r["group"] for r in done})
    cmap = plt.get_cmap("tab10")
    for i, group in enumerate(groups):
        for hollow in (False, True):
            pts = [
                r
                for r in done
                if r["group"] == group and bool(r["calibration"] or r["separate_flags"]) == hollow
            ]
            if not pts:
                continue
            colour = cmap(i % 10)
            ax.scatter(
                [r["measured"] for r in pts],
                [r["predicted"] for r in pts],
                label=group + (" (flagged)" if hollow else ""),
                s=28,
                facecolors="none" if hollow else colour,
                edgecolors=colour,
            )
    if done:
        values = [r["measured"] for r in done] + [r["predicted"] for r in done]
        lo, hi = min(values) / 1.5, max(values) * 1.5
        ax.plot([lo, hi], [lo, hi], color="black", lw=1)
        ax.fill_between(
            [lo, hi], [lo * 0.9, hi * 0.9], [lo * 1.1, hi * 1.1], color="grey", alpha=0.15, label="+-10 %"
        )
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("measured (case units: s, tokens/s/GPU, TFLOP/s/GPU, GB/s, ms per layer)")
    ax.set_ylabel("predicted (same units)")
    ax.set_title("HeteroSim validation: predicted vs measured")
    ax.grid(True, which="both", alpha=0.3)
    if ax.get_legend_handles_labels()[0]:  # no case predicted: nothing to label
        ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def markdown_table(rows: list[dict[str, Any]]) -> str:
    """The per-case table as Markdown (benchmarks/README.md carries it)."""
    lines = [
        "| case | group | quantity | measured | predicted | error % | compute % (roofline %) "
        "| exposed comm % | bubble % | miss s | method | assumed | marks |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|---|---|",
    ]
    for r in rows:
        assumed = "; ".join(
            f"{k}={v['value'] if isinstance(v, dict) else v}" for k, v in (r.get("assumptions") or {}).items()
        )
        marks = ",".join(
            r.get("separate_flags", [])
            + (["calibration"] if r.get("calibration") else [])
            + (["MEM"] if (r.get("details") or {}).get("memory_warnings") else [])
        )
        if r.get("predicted") is None:
            pred, err = "failed", r.get("error", "")
        else:
            pred, err = f"{r['predicted']:.4g}", f"{r['error_pct']:+.1f}"
        method = r.get("method", "") or ""
        method = "2-run extrapolation" if method.startswith("extrapolated") else method
        b = r.get("budget")
        if b:
            roof = 100 * b["compute_by_source_s"]["roofline"] / b["compute_s"] if b["compute_s"] else 0
            budget = (
                f"{b['compute_pct']:.0f} ({roof:.0f}) | {b['exposed_comm_pct']:.0f} | "
                f"{b['bubble_pct']:.0f} | {b['miss_s']:+.3g}"
            )
        else:
            budget = "- | - | - | -"
        lines.append(
            f"| {r['id']} | {r['group']} | {r['quantity']} | {r['measured']:.4g} | {pred} "
            f"| {err} | {budget} | {method} | {assumed} | {marks} |"
        )
    return "\n".join(lines) + "\n"


def result_row(case: Case, pred: Prediction | None, error: str | None) -> dict[str, Any]:
    """One case's row of results.json: the case, its prediction (or its error) and the error %."""
    row: dict[str, Any] = {
        "id": case.id,
        "group": case.group,
        "kind": case.kind,
        "quantity": case.quantity,
        "flop_convention": case.flop_convention,
        "measured": case.measured,
        "predicted": None,
        "error_pct": None,
        "assumptions": case.assumed,
        "not_modelled": list(case.not_modelled),
        "flags": list(case.flags),
        "separate_flags": case.separate_flags,
        "calibration": case.calibration,
        "gpus": case.gpus,
        "source": case.source,
    }
    if pred is not None:
        row.update(
            {
                "predicted": pred.value,
                "error_pct": error_pct(pred.value, case.measured),
                "simulated_time_s": pred.time_s,
                "method": pred.method,
                "wall_s": pred.wall_s,
                "details": pred.details,
                "budget": error_budget(case.quantity, case.measured, pred.value, pred.time_s, pred.details),
            }
        )
    if error is not None:
        row["error"] = error
    return row


def _cell(value: float | None, width: int) -> str:
    return f"{'-':>{width}}" if value is None else f"{value:>{width}.4g}"


def summary_lines(groups: dict[str, Any]) -> list[str]:
    """The per-group summary the command prints: main cases' count, MAPE, mean error and
    Spearman rank correlation, then the flagged and calibration cases apart, failures, and the
    mean speed error (positive: the simulator is faster than the measurements)."""
    lines = [
        "# group                  n   MAPE%  mean err%  Spearman   flagged n/MAPE%  calib n/MAPE%  failed"
        "  too fast%"
    ]
    pseudo = ("end-to-end", "layer_time", "collective_busbw")
    for name, s in sorted(groups.items(), key=lambda kv: (kv[0] in pseudo, kv[0])):
        lines.append(
            f"  {name:<22} {s['main_n']:>2} {_cell(s['main_mape_pct'], 7)} "
            f"{_cell(s['main_mean_error_pct'], 10)} {_cell(s.get('main_spearman'), 9)}"
            f"   {s['flagged_n']:>3}/{_cell(s['flagged_mape_pct'], 7)}"
            f"    {s['calibration_n']:>2}/{_cell(s['calibration_mape_pct'], 7)}  {s['failed']:>5}"
            f"  {_cell(s.get('main_mean_speed_error_pct'), 9)}"
        )
    return lines


def write_budget_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    """One row per case: the error budget (heterosim/validate/budget.py)."""
    import csv

    tmp = path.with_suffix(".csv.tmp")
    with tmp.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(CSV_COLUMNS)
        for row in rows:
            writer.writerow(csv_row(row, statistics_class(row)))
    tmp.replace(path)
