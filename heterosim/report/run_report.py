"""What ``heterosim run`` writes: results.json, CSVs, the Perfetto trace and PNG plots.

All files go to a temporary folder beside ``out_dir`` and are moved into place at the end, so an
error never leaves half-written results. results.json holds at least the keys of the docs/results.md
contract; numbers are plain floats and ints (seconds, bytes, counts), so the same experiment and
seed give byte-identical files apart from ``sim.wall_s`` and the ``*_wall_s`` timings.
"""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from heterosim import __version__
from heterosim.config.experiment import ExperimentConfig
from heterosim.engine.executor import EngineResult
from heterosim.engine.faults import fault_impact, fault_records
from heterosim.engine.flow_table import FlowTable
from heterosim.engine.topology import LINK_KIND_NAMES, Topology
from heterosim.plan.collectives.common import bus_factor
from heterosim.plan.execution_plan import FLOW
from heterosim.plan.iterations import iteration_end_times
from heterosim.report.breakdown import RankBreakdown, rank_breakdown
from heterosim.report.link_series import LinkRates, link_rates, port_queues
from heterosim.report.numeric_csv import write_numeric_csv_parts
from heterosim.report.perfetto import DEFAULT_MAX_SPANS, fault_events, write_perfetto_trace
from heterosim.report.plots import plot_breakdown, plot_link_utilization, plot_queues, plot_timeline
from heterosim.report.staging import staged_output
from heterosim.report.tcp_tables import write_tcp_tables
from heterosim.report.trims import trim_counters
from heterosim.results import JobsArtifacts, RunArtifacts
from heterosim.workload.trace import COLLECTIVE_NAMES

NS = 1e-9
FLOW_ROWS = 1 << 16  # flows.csv rows built at a time (about 12 MB of columns)
# The columns of each CSV a run writes, in order (docs/results.md lists them)
RANK_COLUMNS = (
    *("rank", "gpu", "host", "stage", "dp_replica", "busy_s", "compute_s", "comm_s"),
    *("exposed_comm_s", "bubble_s", "intra_host_comm_s", "inter_host_comm_s"),
)
COLLECTIVE_COLUMNS = (
    *("id", "type", "group", "ranks", "size_bytes", "algorithm", "protocol", "channels"),
    *("start_s", "end_s", "time_s", "busbw_GBps"),
)
FLOW_COLUMNS = (
    *("task", "src_gpu", "dst_gpu", "bytes", "start_s", "end_s", "fct_s", "retransmits"),
    *("collective", "connection", "out_of_order", "max_reorder_depth"),
)


def _plan_stages(exp: ExperimentConfig, counts: np.ndarray) -> dict[str, Any]:
    """``stages``: an explicit plan as run, every replica with its micro-batch count."""
    plan = exp.parallel.plan
    if plan is None:
        return {}
    stages = plan.as_dict()
    for stage in stages:
        for j, replica in enumerate(stage["replicas"]):
            replica["micro_batches"] = int(counts[j])
    return {"stages": stages}


