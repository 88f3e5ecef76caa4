"""Predict one validation case into a result row, format it for the terminal, write every output.

Used by ``heterosim validate``; the command keeps only argument parsing and printing.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from heterosim.errors import OUT_OF_MEMORY_HINT, UserError, is_out_of_memory
from heterosim.validate.budget import budget_line
from heterosim.validate.cases import Case
from heterosim.validate.predict import predict
from heterosim.validate.report import (
    markdown_table,
    result_row,
    write_budget_csv,
    write_parity_plot,
    write_results,
)


def predict_row(
    case: Case,
    fidelity: str,
    granularity: str | None,
    intra_host: str | None,
    queue_pairs: str | None,
    packet_acceleration: str | None = None,
    databases: Sequence[str] = (),
    compute_contention: bool | None = None,
) -> dict[str, Any]:
    """The case's result row; a case that cannot be predicted (a model limit, out of memory) gets
    its one-line reason in ``error`` and ``error_pct`` None. Bad input found by the run (a
    UserError) is one UserError naming the case (exit 2). Any other exception is a bug and raises."""
    pred, error = None, None
    try:
        options = (granularity, intra_host, queue_pairs, packet_acceleration, databases, compute_contention)
        pred = predict(case, fidelity, *options)
    except UserError as exc:  # invalid input, not a failed prediction: one line, exit 2
        message = str(exc).splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(message if message.startswith(case.origin) else f"{case.origin}: {message}") from None
    except ValueError as exc:
        error = str(exc).splitlines()[0]
    except Exception as exc:
        if not is_out_of_memory(exc):
            raise
        error = f"out of memory ({OUT_OF_MEMORY_HINT})"
    return result_row(case, pred, error)


def check_databases(paths: Sequence[str]) -> None:
    """Open each operation database once, so a missing or foreign file fails before any case."""
    from heterosim.plan.compute.database import OpDatabase

    for path in paths:
        OpDatabase(path).close()


def _fmt(value: float | None, width: int = 9) -> str:
    if value is None:
        return f"{'-':>{width}}"
    return f"{value:>{width}.4g}"


def case_lines(case: Case, row: dict[str, Any], show_budget: bool = True) -> list[str]:
    """The case's line of the printed table (and its error-budget line)."""
    if row["error_pct"] is None:
        return [f"  {case.id:<42} FAILED: {row.get('error')}"]
    marks = ",".join(case.separate_flags + (["calibration"] if case.calibration else []))
    lines = [
        f"  {case.id:<42} {case.quantity:<20} {_fmt(case.measured)} {_fmt(row.get('predicted'))} "
        f"{row['error_pct']:>+8.1f}  {marks}"
    ]
    if row.get("budget") and show_budget:
        lines.append(f"      budget: {budget_line(row['budget'])}")
    if case.kind == "layer_time" and row.get("details"):
        lines.append(f"      layer: {layer_line(row['details'], case.measured_all)}")
    lines.extend(f"      not modelled: {entry['what']}" for entry in case.not_modelled)
    return lines


def layer_line(details: dict[str, Any], measured: dict[str, float]) -> str:
    """Forward and backward of a layer_time case, predicted against measured where published."""
    parts = []
    for key, name in (("layer_forward_ms", "forward"), ("layer_backward_ms", "backward")):
        text = f"{name} {details[key]:.3g} ms"
        if key in measured:
            text += f" vs {measured[key]:.3g} ({100 * (details[key] / measured[key] - 1):+.1f}%)"
        parts.append(text)
    return " | ".join(parts)


def write_validation_outputs(
    out: Path, rows: list[dict[str, Any]], groups: dict[str, Any], meta: dict[str, Any]
) -> list[Path]:
    """results.json, parity.png, table.md and budget.csv in ``out``; returns their paths."""
    write_results(out, rows, groups, meta)
    write_parity_plot(out, rows)
    (out / "table.md").write_text(markdown_table(rows))
    write_budget_csv(out / "budget.csv", rows)
    return [out / "results.json", out / "parity.png", out / "table.md", out / "budget.csv"]
