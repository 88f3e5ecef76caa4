"""Experiments with several training jobs on one cluster (README.md, "Several jobs on one
fabric"; docs/config.md).

::

    name: two-jobs-h4
    cluster: ../topologies/h4_32gpu.yaml
    jobs:                                 # each: an experiment file (its cluster is ignored) or inline
      - {experiment: gpt_a.yaml, gpus: "0-15"}
      - {experiment: {model: gpt3-6.7b, training: {...}, parallel: {...}}, gpus: "16-31", start: 2ms}
    network: {cc: dcqcn, pfc: true}       # shared by every job
    simulation: {fidelity: packet, seed: 1}
    faults: [...]                          # optional, as in any experiment

Each job is validated as an experiment on the hosts its GPUs cover (``tp*pp*dp`` must equal its
GPU count); its own ``network`` and ``simulation`` sections are ignored: the shared ones
apply, since one network and one simulator carry every job. Jobs may share a host (each then
sees the host with its own GPUs only, and their traffic meets on the host's links and NICs) but
not a GPU, and every GPU id must exist in the cluster.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from heterosim.config.cluster import ClusterConfig, HostType, load_cluster, parse_cluster
from heterosim.config.experiment import (
    ExperimentConfig,
    NetworkConfig,
    SimulationConfig,
    _network,
    _simulation,
    apply_overrides,
    parse_experiment,
)
from heterosim.config.faults import FaultSpec, fault_warnings, parse_faults
from heterosim.config.fields import Section, read_yaml_mapping
from heterosim.errors import UserError


@dataclass(frozen=True)
class JobSpec:
    """One job: its experiment (validated on its own hosts), its GPUs and its start time."""

    name: str
    experiment: ExperimentConfig  # cluster: the job's hosts only; network/simulation: shared
    gpus: tuple[int, ...]  # global GPU ids; local GPU i of the job's cluster is gpus[i]
    start_ns: int = 0


@dataclass(frozen=True)
class JobsExperiment:
    """Several jobs sharing one cluster, network and simulator."""

    name: str
    cluster: ClusterConfig
    network: NetworkConfig
    simulation: SimulationConfig
    jobs: tuple[JobSpec, ...]
    faults: tuple[FaultSpec, ...] = ()
    source: str = ""
    resolved: dict[str, Any] = field(default_factory=dict, compare=False)
    warnings: tuple[str, ...] = field(default=(), compare=False)


def is_jobs_mapping(data: dict[str, Any]) -> bool:
    return isinstance(data, dict) and "jobs" in data


def parse_gpu_set(value: Any, where: str, world_size: int) -> tuple[int, ...]:
    """``"0-15"``, ``"0-7,16-23"``, ``5`` or ``[0, 1, 2]`` -> sorted GPU ids (checked)."""
    ids: list[int] = []
    if isinstance(value, bool):
        raise UserError(f'{where}: expected GPU ids such as "0-15", got {value!r}')
    if isinstance(value, int):
        ids = [value]
    elif isinstance(value, list) and len(value) > world_size:  # before the ids are read
        raise UserError(f"{where}: {len(value):,} GPU ids; the cluster has {world_size} GPUs")
    elif isinstance(value, list) and all(isinstance(x, int) and not isinstance(x, bool) for x in value):
        ids = list(value)
    elif isinstance(value, str):
        if value.count(",") >= world_size:  # more parts than GPUs: some GPU is listed twice
            raise UserError(
                f"{where}: {value.count(',') + 1:,} GPU ids or ranges; the cluster has {world_size} GPUs"
            )
        for part in value.split(","):
            part = part.strip()
            lo, sep, hi = part.partition("-")
            try:
                first = int(lo)
                last = int(hi) if sep else first
            except ValueError:
                raise UserError(f"{where}: {part!r} is not a GPU id or range such as 0-15") from None
            if last < first:
                raise UserError(f"{where}: range {part!r} ends before it starts")
            if first < 0 or last >= world_size:  # before the range is built
                missing = first if first < 0 else max(first, world_size)
                raise UserError(
                    f"{where}: GPU {missing} does not exist (the cluster has GPUs 0..{world_size - 1})"
                )
            ids.extend(range(first, last + 1))
    else:
        raise UserError(f'{where}: expected GPU ids such as "0-15", got {value!r}')
    if not ids:
        raise UserError(f"{where}: no GPUs given")
    bad = [g for g in ids if not 0 <= g < world_size]
    if bad:
        raise UserError(f"{where}: GPU {bad[0]} does not exist (the cluster has GPUs 0..{world_size - 1})")
    if len(set(ids)) != len(ids):
        seen: set[int] = set()
        dup = ids[0]
        for dup in ids:  # the first id seen twice (linear, not ids.count per id)
            if dup in seen:
                break
            seen.add(dup)
        raise UserError(f"{where}: GPU {dup} is listed twice")
    return tuple(sorted(ids))


def job_cluster(cluster: ClusterConfig, gpus: tuple[int, ...], where: str) -> ClusterConfig:
    """The cluster the job sees: the hosts ``gpus`` cover, in host order, each with only the
    job's GPUs (a host split between jobs appears as a smaller host of its type, with the NICs
    its GPUs use). The job's workload and partition are built on it; its plan runs on the
    whole cluster's GPUs ``gpus`` (local GPU i is ``gpus[i]``)."""
    hosts = sorted({int(cluster.gpu_host[g]) for g in gpus})
    types: dict[str, HostType] = {}
    order: list[str] = []
    for h in hosts:
        htype = cluster.host(h)
        local = sorted(int(cluster.gpu_local_index[g]) for g in gpus if int(cluster.gpu_host[g]) == h)
        if len(local) == htype.gpus:
            types.setdefault(htype.name, htype)
            order.append(htype.name)
            continue
        nics = sorted({htype.gpu_nic[i] for i in local})
        name = f"{htype.name}[gpus {','.join(str(i) for i in local)}]"
        types.setdefault(
            name,
            replace(
                htype,
                name=name,
                gpus=len(local),
                nics=len(nics),
                gpu_nic=tuple(nics.index(htype.gpu_nic[i]) for i in local),
                pcie_switches=max(1, min(htype.pcie_switches, len(nics))),
            ),
        )
        order.append(name)
    label = f"host {hosts[0]}" if len(hosts) == 1 else f"hosts {hosts[0]}-{hosts[-1]}"
    return replace(cluster, name=f"{cluster.name}[{label}]", host_types=types, host_type_of_host=tuple(order))