def results_dict(run: RunArtifacts) -> dict[str, Any]:
    """The results.json content of a finished (or partial) run."""
    exp, engine, plan = run.experiment, run.engine, run.tables.plan
    iterations = exp.simulation.iterations
    makespan_ns = int(engine.makespan_ns)
    partial = bool(engine.partial)
    ends = _iteration_ends(run, iterations)
    completed = _completed_iterations(run, iterations) if partial else iterations
    # A partial run reports what it simulated and nothing extrapolated from it: no iteration
    # time (the span simulated is not an iteration), no throughput; the breakdown covers the
    # simulated span, and only iterations that finished have a time.
    iteration_s = None if partial else makespan_ns / iterations * NS
    bd = rank_breakdown(
        plan, engine.task_start_ns, engine.task_end_ns, run.rank_gpu, exp.cluster.gpu_host, makespan_ns
    )
    bd = bd if partial else _per_iteration(bd, iterations)
    finished_ends = [e for e in ends[:completed] if e >= 0]
    out = {
        "iteration_time_s": iteration_s,
        "iterations": {
            "count": iterations,
            "completed": completed,
            "end_s": [e * NS for e in finished_ends],
            "time_s": [(b - a) * NS for a, b in zip([0, *finished_ends[:-1]], finished_ends)],
        },
        "breakdown": _breakdown_means(bd, partial),
        "throughput": _throughput(run, iteration_s),
        "ranks": _rank_rows(run, bd, 1 if partial else iterations),
        "network": _network_counters(run),
        "collectives": _collective_summary(run),
        "compute_provenance": run.compute_provenance,
        "compute_layers": list(getattr(run, "compute_layers", [])),
        "partition": {
            "mode": run.workload.partition.mode,
            "stage_layers": [[r.start, r.stop - 1] for r in run.workload.partition.chunk_layers],
            "replica_micro_batches": list(run.workload.partition.replica_micro_batches),
            "memory_warnings": list(getattr(run.workload.partition, "memory_warnings", ())),
            **_plan_stages(exp, run.workload.partition.replica_micro_batches),
        },
        "sim": _sim_section(run, partial),
        "experiment": {"name": exp.name, "source": exp.source, "resolved": exp.resolved},
        "warnings": [*getattr(exp, "warnings", ()), *getattr(run.workload.partition, "memory_warnings", ())],
    }
    out["contention"] = _contention_summary(engine, run.rank_gpu, 1 if partial else iterations)
    faults = getattr(run, "faults", None)
    if faults is not None:
        out["faults"] = fault_records(
            faults,
            engine.fault_counts,
            engine.fidelity,
            plan,
            engine.task_start_ns,
            engine.task_end_ns,
            makespan_ns,
            engine.links,
        )
    baseline = getattr(run, "baseline", None)
    if baseline is not None:
        out["fault_impact"] = fault_impact(engine, baseline, run.tables.collectives, COLLECTIVE_NAMES)
    return out


def _rank_rows(run: RunArtifacts, bd: RankBreakdown, per: int) -> list[dict[str, Any]]:
    """One ranks.csv / results.json row per rank; compute lost to contention divided by ``per``
    (the iterations, or 1 for a partial run)."""
    cluster, engine = run.experiment.cluster, run.engine
    ids = _global_ranks(run)
    ranks = []
    for r in range(len(run.rank_gpu)):
        gpu = int(run.rank_gpu[r])
        row: dict[str, Any] = {
            "rank": int(ids[r]),
            "gpu": cluster.gpu_type[gpu],
            "gpu_index": gpu,
            "host": int(cluster.gpu_host[gpu]),
            "stage": int(run.workload.layout.pp_index(r)),
            "dp_replica": int(run.workload.layout.dp_index(r)),
            "busy_s": bd.busy_ns[r] * NS,
            "compute_s": bd.compute_ns[r] * NS,
            "comm_s": bd.comm_ns[r] * NS,
            "exposed_comm_s": bd.exposed_comm_ns[r] * NS,
            "bubble_s": bd.bubble_ns[r] * NS,
            "intra_host_comm_s": bd.intra_host_ns[r] * NS,
            "inter_host_comm_s": bd.inter_host_ns[r] * NS,
        }
        if getattr(engine, "contention", None):
            row["contention_s"] = float(engine.contention["extra_ns"][gpu]) * NS / per
        tp = run.workload.layout.tp_degree(r)
        if tp is not None:  # traces read from files may not say
            row["tp"] = int(tp)
        ranks.append(row)
    return ranks


def _global_ranks(run: RunArtifacts) -> np.ndarray:
    """Each simulated rank's id in the job: under ``simulation.replicas: fold`` the kept
    replica's ranks in the full job (heterosim/plan/fold.py FoldedWorkload), else 0..n-1."""
    ids = getattr(run.workload, "global_ranks", None)
    return np.arange(len(run.rank_gpu)) if ids is None else np.asarray(ids, np.int64)


