"""PNG plots of a run: per-rank timeline grouped by pipeline stage and GPU type, breakdown bars,
link throughput over time against capacity, queue depth per named port. Matplotlib with the Agg
backend (no display needed). Every figure says what it leaves out."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.collections import LineCollection  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from heterosim.plan.execution_plan import COMPUTE, FLOW, ExecutionPlan  # noqa: E402
from heterosim.report.link_series import LinkRates, PortQueues  # noqa: E402

MAX_TIMELINE_ROWS = 256  # beyond this, each group shows evenly spaced ranks and the title says so
MAX_TIME_BINS = 800  # link and queue plots average consecutive samples down to this many columns


def timeline_rows(
    rank_stage: np.ndarray,
    rank_gpu_type: list[str],
    max_rows: int = MAX_TIMELINE_ROWS,
    rank_ids: np.ndarray | None = None,
) -> tuple[np.ndarray, list[tuple[str, int, int]]]:
    """Ranks to draw, top to bottom, grouped by (stage, GPU type), and the groups as
    (label, first row, row count). Groups keep all their ranks when the total fits ``max_rows``;
    otherwise each keeps evenly spaced ranks (its first and last included) in proportion to its size.
    ``rank_ids``: the ranks' names in the labels (a folded run's global ranks; default 0..n-1)."""
    names = np.arange(len(rank_gpu_type)) if rank_ids is None else np.asarray(rank_ids)
    keys = sorted({(int(s), g) for s, g in zip(rank_stage.tolist(), rank_gpu_type)})
    members = [np.flatnonzero((rank_stage == s) & (np.asarray(rank_gpu_type) == g)) for s, g in keys]
    total = sum(m.size for m in members)
    rows: list[int] = []
    groups: list[tuple[str, int, int]] = []
    for (stage, gpu), ranks in zip(keys, members):
        keep = ranks
        if total > max_rows:
            count = max(2, int(round(max_rows * ranks.size / total)))
            picks = np.linspace(0, ranks.size - 1, min(count, ranks.size)).round().astype(int)
            keep = ranks[np.unique(picks)]
        label = f"stage {stage} · {gpu}\nranks {_ranges(np.sort(names[ranks]))}"
        groups.append((label, len(rows), keep.size))
        rows.extend(keep.tolist())
    return np.asarray(rows, dtype=np.int64), groups


def plot_timeline(
    path: Path,
    plan: ExecutionPlan,
    start_ns: np.ndarray,
    end_ns: np.ndarray,
    rank_gpu: np.ndarray,
    rank_stage: np.ndarray,
    rank_gpu_type: list[str],
    width_px: int = 1300,
    rank_ids: np.ndarray | None = None,
) -> None:
    """Gantt chart, one row per rank grouped by (pipeline stage, GPU type): compute in blue on the
    upper half of a row, flows the rank sends in orange on the lower half.

    Every span is drawn: spans of one row and kind closer than a pixel (of ``width_px`` across
    the run) are merged into one segment, so the picture is exact at its resolution. The title
    says how many ranks are shown when not all are. ``rank_ids`` names the ranks in the labels.
    """
    world = len(rank_gpu)
    rows, groups = timeline_rows(np.asarray(rank_stage), list(rank_gpu_type), rank_ids=rank_ids)
    row_of_rank = np.full(world, -1)
    row_of_rank[rows] = np.arange(rows.size)
    gpu_rank = np.full(max(plan.num_gpus, int(rank_gpu.max()) + 1), -1)
    gpu_rank[rank_gpu] = np.arange(world)
    height = min(14.0, max(3.0, 0.16 * rows.size + 1.5))
    fig, ax = plt.subplots(figsize=(13, height))
    line_width = max(0.6, min(5.0, 200.0 / max(rows.size, 1) * height / 10))
    horizon = max(float(end_ns.max()) / 1e6 if end_ns.size else 1.0, 1e-6)
    pixel_ns = max(1, int(horizon * 1e6 / width_px))
    for kind, color, offset in ((COMPUTE, "tab:blue", 0.3), (FLOW, "tab:orange", 0.7)):
        sel = np.flatnonzero((plan.kind == kind) & (end_ns >= 0))
        rank = gpu_rank[plan.gpu[sel]]
        sel, rank = sel[rank >= 0], rank[rank >= 0]
        row = row_of_rank[rank]
        sel, row = sel[row >= 0], row[row >= 0]
        if sel.size:
            row, first, last = merged_segments(
                row, start_ns[sel], np.maximum(end_ns[sel], start_ns[sel] + 1), pixel_ns
            )
            y = row + offset
            segments = np.stack(
                [np.stack([first / 1e6, y], axis=1), np.stack([last / 1e6, y], axis=1)], axis=1
            )
            ax.add_collection(LineCollection(list(segments), colors=color, linewidths=line_width))
    ax.set_xlim(0, horizon * 1.01)
    ax.set_ylim(rows.size, 0)
    shade = ("#f2f2f2", "white")
    ticks, labels = [], []
    for i, (label, top_row, count) in enumerate(groups):
        ax.axhspan(top_row, top_row + count, color=shade[i % 2], zorder=-1)
        if i:
            ax.axhline(top_row, color="0.4", linewidth=0.8)
        ticks.append(top_row + count / 2)
        labels.append(label)
    ax.set_yticks(ticks, labels, fontsize=8 if len(groups) <= 16 else 6)
    ax.set_xlabel("simulated time (ms)")
    shown = (
        "all ranks" if rows.size == world else f"{rows.size} of {world} ranks (evenly spaced in each group)"
    )
    ax.set_title(f"per-rank timeline by pipeline stage and GPU type: {shown}, one row each")
    ax.legend(
        handles=[Patch(color="tab:blue", label="compute"), Patch(color="tab:orange", label="flows sent")],
        loc="upper right",
        fontsize=8,
        framealpha=0.9,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def merged_segments(
    row: np.ndarray, start: np.ndarray, end: np.ndarray, gap: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Union of the intervals [start, end) of each row, with gaps up to ``gap`` closed: (row,
    start, end) of the merged segments, by row then time (vectorised: a running maximum of the
    ends, each row offset past the previous one)."""
    row, start, end = np.asarray(row, np.int64), np.asarray(start, np.int64), np.asarray(end, np.int64)
    order = np.lexsort((start, row))
    row, start, end = row[order], start[order], end[order]
    stride = int(max(end.max(), start.max())) + gap + 1
    shifted_start = start + row * stride
    reach = np.maximum.accumulate(end + row * stride)
    new = np.ones(row.size, dtype=bool)
    new[1:] = shifted_start[1:] > reach[:-1] + gap
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, row.size - 1)
    return row[first], start[first], reach[last] - row[first] * stride