def _cluster(top: Section, source: str, base_dir: Path | None) -> ClusterConfig:
    value = top.raw("cluster")
    if isinstance(value, str):
        path = Path(value)
        if not path.is_absolute():
            path = (base_dir or Path.cwd()) / path
        return load_cluster(path)
    if isinstance(value, dict):
        return parse_cluster(value, f"{source}: cluster")
    raise top.error("cluster", "expected a cluster file path or an inline cluster mapping")


def parse_jobs_experiment(data: dict[str, Any], source: str, base_dir: Path | None = None) -> JobsExperiment:
    """Validate a several-jobs experiment mapping read from ``source``."""
    top = Section(data, source)
    name = top.string("name", Path(source).stem if source else "jobs")
    cluster = _cluster(top, source, base_dir)
    network = _network(top.section("network"))
    simulation = _simulation(top.section("simulation"))
    if simulation.replicas == "fold":  # heterosim/plan/fold.py: one job's replicas only
        raise top.error("simulation.replicas", "fold: several jobs share the fabric; use all")
    if simulation.fold_timing != "all":  # it applies to simulation.replicas: fold only
        raise top.error(
            "simulation.fold_timing", f"{simulation.fold_timing}: needs simulation.replicas: fold; use all"
        )
    faults = parse_faults(top.raw("faults", None), source)
    entries = top.raw("jobs")
    if not isinstance(entries, list) or not entries:
        raise top.error("jobs", "expected a non-empty list of {experiment, gpus, start}")
    if len(entries) > cluster.world_size:  # before any job is read: each job needs a GPU
        raise top.error("jobs", f"{len(entries):,} jobs; the cluster has {cluster.world_size} GPUs")
    top.reject_unknown()
    jobs: list[JobSpec] = []
    owner: dict[int, int] = {}
    names: set[str] = set()
    for i, entry in enumerate(entries):
        job = _job(entry, i, source, base_dir, cluster, network, simulation)
        for g in job.gpus:
            if g in owner:
                raise UserError(
                    f"{source}: jobs[{i}]: gpus: GPU {g} is already used by jobs[{owner[g]}]; "
                    "jobs may not share GPUs"
                )
            owner[g] = i
        if job.name in names:
            job = replace(job, name=f"{job.name}#{i}")
        names.add(job.name)
        jobs.append(job)
    return JobsExperiment(
        name=name,
        cluster=cluster,
        network=network,
        simulation=simulation,
        jobs=tuple(jobs),
        faults=faults,
        source=source,
        resolved=copy.deepcopy(data),
        warnings=tuple(fault_warnings(faults)),
    )