def _breakdown_means(bd: RankBreakdown, partial: bool) -> dict[str, Any]:
    return {
        "compute_s": float(bd.compute_ns.mean() * NS),
        "exposed_comm_s": float(bd.exposed_comm_ns.mean() * NS),
        "bubble_s": float(bd.bubble_ns.mean() * NS),
        "intra_host_comm_s": float(bd.intra_host_ns.mean() * NS),
        "inter_host_comm_s": float(bd.inter_host_ns.mean() * NS),
        "definition": (
            "mean over ranks over the simulated span (partial run: not per iteration)"
            if partial
            else "mean over ranks; compute_s + exposed_comm_s + bubble_s = iteration_time_s"
        ),
    }


def _throughput(run: RunArtifacts, iteration_s: float | None) -> dict[str, Any]:
    training = run.experiment.training
    tokens = training.global_batch * training.seq_len
    total_flops = float(
        sum(float(np.sum(t.templates.flops[t.template], dtype=np.float64)) for t in run.traces)
    )
    world = len(run.rank_gpu)
    return {
        "tokens_per_s": tokens / iteration_s if iteration_s else None,
        "tflops_per_gpu": total_flops / iteration_s / world / 1e12 if iteration_s else None,
        "flop_convention": "all compute ops of the traces (causal attention, recompute included)",
    }


def _network_counters(run: RunArtifacts) -> dict[str, Any]:
    plan, engine = run.tables.plan, run.engine
    flows = plan.kind == FLOW
    counters: dict[str, Any] = {
        "flows": int(flows.sum()),
        "bytes": int(np.sum(plan.bytes, where=flows, dtype=np.int64)),  # no copy of the flows'
        "drops": 0,
        "retransmits": 0,
        "pfc_pause_frames": 0,
        "ecn_marks": 0,
        "cnps": 0,
    }
    counters.update({k: int(v) for k, v in engine.network.items() if k in counters})
    # network.trimming: packets cut to their header at switches, in all and per switch
    counters.update(trim_counters(engine.network, engine.links, run.topology))
    if getattr(engine, "tcp", None):
        counters["tcp"] = dict(engine.tcp["summary"])  # socket hosts: TCP congestion control
    return counters


def _collective_summary(run: RunArtifacts) -> dict[str, Any]:
    colls = run.tables.collectives
    by_algorithm: dict[str, int] = {}
    for a in colls.get("algorithm", []):
        name = run.tables.algorithms[int(a)]
        by_algorithm[name] = by_algorithm.get(name, 0) + 1
    return {
        "instances": int(len(colls.get("id", []))),
        "by_algorithm": by_algorithm,
        "by_type": collective_times(colls, run.engine),
        "p2p_bytes": int(run.tables.p2p_bytes),
        "granularity": run.experiment.simulation.collective_granularity,
    }


def _sim_section(run: RunArtifacts, partial: bool) -> dict[str, Any]:
    engine, exp = run.engine, run.experiment
    return {
        "fidelity": engine.fidelity,
        "wall_s": engine.wall_s,
        "events": int(engine.events),
        "build_s": float(getattr(engine, "build_s", 0.0)),
        "version": __version__,
        "seed": exp.simulation.seed,
        "partial": partial,
        "error": engine.error,
        "simulated_s": _simulated_ns(engine) * NS,
        "tasks_done": int(np.count_nonzero(engine.task_end_ns >= 0)),
        "tasks": int(len(run.tables.plan)),
        "stage_wall_s": run.stage_wall_s,
        **({"packet_acceleration": engine.fast_forward} if engine.fast_forward else {}),
        **({"replicas": run.replicas} if getattr(run, "replicas", None) else {}),
    }


