"""One experiment: workload -> plan -> engine, returning :class:`RunArtifacts` for the report.

``heterosim run``, ``compare``, ``sweep`` and ``validate``'s end-to-end cases go through
:func:`run_experiment`; ``heterosim workload`` through :func:`generate_experiment_workload`.
Several jobs sharing one cluster (``jobs:``) build each job with :func:`prepare_run` and run
together in :mod:`heterosim.simulate.jobs`.
"""

from __future__ import annotations

import copy
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from heterosim.config.cluster import ClusterConfig
from heterosim.config.experiment import ExperimentConfig
from heterosim.engine import faults as fault_models
from heterosim.engine.executor import execute_plan
from heterosim.engine.topology import Topology, build_topology
from heterosim.notes import print_note
from heterosim.plan.budget import check_plan_sample_budget
from heterosim.plan.collectives.decompose import decompose_collective
from heterosim.plan.compute.contention import fill_plan_terms, template_terms
from heterosim.plan.compute.host_dispatch import DispatchStretch, stretch_to_host_dispatch
from heterosim.plan.compute.host_overhead import add_host_overhead
from heterosim.plan.compute.layer_gap import LayerScale, layer_scale, scale_templates
from heterosim.plan.compute.model import PROVENANCES, ComputeModel
from heterosim.plan.compute.partition_cost import partition_cost_fn
from heterosim.plan.execution_plan import FLOW
from heterosim.plan.from_traces import PlanTables, build_plan
from heterosim.plan.iterations import repeat_plan
from heterosim.plan.placement import place_plan, place_ranks
from heterosim.results import PreparedRun, RunArtifacts
from heterosim.simulate.fold import FoldedRun, fold_run
from heterosim.workload.generator import Workload, generate_workload
from heterosim.workload.trace import RankTrace

ProgressFn = Callable[[int, int, int, int], None]  # (sim ns, tasks done, tasks total, events)


def experiment_compute_model(
    experiment: ExperimentConfig, databases: list[str] | None = None
) -> ComputeModel:
    """The compute model of ``experiment``: its cluster's own GPUs and, unless ``auto``, the
    attention kernel ``training.attention_kernel`` names for every GPU."""
    kernel = experiment.training.attention_kernel
    return ComputeModel(
        databases, gpus=experiment.cluster.gpus, attention_impl=None if kernel == "auto" else kernel
    )


def generate_experiment_workload(
    experiment: ExperimentConfig, compute: ComputeModel | None = None
) -> Workload:
    """The experiment's workload, partitioned with the compute model's layer costs; an explicit
    plan (``parallel.stages``) is placed as written (``workload.rank_gpu``)."""
    compute = compute if compute is not None else experiment_compute_model(experiment)
    workload = generate_workload(experiment, cost_fn=partition_cost_fn(compute))
    if experiment.parallel.plan is not None:
        workload.rank_gpu = place_plan(experiment.cluster, experiment.parallel.plan).tolist()
    return workload


def prepare_run(
    experiment: ExperimentConfig,
    *,
    databases: list[str] | None = None,
    workload: Any = None,
    gpus: np.ndarray | None = None,
    plan_cluster: ClusterConfig | None = None,
    with_topology: bool = True,
) -> PreparedRun:
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
    compute = experiment_compute_model(experiment, databases)
    for note in experiment.cluster.notes:
        print_note(note)
    if workload is None:
        workload = generate_experiment_workload(experiment, compute)
        for warning in workload.partition.memory_warnings:
            print(f"heterosim: warning: {experiment.source or 'experiment'}: {warning}", file=sys.stderr)
    fold = experiment.simulation.replicas == "fold"
    traces = [] if fold else [workload.trace(r) for r in range(workload.world_size)]
    stage_wall["workload_s"] = time.perf_counter() - t0

    t1 = time.perf_counter()
    groups = {int(k): list(v) for k, v in workload.groups.as_json().items()}
    rank_gpu = _placed_ranks(experiment, workload, gpus)
    cluster = plan_cluster if plan_cluster is not None else experiment.cluster
    decompose = _decomposer(experiment, cluster)
    folded: FoldedRun | None = None
    if fold:  # one replica's traces; its data-parallel collectives timed (heterosim/plan/fold.py)
        folded = fold_run(experiment, workload, groups, rank_gpu, cluster, decompose)
        workload, traces, rank_gpu, groups, decompose = (
            folded.workload,
            folded.traces,
            folded.rank_gpu,
            folded.groups,
            folded.decompose,
        )
    keep_trace_durations = bool(getattr(workload, "keep_trace_durations", False))
    timing = _time_traces(experiment, compute, workload, traces, rank_gpu, cluster, keep_trace_durations)
    tables = build_plan(
        traces,
        rank_gpu,
        timing.durations,
        groups,
        cluster,
        decompose,
        p2p_rendezvous=bool(getattr(workload, "p2p_rendezvous", True)),
    )
    if experiment.simulation.compute_contention and not keep_trace_durations:
        _fill_contention_terms(tables, compute, cluster, rank_gpu, traces)
    iterations = experiment.simulation.iterations
    tables.plan, tables.task_iteration = repeat_plan(tables.plan, tables.node_task_offset, iterations)
    stage_wall["plan_s"] = time.perf_counter() - t1
    t2 = time.perf_counter()
    topology: Topology | None = None
    if folded is not None:  # built to time the folded collectives
        topology = folded.topology
        stage_wall["fold_timing_s"] = folded.summary["timing_wall_s"]
    elif with_topology:
        topology = build_topology(cluster)
    stage_wall["topology_s"] = time.perf_counter() - t2
    return PreparedRun(
        workload,
        traces,
        rank_gpu,
        tables,
        topology,
        timing.shares,
        stage_wall,
        timing.measured_layers,
        replicas=folded.summary if folded is not None else None,
    )


