"""Error budget of one predicted case: where the predicted time goes, and how big the miss is.

For an end-to-end case the predicted iteration time T splits (mean over ranks, the identity of
:mod:`heterosim.report.breakdown`) into compute + exposed communication + bubble, and compute
splits further by where each op's duration came from (the compute model's provenance:
measured, interpolated, roofline, scaled; "framework" for blocking framework costs the workload
model times itself, such as DeepSpeed 0.3's ZeRO-3 fetches). The budget puts the miss beside it: the measured
time T_m (the published time, or, for a throughput, the time that gives the published value:
every supported throughput is inversely proportional to T, so T_m = T x predicted / measured)
and miss = T - T_m (negative: the simulator is too fast). A miss larger than a component that
is not "roofline" compute points at a mechanism, not at kernel speed.

Two-run extrapolated cases (validate/predict.py) extrapolate every component linearly with the
same weights as the time, so the components still add up to the predicted T.

``collective_busbw`` cases have no budget (the whole prediction is one collective).
"""

from __future__ import annotations

from typing import Any

COMPONENTS = ("compute_s", "exposed_comm_s", "bubble_s")
SOURCES = ("measured", "interpolated", "roofline", "scaled", "framework")
CSV_COLUMNS = (
    "id",
    "group",
    "gpus",
    "quantity",
    "measured",
    "predicted",
    "error_pct",
    "time_pred_s",
    "time_meas_s",
    "miss_s",
    *COMPONENTS,
    *(f"compute_{s}_s" for s in SOURCES),
    "contention_s",
    "compute_pct",
    "exposed_comm_pct",
    "bubble_pct",
    "statistics",
)


def _extrapolated(details: dict[str, Any], key: str) -> float:
    """One breakdown component, extrapolated like the iteration time when two runs were used."""
    value = float(details["breakdown"][key])
    ext = details.get("extrapolation")
    if not ext or "breakdown1" not in ext:
        return value
    v1 = float(ext["breakdown1"][key])
    return v1 + (value - v1) * (ext["m"] - ext["m1"]) / (ext["m2"] - ext["m1"])


def _extrapolated_value(details: dict[str, Any], key: str) -> float:
    """A top-level detail extrapolated like the breakdown (0 when absent)."""
    value = float(details.get(key, 0.0))
    ext = details.get("extrapolation")
    if not ext or key not in ext:
        return value
    v1 = float(ext[key])
    return v1 + (value - v1) * (ext["m"] - ext["m1"]) / (ext["m2"] - ext["m1"])


def measured_time_s(quantity: str, measured: float, predicted: float, time_s: float) -> float:
    """The iteration time the published value corresponds to (see the module docstring)."""
    if quantity == "iteration_time_s":
        return measured
    return time_s * predicted / measured


def error_budget(
    quantity: str, measured: float, predicted: float, time_s: float, details: dict[str, Any]
) -> dict[str, Any] | None:
    """The budget of one end-to-end prediction; None when the details carry no breakdown."""
    if quantity == "busbw_GBps" or "breakdown" not in details:
        return None
    parts = {k: _extrapolated(details, k) for k in COMPONENTS}
    total = sum(parts.values())
    # components add up to the simulated time (breakdown identity); rescale rounding away so
    # the shares of an extrapolated case sum to T exactly
    scale = time_s / total if total > 0 else 0.0
    parts = {k: v * scale for k, v in parts.items()}
    shares = details.get("compute_provenance") or {}
    by_source = {s: parts["compute_s"] * float(shares.get(s, 0.0)) for s in SOURCES}
    t_meas = measured_time_s(quantity, measured, predicted, time_s)
    budget: dict[str, Any] = {
        "time_pred_s": time_s,
        "time_meas_s": t_meas,
        "miss_s": time_s - t_meas,
        **parts,
        "compute_by_source_s": by_source,
        # compute time lost to communication kernels beside it (mean over ranks; part of compute_s)
        "contention_s": _extrapolated_value(details, "contention_s") * scale,
    }
    for key in COMPONENTS:
        budget[key[:-2] + "_pct"] = 100.0 * parts[key] / time_s if time_s > 0 else 0.0
    return budget


def budget_line(budget: dict[str, Any]) -> str:
    """One printed line: components with their share, the compute sources, the miss."""
    sources = ", ".join(
        f"{s} {100 * v / budget['compute_s']:.0f}%"
        for s, v in budget["compute_by_source_s"].items()
        if budget["compute_s"] > 0 and v > 0.005 * budget["compute_s"]
    )
    t = budget["time_pred_s"]
    miss = budget["miss_s"]
    contention = budget.get("contention_s", 0.0)
    lost = f", contention {contention:.3g} s" if contention > 0 else ""
    return (
        f"compute {budget['compute_s']:.4g} s {budget['compute_pct']:.0f}% ({sources}{lost}) | "
        f"exposed comm {budget['exposed_comm_s']:.3g} s {budget['exposed_comm_pct']:.0f}% | "
        f"bubble {budget['bubble_s']:.3g} s {budget['bubble_pct']:.0f}% | "
        f"predicted {t:.4g} s vs measured {budget['time_meas_s']:.4g} s: miss {miss:+.3g} s"
    )


def csv_row(row: dict[str, Any], statistics: str) -> list[Any]:
    """The budget.csv row of one result row (empty budget cells for collectives/failures)."""
    budget = row.get("budget") or {}
    head = [
        row["id"],
        row["group"],
        row["gpus"],
        row["quantity"],
        row["measured"],
        row.get("predicted"),
        row.get("error_pct"),
    ]
    if not budget:
        return [
            *head,
            row.get("simulated_time_s"),
            *([None] * (len(CSV_COLUMNS) - len(head) - 2)),
            statistics,
        ]
    return [
        *head,
        budget["time_pred_s"],
        budget["time_meas_s"],
        budget["miss_s"],
        *(budget[k] for k in COMPONENTS),
        *(budget["compute_by_source_s"][s] for s in SOURCES),
        budget.get("contention_s", 0.0),
        budget["compute_pct"],
        budget["exposed_comm_pct"],
        budget["bubble_pct"],
        statistics,
    ]
