"""Several training jobs at once on one cluster: one executor, one network, so their flows contend.

Each job is built on its own GPUs with :func:`heterosim.simulate.experiment.prepare_run`, the
plans are merged (:mod:`heterosim.plan.merge`) with each job's start offset, and one engine run
carries them all; each job's part of the run is then read back as if it had run alone.
"""

from __future__ import annotations

import sys
import time
from dataclasses import replace
from typing import Any

import numpy as np

from heterosim.config.experiment import ExperimentConfig
from heterosim.config.jobs import JobsExperiment
from heterosim.engine import faults as fault_models
from heterosim.engine.executor import EngineResult, execute_plan
from heterosim.engine.process_memory import return_large_frees
from heterosim.engine.topology import Topology, build_topology
from heterosim.plan.budget import check_plan_sample_budget
from heterosim.plan.execution_plan import FLOW
from heterosim.plan.from_traces import PlanTables
from heterosim.plan.merge import MergedPlan, merge_job_plans
from heterosim.results import JobsArtifacts, PreparedRun, RunArtifacts
from heterosim.simulate.experiment import ProgressFn, _record_granularity, prepare_run, run_experiment


def _merged(experiment: JobsExperiment, built: list[tuple[ExperimentConfig, PreparedRun]]) -> MergedPlan:
    """The jobs' plans as one, each shifted to its start, with each task's iteration number."""
    merged = merge_job_plans(
        [b.tables for _, b in built],
        [len(b.rank_gpu) for _, b in built],
        [j.start_ns for j in experiment.jobs],
        experiment.cluster.world_size,
    )
    merged.tables.task_iteration = np.concatenate(
        [np.concatenate([[0], b.tables.task_iteration]) for _, b in built]
    ).astype(np.int32)
    return merged


def _job_runs(
    experiment: JobsExperiment,
    built: list[tuple[ExperimentConfig, PreparedRun]],
    merged: MergedPlan,
    topology: Topology,
    engine: EngineResult,
    stage_wall: dict[str, float],
) -> list[RunArtifacts]:
    """Each job's part of the shared run, as if it had run alone."""
    return [
        RunArtifacts(
            exp,
            b.workload,
            b.traces,
            b.rank_gpu,
            b.tables,
            topology,
            _job_engine(engine, merged, j, experiment.jobs[j].start_ns, b.tables),
            b.compute_provenance,
            stage_wall,
        )
        for j, (exp, b) in enumerate(built)
    ]


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
    experiment = _at_fidelity(experiment, fidelity)
    cluster = experiment.cluster
    built, stage_wall = _prepare_jobs(experiment, databases)
    t2 = time.perf_counter()
    topology = build_topology(cluster)
    stage_wall["topology_s"] = time.perf_counter() - t2
    merged = _merged(experiment, built)
    sim = experiment.simulation
    fault_plan = fault_models.resolve_faults(experiment.faults, topology, experiment.network, stop_ns)
    for warning in fault_models.unused_link_warnings(fault_plan, topology, merged.tables.plan):
        print(f"heterosim: warning: {warning}", file=sys.stderr)
    t3 = time.perf_counter()
    if sample_interval_ns is not None:
        sim = replace(sim, sample_interval_ns=sample_interval_ns)
    check_plan_sample_budget(experiment, merged.tables.plan, stop_ns, sim.sample_interval_ns)
    engine = execute_plan(
        merged.tables.plan,
        topology,
        experiment.network,
        sim,
        stop_ns=stop_ns,
        progress=progress,
        faults=fault_plan,
    )
    stage_wall["engine_s"] = time.perf_counter() - t3
    fault_models.check_faults_in_run(fault_plan, engine.makespan_ns, engine.partial)
    baseline = None
    if fault_plan is not None and sim.fault_baseline:
        t4 = time.perf_counter()
        baseline = execute_plan(
            merged.tables.plan,
            topology,
            experiment.network,
            replace(sim, sample_interval_ns=0),
            stop_ns=stop_ns,
        )
        stage_wall["baseline_engine_s"] = time.perf_counter() - t4
    return JobsArtifacts(
        experiment=experiment,
        jobs=_job_runs(experiment, built, merged, topology, engine, stage_wall),
        merged=merged,
        topology=topology,
        engine=engine,
        rank_gpu=np.concatenate([b.rank_gpu for _, b in built]),
        traces=[t for _, b in built for t in b.traces],
        stage_wall_s=stage_wall,
        faults=fault_plan,
        baseline=baseline,
    )


