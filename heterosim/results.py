"""What each kind of run returns: typed results shared by commands, reports, sweeps and validate."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from heterosim.config.experiment import ExperimentConfig
from heterosim.config.jobs import JobsExperiment
from heterosim.config.scenario import ScenarioConfig
from heterosim.engine import faults as fault_models
from heterosim.engine.executor import EngineResult
from heterosim.engine.topology import Topology
from heterosim.plan.from_traces import PlanTables
from heterosim.plan.merge import MergedPlan
from heterosim.workload.trace import RankTrace


@dataclass
class PreparedRun:
    """An experiment up to the engine: workload, traces, placement, timed plan and topology."""

    workload: Any  # heterosim.workload.generator.Workload or an imported trace workload
    traces: list[RankTrace]
    rank_gpu: np.ndarray  # int64 (ranks,): global GPU index of each rank
    tables: PlanTables
    topology: Topology | None  # None for one job of several (the jobs run builds the whole one)
    compute_provenance: dict[str, float]  # share of compute time per provenance
    stage_wall_s: dict[str, float]  # workload_s, plan_s, topology_s (engine_s once run)
    # layers whose ops were scaled to a measured whole layer (heterosim.plan.compute.layer_gap)
    compute_layers: list[dict[str, Any]] = field(default_factory=list)
    # simulation.replicas: fold: what was folded (heterosim.simulate.fold.replicas_summary)
    replicas: dict[str, Any] | None = None


@dataclass
class RunArtifacts:
    """Everything a report needs about one simulated experiment."""

    experiment: ExperimentConfig
    workload: Any
    traces: list[RankTrace]
    rank_gpu: np.ndarray
    tables: PlanTables
    topology: Topology
    engine: EngineResult
    compute_provenance: dict[str, float]
    stage_wall_s: dict[str, float]
    faults: fault_models.FaultPlan | None = None
    baseline: EngineResult | None = None  # the same plan without faults (simulation.fault_baseline)
    compute_layers: list[dict[str, Any]] = field(default_factory=list)
    replicas: dict[str, Any] | None = None  # simulation.replicas: fold (PreparedRun.replicas)

    @classmethod
    def from_prepared(
        cls,
        experiment: ExperimentConfig,
        prepared: PreparedRun,
        engine: EngineResult,
        *,
        faults: fault_models.FaultPlan | None = None,
        baseline: EngineResult | None = None,
    ) -> RunArtifacts:
        assert prepared.topology is not None
        return cls(
            experiment,
            prepared.workload,
            prepared.traces,
            prepared.rank_gpu,
            prepared.tables,
            prepared.topology,
            engine,
            prepared.compute_provenance,
            prepared.stage_wall_s,
            faults,
            baseline,
            list(prepared.compute_layers),
            prepared.replicas,
        )

    def release_schedule(self) -> int:
        """Free the plan's engine-only columns once the run is over (reports do not read them;
        :meth:`ExecutionPlan.release_schedule`), and its compute durations too when there are no
        fault records to read them; return the bytes freed."""
        return self.tables.plan.release_schedule(durations=self.faults is None)


@dataclass(frozen=True)
class CollectiveSpec:
    """One collective: its name, communicator (GPU ids in order) and NCCL overrides."""

    op: str  # a collective name or alias (heterosim.plan.collectives.common)
    ranks: tuple[int, ...]
    algorithm: str = "auto"  # config.choices.COLLECTIVE_ALGORITHMS
    protocol: str = "auto"  # config.choices.COLLECTIVE_PROTOCOLS
    channels: int = 0  # 0: as NCCL would pick
    root: int = 0  # communicator index (broadcast, reduce, gather, scatter)
    granularity: str = "chunk"  # config.choices.GRANULARITIES (heterosim.plan.collectives.granularity)


@dataclass(frozen=True)
class CollectiveResult:
    """One simulated collective in nccl-tests terms (algbw = S / t; busbw = algbw x bus factor)."""

    op: str
    size_bytes: int
    time_s: float
    algbw_GBps: float
    busbw_GBps: float
    algorithm: str  # what ran (NCCL's choice unless overridden)
    protocol: str
    channels: int
    flows: int
    predicted_time_s: float  # NCCL's tuning-model time for the same choice
    fidelity: str
    network: dict[str, int]  # the engine's counters
    # socket hosts at packet fidelity: the TCP summary (heterosim.engine.packet.tcp_stats)
    tcp: dict[str, Any] | None = None
    # the engine's cost, as run's results.json sim: fidelity, wall_s (engine only, no start-up
    # or build), events, and in packet fidelity packet_acceleration
    sim: dict[str, Any] = field(default_factory=dict)

    @property
    def count(self) -> int:
        """Elements of 4 bytes, as nccl-tests prints them."""
        return self.size_bytes // 4

    def row(self) -> dict[str, Any]:
        """The fields results.json records per size (docs/results.md)."""
        return {
            "size_bytes": self.size_bytes,
            "time_s": self.time_s,
            "algbw_GBps": self.algbw_GBps,
            "busbw_GBps": self.busbw_GBps,
            "algorithm": self.algorithm,
            "protocol": self.protocol,
            "channels": self.channels,
            "flows": self.flows,
            "predicted_time_s": self.predicted_time_s,
            "network": dict(self.network),
            "sim": dict(self.sim),
            **({"tcp": self.tcp} if self.tcp else {}),
        }


@dataclass(frozen=True)
class FlowSetRun:
    """A scenario's flows run on one network model: the engine's raw tables for the report."""

    scenario: ScenarioConfig
    topology: Topology
    fidelity: str
    raw: Mapping[str, Any]  # flows, ports, counters, series (heterosim.engine.packet / fluid)


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

    def release_schedule(self) -> int:
        """Free the engine-only columns of the merged plan and of each job's own plan once the
        run is over (:meth:`RunArtifacts.release_schedule`); return the bytes freed."""
        return self.merged.tables.plan.release_schedule() + sum(job.release_schedule() for job in self.jobs)
