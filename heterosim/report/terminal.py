"""What ``heterosim run`` shows on the terminal: progress while simulating, the summary after,
and the options that choose what a run writes and shows."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any


def add_output_options(parser: argparse.ArgumentParser) -> None:
    """``--no-plots``, ``--trace-spans N`` (checked here: a bad value fails before simulating),
    ``--quiet`` and ``--report``."""
    from heterosim.report.perfetto import DEFAULT_MAX_SPANS  # noqa: PLC0415 - numpy on use only

    parser.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    parser.add_argument(
        "--trace-spans",
        type=_span_cap,
        default=DEFAULT_MAX_SPANS,
        metavar="N",
        help=f"most spans in trace.json, the longest kept (default {DEFAULT_MAX_SPANS:,}; "
        "0 = all); spans left out are announced and counted in results.json",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress on the terminal")
    parser.add_argument(
        "--report",
        action="store_true",
        help="also write report.html, one self-contained page of the results (as `heterosim report OUT`)",
    )


def _span_cap(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a number of spans >= 0 (0 = all), got {text!r}")
    return value


class Progress:
    """Prints simulated time, share of the plan done and events/s, at most every 0.5 s."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.started = time.monotonic()
        self.last = 0.0
        self.last_events = 0

    def __call__(self, sim_ns: int, done: int, total: int, events: int = 0) -> None:
        now = time.monotonic()
        if not self.enabled or now - self.last < 0.5:
            return
        rate = (events - self.last_events) / (now - self.last) if self.last else 0.0
        self.last, self.last_events = now, events
        share = 100.0 * done / total if total else 100.0
        end = "\r" if sys.stderr.isatty() else "\n"
        print(
            f"  simulated {sim_ns / 1e6:10.3f} ms | {share:5.1f}% of {total} tasks | "
            f"{rate / 1e6:6.2f} M events/s | {now - self.started:6.1f} s wall",
            end=end,
            file=sys.stderr,
            flush=True,
        )

    def close(self) -> None:
        if self.enabled and self.last and sys.stderr.isatty():
            print(file=sys.stderr)


def run_header(experiment: Any) -> str:
    """What is about to run: the experiment (or its jobs), the cluster and the fidelity."""
    jobs = getattr(experiment, "jobs", None)
    what = f"{len(jobs)} jobs" if jobs else experiment.model.name
    return (
        f"heterosim run: {experiment.name}: {what} on {experiment.cluster.world_size} GPUs "
        f"({experiment.cluster.name}), {experiment.simulation.fidelity} fidelity"
    )


def run_summary(results: dict[str, Any], stopped: str) -> str:
    """The iteration time and its breakdown (a jobs run: when all jobs were done), the faults, the
    network counters and the simulator's cost."""
    sim = results["sim"]
    reason = sim.get("error") or stopped
    net = results["network"]
    if "jobs" in results:
        from heterosim.report.jobs_report import job_summary_lines

        lines = job_summary_lines(results)
        lines += [
            f"PARTIAL         {results['makespan_s'] * 1e3:10.3f} ms simulated ({reason}); not "
            "every job finished"
            if sim["partial"]
            else f"all jobs done   {results['makespan_s'] * 1e3:10.3f} ms"
        ]
    else:
        b = results["breakdown"]
        span = " over the simulated span" if sim["partial"] else ""
        lines = [
            _iteration_line(results, reason),
            f"  compute       {b['compute_s'] * 1e3:10.3f} ms   (mean over ranks{span})",
            f"  exposed comm  {b['exposed_comm_s'] * 1e3:10.3f} ms",
            f"  bubble        {b['bubble_s'] * 1e3:10.3f} ms",
            f"  intra-host    {b['intra_host_comm_s'] * 1e3:10.3f} ms   inter-host "
            f"{b['inter_host_comm_s'] * 1e3:.3f} ms",
        ]
        lost = (results.get("contention") or {}).get("lost_s_mean")
        if lost:
            lines.append(f"  contention    {lost * 1e3:10.3f} ms   of compute, beside communication kernels")
    lines += [f"fault {fault['index']}       {_fault_line(fault)}" for fault in results.get("faults", [])]
    lines += [
        f"network         {net['flows']} flows, {net['bytes'] / 2**30:.3f} GiB, drops {net['drops']}, "
        f"pauses {net['pfc_pause_frames']}, ECN marks {net['ecn_marks']}, CNPs {net['cnps']}"
        + (f", trims {net['trims']}" if "trims" in net else ""),
        f"simulator       {results['sim']['wall_s']:.2f} s wall, {results['sim']['events']} events",
    ]
    folded = results["sim"].get("replicas")
    if folded:
        timed = ", ".join(
            f"{c['op']} {c['size_bytes'] / 2**20:.1f} MiB {c['time_s'] * 1e3:.3f} ms"
            for c in folded["collectives"]
        )
        lines.append(
            f"replicas        folded: 1 of {folded['replicas']} data-parallel replicas simulated "
            f"({folded['ranks_simulated']} ranks); data-parallel collectives timed on the full "
            f"fabric: {timed or 'none'}"
        )
    ff = results["sim"].get("packet_acceleration") or {}
    memo = ff.get("memo")
    if memo:
        lines.append(
            f"memoization     {memo['hits']} of {memo['lookups']} episodes replayed "
            f"({memo['hit_rate']:.1%}), {memo['interrupted']} interrupted, "
            f"{memo['frames_avoided']} frames not simulated"
        )
    if "episodes" in ff:
        fallback = ", ".join(
            f"{reason.replace('_', ' ')} {count}"
            for reason, count in (ff.get("fallback") or {}).items()
            if count
        )
        lines.append(
            f"fast-forward    {ff['episodes']} skips: {ff['time_share']:.1%} of the simulated time, "
            f"{ff['bytes_share']:.1%} of the flow bytes"
            + (f"; checks left to packets: {fallback}" if fallback else "")
        )
    return "\n".join(lines)


def _iteration_line(results: dict[str, Any], reason: str) -> str:
    """The iteration time, or for a partial run what was simulated, marked PARTIAL and never
    extrapolated (no iteration time from a partial makespan)."""
    sim = results["sim"]
    if not sim["partial"]:
        return f"iteration time  {results['iteration_time_s'] * 1e3:10.3f} ms"
    iterations = results.get("iterations", {})
    return (
        f"PARTIAL         {sim.get('simulated_s', 0.0) * 1e3:10.3f} ms simulated, "
        f"{iterations.get('completed', 0)} of {iterations.get('count', 1)} iterations complete, "
        f"{sim.get('tasks_done', 0)} of {sim.get('tasks', 0)} tasks done ({reason}); "
        "no iteration time"
    )


def _fault_line(fault: dict[str, Any]) -> str:
    """What one fault did, in one line."""
    target = fault.get("link") or f"GPU {fault.get('gpu')}"
    if fault["kind"] == "slowdown":
        return (
            f"{target} x{fault['slowdown']:g} slower: {fault['tasks_slowed']} compute tasks, "
            f"+{fault['extra_compute_s'] * 1e3:.3f} ms of compute"
        )
    return (
        f"{target} {fault['kind']} at {fault['at_s'] * 1e3:g} ms: {fault['frames_dropped']} frames "
        f"dropped, {fault['flows_rerouted']} flows rerouted"
    )