def _at_fidelity(experiment: JobsExperiment, fidelity: str | None) -> JobsExperiment:
    """The jobs experiment with every job at ``fidelity`` (unchanged for None or its own)."""
    if fidelity is None or fidelity == experiment.simulation.fidelity:
        return experiment
    simulation = replace(experiment.simulation, fidelity=fidelity)
    return replace(
        experiment,
        simulation=simulation,
        jobs=tuple(
            replace(j, experiment=replace(j.experiment, simulation=simulation)) for j in experiment.jobs
        ),
    )


def _prepare_jobs(
    experiment: JobsExperiment, databases: list[str] | None
) -> tuple[list[tuple[ExperimentConfig, PreparedRun]], dict[str, float]]:
    """Each job's experiment (carrying the shared cluster) and its workload, traces and plan on
    its own GPUs of that cluster, and the stages' wall seconds summed over the jobs."""
    stage_wall: dict[str, float] = {}
    built = []
    for job in experiment.jobs:
        job_exp = _record_granularity(job.experiment)
        prepared = prepare_run(
            job_exp,
            databases=databases,
            gpus=np.asarray(job.gpus, np.int64),
            plan_cluster=experiment.cluster,
            with_topology=False,
        )
        for key, value in prepared.stage_wall_s.items():
            stage_wall[key] = stage_wall.get(key, 0.0) + value
        built.append((replace(job_exp, cluster=experiment.cluster), prepared))
    return built, stage_wall


def _job_engine(
    engine: EngineResult, merged: MergedPlan, job: int, start_ns: int, tables: PlanTables
) -> EngineResult:
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
    network = {
        "flows": int(local_flows.size),
        "bytes": int(plan.bytes[local_flows].sum()),
        "retransmits": retransmits,
    }
    unfinished = bool(np.any(end < 0))
    return EngineResult(
        task_start_ns=start,
        task_end_ns=end,
        makespan_ns=int(end.max()) if end.size else 0,
        events=engine.events,
        wall_s=engine.wall_s,
        fidelity=engine.fidelity,
        network=network,
        links=engine.links,
        flows=job_flows,
        series={},
        partial=engine.partial or unfinished,
        error=engine.error,
        fault_counts=engine.fault_counts,
    )


def run_any(experiment: ExperimentConfig | JobsExperiment, **options: Any) -> RunArtifacts | JobsArtifacts:
    """:func:`run_jobs` for an experiment of several jobs, :func:`run_experiment` otherwise."""
    if isinstance(experiment, JobsExperiment):
        options.pop("workload", None)
        options.pop("release_schedule", None)  # released by the caller once every job ran
        return run_jobs(experiment, **options)
    return run_experiment(experiment, **options)


def run_for_reports(
    experiment: ExperimentConfig | JobsExperiment, **options: Any
) -> RunArtifacts | JobsArtifacts:
    """:func:`run_any` for a run whose plan only feeds reports afterwards (``heterosim run``):
    large freed arrays go back to the system from the start (:func:`return_large_frees`) and the
    plan's schedule columns are freed once every run of it is over (``release_schedule``; a
    single job's plan as soon as the engine has read it, before the run), which lowers the peak
    memory of the run and of the reports."""
    return_large_frees()
    artifacts = run_any(experiment, release_schedule=True, **options)
    artifacts.release_schedule()
    return artifacts
