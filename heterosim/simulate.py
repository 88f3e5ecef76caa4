"""One experiment end to end: workload -> plan -> engine -> report.

This module sits above the three layers and is the only one that calls all of them;
``heterosim run``, ``compare``, ``sweep`` and ``validate`` go through :func:`run_experiment`,
or :func:`run_jobs` for an experiment of several jobs sharing one cluster (``jobs:``).
"""

from __future__ import annotations

import copy
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from heterosim import __version__
from heterosim.config.cluster import ClusterConfig
from heterosim.config.experiment import ExperimentConfig
from heterosim.config.jobs import JobsExperiment
from heterosim.engine import faults as fault_models
from heterosim.engine.executor import EngineResult, execute_plan
from heterosim.engine.topology import Topology, build_topology
from heterosim.plan.collectives.decompose import decompose_collective
from heterosim.plan.compute.model import PROVENANCES, ComputeModel
from heterosim.plan.compute.partition_cost import partition_cost_fn
from heterosim.plan.execution_plan import FLOW
from heterosim.plan.from_traces import PlanTables, build_plan
from heterosim.plan.iterations import repeat_plan
from heterosim.plan.merge import MergedPlan, merge_job_plans
from heterosim.plan.placement import place_plan, place_ranks
from heterosim.workload.generator import Workload, generate_workload
from heterosim.workload.trace import RankTrace

ProgressFn = Callable[[int, int, int], None]


@dataclass
class RunArtifacts:
    """Everything a report needs about one run."""

    experiment: ExperimentConfig
    workload: Workload
    traces: list[RankTrace]
    rank_gpu: np.ndarray
    tables: PlanTables
    topology: Topology
    engine: EngineResult
    compute_provenance: dict[str, float]
    stage_wall_s: dict[str, float]
    faults: fault_models.FaultPlan | None = None
    baseline: EngineResult | None = None  # the same plan without faults (fault_baseline)


def build_run(experiment: ExperimentConfig, *, databases: list[str] | None = None,
              workload: Any = None, gpus: np.ndarray | None = None,
              plan_cluster: ClusterConfig | None = None, with_topology: bool = True) -> tuple:
    """Workload, traces, placement, timed plan and topology (no simulation yet).

    ``workload`` replaces the generated one (e.g. traces read from Chakra files): any object with
    ``world_size``, ``trace(rank)``, ``groups.as_json()``, ``layout`` and ``partition`` as
    :class:`~heterosim.workload.generator.Workload` has them. A workload whose
    ``keep_trace_durations`` is true keeps the compute durations its traces carry
    (``templates.duration_ns``) instead of timing ops with the compute model; one whose
    ``p2p_rendezvous`` is false starts a send when the sender is ready (eager, as ASTRA-sim does).

    For one job of several (:func:`run_jobs`): the workload is generated on ``experiment.cluster``
    (the job's hosts), ``gpus[i]`` is the GPU of ``plan_cluster`` (the whole cluster) that is the
    job cluster's GPU ``i``, and compute timing, collective decomposition and the plan use
    ``plan_cluster`` and those global GPU ids; ``with_topology=False`` skips the topology (None).
    """
    stage_wall: dict[str, float] = {}
    t0 = time.perf_counter()
    compute = ComputeModel(databases, gpus=experiment.cluster.gpus)
    for note in experiment.cluster.notes:
        print(f"heterosim: note: {note}", file=sys.stderr)
    if workload is None:
        workload = generate_workload(experiment, cost_fn=partition_cost_fn(compute))
        for warning in workload.partition.memory_warnings:
            print(f"heterosim: warning: {experiment.source or 'experiment'}: {warning}", file=sys.stderr)
    traces = [workload.trace(r) for r in range(workload.world_size)]
    stage_wall["workload_s"] = time.perf_counter() - t0

    t1 = time.perf_counter()
    cluster = experiment.cluster
    plan = experiment.parallel.plan
    custom = place_plan(cluster, plan) if plan is not None and workload.world_size == \
        plan.world_size else None
    rank_gpu = np.asarray(place_ranks(cluster, workload.world_size, custom=custom), dtype=np.int64)
    if custom is not None and hasattr(workload, "rank_gpu"):
        workload.rank_gpu = rank_gpu
    if gpus is not None:  # one job of several: the job's GPUs are GPUs of the whole cluster
        rank_gpu = np.asarray(gpus, dtype=np.int64)[rank_gpu]
    cluster = plan_cluster if plan_cluster is not None else experiment.cluster
    durations, provenance_time = [], np.zeros(len(PROVENANCES))
    keep_trace_durations = bool(getattr(workload, "keep_trace_durations", False))
    for rank, trace in enumerate(traces):
        if keep_trace_durations:  # recorded runtimes (traces without op shapes)
            durations.append(trace.templates.duration_ns.astype(np.int64))
            continue
        gpu_type = cluster.gpu_type[int(rank_gpu[rank])]
        ns, prov = compute.time_templates(trace.templates, gpu_type)
        trace.templates.duration_ns = np.asarray(ns, dtype=np.uint64)
        durations.append(np.asarray(ns, dtype=np.int64))
        counts = np.bincount(trace.template, minlength=len(trace.templates))
        provenance_time += np.bincount(prov, weights=np.asarray(ns, float) * counts,
                                       minlength=len(PROVENANCES))
    for note in compute.notes(new_only=True):
        print(f"heterosim: note: {note}", file=sys.stderr)
    total = provenance_time.sum()
    shares = {name: (float(provenance_time[i] / total) if total else 0.0)
              for i, name in enumerate(PROVENANCES)}
    if keep_trace_durations:
        shares = {**shares, "trace": 1.0}
    network = experiment.network
    groups = {int(k): list(v) for k, v in workload.groups.as_json().items()}
    granularity = experiment.simulation.collective_granularity

    def decompose(comm_type: int, size_bytes: int, gpus: list[int]):
        return decompose_collective(
            comm_type, size_bytes, gpus, cluster, algorithm=network.collective_algorithm,
            protocol=network.collective_protocol, channels=network.channels, strict=False,
            granularity=granularity,
        )

    tables = build_plan(traces, rank_gpu, durations, groups, cluster, decompose,
                        p2p_rendezvous=bool(getattr(workload, "p2p_rendezvous", True)))
    iterations = experiment.simulation.iterations
    tables.plan, tables.task_iteration = repeat_plan(tables.plan, tables.node_task_offset, iterations)
    stage_wall["plan_s"] = time.perf_counter() - t1
    t2 = time.perf_counter()
    topology = build_topology(cluster) if with_topology else None
    stage_wall["topology_s"] = time.perf_counter() - t2
    return workload, traces, rank_gpu, tables, topology, shares, stage_wall


