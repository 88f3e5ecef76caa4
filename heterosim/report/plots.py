"""PNG plots of a run: per-rank timeline, breakdown bars, link-utilization heat map, queue and
pause time series. Matplotlib with the Agg backend (no display needed)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.collections import LineCollection  # noqa: E402

from heterosim.plan.execution_plan import COMPUTE, FLOW, ExecutionPlan  # noqa: E402


def plot_timeline(path: Path, plan: ExecutionPlan, start_ns: np.ndarray, end_ns: np.ndarray,
                  rank_gpu: np.ndarray, max_ranks: int = 64, max_spans: int = 20_000) -> None:
    """Gantt chart: one row per rank, compute in blue, communication (flows sent) in orange.

    Spans are drawn as one LineCollection per kind, so hundreds of thousands stay fast.
    """
    gpu_rank = np.full(max(plan.num_gpus, int(rank_gpu.max()) + 1), -1)
    gpu_rank[rank_gpu] = np.arange(len(rank_gpu))
    shown = min(len(rank_gpu), max_ranks)
    fig, ax = plt.subplots(figsize=(12, max(2.5, 0.25 * shown + 1)))
    for kind, color, offset in ((COMPUTE, "tab:blue", 0.2), (FLOW, "tab:orange", 0.65)):
        sel = np.flatnonzero((plan.kind == kind) & (end_ns >= 0))
        rows = gpu_rank[plan.gpu[sel]]
        keep = (rows >= 0) & (rows < shown)
        sel, rows = sel[keep], rows[keep]
        if sel.size > max_spans:  # keep the longest spans: the picture is the same
            longest = np.sort(np.argsort(-(end_ns[sel] - start_ns[sel]), kind="stable")[:max_spans])
            sel, rows = sel[longest], rows[longest]
        if sel.size:
            y = rows + offset
            segments = np.stack([np.stack([start_ns[sel] / 1e6, y], axis=1),
                                 np.stack([np.maximum(end_ns[sel], start_ns[sel] + 1) / 1e6, y],
                                          axis=1)], axis=1)
            ax.add_collection(LineCollection(list(segments), colors=color, linewidths=4))
    horizon = max(float(end_ns.max()) / 1e6 if end_ns.size else 1.0, 1e-6)
    ax.set_xlim(0, horizon * 1.01)
    ax.set_xlabel("simulated time (ms)")
    ax.set_ylabel("rank")
    ax.set_ylim(shown, 0)
    ax.set_title("per-rank timeline (blue: compute, orange: flows sent)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_breakdown(path: Path, terms_s: dict[str, np.ndarray]) -> None:
    """Stacked bars per rank: compute, exposed communication, bubble (seconds)."""
    fig, ax = plt.subplots(figsize=(max(6, 0.2 * len(next(iter(terms_s.values()))) + 3), 4))
    bottom = None
    for name, values in terms_s.items():
        ranks = np.arange(len(values))
        ax.bar(ranks, values * 1e3, bottom=None if bottom is None else bottom * 1e3, label=name)
        bottom = values if bottom is None else bottom + values
    ax.set_xlabel("rank")
    ax.set_ylabel("time (ms)")
    ax.set_title("iteration-time breakdown per rank")
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_link_heatmap(path: Path, names: list[str], utilization: np.ndarray,
                      max_links: int = 60) -> None:
    """Utilization (0..1) of the busiest link directions as a heat strip."""
    order = np.argsort(-utilization)[:max_links]
    fig, ax = plt.subplots(figsize=(8, max(2.5, 0.18 * len(order) + 1)))
    image = ax.imshow(utilization[order][:, None], aspect="auto", cmap="viridis", vmin=0, vmax=1)
    ax.set_yticks(range(len(order)), [names[i] for i in order], fontsize=6)
    ax.set_xticks([])
    ax.set_title("link utilization over the iteration (busiest directions)")
    fig.colorbar(image, ax=ax, label="utilization")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_series(path: Path, series: dict[str, tuple[np.ndarray, np.ndarray]], ylabel: str,
                title: str) -> None:
    """Line plot of a few named time series (time in ns)."""
    fig, ax = plt.subplots(figsize=(9, 3.5))
    for name, (times, values) in series.items():
        ax.plot(np.asarray(times) / 1e6, values, label=name, linewidth=0.8)
    ax.set_xlabel("simulated time (ms)")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    if 0 < len(series) <= 10:
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