def collective_times(colls: dict[str, np.ndarray], engine: EngineResult) -> dict[str, dict[str, Any]]:
    """Per collective type: instances, bytes (the instances' sizes) and the mean and longest
    instance time (start marker to end marker) of the instances that ran."""
    if not len(colls.get("id", [])):
        return {}
    start = engine.task_start_ns[colls["start_task"]]
    end = engine.task_end_ns[colls["end_task"]]
    ran = (start >= 0) & (end >= start)
    out: dict[str, dict[str, Any]] = {}
    for ctype in np.unique(colls["comm_type"]).tolist():
        mine = colls["comm_type"] == ctype
        done = (end - start)[mine & ran]
        out[str(COLLECTIVE_NAMES.get(int(ctype), ctype))] = {
            "count": int(mine.sum()),
            "bytes": int(colls["size_bytes"][mine].sum()),
            "mean_time_s": float(done.mean() * NS) if done.size else None,
            "max_time_s": float(done.max() * NS) if done.size else None,
        }
    return out


def _contention_summary(engine: EngineResult, rank_gpu: np.ndarray, iterations: int) -> dict[str, Any]:
    """Compute time lost to communication kernels on the same GPU (ranks[].contention_s holds
    each rank's): mean and max over ranks per iteration, and compute tasks slowed."""
    accounts = getattr(engine, "contention", None) or {}
    if not accounts:
        return {"enabled": False}
    lost = accounts["extra_ns"][np.asarray(rank_gpu, np.int64)] * NS / iterations
    return {
        "enabled": True,
        "lost_s_mean": float(lost.mean()) if lost.size else 0.0,
        "lost_s_max": float(lost.max()) if lost.size else 0.0,
        "tasks_slowed": int(accounts["tasks_slowed"].sum()),
        "model": "heterosim.plan.compute.contention (compute beside NCCL kernels on one GPU)",
    }


def _iteration_ends(run: RunArtifacts | JobsArtifacts, iterations: int) -> list[int]:
    task_iteration = run.tables.task_iteration
    if task_iteration is None or iterations == 1:
        return [int(run.engine.makespan_ns)]
    return [int(x) for x in iteration_end_times(run.engine.task_end_ns, task_iteration, iterations)]


def print_warnings(warnings: Any) -> None:
    """One ``heterosim: warning:`` line on stderr per warning."""
    import sys

    for warning in warnings:
        print(f"heterosim: warning: {warning}", file=sys.stderr)


def _completed_iterations(run: RunArtifacts | JobsArtifacts, iterations: int) -> int:
    """How many leading iterations finished every task (a partial run stops mid-iteration)."""
    end = run.engine.task_end_ns
    task_iteration = run.tables.task_iteration
    if task_iteration is None or iterations == 1:
        return int(bool(len(end)) and bool(np.all(end >= 0)))
    unfinished = np.bincount(np.asarray(task_iteration)[end < 0], minlength=iterations)
    done = 0
    while done < iterations and unfinished[done] == 0:
        done += 1
    return done


def _simulated_ns(engine: EngineResult) -> int:
    """Simulated time covered: the last task end, or where a stopped run stopped."""
    ends = engine.task_end_ns
    last = int(ends.max()) if len(ends) else 0
    return max(int(engine.makespan_ns), last)


def interrupted_exit_status(results: dict[str, Any]) -> int:
    """130 (Ctrl-C) or 143 (SIGTERM) for a run a signal stopped, else 0 (finished, or stopped
    where --until asked)."""
    from heterosim.errors import EXIT_INTERRUPTED, EXIT_TERMINATED

    error = str(results.get("sim", {}).get("error") or "")
    if "SIGTERM" in error:
        return EXIT_TERMINATED
    if "Ctrl-C" in error or "interrupted" in error:
        return EXIT_INTERRUPTED
    return 0


def _per_iteration(bd: RankBreakdown, iterations: int) -> RankBreakdown:
    """Whole-run terms divided by the number of iterations (means per iteration)."""
    if iterations == 1:
        return bd
    return RankBreakdown(**{name: (getattr(bd, name) / iterations) for name in bd.__dataclass_fields__})


