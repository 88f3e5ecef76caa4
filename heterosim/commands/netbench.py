"""``heterosim netbench SCENARIO.yaml``: congestion-control micro-benchmarks on a small fabric.

Runs the scenario's flows on the packet-level ns-3 network (or the fluid model with
``--fidelity flow``) and writes results.json, flows.csv, ports.csv, rates.csv, queues.csv and PNG
plots to ``--out``. With ``--compare-cc`` (or ``compare_cc:`` in the file) the same flows run once
per congestion control, each into ``OUT/<cc>/``, plus a comparison table (comparison.csv/.png).
Results are written to a temporary folder first, so a failed run leaves nothing half-written.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from heterosim.config.choices import FIDELITIES
from heterosim.config.scenario import load_scenario, parse_cc_option
from heterosim.report import netbench_report as report

EXAMPLES = """\
examples:
  heterosim netbench workloads/netbench/single_flow.yaml
  heterosim netbench workloads/netbench/incast_4to1.yaml --set network.cc=hpcc --out out/hpcc
  heterosim netbench workloads/netbench/incast_4to1.yaml --compare-cc dcqcn,hpcc,timely,dctcp,none
  heterosim netbench workloads/netbench/pfc_off_small_buffer.yaml --set network.buffer=256KiB
  heterosim netbench workloads/netbench/incast_4to1.yaml --fidelity flow   # fluid model, fast

scenario keys: name, cluster, pattern {kind: incast|one-to-one|all-to-all|permutation, senders,
receiver(s), gpus, size, start, stagger, priority} or flows [{src, dst, size, start, priority}],
network {cc, pfc, buffer, mtu, ecmp, attributes}, simulation {stop, sample_interval, seed,
fidelity}, compare_cc [..], fairness_flows [..]. See heterosim/config/scenario.py.
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "netbench",
        help="CC micro-scenarios: incast, fairness, PFC (flows on a small fabric)",
        epilog=EXAMPLES,
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("scenario", help="scenario YAML file (see workloads/netbench/)")
    parser.add_argument(
        "--out", type=Path, default=None, help="output folder (default: results/netbench/<name>)"
    )
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a scenario key, e.g. network.cc=hpcc (repeatable)",
    )
    parser.add_argument(
        "--fidelity",
        choices=FIDELITIES,
        default=None,
        help="packet: ns-3 RDMA network (default); flow: fluid max-min model",
    )
    parser.add_argument(
        "--compare-cc",
        default=None,
        metavar="CC,CC,...",
        help="run once per congestion control and write a comparison table",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from heterosim.simulate import run_netbench

    overrides = list(args.overrides)
    if args.fidelity:
        overrides.append(f"simulation.fidelity={args.fidelity}")
    scenario = load_scenario(args.scenario, overrides)
    report.print_warnings(scenario.warnings)
    compare = parse_cc_option(args.compare_cc) if args.compare_cc else scenario.compare_cc
    out = args.out if args.out is not None else Path("results") / "netbench" / scenario.name
    results = run_netbench(scenario, out, compare_cc=compare, progress=not args.quiet)
    if "compare_cc" in results:
        print(report.comparison_text(results["compare_cc"]))
        unfinished = sum(row["unfinished_flows"] for row in results["compare_cc"])
    else:
        print(report.summary_text(results))
        unfinished = results["summary"]["unfinished_flows"]
    if unfinished:
        print(
            f"heterosim netbench: warning: {unfinished} flow(s) did not finish before "
            f"simulation.stop; raise it to see their completion times",
            file=sys.stderr,
        )
    print(f"results in {out}")
    return 0
