"""``heterosim collective`` outputs: results.json (docs/results.md) and busbw_vs_size.png."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from heterosim.results import CollectiveResult
from heterosim.units import format_size

HEADER = (
    f"# {'size':>10} {'count':>12} {'time(us)':>11} {'algbw(GB/s)':>12} {'busbw(GB/s)':>12}"
    f"  algorithm  protocol  channels"
)


def result_line(row: CollectiveResult) -> str:
    """One nccl-tests-style line of the terminal table."""
    return (
        f"  {format_size(row.size_bytes):>10} {row.count:>12} {row.time_s * 1e6:>11.2f} "
        f"{row.algbw_GBps:>12.2f} {row.busbw_GBps:>12.2f}  {row.algorithm:<9}  "
        f"{row.protocol:<8}  {row.channels}" + tcp_line(row)
    )


def tcp_line(row: CollectiveResult) -> str:
    """The TCP summary under a size's line when socket hosts ran at packet fidelity, else ''."""
    if not row.tcp:
        return ""
    tcp = row.tcp
    return (
        f"\n  # tcp: {tcp['connections']} connections, {tcp['streams']} sockets, "
        f"{tcp['retransmits']} retransmits, {tcp['timeouts']} timeouts, "
        f"max cwnd {tcp['max_cwnd_bytes']} B"
    )


def write_results(
    out: Path,
    op: str,
    ranks: list[int],
    fidelity: str,
    rows: list[CollectiveResult],
    granularity: str = "chunk",
) -> None:
    """results.json (one size: its fields at the top level; several: a ``sizes`` list) and the plot."""
    out.mkdir(parents=True, exist_ok=True)
    doc: dict[str, Any] = {
        "op": op,
        "ranks": list(map(int, ranks)),
        "fidelity": fidelity,
        "granularity": granularity,
    }
    if len(rows) == 1:
        doc.update(rows[0].row())
    else:
        doc["sizes"] = [r.row() for r in rows]
    (out / "results.json").write_text(json.dumps(doc, indent=2) + "\n")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot([r.size_bytes for r in rows], [r.busbw_GBps for r in rows], marker="o")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("size (bytes)")
    ax.set_ylabel("bus bandwidth (GB/s)")
    ax.set_title(f"{op}, {len(ranks)} ranks, {fidelity}")
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(out / "busbw_vs_size.png", dpi=100)
    plt.close(fig)
