"""``heterosim run``: simulate one training iteration of an experiment and write its results."""

from __future__ import annotations

import argparse
import signal
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path

from heterosim.config.experiment import load_experiment
from heterosim.errors import UserError
from heterosim.report.perfetto import DEFAULT_MAX_SPANS
from heterosim.units import parse_time_ns

EXAMPLES = """\
examples:
  heterosim run                                    # the shipped default (16 GPUs, H100 + A100)
  heterosim run workloads/default.yaml --fidelity flow --out out/default
  heterosim run workloads/simai/gpt3_13b.yaml --set network.cc=hpcc --set simulation.seed=2
  heterosim run workloads/simai/gpt3_13b.yaml --fidelity packet --until 50ms
                                                   # the first 50 ms only, reported as partial
  heterosim run --traces traces/ --cluster topologies/two_host_h100.yaml --fidelity flow
                                                   # Chakra ET traces (ours or another tool's)
  heterosim run workloads/simai/gpt3_175b_tp8_pp8.yaml --fidelity flow --trace-spans 0
                                                   # every span in trace.json, however many
outputs in --out: results.json, ranks.csv, collectives.csv, flows.csv, links.csv, trace.json
(open in ui.perfetto.dev), timeline.png, breakdown.png, link_utilization.png, queues.png (packet)
"""


def default_experiment() -> Path:
    """workloads/default.yaml of the checkout (or the copy installed with the package)."""
    here = Path(__file__).resolve().parents[2] / "workloads" / "default.yaml"
    if here.exists():
        return here
    return Path(str(resources.files("heterosim").joinpath("data/default.yaml")))


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "run", help="simulate one training iteration of an experiment", epilog=EXAMPLES,
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("experiment", nargs="?", help="experiment YAML (default: the shipped one)")
    parser.add_argument("--fidelity", choices=("packet", "flow"), help="network model to use")
    parser.add_argument("--out", default="out/run", help="output folder (default: out/run)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override an experiment key, e.g. network.cc=hpcc (repeatable)")
    parser.add_argument("--traces", metavar="DIR",
                        help="run a directory of Chakra ET traces (<prefix>.<rank>.et, optional "
                             "comm_group.json) instead of an experiment; needs --cluster")
    parser.add_argument("--cluster", metavar="CLUSTER.yaml",
                        help="with --traces: the cluster (rank i runs on GPU i)")
    parser.add_argument("--db", action="append", default=[], metavar="PROFILE.db",
                        help="operation database from `heterosim profile`, used before the shipped"
                             " data (repeatable; the first wins)")
    parser.add_argument("--until", metavar="TIME",
                        help="stop at this simulated time (e.g. 380ms) and report what finished "
                             "as a partial iteration: a measured slice of a long packet run")
    parser.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    parser.add_argument("--trace-spans", type=int, default=DEFAULT_MAX_SPANS, metavar="N",
                        help=f"most spans in trace.json, the longest kept (default {DEFAULT_MAX_SPANS:,}; "
                             "0 = all); spans left out are announced and counted in results.json")
    parser.add_argument("--quiet", action="store_true", help="no progress on the terminal")
    parser.set_defaults(func=run)


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
        print(f"  simulated {sim_ns / 1e6:10.3f} ms | {share:5.1f}% of {total} tasks | "
              f"{rate / 1e6:6.2f} M events/s | {now - self.started:6.1f} s wall", end=end,
              file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.enabled and self.last and sys.stderr.isatty():
            print(file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    from heterosim.report.run_report import results_dict, write_run_outputs
    from heterosim.report.staging import check_output_folder
    from heterosim.simulate import run_experiment

    stop_ns = _until_ns(args.until)  # before the experiment loads: a bad value fails at once
    if args.trace_spans < 0:
        raise UserError(f"--trace-spans: expected a number of spans >= 0 (0 = all), got {args.trace_spans}")
    overrides = list(args.overrides)
    if args.fidelity:
        overrides.append(f"simulation.fidelity={args.fidelity}")
    workload = None
    if args.traces or args.cluster:
        experiment, workload = _trace_run(args, overrides)
    else:
        path = Path(args.experiment) if args.experiment else default_experiment()
        experiment = load_experiment(path, overrides)
    out = Path(args.out)
    check_output_folder(out)  # before simulating: a folder that cannot take results fails now
    progress = Progress(not args.quiet)
    if not args.quiet:
        print(f"heterosim run: {experiment.name}: {experiment.model.name} on "
              f"{experiment.cluster.world_size} GPUs ({experiment.cluster.name}), "
              f"{experiment.simulation.fidelity} fidelity", file=sys.stderr)
    with _sigterm_stops_the_run():
        artifacts = run_experiment(experiment, progress=progress, workload=workload,
                                   databases=args.db or None, stop_ns=stop_ns)
    progress.close()
    results = results_dict(artifacts)
    results["experiment"]["overrides"] = overrides
    results["sim"]["until_ns"] = stop_ns
    write_run_outputs(artifacts, out, results, plots=not args.no_plots, trace_max_spans=args.trace_spans)
    b = results["breakdown"]
    stopped = f"stopped at --until {args.until}" if stop_ns else "stopped early"
    partial = f" (PARTIAL: {results['sim']['error'] or stopped})" if results["sim"]["partial"] else ""
    print(f"iteration time  {results['iteration_time_s'] * 1e3:10.3f} ms{partial}")
    print(f"  compute       {b['compute_s'] * 1e3:10.3f} ms   (mean over ranks)")
    print(f"  exposed comm  {b['exposed_comm_s'] * 1e3:10.3f} ms")
    print(f"  bubble        {b['bubble_s'] * 1e3:10.3f} ms")
    print(f"  intra-host    {b['intra_host_comm_s'] * 1e3:10.3f} ms   inter-host "
          f"{b['inter_host_comm_s'] * 1e3:.3f} ms")
    net = results["network"]
    print(f"network         {net['flows']} flows, {net['bytes'] / 2**30:.3f} GiB, drops {net['drops']}, "
          f"pauses {net['pfc_pause_frames']}, ECN marks {net['ecn_marks']}, CNPs {net['cnps']}")
    print(f"simulator       {results['sim']['wall_s']:.2f} s wall, {results['sim']['events']} events")
    print(f"results in      {out}/")
    return 0


@contextmanager
def _sigterm_stops_the_run() -> Iterator[None]:
    """SIGTERM (kill, a batch scheduler's time limit) ends the simulation as Ctrl-C does: the
    part simulated so far is written as a partial iteration. Background jobs ignore Ctrl-C, so
    this is how a long run started with ``&`` or ``nohup`` is stopped with its results."""
    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt("terminated by SIGTERM")

    try:
        previous = signal.signal(signal.SIGTERM, interrupt)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _until_ns(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        stop_ns = parse_time_ns(text)
    except ValueError as exc:
        raise UserError(f"--until {text}: {exc}") from None
    if stop_ns <= 0:
        raise UserError(f"--until {text}: expected a simulated time > 0")
    return stop_ns


def _trace_run(args: argparse.Namespace, overrides: list[str]):
    """``--traces DIR --cluster C.yaml``: the experiment settings and the imported workload."""
    from heterosim.workload.imported import load_trace_workload, trace_experiment

    if args.experiment:
        raise UserError(f"{args.experiment}: give either an experiment file or --traces, not both")
    if not args.traces or not args.cluster:
        raise UserError("--traces DIR and --cluster CLUSTER.yaml go together")
    workload = load_trace_workload(args.traces)
    return trace_experiment(args.traces, args.cluster, workload.world_size, overrides), workload
