"""What ``heterosim compare`` writes: a side-by-side table of two runs' results, with deltas and ratios.

``delta = B - A`` and ``ratio = B / A`` (None where A is zero), for the iteration time, each
breakdown term, throughput and the network counters. comparison.json, comparison.csv and
comparison.png (grouped bars of the breakdown terms) are each written atomically.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

from heterosim.report.staging import write_file_atomically

# (results key, label, unit): unit "s" is shown in milliseconds in the table
COMPARED_METRICS: tuple[tuple[str, str, str], ...] = (
    ("iteration_time_s", "iteration time", "s"),
    ("breakdown.compute_s", "compute", "s"),
    ("breakdown.exposed_comm_s", "exposed comm", "s"),
    ("breakdown.bubble_s", "bubble", "s"),
    ("breakdown.intra_host_comm_s", "intra-host comm", "s"),
    ("breakdown.inter_host_comm_s", "inter-host comm", "s"),
    ("throughput.tokens_per_s", "tokens/s", ""),
    ("throughput.tflops_per_gpu", "TFLOPS/GPU", ""),
    ("network.flows", "flows", ""),
    ("network.bytes", "bytes", ""),
    ("network.drops", "drops", ""),
    ("network.retransmits", "retransmits", ""),
    ("network.trims", "trims", ""),  # network.trimming runs only
    ("network.pfc_pause_frames", "PFC pause frames", ""),
    ("network.ecn_marks", "ECN marks", ""),
    ("network.cnps", "CNPs", ""),
    ("sim.events", "simulator events", ""),
)
BREAKDOWN_BARS = (
    "iteration_time_s",
    "breakdown.compute_s",
    "breakdown.exposed_comm_s",
    "breakdown.bubble_s",
    "breakdown.intra_host_comm_s",
    "breakdown.inter_host_comm_s",
)


def lookup(results: dict[str, Any], dotted: str) -> Any:
    """``results['a']['b']`` for ``'a.b'``; None where a key is missing. In a list, a part is
    an index (``jobs.0.iteration_time_s``) or the ``name`` of an entry."""
    node: Any = results
    for part in dotted.split("."):
        if isinstance(node, list):
            if part.isdigit() and int(part) < len(node):
                node = node[int(part)]
                continue
            named = [x for x in node if isinstance(x, dict) and x.get("name") == part]
            if not named:
                return None
            node = named[0]
            continue
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def job_metrics(results: dict[str, Any]) -> list[tuple[str, str, str]]:
    """Per-job metrics of a several-jobs results.json (none for a one-job run)."""
    out = []
    for i, job in enumerate(results.get("jobs") or []):
        name = job.get("name", str(i))
        out.append((f"jobs.{i}.iteration_time_s", f"job {name} iteration", "s"))
        out.append((f"jobs.{i}.breakdown.exposed_comm_s", f"job {name} exposed comm", "s"))
    return out


def all_to_all_metrics(results: dict[str, Any]) -> list[tuple[str, str, str]]:
    """Rows for the expert-parallel all-to-alls of an MoE run (none without them)."""
    if lookup(results, "collectives.by_type.ALL_TO_ALL") is None:
        return []
    key = "collectives.by_type.ALL_TO_ALL"
    return [(f"{key}.mean_time_s", "all-to-all mean", "s"), (f"{key}.max_time_s", "all-to-all max", "s")]


def metric_rows(results_a: dict[str, Any], results_b: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per compared metric: a, b, delta (b - a) and ratio (b / a, None when a is 0)."""
    rows = []
    same_jobs = len(results_a.get("jobs") or []) == len(results_b.get("jobs") or [])
    extra = (job_metrics(results_a) if same_jobs else []) + all_to_all_metrics(results_a)
    for key, label, unit in (*COMPARED_METRICS, *extra):
        a, b = lookup(results_a, key), lookup(results_b, key)
        if a is None and b is None:
            continue
        numeric = isinstance(a, (int, float)) and isinstance(b, (int, float))
        delta = b - a if numeric else None
        ratio = (b / a if a else None) if numeric else None
        rows.append(
            {"metric": key, "label": label, "unit": unit, "a": a, "b": b, "delta": delta, "ratio": ratio}
        )
    return rows