def _write_csv(path: Path, header: list[str], rows) -> None:
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)


def _label_fn(run: RunArtifacts | JobsArtifacts):
    plan, traces = run.tables.plan, run.traces
    colls = run.tables.collectives

    def labels(tasks: np.ndarray) -> list[str]:
        """Op label for a trace node, collective type for a collective's flow, else "p2p"."""
        tasks = np.asarray(tasks, dtype=np.int64)
        rank, node, coll = plan.rank[tasks], plan.node[tasks], plan.collective[tasks]
        out = np.full(tasks.size, "p2p", dtype=object)
        op = (rank >= 0) & (node >= 0)
        by_rank = np.flatnonzero(op)
        by_rank = by_rank[np.argsort(rank[by_rank], kind="stable")]
        ranks, first = np.unique(rank[by_rank], return_index=True)
        for r, rows in zip(ranks.tolist(), np.split(by_rank, first[1:])):
            templates = traces[r].templates
            names = np.asarray(templates.label_names, dtype=object)
            out[rows] = names[templates.label[traces[r].template[node[rows]]]]
        in_coll = np.flatnonzero(~op & (coll >= 0))
        if in_coll.size:
            types, inverse = np.unique(np.asarray(colls["comm_type"])[coll[in_coll]], return_inverse=True)
            names = np.array(
                [COLLECTIVE_NAMES.get(int(t), "collective").lower() for t in types.tolist()], dtype=object
            )
            out[in_coll] = names[inverse]
        return out.tolist()

    return labels


def write_run_outputs(
    run: RunArtifacts,
    out_dir: Path,
    results: dict[str, Any] | None = None,
    plots: bool = True,
    trace_max_spans: int | None = DEFAULT_MAX_SPANS,
) -> dict[str, Any]:
    """Write every output of ``run`` into ``out_dir`` (atomically); return results.json content.

    ``trace_max_spans`` caps the spans of trace.json (None or 0: all); spans left out are
    announced on stderr and counted in results.json (``sim.trace_spans``)."""
    results = results if results is not None else results_dict(run)
    with staged_output(Path(out_dir)) as staging:
        _write_all(run, staging, results, plots, trace_max_spans)
    announce_dropped_spans(Path(out_dir), results)
    return results


def announce_dropped_spans(out_dir: Path, results: dict[str, Any]) -> None:
    """Say on stderr how many spans trace.json left out, if any (results.json sim.trace_spans)."""
    info = results["sim"].get("trace_spans") or {}
    if info.get("dropped_spans"):
        print(
            f"heterosim: {out_dir / 'trace.json'} keeps the {info['spans']:,} longest of "
            f"{info['spans'] + info['dropped_spans']:,} spans (--trace-spans {info['max_spans']}; "
            "--trace-spans 0 keeps all)",
            file=sys.stderr,
        )


def _write_all(
    run: RunArtifacts | JobsArtifacts,
    folder: Path,
    results: dict[str, Any],
    plots: bool,
    trace_max_spans: int | None = DEFAULT_MAX_SPANS,
) -> None:
    """Every output of a run into ``folder``: the tables, trace.json, results.json, the plots."""
    _write_csv(
        folder / "ranks.csv", list(RANK_COLUMNS), ([row[k] for k in RANK_COLUMNS] for row in results["ranks"])
    )
    _write_collectives(run, folder)
    _write_flows(run.engine.flows, folder)
    if getattr(run.engine, "tcp", None):
        write_tcp_tables(folder, run.engine.tcp, list(run.topology.node_name))
    _write_links(run.engine.links, run.topology, folder)
    series = run.engine.series or {}
    rates = link_rates(series, run.topology)
    results["sim"]["trace_spans"] = _write_trace(run, folder, results, series, rates, trace_max_spans)
    (folder / "results.json").write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    if plots:
        _write_plots(run, folder, results, series, rates)