def run_experiment(
    experiment: ExperimentConfig,
    *,
    fidelity: str | None = None,
    progress: ProgressFn | None = None,
    databases: list[str] | None = None,
    stop_ns: int | None = None,
    sample_interval_ns: int | None = None,
    workload: Any = None,
) -> RunArtifacts:
    """Simulate one training iteration of ``experiment``; return the artifacts for reporting."""
    if fidelity is not None and fidelity != experiment.simulation.fidelity:
        experiment = replace(experiment, simulation=replace(experiment.simulation, fidelity=fidelity))
    experiment = _record_granularity(experiment)
    workload, traces, rank_gpu, tables, topology, shares, stage_wall = build_run(
        experiment, databases=databases, workload=workload
    )
    note = intra_host_note(experiment, tables.plan, topology)
    if note:
        print(f"heterosim: note: {note}", file=sys.stderr)
    fault_plan = fault_models.resolve_faults(experiment.faults, topology, experiment.network, stop_ns)
    t3 = time.perf_counter()
    engine = execute_plan(
        tables.plan, topology, experiment.network, fidelity=experiment.simulation.fidelity,
        seed=experiment.simulation.seed, stop_ns=stop_ns,
        sample_interval_ns=(experiment.simulation.sample_interval_ns if sample_interval_ns is None
                            else sample_interval_ns),
        progress=progress, intra_host=experiment.simulation.intra_host,
        queue_pairs=experiment.simulation.queue_pairs, faults=fault_plan,
    )
    stage_wall["engine_s"] = time.perf_counter() - t3
    fault_models.check_faults_in_run(fault_plan, engine.makespan_ns, engine.partial)
    baseline = None
    if fault_plan is not None and experiment.simulation.fault_baseline:
        t4 = time.perf_counter()
        baseline = execute_plan(
            tables.plan, topology, experiment.network, fidelity=experiment.simulation.fidelity,
            seed=experiment.simulation.seed, stop_ns=stop_ns, intra_host=experiment.simulation.intra_host,
            queue_pairs=experiment.simulation.queue_pairs)
        stage_wall["baseline_engine_s"] = time.perf_counter() - t4
    return RunArtifacts(experiment, workload, traces, rank_gpu, tables, topology, engine, shares,
                        stage_wall, fault_plan, baseline)


