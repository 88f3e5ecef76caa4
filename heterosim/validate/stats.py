"""Error statistics: signed error % per case and MAPE per group.

error % = 100 * (predicted - measured) / measured (positive: the simulator predicts more of the
published quantity, i.e. slower for times and faster for throughputs). MAPE = mean of |error %|.
Cases flagged SUSPECT/CONFLICT/APPROX and cases used for calibration are summarised in their own
rows and never enter the main statistics.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any


def error_pct(predicted: float, measured: float) -> float:
    if measured == 0:
        raise ValueError("measured value is 0: relative error undefined")
    return 100.0 * (predicted - measured) / measured


def mape(errors: Iterable[float]) -> float | None:
    """Mean absolute percentage error of signed errors in %; None for no cases."""
    values = [abs(e) for e in errors]
    return sum(values) / len(values) if values else None


def statistics_class(row: dict[str, Any]) -> str:
    """Which summary a result row belongs to: main, calibration or flagged."""
    if row.get("calibration"):
        return "calibration"
    if row.get("separate_flags"):
        return "flagged"
    return "main"


def group_summary(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per group: count and MAPE of the main cases, plus calibration and flagged cases apart.

    Rows without a prediction (``error_pct`` None) are counted as ``failed``. Two pseudo-groups
    are added: ``end-to-end`` (every non-collective main case) and ``collective_busbw``.
    """
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(row["group"], []).append(row)
        pseudo = "collective_busbw" if row["kind"] == "collective_busbw" else "end-to-end"
        if pseudo != row["group"]:
            groups.setdefault(pseudo, []).append(row)
    out: dict[str, dict[str, Any]] = {}
    for name, members in groups.items():
        summary: dict[str, Any] = {"cases": len(members)}
        for cls in ("main", "calibration", "flagged"):
            errs = [r["error_pct"] for r in members
                    if statistics_class(r) == cls and r.get("error_pct") is not None]
            summary[f"{cls}_n"] = len(errs)
            summary[f"{cls}_mape_pct"] = mape(errs)
            if cls == "main":
                summary["main_mean_error_pct"] = sum(errs) / len(errs) if errs else None
        summary["failed"] = sum(1 for r in members if r.get("error_pct") is None)
        out[name] = summary
    return out