def _placed_ranks(experiment: ExperimentConfig, workload: Any, gpus: np.ndarray | None) -> np.ndarray:
    """Each rank's GPU (int64): an explicit plan's placement (placed once, by
    :func:`generate_experiment_workload`, for the workload; here only for a workload built
    elsewhere), else the default; for one job of several, mapped to GPUs of the whole cluster."""
    cluster, plan = experiment.cluster, experiment.parallel.plan
    custom = None
    if plan is not None and workload.world_size == plan.world_size:
        placed = getattr(workload, "rank_gpu", None)
        custom = placed if placed is not None else place_plan(cluster, plan)
    rank_gpu = np.asarray(place_ranks(cluster, workload.world_size, custom=custom), dtype=np.int64)
    if gpus is not None:  # one job of several: the job's GPUs are GPUs of the whole cluster
        rank_gpu = np.asarray(gpus, dtype=np.int64)[rank_gpu]
    return rank_gpu


@dataclass
class _TracesTiming:
    durations: list[np.ndarray]  # per rank: ns per template row
    shares: dict[str, float]  # share of compute time per provenance
    measured_layers: list[dict[str, Any]]  # results.json compute_layers


def _time_traces(
    experiment: ExperimentConfig,
    compute: ComputeModel,
    workload: Any,
    traces: list[RankTrace],
    rank_gpu: np.ndarray,
    cluster: ClusterConfig,
    keep_trace_durations: bool,
) -> _TracesTiming:
    """Every rank's template durations: the compute model's op times, scaled to a measured whole
    layer or stretched to the host's dispatch, plus host overheads; timed once per GPU type and
    trace shared by several ranks (or the traces' own durations where they are kept)."""
    durations, provenance_time = [], np.zeros(len(PROVENANCES))
    layer_scales: dict[tuple, LayerScale | None] = {}
    dispatch_stretches: dict[str, DispatchStretch] = {}  # the first rank's of each GPU type
    timed: dict[tuple, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    fw = experiment.framework
    for rank, trace in enumerate(traces):
        if keep_trace_durations:  # recorded runtimes (traces without op shapes)
            durations.append(trace.templates.duration_ns.astype(np.int64))
            continue
        gpu_type = cluster.gpu_type[int(rank_gpu[rank])]
        key = (gpu_type, *_shared_arrays(trace))
        if key not in timed:
            ns, prov = compute.time_templates(trace.templates, gpu_type)
            scale = _layer_scale(compute, experiment, workload, rank, gpu_type, layer_scales)
            if scale is not None:
                ns = scale_templates(ns, trace.templates, scale)
            elif fw.pipelined_host_dispatch.enabled:
                dispatch = fw.pipelined_host_dispatch
                per_op = dispatch.per_op_ns(experiment.model.arch, experiment.training.kernels)
                per_kernel = dispatch.per_kernel_ns(experiment.model.arch, experiment.training.kernels)
                resolved = compute.resolve_gpu(gpu_type)
                ns, stretch = stretch_to_host_dispatch(ns, trace, per_op, resolved, per_kernel)
                if stretch is not None:
                    dispatch_stretches.setdefault(stretch.gpu, stretch)
            ns = add_host_overhead(
                ns, trace.templates, fw.host_overhead_ns(gpu_type), fw.tp_collective_overhead_ns(gpu_type)
            )
            counts = np.bincount(trace.template, minlength=len(trace.templates))
            spent = np.bincount(prov, weights=np.asarray(ns, float) * counts, minlength=len(PROVENANCES))
            timed[key] = (np.asarray(ns, dtype=np.uint64), np.asarray(ns, dtype=np.int64), spent)
            for shared in timed[key][:2]:  # one array for every rank of the key
                shared.setflags(write=False)
        ns_u64, ns_i64, spent = timed[key]
        trace.templates.duration_ns = ns_u64
        durations.append(ns_i64)
        provenance_time += spent
    for note in compute.notes(new_only=True):
        print_note(note)
    total = provenance_time.sum()
    shares = {
        name: (float(provenance_time[i] / total) if total else 0.0) for i, name in enumerate(PROVENANCES)
    }
    if keep_trace_durations:
        shares = {**shares, "trace": 1.0}
    measured_layers = [s.as_json() for s in layer_scales.values() if s is not None]
    measured_layers += [s.as_json() for s in dispatch_stretches.values()]
    return _TracesTiming(durations, shares, measured_layers)


def _decomposer(experiment: ExperimentConfig, cluster: ClusterConfig) -> Callable[..., Any]:
    """The collective decomposition the plan builder calls, with the experiment's NCCL settings."""
    network = experiment.network
    granularity = experiment.simulation.collective_granularity

    def decompose(comm_type: int, size_bytes: int, gpus: list[int], pair_bytes=None):
        return decompose_collective(
            comm_type,
            size_bytes,
            gpus,
            cluster,
            algorithm=network.collective_algorithm,
            protocol=network.collective_protocol,
            channels=network.channels,
            strict=False,
            granularity=granularity,
            pair_bytes=pair_bytes,
        )

    return decompose


def _fill_contention_terms(
    tables: PlanTables, compute: ComputeModel, cluster: ClusterConfig, rank_gpu: np.ndarray, traces: list
) -> None:
    """Each compute task's contention terms, computed once per GPU type and shared trace."""
    term_cache: dict[tuple, tuple | None] = {}
    terms = []
    for g, t in zip(rank_gpu, traces):
        key = (cluster.gpu_type[int(g)], *_shared_arrays(t))
        if key not in term_cache:
            term_cache[key] = _contention_terms(compute, key[0], t)
        terms.append(term_cache[key])
    fill_plan_terms(tables.plan, [t.template for t in traces], terms)


def _layer_scale(
    compute: ComputeModel,
    experiment: ExperimentConfig,
    workload: Any,
    rank: int,
    gpu_type: str,
    cache: dict[tuple, LayerScale | None],
) -> LayerScale | None:
    """The measured-layer scaling of a rank's layer ops (heterosim.plan.compute.layer_gap)."""
    if not compute.layer_measurements:
        return None
    layout = getattr(workload, "layout", None)
    tp = layout.tp_degree(rank) if layout is not None else None
    parallel = replace(experiment.parallel, tp=int(tp)) if tp else experiment.parallel
    key = (compute.resolve_gpu(gpu_type), parallel.tp)
    if key not in cache:
        cache[key] = layer_scale(
            compute, compute.layer_measurements, key[0], experiment.model, experiment.training, parallel
        )
    return cache[key]


def _shared_arrays(trace: Any) -> tuple:
    """Where the arrays that time a rank's ops live (node templates, layers, micro-batches and
    the template rows but their communicators): equal for the relabelled copies of one trace
    (heterosim/workload/relabel.py), which share them, so each is timed once."""
    t = trace.templates
    arrays = (
        trace.template,
        trace.layer,
        trace.micro_batch,
        t.node_type,
        t.op_kind,
        t.label,
        t.shape,
        t.flops,
    )
    return tuple((a.__array_interface__["data"][0], a.shape) for a in arrays)


def _contention_terms(compute: ComputeModel, gpu_type: str, trace: Any) -> tuple | None:
    """The contention terms of a rank's templates on its GPU (None for a database-only device)."""
    spec = compute.spec(gpu_type)
    if spec is None:
        return None
    return template_terms(trace.templates, spec, compute.params(gpu_type))


def run_experiment(
    experiment: ExperimentConfig,
    *,
    fidelity: str | None = None,
    progress: ProgressFn | None = None,
    databases: list[str] | None = None,
    stop_ns: int | None = None,
    workload: Any = None,
    release_schedule: bool = False,
) -> RunArtifacts:
    """Simulate one training iteration of ``experiment``; return the artifacts for reporting.

    ``fidelity`` replaces ``simulation.fidelity``; ``stop_ns`` ends the run at that simulated time
    (a partial iteration); ``workload`` replaces the generated one (see :func:`prepare_run`);
    ``release_schedule``: the plan only feeds reports afterwards, so the engine frees its
    schedule columns as soon as it has read them (``execute_plan``), unless the plan runs again
    (``simulation.fault_baseline``).
    """
    if fidelity is not None and fidelity != experiment.simulation.fidelity:
        experiment = replace(experiment, simulation=replace(experiment.simulation, fidelity=fidelity))
    experiment = _record_granularity(experiment)
    prepared = prepare_run(experiment, databases=databases, workload=workload)
    check_plan_sample_budget(experiment, prepared.tables.plan, stop_ns)  # before the engine samples
    topology = prepared.topology
    assert topology is not None  # built unless with_topology=False
    note = intra_host_note(experiment, prepared.tables.plan, topology)
    if note:
        print_note(note)
    fault_plan = fault_models.resolve_faults(experiment.faults, topology, experiment.network, stop_ns)
    for warning in fault_models.unused_link_warnings(fault_plan, topology, prepared.tables.plan):
        print(f"heterosim: warning: {warning}", file=sys.stderr)
    t3 = time.perf_counter()
    baseline_run = fault_plan is not None and experiment.simulation.fault_baseline
    engine = execute_plan(
        prepared.tables.plan,
        topology,
        experiment.network,
        experiment.simulation,
        stop_ns=stop_ns,
        progress=progress,
        faults=fault_plan,
        release_schedule=release_schedule and not baseline_run,
    )
    prepared.stage_wall_s["engine_s"] = time.perf_counter() - t3
    fault_models.check_faults_in_run(fault_plan, engine.makespan_ns, engine.partial)
    baseline = None
    if baseline_run:
        t4 = time.perf_counter()
        baseline = execute_plan(
            prepared.tables.plan, topology, experiment.network, experiment.simulation, stop_ns=stop_ns
        )
        prepared.stage_wall_s["baseline_engine_s"] = time.perf_counter() - t4
    return RunArtifacts.from_prepared(experiment, prepared, engine, faults=fault_plan, baseline=baseline)


INTRA_HOST_NOTE_MIN_BYTES = 64 << 30  # below this a packet run is short either way


def intra_host_note(
    experiment: ExperimentConfig, plan: Any, topology: Topology, min_bytes: int = INTRA_HOST_NOTE_MIN_BYTES
) -> str | None:
    """A hint for long packet runs whose bytes are mostly copies inside hosts (None otherwise):
    those copies are most of the packet events, and ``simulation.intra_host: flow`` runs them in
    the fluid model while the fabric stays frame by frame."""
    sim = experiment.simulation
    if not sim.network_model.models_intra_host or sim.intra_host != "packet":
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
    return (
        f"{share:.0%} of the {total / 2**30:,.0f} GiB this packet run moves are copies between "
        "GPUs of one host (NVLink/PCIe frames: most of its events); --set "
        "simulation.intra_host=flow runs them in the fluid model and leaves the fabric frame by "
        "frame (benchmarks/README.md: 5-10x fewer events, iteration within 1 %)"
    )


def _record_granularity(experiment: ExperimentConfig) -> ExperimentConfig:
    """The experiment with its collective granularity, (packet fidelity) intra-host model and
    (TP > 1) backward TP overlap, defaults included, written into ``resolved``, so results.json
    (experiment.resolved) says which ones ran."""
    resolved = copy.deepcopy(experiment.resolved)
    simulation = resolved.get("simulation")
    simulation = dict(simulation) if isinstance(simulation, dict) else {}
    simulation["collective_granularity"] = experiment.simulation.collective_granularity
    simulation["queue_pairs"] = experiment.simulation.queue_pairs
    model = experiment.simulation.network_model
    if model.models_intra_host:
        simulation["intra_host"] = experiment.simulation.intra_host
    if model.accelerates:
        simulation["packet_acceleration"] = experiment.simulation.packet_acceleration
    resolved["simulation"] = simulation
    parallel = resolved.get("parallel")
    if isinstance(parallel, dict) and experiment.parallel.tp > 1:  # auto resolved by the framework
        overlap = experiment.parallel.backward_overlap(experiment.framework.name)
        resolved["parallel"] = {**parallel, "tp_backward_overlap": overlap}
    return replace(experiment, resolved=resolved)
