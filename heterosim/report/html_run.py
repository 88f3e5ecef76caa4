"""The sections of the HTML report that describe one run's output folder: its key numbers, the
breakdown, the figures the run wrote, the slowest collectives and the busiest links.

Everything is read from the files a run writes (results.json, collectives.csv, links.csv, the
PNGs); the CSVs are streamed, so a 1,024-GPU run's tables cost no more memory than a small one's.
"""

from __future__ import annotations

import csv
import heapq
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from heterosim.report.compare_report import lookup
from heterosim.report.html_page import figure, heading, paragraph, table

# the figures a run writes, in the order the page shows them: file, section title, caption
RUN_FIGURES: tuple[tuple[str, str, str], ...] = (
    ("breakdown.png", "Breakdown", "compute, exposed communication and bubble per rank"),
    ("timeline.png", "Timeline", "each rank's compute and sent flows over the iteration"),
    (
        "link_utilization.png",
        "Link utilization",
        "throughput of the busiest link directions as a share of each link's capacity",
    ),
    ("queues.png", "Queues", "egress queue depth of the ports with the deepest queues (packet fidelity)"),
)
BREAKDOWN_TERMS = (
    ("compute", "breakdown.compute_s"),
    ("exposed communication", "breakdown.exposed_comm_s"),
    ("bubble", "breakdown.bubble_s"),
    ("intra-host communication", "breakdown.intra_host_comm_s"),
    ("inter-host communication", "breakdown.inter_host_comm_s"),
)
COUNTERS = (
    ("flows", "network.flows"),
    ("drops", "network.drops"),
    ("retransmits", "network.retransmits"),
    ("PFC pause frames", "network.pfc_pause_frames"),
    ("ECN marks", "network.ecn_marks"),
    ("CNPs", "network.cnps"),
    ("simulator events", "sim.events"),
)
SLOWEST_COLLECTIVES = 10
BUSIEST_LINKS = 8


def ms(seconds: Any) -> str:
    """Seconds as milliseconds with three decimals; '-' when missing."""
    return f"{seconds * 1e3:.3f}" if isinstance(seconds, (int, float)) else "-"


def count(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) else ("-" if value is None else str(value))


def number(value: Any, digits: int = 4) -> str:
    """``digits`` significant digits; numbers of more digits than that whole, with separators."""
    if not isinstance(value, (int, float)):
        return "-"
    return f"{value:,.0f}" if abs(value) >= 10**digits else f"{value:.{digits}g}"


def key_numbers(results: dict[str, Any]) -> list[str]:
    """The headline table: iteration time, throughput, network counters and the simulator's cost."""
    sim = results.get("sim", {})
    partial = bool(sim.get("partial"))
    rows: list[tuple[str, str]] = []
    if partial:
        rows.append(("PARTIAL: simulated (ms)", ms(sim.get("simulated_s"))))
    else:
        rows.append(("iteration time (ms)", ms(results.get("iteration_time_s"))))
    if "makespan_s" in results:
        rows.append(("makespan, every job (ms)", ms(results["makespan_s"])))
    rows.append(("tokens/s", number(lookup(results, "throughput.tokens_per_s"))))
    rows.append(("TFLOPS per GPU", number(lookup(results, "throughput.tflops_per_gpu"))))
    size = lookup(results, "network.bytes")
    rows.append(("network bytes (GiB)", f"{size / 2**30:.3f}" if isinstance(size, int) else "-"))
    rows.extend((label, count(lookup(results, key))) for label, key in COUNTERS)
    rows.append(("simulator wall time (s)", number(sim.get("wall_s"))))
    shown = [row for row in rows if row[1] != "-"]
    blocks = [heading(2, "Key numbers", "key-numbers"), table(("quantity", "value"), shown, numeric=(1,))]
    if partial:
        blocks.append(paragraph(f"stopped early: {sim.get('error') or 'partial run'}", "warning"))
    for warning in results.get("warnings") or ():
        blocks.append(paragraph(f"warning: {warning}", "warning"))
    return blocks


def breakdown_table(results: dict[str, Any]) -> str:
    """Each term of the breakdown in ms and as a share of the iteration time."""
    total = results.get("iteration_time_s")
    rows = []
    for label, key in BREAKDOWN_TERMS:
        value = lookup(results, key)
        if not isinstance(value, (int, float)):
            continue
        share = f"{100 * value / total:.1f} %" if isinstance(total, (int, float)) and total else "-"
        rows.append((label, ms(value), share))
    if not rows:
        return ""
    note = lookup(results, "breakdown.definition") or ""
    return table(("term", "ms", "of the iteration"), rows, numeric=(1, 2)) + (paragraph(note) if note else "")