def _write_collectives(run: RunArtifacts | JobsArtifacts, folder: Path) -> None:
    """collectives.csv: one row per collective instance, its span and bus bandwidth."""
    colls = run.tables.collectives
    start, end = run.engine.task_start_ns, run.engine.task_end_ns
    job_sizes = _folded_group_sizes(run)
    coll_rows = []
    for i in range(len(colls.get("id", []))):
        s, e = int(start[colls["start_task"][i]]), int(end[colls["end_task"][i]])
        size, n = int(colls["size_bytes"][i]), int(colls["ranks"][i])
        n = job_sizes.get(int(colls["group"][i]), n)
        ctype = int(colls["comm_type"][i])
        duration = (e - s) * NS if e >= s >= 0 else float("nan")
        busbw = _busbw(ctype, size, n, duration)
        coll_rows.append(
            [
                i,
                COLLECTIVE_NAMES.get(ctype, ctype),
                int(colls["group"][i]),
                n,
                size,
                run.tables.algorithms[int(colls["algorithm"][i])],
                run.tables.protocols[int(colls["protocol"][i])],
                int(colls["channels"][i]),
                s * NS,
                e * NS,
                duration,
                busbw,
            ]
        )
    _write_csv(folder / "collectives.csv", list(COLLECTIVE_COLUMNS), coll_rows)


def _folded_group_sizes(run: RunArtifacts | JobsArtifacts) -> dict[int, int]:
    """Under ``simulation.replicas: fold``, each communicator's ranks in the full job (a folded
    data-parallel collective has one member in the replica, one per replica in the job)."""
    workload = getattr(run, "workload", None)
    if workload is None or getattr(workload, "global_ranks", None) is None:
        return {}
    return {int(k): len(v) for k, v in workload.groups.as_json().items()}


def _write_flows(flows: Mapping[str, Any] | None, folder: Path, block_rows: int = FLOW_ROWS) -> None:
    """flows.csv (none when the run had no flows), built and written ``block_rows`` rows at a
    time (the columns of a whole table of millions of flows would be gigabytes)."""
    rows = flows.flows if isinstance(flows, FlowTable) else len((flows or {}).get("task", []))
    if not flows or not rows:
        return
    write_numeric_csv_parts(
        folder / "flows.csv",
        list(FLOW_COLUMNS),
        (_flow_columns(flows, lo, min(rows, lo + block_rows)) for lo in range(0, rows, block_rows)),
    )


def _flow_columns(flows: Mapping[str, Any], lo: int, hi: int) -> list[np.ndarray]:
    """The flows.csv columns of rows ``lo:hi`` of a flow table (a FlowTable or a dict)."""
    part = (
        flows.rows(lo, hi)
        if isinstance(flows, FlowTable)
        else {k: np.asarray(v)[lo:hi] for k, v in flows.items()}
    )
    retrans = part.get("retransmits", np.zeros(hi - lo, np.int64))
    start_ns = np.asarray(part["start_ns"], dtype=np.int64)
    end_ns = np.asarray(part["end_ns"], dtype=np.int64)
    columns = [_integers(part[k]) for k in ("task", "src", "dst", "bytes")]
    columns += [start_ns * NS, end_ns * NS, (end_ns - start_ns) * NS, _integers(retrans)]
    none = np.full(hi - lo, -1, np.int64)
    columns += [_integers(part.get("collective", none)), _integers(part.get("connection", none))]
    zeros = np.zeros(hi - lo, np.int64)
    columns += [_integers(part.get(k, zeros)) for k in ("out_of_order", "max_reorder_depth")]
    return columns


