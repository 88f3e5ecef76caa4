"""``heterosim run``: simulate one training iteration of an experiment and write its results."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from heterosim.config.choices import FIDELITIES
from heterosim.config.defaults import default_experiment
from heterosim.config.experiment import ExperimentConfig
from heterosim.config.fidelity_scope import override_warnings
from heterosim.config.jobs import JobsExperiment, load_any_experiment
from heterosim.errors import Interrupted, UserError
from heterosim.plan.budget import check_plan_budget
from heterosim.report.terminal import add_output_options
from heterosim.units import stop_time_ns

EXAMPLES = """\
examples:
  heterosim run                                    # the shipped default (16 GPUs, H100 + A100)
  heterosim run workloads/default.yaml --fidelity flow --out out/default
  heterosim run workloads/simai/gpt3_13b_tp2.yaml --set network.cc=hpcc --set simulation.seed=2
  heterosim run workloads/simai/gpt3_13b_tp2.yaml --fidelity packet --until 50ms
                                                   # the first 50 ms only, reported as partial
  heterosim run --traces traces/ --cluster topologies/two_host_h100.yaml --fidelity flow
                                                   # Chakra ET traces (ours or another tool's)
  heterosim run workloads/examples/two_jobs_h4.yaml --fidelity flow
                                                   # several jobs sharing one fabric (jobs:)
  heterosim run workloads/examples/link_failure_h4.yaml --fidelity flow
                                                   # faults: link down, degraded link, straggler
outputs in --out: results.json, ranks.csv, collectives.csv, flows.csv, links.csv, trace.json
(open in ui.perfetto.dev), timeline.png, breakdown.png, link_utilization.png, queues.png (packet)
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "run",
        help="simulate one training iteration of an experiment",
        epilog=EXAMPLES,
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("experiment", nargs="?", help="experiment YAML (default: the shipped one)")
    parser.add_argument("--fidelity", choices=FIDELITIES, help="network model to use")
    parser.add_argument("--out", default="out/run", help="output folder (default: out/run)")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override an experiment key, e.g. network.cc=hpcc (repeatable)",
    )
    parser.add_argument(
        "--traces",
        metavar="DIR",
        help="run a directory of Chakra ET traces (<prefix>.<rank>.et, optional "
        "comm_group.json) instead of an experiment; needs --cluster",
    )
    parser.add_argument(
        "--cluster", metavar="CLUSTER.yaml", help="with --traces: the cluster (rank i runs on GPU i)"
    )
    parser.add_argument(
        "--db",
        action="append",
        default=[],
        metavar="PROFILE.db",
        help="operation database from `heterosim profile`, used before the shipped"
        " data (repeatable; the first wins)",
    )
    parser.add_argument(
        "--until",
        metavar="TIME",
        help="stop at this simulated time (e.g. 380ms) and report what finished "
        "as a partial iteration: a measured slice of a long packet run",
    )
    add_output_options(parser)  # --no-plots, --trace-spans N, --quiet, --report
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from heterosim.interrupts import sigterm_as_interrupt
    from heterosim.report.html_report import report_when_asked
    from heterosim.report.jobs_report import any_results_dict, write_any_outputs
    from heterosim.report.run_report import interrupted_exit_status, print_warnings
    from heterosim.report.staging import check_output_folder
    from heterosim.report.terminal import Progress, run_header, run_summary
    from heterosim.simulate import run_for_reports

    stop_ns = stop_time_ns(args.until)  # before the experiment loads: a bad value fails at once
    overrides = list(args.overrides)
    if args.fidelity:
        overrides.append(f"simulation.fidelity={args.fidelity}")
    workload = None
    experiment: ExperimentConfig | JobsExperiment
    if args.traces or args.cluster:
        experiment, workload = _trace_run(args, overrides)
    else:
        path = Path(args.experiment) if args.experiment else default_experiment()
        experiment = load_any_experiment(path, overrides)
        check_plan_budget(experiment, stop_ns)  # before anything is printed or built
    out = Path(args.out)
    check_output_folder(out)  # before simulating: a folder that cannot take results fails now
    print_warnings(getattr(experiment, "warnings", ()))
    print_warnings(override_warnings(overrides, experiment.simulation.fidelity))
    progress = Progress(not args.quiet)
    if not args.quiet:
        print(run_header(experiment), file=sys.stderr)
    with sigterm_as_interrupt():
        artifacts = run_for_reports(
            experiment, progress=progress, workload=workload, databases=args.db or None, stop_ns=stop_ns
        )
    progress.close()
    results = any_results_dict(artifacts)
    results["experiment"]["overrides"] = overrides
    results["sim"]["until_ns"] = stop_ns
    write_any_outputs(artifacts, out, results, plots=not args.no_plots, trace_max_spans=args.trace_spans)
    stopped = f"stopped at --until {args.until}" if stop_ns else "stopped early"
    print(run_summary(results, stopped))
    print(f"results in      {out}/")
    report_when_asked(args.report, out)
    status = interrupted_exit_status(results)
    if status:
        raise Interrupted(f"{results['sim']['error']}: partial results in {out}/", status)
    return 0


def _trace_run(args: argparse.Namespace, overrides: list[str]) -> tuple[ExperimentConfig, Any]:
    """``--traces DIR --cluster C.yaml``: the experiment settings and the imported workload."""
    from heterosim.workload.imported import load_trace_workload, trace_experiment

    if args.experiment:
        raise UserError(f"{args.experiment}: give either an experiment file or --traces, not both")
    if not args.traces or not args.cluster:
        raise UserError("--traces DIR and --cluster CLUSTER.yaml go together")
    workload = load_trace_workload(args.traces)
    return trace_experiment(args.traces, args.cluster, workload.world_size, overrides), workload