def jobs_table(results: dict[str, Any]) -> str:
    """One row per job of a several-jobs run ('' for a run of one job)."""
    jobs = results.get("jobs") or []
    rows = [
        (
            job.get("name", i),
            job.get("gpus", "-"),
            ms(job.get("start_s")),
            ms(job.get("iteration_time_s")),
            ms(lookup(job, "breakdown.compute_s")),
            ms(lookup(job, "breakdown.exposed_comm_s")),
            ms(lookup(job, "breakdown.bubble_s")),
        )
        for i, job in enumerate(jobs)
    ]
    if not rows:
        return ""
    header = ("job", "GPUs", "start (ms)", "iteration (ms)", "compute", "exposed comm", "bubble")
    return heading(2, "Jobs", "jobs") + table(header, rows, numeric=(2, 3, 4, 5, 6))


def run_figure(folder: Path, name: str, label: str = "") -> str:
    """The figure ``name`` of a run folder with its caption, or '' when the run did not write it."""
    path = folder / name
    caption = next((c for n, _, c in RUN_FIGURES if n == name), "")
    return figure(path, caption, label) if path.is_file() else ""


def other_figures(folder: Path) -> list[Path]:
    """PNGs in the folder beside the four standard run figures (netbench's, a sweep's)."""
    standard = {name for name, _, _ in RUN_FIGURES}
    return sorted(p for p in folder.glob("*.png") if p.name not in standard and p.is_file())


def _csv_rows(path: Path) -> Iterator[dict[str, str]]:
    if not path.is_file():
        return
    with path.open(newline="") as handle:
        yield from csv.DictReader(handle)


def _float(text: str | None) -> float:
    try:
        return float(text) if text else 0.0
    except ValueError:
        return 0.0


def slowest_collectives(folder: Path, limit: int = SLOWEST_COLLECTIVES) -> str:
    """The ``limit`` longest collectives of collectives.csv ('' when the run wrote none)."""
    top = heapq.nlargest(limit, _csv_rows(folder / "collectives.csv"), key=lambda r: _float(r.get("time_s")))
    if not top:
        return ""
    rows = [
        (
            r.get("id", ""),
            r.get("type", ""),
            r.get("ranks", ""),
            f"{_float(r.get('size_bytes')) / 2**20:.2f}",
            f"{r.get('algorithm', '')}/{r.get('protocol', '')}",
            ms(_float(r.get("start_s"))),
            ms(_float(r.get("time_s"))),
            f"{_float(r.get('busbw_GBps')):.1f}",
        )
        for r in top
    ]
    header = ("id", "type", "ranks", "MiB", "algorithm/protocol", "start (ms)", "time (ms)", "busbw (GB/s)")
    return table(header, rows, numeric=(2, 3, 5, 6, 7))


def busiest_links(folder: Path, limit: int = BUSIEST_LINKS) -> str:
    """The ``limit`` link directions of links.csv with the highest utilization."""
    top = heapq.nlargest(limit, _csv_rows(folder / "links.csv"), key=lambda r: _float(r.get("utilization")))
    rows = [
        (
            r.get("name", ""),
            r.get("kind", ""),
            f"{100 * _float(r.get('utilization')):.1f} %",
            f"{_float(r.get('bytes')) / 2**20:.1f}",
            f"{_float(r.get('max_queue_bytes')) / 2**10:.1f}",
            count(int(_float(r.get("ecn_marks")))),
            f"{_float(r.get('paused_ns')) / 1e3:.1f}",
        )
        for r in top
        if _float(r.get("utilization")) > 0
    ]
    if not rows:
        return ""
    header = ("link direction", "kind", "utilization", "MiB", "max queue (KiB)", "ECN marks", "paused (us)")
    return table(header, rows, numeric=(2, 3, 4, 5, 6))


def run_sections(folder: Path, results: dict[str, Any]) -> list[str]:
    """Every section of a run's page, in order."""
    blocks = key_numbers(results)
    blocks.append(jobs_table(results))
    breakdown = breakdown_table(results)
    for name, title, _ in RUN_FIGURES:
        shown = run_figure(folder, name)
        extra = breakdown if name == "breakdown.png" else ""
        if shown or extra:
            blocks += [heading(2, title, name.removesuffix(".png")), extra, shown]
    for path in other_figures(folder):
        blocks += [heading(2, path.stem.replace("_", " "), path.stem), figure(path, "")]
    collectives = slowest_collectives(folder)
    if collectives:
        blocks += [heading(2, "Slowest collectives", "slowest-collectives"), collectives]
    links = busiest_links(folder)
    if links:
        blocks += [heading(2, "Busiest links", "busiest-links"), links]
    missing = [name for name, _, _ in RUN_FIGURES if not (folder / name).is_file()]
    if missing:
        blocks.append(paragraph(f"not written by this run: {', '.join(missing)}"))
    return [block for block in blocks if block]