INTRA_HOST_NOTE_MIN_BYTES = 64 << 30  # below this a packet run is short either way


def intra_host_note(experiment: ExperimentConfig, plan: Any, topology: Topology,
                    min_bytes: int = INTRA_HOST_NOTE_MIN_BYTES) -> str | None:
    """A hint for long packet runs whose bytes are mostly copies inside hosts (None otherwise):
    those copies are most of the packet events, and ``simulation.intra_host: flow`` runs them in
    the fluid model while the fabric stays frame by frame."""
    sim = experiment.simulation
    if sim.fidelity != "packet" or sim.intra_host != "packet":
        return None
    flows = np.flatnonzero(plan.kind == FLOW)
    if not len(flows):
        return None
    size = plan.bytes[flows].astype(np.float64)
    total = float(size.sum())
    if total < min_bytes:
        return None
    host = topology.node_host[topology.gpu_node]
    inside = host[plan.gpu[flows]] == host[plan.dst[flows]]
    share = float(size[inside].sum()) / total
    if share < 0.5:
        return None
    return (f"{share:.0%} of the {total / 2**30:,.0f} GiB this packet run moves are copies between "
            "GPUs of one host (NVLink/PCIe frames: most of its events); --set "
            "simulation.intra_host=flow runs them in the fluid model and leaves the fabric frame by "
            "frame (benchmarks/README.md: 5-10x fewer events, iteration within 1 %)")


def _record_granularity(experiment: ExperimentConfig) -> ExperimentConfig:
    """The experiment with its collective granularity and (packet fidelity) intra-host model,
    defaults included, written into ``resolved``, so results.json
    (experiment.resolved.simulation) says which ones ran."""
    resolved = copy.deepcopy(experiment.resolved)
    simulation = resolved.get("simulation")
    simulation = dict(simulation) if isinstance(simulation, dict) else {}
    simulation["collective_granularity"] = experiment.simulation.collective_granularity
    simulation["queue_pairs"] = experiment.simulation.queue_pairs
    if experiment.simulation.fidelity == "packet":
        simulation["intra_host"] = experiment.simulation.intra_host
    resolved["simulation"] = simulation
    return replace(experiment, resolved=resolved)


def version() -> str:
    return __version__


@dataclass
class JobsArtifacts:
    """Everything a report needs about a run of several jobs on one cluster.

    ``jobs[j]`` is job j seen alone: its own plan tables (task ids of its own plan), GPU ids of
    the whole cluster, and an engine result holding its tasks' times relative to its start (so
    its iteration time and breakdown read as for a run of that job alone). ``engine`` is the
    whole run: the merged plan's times and the shared network's counters and links.
    """

    experiment: JobsExperiment
    jobs: list[RunArtifacts]
    merged: MergedPlan
    topology: Topology
    engine: EngineResult
    rank_gpu: np.ndarray  # global rank (job by job) -> GPU
    traces: list[RankTrace]  # global rank order
    stage_wall_s: dict[str, float]
    faults: fault_models.FaultPlan | None = None
    baseline: EngineResult | None = None  # the merged plan without faults (fault_baseline)

    @property
    def tables(self) -> PlanTables:
        return self.merged.tables