def comparison_dict(
    side_a: dict[str, Any], results_a: dict[str, Any], side_b: dict[str, Any], results_b: dict[str, Any]
) -> dict[str, Any]:
    """comparison.json content; ``side_*`` describe each side (label, experiment, overrides, dir)."""
    return {
        "a": side_a,
        "b": side_b,
        "seed": {"a": lookup(results_a, "sim.seed"), "b": lookup(results_b, "sim.seed")},
        "fidelity": {"a": lookup(results_a, "sim.fidelity"), "b": lookup(results_b, "sim.fidelity")},
        "partial": {"a": bool(lookup(results_a, "sim.partial")), "b": bool(lookup(results_b, "sim.partial"))},
        "definition": "delta = b - a; ratio = b / a (null when a is 0)",
        "metrics": metric_rows(results_a, results_b),
    }


def _fmt(value: Any, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "s":
        return f"{value * 1e3:.3f}"
    if isinstance(value, int):
        return f"{value:d}"
    return f"{value:.4g}" if abs(value) < 1e6 else f"{value:.4e}"


def format_table(comparison: dict[str, Any]) -> str:
    """The side-by-side table printed on the terminal (times in ms)."""
    label_a, label_b = comparison["a"]["label"], comparison["b"]["label"]
    header = ["metric", f"A: {label_a}", f"B: {label_b}", "B - A", "B / A"]
    lines = [header]
    for row in comparison["metrics"]:
        name = row["label"] + (" (ms)" if row["unit"] == "s" else "")
        ratio = f"{row['ratio']:.3f}" if row["ratio"] is not None else "-"
        delta = row["delta"]
        delta_text = "-" if delta is None else ("+" if delta > 0 else "") + _fmt(delta, row["unit"])
        lines.append([name, _fmt(row["a"], row["unit"]), _fmt(row["b"], row["unit"]), delta_text, ratio])
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    out = []
    for i, line in enumerate(lines):
        cells = [line[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(line[1:], widths[1:])]
        out.append("  ".join(cells))
        if i == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)


def _atomic_write(path: Path, data: bytes) -> None:
    write_file_atomically(path, data)


def _plot(path: Path, comparison: dict[str, Any]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = {row["metric"]: row for row in comparison["metrics"]}
    keys = [k for k in BREAKDOWN_BARS if k in rows]
    labels = [rows[k]["label"] for k in keys]
    a = [(rows[k]["a"] or 0.0) * 1e3 for k in keys]
    b = [(rows[k]["b"] or 0.0) * 1e3 for k in keys]
    xs = range(len(keys))
    width = 0.38
    fig, ax = plt.subplots(figsize=(8, 4.2))
    bars_a = ax.bar([x - width / 2 for x in xs], a, width, label=f"A: {comparison['a']['label']}")
    bars_b = ax.bar([x + width / 2 for x in xs], b, width, label=f"B: {comparison['b']['label']}")
    for bars in (bars_a, bars_b):
        ax.bar_label(bars, fmt="%.3g", fontsize=7, padding=2)
    ax.set_xticks(list(xs), labels, rotation=15, fontsize=9)
    ax.set_ylabel("ms (breakdown: mean over ranks)")
    ax.set_title("iteration time and its breakdown, A vs B", fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    plt.close(fig)
    _atomic_write(path, buffer.getvalue())


def write_comparison(out_dir: Path, comparison: dict[str, Any], plots: bool = True) -> None:
    """Write comparison.json, comparison.csv and (with ``plots``) comparison.png into ``out_dir``."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    _atomic_write(
        out_dir / "comparison.json", (json.dumps(comparison, indent=2, sort_keys=True) + "\n").encode()
    )
    text = io.StringIO()
    writer = csv.writer(text)
    writer.writerow(["metric", "a", "b", "delta", "ratio"])
    for row in comparison["metrics"]:
        writer.writerow(
            [row["metric"], *("" if row[k] is None else row[k] for k in ("a", "b", "delta", "ratio"))]
        )
    _atomic_write(out_dir / "comparison.csv", text.getvalue().encode())
    if plots:
        _plot(out_dir / "comparison.png", comparison)