def plot_breakdown(path: Path, terms_s: dict[str, np.ndarray], rank_ids: np.ndarray | None = None) -> None:
    """Stacked bars per rank: compute, exposed communication, bubble (milliseconds). ``rank_ids``:
    the ranks' names on the axis when they are not 0..n-1 (a folded run's global ranks)."""
    n = len(next(iter(terms_s.values())))
    fig, ax = plt.subplots(figsize=(min(16, max(6, 0.12 * n + 3)), 4))
    bottom = np.zeros(n)
    ranks = np.arange(n)
    for name, values in terms_s.items():
        ax.bar(ranks, values * 1e3, bottom=bottom * 1e3, label=name, width=0.9 if n < 64 else 1.0)
        bottom = bottom + values
    ax.set_xlim(-0.5, n - 0.5)
    ax.set_xlabel("rank")
    if rank_ids is not None and not np.array_equal(rank_ids, ranks):
        ticks = np.unique(np.linspace(0, n - 1, min(n, 16)).round().astype(int))
        ax.set_xticks(ticks, [str(int(rank_ids[t])) for t in ticks])
        ax.set_xlabel("rank (global ids of the simulated replica)")
    ax.set_ylabel("time (ms)")
    ax.set_title("iteration-time breakdown per rank")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_link_utilization(path: Path, rates: LinkRates, total_directions: int, lines: int = 4) -> None:
    """Top: utilisation (throughput / capacity) over time of the busiest link directions, one
    named row each (NIC and switch links first, then NVLink / PCIe); bottom: throughput of the
    ``lines`` busiest network directions (host links if there are none) in Gb/s against their
    capacity."""
    heat = np.arange(rates.direction.size)
    network = np.flatnonzero(rates.network)
    order = network if network.size else heat
    edges_ms, rate = _rebin(rates.time_ns, rates.rate_bps)
    util = np.divide(rate, rates.capacity_bps, out=np.zeros_like(rate), where=rates.capacity_bps > 0)
    fig, (top, bottom) = plt.subplots(
        2, 1, figsize=(13, 3.2 + 0.22 * heat.size + 3.2), height_ratios=[0.22 * heat.size + 1.2, 3.0]
    )
    image = top.pcolormesh(
        edges_ms,
        np.arange(heat.size + 1),
        util[:, heat].T * 100,
        cmap="viridis",
        vmin=0,
        vmax=100,
        shading="flat",
    )
    top.set_ylim(heat.size, 0)
    top.set_yticks(
        np.arange(heat.size) + 0.5,
        [f"{rates.names[i]} ({_gbps(rates.capacity_bps[i])})" for i in heat],
        fontsize=7,
    )
    what = "wire bytes, headers included" if rates.bytes_kind == "wire" else "payload bytes"
    parts = [
        f"{count} {name}"
        for count, name in ((network.size, "NIC/switch"), (heat.size - network.size, "NVLink/PCIe"))
        if count
    ]
    top.set_title(
        f"link utilisation over time: the busiest {' and '.join(parts)} of "
        f"{total_directions} sampled link directions ({what})"
    )
    if 0 < network.size < heat.size:
        top.axhline(network.size, color="white", linewidth=1.5)
    fig.colorbar(image, ax=top, label="% of capacity", pad=0.01)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for k, i in enumerate(order[:lines]):
        color = colors[k % len(colors)]
        bottom.step(
            edges_ms[:-1],
            rate[:, i] / 1e9,
            where="post",
            color=color,
            linewidth=0.9,
            label=f"{rates.names[i]}",
        )
        bottom.axhline(rates.capacity_bps[i] / 1e9, color=color, linestyle="--", linewidth=0.8)
    bottom.set_xlim(edges_ms[0], edges_ms[-1])
    top.set_xlim(edges_ms[0], edges_ms[-1])
    bottom.set_ylim(0, float(rates.capacity_bps[order[:lines]].max()) / 1e9 * 1.12)
    bottom.set_xlabel("simulated time (ms)")
    bottom.set_ylabel("throughput (Gb/s)")
    bin_us = (edges_ms[1] - edges_ms[0]) * 1e3 if edges_ms.size > 1 else 0
    kind = "NIC/switch" if network.size else "NVLink/PCIe"
    bottom.set_title(
        f"the {min(lines, order.size)} busiest {kind} directions, mean per {bin_us:.0f} us "
        "(dashed: link capacity)"
    )
    bottom.legend(fontsize=7, loc="upper right", framealpha=0.9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_queues(path: Path, queues: PortQueues, total_ports: int) -> None:
    """Queue depth over time of the ports with the deepest queues, named by the link direction
    whose egress holds them, in KiB or MiB."""
    peak = float(queues.depth_bytes.max())
    unit, scale = ("MiB", 2.0**20) if peak >= 2**20 else ("KiB", 2.0**10)
    fig, ax = plt.subplots(figsize=(13, 4.2))
    order = np.argsort(-queues.depth_bytes.max(axis=0), kind="stable")
    for i in order:
        ax.plot(
            queues.time_ns / 1e6,
            queues.depth_bytes[:, i] / scale,
            linewidth=0.8,
            label=f"{queues.names[i]} (peak {queues.depth_bytes[:, i].max() / scale:.1f} {unit})",
        )
    ax.ticklabel_format(axis="y", style="plain", useOffset=False)
    ax.set_ylim(bottom=0)
    ax.set_xlim(0, queues.time_ns[-1] / 1e6)
    ax.set_xlabel("simulated time (ms)")
    ax.set_ylabel(f"queue depth ({unit})")
    ax.set_title(
        f"egress queue depth of the {len(order)} ports with the deepest queues "
        f"(of {total_ports} sampled ports; port a->b: at a, towards b)"
    )
    ax.legend(fontsize=7, loc="upper right", framealpha=0.9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_series(
    path: Path, series: dict[str, tuple[np.ndarray, np.ndarray]], ylabel: str, title: str
) -> None:
    """Line plot of a few named time series (time in ns)."""
    fig, ax = plt.subplots(figsize=(9, 3.5))
    for name, (times, values) in series.items():
        ax.plot(np.asarray(times) / 1e6, values, label=name, linewidth=0.8)
    ax.ticklabel_format(axis="y", style="plain", useOffset=False)
    ax.set_xlabel("simulated time (ms)")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    if 0 < len(series) <= 10:
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _rebin(bounds_ns: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Time bin edges (ms) and time-weighted means of ``values`` (S, D) over at most
    MAX_TIME_BINS equal groups of consecutive intervals."""
    width = np.diff(bounds_ns).astype(np.float64)
    groups = max(1, int(np.ceil(width.size / MAX_TIME_BINS)))
    if groups == 1:
        return bounds_ns / 1e6, values
    starts = np.arange(0, width.size, groups)
    weighted = np.add.reduceat(values * width[:, None], starts, axis=0)
    span = np.add.reduceat(width, starts)
    edges = np.concatenate([bounds_ns[starts], bounds_ns[-1:]])
    return edges / 1e6, weighted / span[:, None]


def _gbps(bps: float) -> str:
    return f"{bps / 1e9:.0f} Gb/s"


def _ranges(ranks: np.ndarray) -> str:
    """ "0-7, 16-23" for sorted rank indices."""
    if not ranks.size:
        return "-"
    breaks = np.flatnonzero(np.diff(ranks) != 1)
    starts = np.concatenate([[ranks[0]], ranks[breaks + 1]])
    ends = np.concatenate([ranks[breaks], [ranks[-1]]])
    parts = [f"{a}" if a == b else f"{a}-{b}" for a, b in zip(starts.tolist(), ends.tolist())]
    return ", ".join(parts[:4]) + (", ..." if len(parts) > 4 else "")
