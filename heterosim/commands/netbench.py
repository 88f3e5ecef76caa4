"""``heterosim netbench SCENARIO.yaml``: congestion-control micro-benchmarks on a small fabric.

Runs the scenario's flows on the packet-level ns-3 network (or the fluid model with
``--fidelity flow``) and writes results.json, flows.csv, ports.csv, rates.csv, queues.csv and PNG
plots to ``--out``. With ``--compare-cc`` (or ``compare_cc:`` in the file) the same flows run once
per congestion control, each into ``OUT/<cc>/``, plus a comparison table (comparison.csv/.png).
Results are written to a temporary folder first, so a failed run leaves nothing half-written.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from heterosim import __version__
from heterosim.config.scenario import ScenarioConfig, load_scenario, parse_cc_option
from heterosim.engine.topology import Topology, build_topology
from heterosim.errors import UserError
from heterosim.report import netbench_plots as plots
from heterosim.report import netbench_report as report
from heterosim.report.staging import staged_output

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

RunFn = Callable[[ScenarioConfig, Topology, str], Mapping[str, Any]]


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "netbench", help="CC micro-scenarios: incast, fairness, PFC (flows on a small fabric)",
        epilog=EXAMPLES, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("scenario", help="scenario YAML file (see workloads/netbench/)")
    parser.add_argument("--out", type=Path, default=None,
                        help="output folder (default: results/netbench/<name>)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override a scenario key, e.g. network.cc=hpcc (repeatable)")
    parser.add_argument("--fidelity", choices=("packet", "flow"), default=None,
                        help="packet: ns-3 RDMA network (default); flow: fluid max-min model")
    parser.add_argument("--compare-cc", default=None, metavar="CC,CC,...",
                        help="run once per congestion control and write a comparison table")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    overrides = list(args.overrides)
    if args.fidelity:
        overrides.append(f"simulation.fidelity={args.fidelity}")
    scenario = load_scenario(args.scenario, overrides)
    report.print_warnings(scenario.warnings)
    compare = parse_cc_option(args.compare_cc) if args.compare_cc else scenario.compare_cc
    if compare and scenario.simulation.fidelity == "flow":
        raise UserError("--compare-cc: the flow (fluid) model has no congestion control, so every "
                        "CC would give the same result; use --fidelity packet")
    out = args.out if args.out is not None else Path("results") / "netbench" / scenario.name
    results = netbench(scenario, out, compare_cc=compare)
    if "compare_cc" in results:
        print(report.comparison_text(results["compare_cc"]))
        unfinished = sum(row["unfinished_flows"] for row in results["compare_cc"])
    else:
        print(report.summary_text(results))
        unfinished = results["summary"]["unfinished_flows"]
    if unfinished:
        print(f"heterosim netbench: warning: {unfinished} flow(s) did not finish before "
              f"simulation.stop; raise it to see their completion times", file=sys.stderr)
    print(f"results in {out}")
    return 0


def simulate(scenario: ScenarioConfig, topology: Topology, fidelity: str) -> Mapping[str, Any]:
    """Run the scenario's flows on the chosen network model and return its raw result dict."""
    flows, sim = scenario.flows, scenario.simulation
    if fidelity == "flow":
        fluid = _engine_module("fluid", "the fluid network model")
        return fluid.run_flows_fluid(topology, scenario.network, flows.src, flows.dst,
                                     flows.size_bytes, flows.start_ns, seed=sim.seed,
                                     stop_ns=sim.stop_ns)
    packet = _engine_module("packet", "the packet-level network (use --fidelity flow)")
    return packet.run_flows(
        topology, scenario.network, flows.src, flows.dst, flows.size_bytes, flows.start_ns,
        flows.priority if flows.explicit_priority else None, stop_ns=sim.stop_ns,
        sample_interval_ns=sim.sample_interval_ns, seed=sim.seed,
    )


def _engine_module(name: str, what: str) -> Any:
    import importlib

    try:
        return importlib.import_module(f"heterosim.engine.{name}")
    except ModuleNotFoundError as exc:
        if exc.name != f"heterosim.engine.{name}":
            raise
        raise UserError(f"{what} is not available in this installation") from None


def netbench(scenario: ScenarioConfig, out: Path, compare_cc: tuple[str, ...] = (),
             simulate_fn: RunFn = simulate) -> dict[str, Any]:
    """Run a scenario (once, or once per CC) and write every output; returns results.json's dict."""
    topology = build_topology(scenario.cluster)
    fidelity = scenario.simulation.fidelity
    with staged_output(out, replace=False) as stage:
        if not compare_cc:
            results, _ = _run_one(scenario, topology, fidelity, stage, simulate_fn)
            return results
        started = time.perf_counter()
        rows = []
        for cc in compare_cc:
            resolved = copy.deepcopy(scenario.resolved)
            resolved["network"] = {**(resolved.get("network") or {}), "cc": cc}
            variant = dataclasses.replace(
                scenario, network=dataclasses.replace(scenario.network, cc=cc), resolved=resolved,
            )
            folder = stage / cc
            folder.mkdir()
            results, _ = _run_one(variant, topology, fidelity, folder, simulate_fn)
            rows.append(report.comparison_row(cc, results))
        summary = {
            "name": scenario.name,
            "compare_cc": rows,
            "runs": {cc: f"{cc}/results.json" for cc in compare_cc},
            "scenario": {"source": scenario.source, "pfc": scenario.network.pfc,
                         "config": scenario.resolved},
            "sim": {"fidelity": fidelity, "wall_s": round(time.perf_counter() - started, 6),
                    "seed": scenario.simulation.seed, "version": __version__},
        }
        keys = list(rows[0])
        report.write_csv(stage / "comparison.csv", keys,
                         ([("" if r[k] is None else r[k]) for k in keys] for r in rows))
        plots.plot_comparison(stage / "comparison.png", rows)
        report.write_json(stage / "results.json", summary)
        return summary


def _run_one(scenario: ScenarioConfig, topology: Topology, fidelity: str, folder: Path,
             simulate_fn: RunFn) -> tuple[dict[str, Any], Mapping[str, Any]]:
    raw = simulate_fn(scenario, topology, fidelity)
    results = report.build_results(scenario, raw, fidelity, topology)
    report.write_tables(folder, results, raw, topology)
    series = raw.get("series") or {}
    labels = [f"{f['id']}: {f['src']}->{f['dst']}" for f in results["flows"]]
    plots.plot_rates(folder / "rates.png", series.get("rate"), labels,
                     report.goodput_series(series.get("rate")))
    ports = raw.get("ports") or {}
    plots.plot_queues(folder / "queues.png", series.get("queue"),
                      report.port_names(raw, topology), ports.get("max_queue_bytes", []))
    plots.plot_fct(folder / "fct.png", results["flows"], results["sim"]["sim_end_s"])
    report.write_json(folder / "results.json", results)
    return results, raw