def _job(
    entry: Any,
    i: int,
    source: str,
    base_dir: Path | None,
    cluster: ClusterConfig,
    network: NetworkConfig,
    simulation: SimulationConfig,
) -> JobSpec:
    section = Section(entry, source, f"jobs[{i}]")
    where = f"{source}: jobs[{i}]"
    gpus = parse_gpu_set(section.raw("gpus"), f"{where}: gpus", cluster.world_size)
    start_ns = section.time_ns("start", 0)
    if start_ns < 0:
        raise section.error("start", f"expected a time >= 0, got {start_ns} ns")
    value = section.raw("experiment")
    job_name = section.string("name", "")
    section.reject_unknown()
    if isinstance(value, str):
        path = Path(value)
        if not path.is_absolute():
            path = (base_dir or Path.cwd()) / path
        if path.is_dir():
            raise section.error("experiment", f"{path} is a directory, expected an experiment file")
        job_data, job_source, job_dir = read_yaml_mapping(path), str(path), path.parent
    elif isinstance(value, dict):
        job_data, job_source, job_dir = copy.deepcopy(value), f"{where}: experiment", base_dir or Path.cwd()
    else:
        raise section.error("experiment", "expected an experiment file path or an inline experiment")
    if "jobs" in job_data:
        raise UserError(f"{job_source}: jobs: a job cannot hold jobs of its own")
    if job_data.get("faults"):
        raise UserError(f"{job_source}: faults: faults belong to the top-level file {source}")
    job_data.pop("cluster", None)  # the job runs on its GPUs of the shared cluster
    sub = job_cluster(cluster, gpus, f"{where}: gpus")
    experiment = parse_experiment(job_data, job_source, base_dir=job_dir, cluster_override=sub)
    experiment = replace(experiment, network=network, simulation=simulation)
    return JobSpec(name=job_name or experiment.name, experiment=experiment, gpus=gpus, start_ns=start_ns)


def parse_any_experiment(
    data: dict[str, Any], source: str, base_dir: Path | None = None
) -> ExperimentConfig | JobsExperiment:
    """A one-job experiment, or a several-jobs one when the mapping has ``jobs``."""
    if is_jobs_mapping(data):
        return parse_jobs_experiment(data, source, base_dir)
    return parse_experiment(data, source, base_dir=base_dir)


def load_any_experiment(
    path: str | Path, overrides: list[str] | None = None
) -> ExperimentConfig | JobsExperiment:
    """Read, override and validate an experiment file of either kind."""
    path = Path(path)
    data = apply_overrides(read_yaml_mapping(path), overrides or [], str(path))
    return parse_any_experiment(data, str(path), base_dir=path.parent)


def solo_experiment(experiment: JobsExperiment, job: int) -> JobsExperiment:
    """The experiment with job ``job`` alone on the cluster (same GPUs, start, network, faults):
    the baseline against which sharing the fabric is measured."""
    return replace(
        experiment, name=f"{experiment.name}:{experiment.jobs[job].name}-alone", jobs=(experiment.jobs[job],)
    )