def _write_links(links: dict[str, Any] | None, topo: Topology, folder: Path) -> None:
    """links.csv: one row per sampled link direction (none when nothing was sampled)."""
    if not links or not len(links.get("link", [])):
        return
    link_names = [
        f"{topo.node_name[topo.link_a[i]]}->{topo.node_name[topo.link_b[i]]}" for i in range(topo.num_links)
    ]
    link_idx = np.asarray(links["link"], dtype=np.int64)
    direction = np.asarray(links["direction"], dtype=np.int64)
    names = [link_names[i] if d == 0 else _reverse(link_names[i]) for i, d in zip(link_idx, direction)]
    link_columns = [
        k
        for k in (
            "bytes",
            "utilization",
            "busy_ns",
            "max_queue_bytes",
            "paused_ns",
            "ecn_marks",
            "drops",
            "trims",
        )
        if k in links
    ]
    _write_csv(
        folder / "links.csv",
        ["link", "name", "kind", "direction", *link_columns],
        (
            [
                int(i),
                n,
                LINK_KIND_NAMES[int(topo.link_kind[i])],
                int(d),
                *[_num(links[c][j]) for c in link_columns],
            ]
            for j, (i, n, d) in enumerate(zip(link_idx, names, direction))
        ),
    )


def _write_trace(
    run: RunArtifacts | JobsArtifacts,
    folder: Path,
    results: dict[str, Any],
    series: dict[str, Any],
    rates: Any,
    trace_max_spans: int | None,
) -> dict[str, Any]:
    """trace.json (Perfetto): every task per rank, the counter tracks, the faults; returns what
    it kept (results.json ``sim.trace_spans``)."""
    engine = run.engine
    rank_names = [
        (f"job {row['job']} " if "job" in row else "")
        + f"rank {row['rank']} ({row['gpu']}, host {row['host']}, stage {row['stage']})"
        for row in results["ranks"]
    ]
    counters = _counter_tracks(series, run.topology, rates)
    extra = fault_events(results.get("faults"), len(rank_names) + 1, float(engine.makespan_ns) * NS)
    return write_perfetto_trace(
        folder / "trace.json",
        run.tables.plan,
        engine.task_start_ns,
        engine.task_end_ns,
        run.rank_gpu,
        rank_names,
        _label_fn(run),
        counters,
        max_spans=trace_max_spans,
        extra_events=extra,
        contention=_slowed_tasks(engine),
    )


def _slowed_tasks(engine: EngineResult) -> tuple[np.ndarray, np.ndarray] | None:
    """The compute tasks contention slowed and their extra ns (None without the model)."""
    accounts = getattr(engine, "contention", None)
    if not accounts:
        return None
    return accounts["slowed_task"], accounts["slowed_extra_ns"]


def _write_plots(
    run: RunArtifacts | JobsArtifacts,
    folder: Path,
    results: dict[str, Any],
    series: dict[str, Any],
    rates: Any,
) -> None:
    """timeline.png, breakdown.png and, when sampled, link_utilization.png and queues.png."""
    ranks = results["ranks"]
    rank_ids = np.array([r["rank"] for r in ranks])  # global ranks in a folded run
    plot_timeline(
        folder / "timeline.png",
        run.tables.plan,
        run.engine.task_start_ns,
        run.engine.task_end_ns,
        run.rank_gpu,
        np.array([r["stage"] for r in ranks]),
        [r["gpu"] for r in ranks],
        rank_ids=rank_ids,
    )
    plot_breakdown(
        folder / "breakdown.png",
        {
            "compute": np.array([r["compute_s"] for r in ranks]),
            "exposed comm": np.array([r["exposed_comm_s"] for r in ranks]),
            "bubble": np.array([r["bubble_s"] for r in ranks]),
        },
        rank_ids=rank_ids,
    )
    if rates is not None:
        sampled = (
            int(np.unique(series["queue"]["port"]).size)
            if rates.bytes_kind == "wire"
            else int(series["link"]["directions_sampled"])
        )
        plot_link_utilization(folder / "link_utilization.png", rates, sampled)
    queues = port_queues(series, run.topology)
    if queues is not None:
        plot_queues(folder / "queues.png", queues, int(np.unique(series["queue"]["port"]).size))


QUEUE_TRACK = "max queue depth (bytes)"