def run_jobs(
    experiment: JobsExperiment,
    *,
    fidelity: str | None = None,
    progress: ProgressFn | None = None,
    databases: list[str] | None = None,
    stop_ns: int | None = None,
    sample_interval_ns: int | None = None,
) -> JobsArtifacts:
    """Simulate several jobs at once on one cluster: one executor, one network, so their flows
    contend (queues, PFC, ECN and CC at packet level; max-min shares in the fluid model)."""
    if fidelity is not None and fidelity != experiment.simulation.fidelity:
        simulation = replace(experiment.simulation, fidelity=fidelity)
        experiment = replace(experiment, simulation=simulation,
                             jobs=tuple(replace(j, experiment=replace(j.experiment, simulation=simulation))
                                        for j in experiment.jobs))
    stage_wall: dict[str, float] = {}
    cluster = experiment.cluster
    built = []
    for job in experiment.jobs:
        job_exp = _record_granularity(job.experiment)
        workload, traces, rank_gpu, tables, shares, _, wall = build_run(
            job_exp, databases=databases, gpus=np.asarray(job.gpus, np.int64), plan_cluster=cluster,
            with_topology=False)
        for key, value in wall.items():
            stage_wall[key] = stage_wall.get(key, 0.0) + value
        built.append((replace(job_exp, cluster=cluster), workload, traces, rank_gpu, tables, shares))
    t2 = time.perf_counter()
    topology = build_topology(cluster)
    stage_wall["topology_s"] = time.perf_counter() - t2
    merged = merge_job_plans([b[4] for b in built], [len(b[3]) for b in built],
                             [j.start_ns for j in experiment.jobs], cluster.world_size)
    merged.tables.task_iteration = np.concatenate(
        [np.concatenate([[0], b[4].task_iteration]) for b in built]).astype(np.int32)
    sim = experiment.simulation
    fault_plan = fault_models.resolve_faults(experiment.faults, topology, experiment.network, stop_ns)
    t3 = time.perf_counter()
    engine = execute_plan(
        merged.tables.plan, topology, experiment.network, fidelity=sim.fidelity, seed=sim.seed,
        stop_ns=stop_ns,
        sample_interval_ns=sim.sample_interval_ns if sample_interval_ns is None else sample_interval_ns,
        progress=progress, intra_host=sim.intra_host, queue_pairs=sim.queue_pairs, faults=fault_plan,
    )
    stage_wall["engine_s"] = time.perf_counter() - t3
    fault_models.check_faults_in_run(fault_plan, engine.makespan_ns, engine.partial)
    baseline = None
    if fault_plan is not None and sim.fault_baseline:
        t4 = time.perf_counter()
        baseline = execute_plan(merged.tables.plan, topology, experiment.network, fidelity=sim.fidelity,
                                seed=sim.seed, stop_ns=stop_ns, intra_host=sim.intra_host,
                                queue_pairs=sim.queue_pairs)
        stage_wall["baseline_engine_s"] = time.perf_counter() - t4
    jobs = [RunArtifacts(exp, workload, traces, rank_gpu, tables, topology,
                         _job_engine(engine, merged, j, experiment.jobs[j].start_ns, tables),
                         shares, stage_wall)
            for j, (exp, workload, traces, rank_gpu, tables, shares) in enumerate(built)]
    return JobsArtifacts(
        experiment=experiment, jobs=jobs, merged=merged, topology=topology, engine=engine,
        rank_gpu=np.concatenate([b[3] for b in built]),
        traces=[t for b in built for t in b[2]], stage_wall_s=stage_wall, faults=fault_plan,
        baseline=baseline,
    )


def _job_engine(engine: EngineResult, merged: MergedPlan, job: int, start_ns: int,
                tables: PlanTables) -> EngineResult:
    """Job ``job``'s part of a shared run: its tasks' times relative to its start, its flows and
    its own flow counters (the network counters of the shared run stay with the whole run)."""
    tasks = merged.job_tasks(job)
    start = engine.task_start_ns[tasks].copy()
    end = engine.task_end_ns[tasks].copy()
    start[start >= 0] -= start_ns
    end[end >= 0] -= start_ns
    plan = tables.plan
    local_flows = np.flatnonzero(plan.kind == FLOW)
    flows = engine.flows
    lo, hi = merged.task_start[job], merged.task_end[job]
    mine = (flows["task"] >= lo) & (flows["task"] < hi) if len(flows.get("task", [])) else np.zeros(0, bool)
    job_flows = {k: np.asarray(v)[mine] for k, v in flows.items()}
    if len(job_flows.get("task", [])):
        job_flows["task"] = job_flows["task"] - lo
        for key in ("start_ns", "end_ns"):
            job_flows[key] = np.where(job_flows[key] >= 0, job_flows[key] - start_ns, -1)
    retransmits = int(np.sum(job_flows.get("retransmits", np.zeros(0, np.int64))))
    network = {"flows": int(local_flows.size), "bytes": int(plan.bytes[local_flows].sum()),
               "retransmits": retransmits}
    unfinished = bool(np.any(end < 0))
    return EngineResult(
        task_start_ns=start, task_end_ns=end, makespan_ns=int(end.max()) if end.size else 0,
        events=engine.events, wall_s=engine.wall_s, fidelity=engine.fidelity, network=network,
        links=engine.links, flows=job_flows, series={}, partial=engine.partial or unfinished,
        error=engine.error, fault_counts=engine.fault_counts,
    )


def run_any(experiment: ExperimentConfig | JobsExperiment, **options: Any) -> RunArtifacts | JobsArtifacts:
    """:func:`run_jobs` for an experiment of several jobs, :func:`run_experiment` otherwise."""
    if isinstance(experiment, JobsExperiment):
        options.pop("workload", None)
        return run_jobs(experiment, **options)
    return run_experiment(experiment, **options)
