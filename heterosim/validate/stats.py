"""Error statistics: signed error % per case and MAPE per group.

error % = 100 * (predicted - measured) / measured (positive: the simulator predicts more of the
published quantity, i.e. slower for times and faster for throughputs). MAPE = mean of |error %|.
Spearman = Pearson correlation of the ranks of predicted and measured values (ties get their
average rank), per group: does the simulator order the cases as the measurements do.
Because the sign of error % depends on the quantity (a time too short is negative, a throughput too
high is positive), each group also gets the mean *speed error*: 100 * (speed predicted / speed
measured - 1), speed being the published throughput or 1 / the published time, so positive always
means the simulator runs faster than the measurement (:func:`speed_error_pct`).
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


TIME_QUANTITIES = ("iteration_time_s", "layer_forward_ms", "layer_backward_ms", "layer_total_ms")


def speed_error_pct(quantity: str, predicted: float, measured: float) -> float:
    """Signed error of the simulated speed in %: positive when the simulator is faster."""
    if quantity in TIME_QUANTITIES:
        if predicted == 0:
            raise ValueError("predicted time is 0: speed error undefined")
        return 100.0 * (measured / predicted - 1.0)
    return error_pct(predicted, measured)


def mape(errors: Iterable[float]) -> float | None:
    """Mean absolute percentage error of signed errors in %; None for no cases."""
    values = [abs(e) for e in errors]
    return sum(values) / len(values) if values else None


def average_ranks(values: Sequence[float]) -> list[float]:
    """Ranks 1..n of ``values``, tied values sharing the mean of their ranks."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def spearman(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Spearman rank correlation of paired values; None for fewer than 3 pairs or a constant side."""
    if len(xs) != len(ys):
        raise ValueError("spearman needs paired values")
    if len(xs) < 3:
        return None
    rx, ry = average_ranks(xs), average_ranks(ys)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    sxy = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    sxx = sum((a - mx) ** 2 for a in rx)
    syy = sum((b - my) ** 2 for b in ry)
    if sxx == 0 or syy == 0:
        return None
    return sxy / (sxx * syy) ** 0.5


def statistics_class(row: dict[str, Any]) -> str:
    """Which summary a result row belongs to: main, calibration or flagged."""
    if row.get("calibration"):
        return "calibration"
    if row.get("separate_flags"):
        return "flagged"
    return "main"


def group_summary(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per group: count, MAPE and Spearman rank correlation of the main cases, plus calibration
    and flagged cases apart (their MAPE).

    Rows without a prediction (``error_pct`` None) are counted as ``failed``. Pseudo-groups are
    added per kind: ``end-to-end`` (iteration time and throughput), ``layer_time`` and
    ``collective_busbw``.
    """
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(row["group"], []).append(row)
        pseudo = row["kind"] if row["kind"] in ("collective_busbw", "layer_time") else "end-to-end"
        if pseudo != row["group"]:
            groups.setdefault(pseudo, []).append(row)
    out: dict[str, dict[str, Any]] = {}
    for name, members in groups.items():
        summary: dict[str, Any] = {"cases": len(members)}
        for cls in ("main", "calibration", "flagged"):
            errs = [
                r["error_pct"]
                for r in members
                if statistics_class(r) == cls and r.get("error_pct") is not None
            ]
            summary[f"{cls}_n"] = len(errs)
            summary[f"{cls}_mape_pct"] = mape(errs)
            if cls == "main":
                summary["main_mean_error_pct"] = sum(errs) / len(errs) if errs else None
                fast = [
                    speed_error_pct(r["quantity"], r["predicted"], r["measured"])
                    for r in members
                    if statistics_class(r) == cls
                    and r.get("error_pct") is not None
                    and r.get("quantity")
                    and r.get("predicted") is not None
                    and r.get("measured") is not None
                ]
                summary["main_mean_speed_error_pct"] = sum(fast) / len(fast) if fast else None
                pairs = [
                    (r["predicted"], r["measured"])
                    for r in members
                    if statistics_class(r) == cls
                    and r.get("error_pct") is not None
                    and r.get("predicted") is not None
                    and r.get("measured") is not None
                ]
                summary["main_spearman"] = spearman([p for p, _ in pairs], [m for _, m in pairs])
        summary["failed"] = sum(1 for r in members if r.get("error_pct") is None)
        out[name] = summary
    return out
