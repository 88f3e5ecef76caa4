"""A scenario's flows on the network alone (``heterosim netbench``): once, or once per CC.

:func:`simulate_flow_set` runs the flows on the packet network or the fluid model, as
``simulation.fidelity`` says; :func:`run_netbench` runs a scenario (or one variant per congestion
control) and writes every output through :mod:`heterosim.report.netbench_report`.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from heterosim import __version__
from heterosim.config.network_model import PACKET
from heterosim.config.scenario import ScenarioConfig
from heterosim.engine.network_model import network_model
from heterosim.engine.topology import Topology, build_topology
from heterosim.errors import UserError
from heterosim.report import netbench_plots as plots
from heterosim.report import netbench_report as report
from heterosim.report.staging import check_output_folder, staged_output
from heterosim.report.task_progress import TaskProgress, to_stderr
from heterosim.results import FlowSetRun

FlowSetFn = Callable[[ScenarioConfig, Topology], FlowSetRun]


def simulate_flow_set(scenario: ScenarioConfig, topology: Topology | None = None) -> FlowSetRun:
    """Run the scenario's flows on the network model ``scenario.simulation.fidelity`` names."""
    topology = topology if topology is not None else build_topology(scenario.cluster)
    fidelity = scenario.simulation.fidelity
    raw = network_model(fidelity).run_flow_set(topology, scenario)
    return FlowSetRun(scenario, topology, fidelity, raw)


def with_cc(scenario: ScenarioConfig, cc: str) -> ScenarioConfig:
    """The scenario with ``network.cc`` set to ``cc`` (also in its resolved configuration)."""
    resolved = copy.deepcopy(scenario.resolved)
    resolved["network"] = {**(resolved.get("network") or {}), "cc": cc}
    return dataclasses.replace(
        scenario, network=dataclasses.replace(scenario.network, cc=cc), resolved=resolved
    )


def run_netbench(
    scenario: ScenarioConfig,
    out: Path,
    compare_cc: tuple[str, ...] = (),
    simulate_fn: FlowSetFn = simulate_flow_set,
    progress: bool = False,
) -> dict[str, Any]:
    """Run a scenario (once, or once per CC into ``out/<cc>/``) and write every output; returns
    results.json's dict. Outputs are staged, so a failed run leaves nothing half-written.
    ``progress``: a line on stderr before the runs and after each one, once the inputs are
    checked (a bad input is one error line, not a header and an error)."""
    model = scenario.simulation.network_model
    if compare_cc and not model.has_congestion_control:
        raise UserError(
            f"--compare-cc: {model.description} has no congestion control, so every "
            f"CC would give the same result; use --fidelity {PACKET.name}"
        )
    check_output_folder(out)
    check_network_attributes(scenario)
    topology = build_topology(scenario.cluster)
    shown = TaskProgress("netbench", max(1, len(compare_cc)), emit=to_stderr if progress else None)
    sim = scenario.simulation
    shown.message(
        f"{scenario.name}: {len(scenario.flows.src)} flows on {scenario.cluster.name}, "
        f"{sim.fidelity} fidelity, until {sim.stop_ns / 1e6:g} ms simulated"
        + (f", once per CC ({', '.join(compare_cc)})" if compare_cc else "")
    )
    with staged_output(out, replace=False) as stage:
        if not compare_cc:
            return _run_one(scenario, topology, stage, simulate_fn)
        started = time.perf_counter()
        rows = []
        events = 0
        for cc in compare_cc:
            folder = stage / cc
            folder.mkdir()
            results = _run_one(with_cc(scenario, cc), topology, folder, simulate_fn)
            rows.append(report.comparison_row(cc, results))
            events += int(results["sim"]["events"])
            shown.done(cc, f"{results['sim']['events']} events", float(results["sim"]["wall_s"]))
        summary = {
            "name": scenario.name,
            "compare_cc": rows,
            "runs": {cc: f"{cc}/results.json" for cc in compare_cc},
            "scenario": {"source": scenario.source, "pfc": scenario.network.pfc, "config": scenario.resolved},
            "sim": {
                "fidelity": scenario.simulation.fidelity,
                "wall_s": round(time.perf_counter() - started, 6),
                "events": events,
                "seed": scenario.simulation.seed,
                "version": __version__,
            },
        }
        keys = list(rows[0])
        report.write_csv(
            stage / "comparison.csv", keys, ([("" if r[k] is None else r[k]) for k in keys] for r in rows)
        )
        plots.plot_comparison(stage / "comparison.png", rows)
        report.write_json(stage / "results.json", summary)
        return summary


def _run_one(
    scenario: ScenarioConfig, topology: Topology, folder: Path, simulate_fn: FlowSetFn
) -> dict[str, Any]:
    run = simulate_fn(scenario, topology)
    raw, fidelity = run.raw, run.fidelity
    results = report.build_results(scenario, raw, fidelity, topology)
    report.write_tables(folder, results, raw, topology)
    series = raw.get("series") or {}
    labels = [f"{f['id']}: {f['src']}->{f['dst']}" for f in results["flows"]]
    plots.plot_rates(
        folder / "rates.png", series.get("rate"), labels, report.goodput_series(series.get("rate"))
    )
    ports = raw.get("ports") or {}
    plots.plot_queues(
        folder / "queues.png",
        series.get("queue"),
        report.port_names(raw, topology),
        ports.get("max_queue_bytes", []),
    )
    plots.plot_fct(folder / "fct.png", results["flows"], results["sim"]["sim_end_s"])
    report.write_json(folder / "results.json", results)
    return results


def check_network_attributes(scenario: ScenarioConfig) -> None:
    """``network.attributes`` names and values checked through ns-3's introspection (at either
    fidelity), as the network models check them, but before any progress line or run."""
    network = scenario.network
    if not network.attributes:
        return
    attributes = _engine_module("attributes", "the ns-3 network models")
    native = _engine_module("native", "the ns-3 network models")
    attributes.check_network_attributes(native.load().ns3, network.attributes, network.source)


def _engine_module(name: str, what: str) -> Any:
    try:
        return importlib.import_module(f"heterosim.engine.{name}")
    except ModuleNotFoundError as exc:
        if exc.name != f"heterosim.engine.{name}":
            raise
        raise UserError(f"{what} is not available in this installation") from None