COUNTER_LINKS = 8  # busiest link directions with their own utilisation counter in trace.json


def _counter_tracks(
    series: dict[str, Any], topo: Any, rates: Any = None
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Perfetto counter tracks from the sampled series: flows in flight (both fidelities), the
    largest sampled queue and the mean utilization of the sampled ports (packet fidelity), and the
    utilisation of the COUNTER_LINKS busiest link directions, NIC/switch links first (both
    fidelities, when sampled)."""
    tracks: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    if len(series.get("flows_in_flight", [])):
        tracks["flows in flight"] = (np.asarray(series["time_ns"]), np.asarray(series["flows_in_flight"]))
    queue = series.get("queue")
    if queue is not None and len(queue.get("time_ns", [])):
        tracks[QUEUE_TRACK] = _max_per_time(queue["time_ns"], queue["bytes"])
        if "tx_bytes" in queue:
            tracks["mean utilization of sampled ports (%)"] = _port_utilization(queue, topo)
    if rates is not None:
        for i in range(min(COUNTER_LINKS, rates.direction.size)):  # network links first, by bytes
            tracks[f"link {rates.names[i]} utilisation (%)"] = (rates.time_ns[:-1], _utilization(rates, i))
    return tracks


def _utilization(rates: LinkRates, i: int) -> np.ndarray:
    """Column ``i`` of ``rates.utilization * 100`` (the same values), without the whole matrix."""
    capacity = rates.capacity_bps[i]
    if not capacity > 0:
        return np.zeros(rates.rate_bps.shape[0])
    column = rates.rate_bps[:, i] / capacity
    column *= 100
    return column


def _port_utilization(queue: dict[str, np.ndarray], topo: Topology) -> tuple[np.ndarray, np.ndarray]:
    """Per sample time, the mean over sampled ports of tx-bytes growth / port rate (percent)."""
    port = np.asarray(queue["port"], dtype=np.int64)
    time_ns = np.asarray(queue["time_ns"], dtype=np.int64)
    tx = np.asarray(queue["tx_bytes"], dtype=np.float64)
    order = np.lexsort((time_ns, port))
    port, time_ns, tx = port[order], time_ns[order], tx[order]
    same = port[1:] == port[:-1]
    dt = (time_ns[1:] - time_ns[:-1])[same]
    rate = topo.link_rate_bps[port[1:][same] // 2]
    util = np.divide(
        (tx[1:] - tx[:-1])[same] * 8e9, dt * rate, out=np.zeros(dt.size), where=(dt > 0) & (rate > 0)
    )
    times, inverse = np.unique(time_ns[1:][same], return_inverse=True)
    total = np.bincount(inverse, weights=util, minlength=times.size)
    count = np.bincount(inverse, minlength=times.size)
    return times, 100.0 * total / np.maximum(count, 1)


def _max_per_time(times, values) -> tuple[np.ndarray, np.ndarray]:
    times = np.asarray(times)
    values = np.asarray(values)
    unique, inverse = np.unique(times, return_inverse=True)
    out = np.zeros(unique.size)
    np.maximum.at(out, inverse, values)
    return unique, out


def _integers(values) -> np.ndarray:
    """An integer column as is (no int64 copy of an int32 one), anything else as int64."""
    values = np.asarray(values)
    return values if values.dtype.kind in "iu" and values.dtype != np.uint64 else values.astype(np.int64)


def _reverse(name: str) -> str:
    a, _, b = name.partition("->")
    return f"{b}->{a}"


def _num(value):
    value = value.item() if hasattr(value, "item") else value
    return value


def _busbw(comm_type: int, size_bytes: int, n: int, time_s: float) -> float:
    """nccl-tests bus bandwidth (GB/s) of one collective instance."""
    if not time_s or time_s != time_s or time_s <= 0 or n < 1:
        return float("nan")
    return size_bytes / time_s / 1e9 * bus_factor(comm_type, n)
