"""Netbench PNG plots: per-flow rate over time, queue depth of the busiest ports, FCT bars, and the
CC comparison panel. Matplotlib with the Agg backend."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from heterosim.report.plots import plot_series  # noqa: E402

MAX_RATE_LINES = 16
BUSIEST_PORTS = 4


def _empty(path: Path, title: str, reason: str) -> None:
    fig, ax = plt.subplots(figsize=(9, 3.5))
    ax.text(0.5, 0.5, reason, ha="center", va="center", transform=ax.transAxes)
    ax.set_axis_off()
    ax.set_title(title)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_rates(
    path: Path,
    rate: Mapping[str, Any] | None,
    flow_labels: Sequence[str],
    goodput_bps: np.ndarray | None = None,
) -> None:
    """Per-flow sending rate set by the congestion control (top) and measured goodput from
    acknowledged bytes (bottom, when available), Gb/s over time, for the first flows."""
    title = "per-flow sending rate"
    if not rate or len(rate.get("time_ns", ())) == 0:
        _empty(path, title, "no rate samples (simulation.sample_interval: 0 or flow fidelity)")
        return
    times = np.asarray(rate["time_ns"], dtype=np.int64) / 1e6
    flows = np.asarray(rate["flow"], dtype=np.int64)
    panels = [("CC sending rate (Gb/s)", np.asarray(rate["rate_bps"], dtype=np.float64) / 1e9)]
    if goodput_bps is not None and np.any(np.isfinite(goodput_bps)):
        panels.append(("goodput (Gb/s)", np.asarray(goodput_bps, dtype=np.float64) / 1e9))
    fig, axes = plt.subplots(len(panels), 1, figsize=(9, 3 * len(panels) + 0.5), sharex=True, squeeze=False)
    shown = np.unique(flows)[:MAX_RATE_LINES]
    for ax, (label, values) in zip(axes[:, 0], panels):
        for fid in shown:
            sel = (flows == fid) & np.isfinite(values)
            name = flow_labels[fid] if 0 <= fid < len(flow_labels) else f"flow {fid}"
            ax.plot(times[sel], values[sel], label=name, linewidth=0.8)
        ax.set_ylabel(label)
        ax.set_ylim(bottom=0)
    axes[0, 0].set_title(title + ("" if len(panels) == 1 else " and goodput"))
    axes[-1, 0].set_xlabel("simulated time (ms)")
    if len(shown) <= 10:
        axes[0, 0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_queues(
    path: Path, queue: Mapping[str, Any] | None, port_names: Sequence[str], max_queue_bytes: np.ndarray
) -> None:
    """Queue depth (KiB) over time at the ports with the largest maximum queue."""
    title = "queue depth at the busiest ports"
    if not queue or len(queue.get("time_ns", ())) == 0:
        _empty(path, title, "no queue samples (simulation.sample_interval: 0 or flow fidelity)")
        return
    times = np.asarray(queue["time_ns"], dtype=np.int64)
    ports = np.asarray(queue["port"], dtype=np.int64)
    depth = np.asarray(queue["bytes"], dtype=np.float64) / 1024
    series = {}
    for port in busiest_sampled_ports(ports, depth, max_queue_bytes, BUSIEST_PORTS):
        sel = ports == port
        if np.any(sel):
            name = port_names[port] if port < len(port_names) else f"port {port}"
            series[name] = (times[sel], depth[sel])
    plot_series(path, series, "queue (KiB)", title)


def busiest_sampled_ports(
    sample_port: np.ndarray, sample_depth: np.ndarray, max_queue_bytes: np.ndarray, count: int
) -> list[int]:
    """The ``count`` sampled ports with the largest maximum queue (from the port counters when
    they cover every sampled port, else from the samples), largest first."""
    sampled = np.unique(np.asarray(sample_port, dtype=np.int64))
    peak = np.asarray(max_queue_bytes, dtype=np.float64)  # counters may be unsigned: no negation
    if len(sampled) and len(peak) > int(sampled.max()):
        key = peak[sampled]
    else:
        key = np.array([float(np.max(sample_depth[sample_port == p])) for p in sampled])
    order = np.argsort(-key, kind="stable")
    return [int(p) for p in sampled[order][:count]]


def plot_fct(path: Path, flows: Sequence[Mapping[str, Any]], sim_end_s: float, max_bars: int = 64) -> None:
    """Flow completion time per flow (unfinished flows: hatched bars up to the end of the run)."""
    shown = list(flows)[:max_bars]
    fig, ax = plt.subplots(figsize=(max(5, 0.3 * len(shown) + 2), 3.5))
    for f in shown:
        done = f["fct_s"] is not None
        height = (f["fct_s"] if done else max(0.0, sim_end_s - f["start_s"])) * 1e6
        ax.bar(
            f["id"],
            height,
            color="tab:blue" if done else "lightgray",
            hatch=None if done else "//",
            edgecolor="black" if not done else None,
            linewidth=0.5,
        )
    ax.set_xlabel("flow id")
    ax.set_ylabel("FCT (us)")
    ax.set_title(
        "flow completion times"
        + ("" if all(f["fct_s"] is not None for f in shown) else " (hatched: unfinished)")
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_comparison(path: Path, rows: Sequence[Mapping[str, Any]]) -> None:
    """One bar panel per metric (mean and max FCT, Jain, max queue, pauses, drops) across CCs."""
    panels = (
        ("fct_mean_s", "mean FCT (us)", 1e6),
        ("fct_max_s", "max FCT (us)", 1e6),
        ("fairness_jain", "Jain's index", 1.0),
        ("max_queue_bytes", "max queue (KiB)", 1 / 1024),
        ("pfc_pause_frames", "PFC pause frames", 1.0),
        ("drops", "drops", 1.0),
    )
    names = [r["cc"] for r in rows]
    fig, axes = plt.subplots(1, len(panels), figsize=(3 * len(panels), 3.2))
    for ax, (key, label, scale) in zip(axes, panels):
        values = [np.nan if r[key] is None else r[key] * scale for r in rows]
        ax.bar(range(len(names)), values, color="tab:blue")
        ax.set_xticks(range(len(names)), names, rotation=45, fontsize=8)
        ax.set_title(label, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
