"""Timing of the folded data-parallel collectives (``simulation.replicas: fold``).

Each (type, size) the replica issues on a folded communicator (:mod:`heterosim.plan.fold`) is
decomposed for every such communicator of the full cluster and simulated once, all of them at
once on the full fabric, with the run's network and fidelity; the makespan is the time every
folded instance of that (type, size) takes in the replica's plan. APPROXIMATION: see
:mod:`heterosim.plan.fold` (the collectives run alone, without the pipeline traffic of any
replica beside them, all groups starting together).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from heterosim.config.cluster import ClusterConfig
from heterosim.config.experiment import ExperimentConfig
from heterosim.engine.executor import execute_plan
from heterosim.engine.topology import Topology, build_topology
from heterosim.errors import UserError
from heterosim.plan.collectives.common import collective_name
from heterosim.plan.execution_plan import FLOW
from heterosim.plan.fold import (
    KEY,
    FoldedTiming,
    FoldedWorkload,
    ReplicaFold,
    fold_replicas,
    folded_collectives,
    folding_decomposer,
    in_sequence,
    replica_traces,
)
from heterosim.simulate.fold_symmetry import representatives
from heterosim.workload.generator import Workload
from heterosim.workload.trace import RankTrace


@dataclass
class FoldedRun:
    """What :func:`heterosim.simulate.prepare_run` builds the folded plan from."""

    workload: Any  # FoldedWorkload: the replica's ranks, local numbering
    traces: list[RankTrace]
    rank_gpu: np.ndarray  # int64: GPU of each local rank (GPUs of the full cluster)
    groups: dict[int, list[int]]
    decompose: Callable[..., Any]  # folded collectives -> timed markers
    topology: Topology
    summary: dict[str, Any]  # results.json sim.replicas


def fold_run(
    experiment: ExperimentConfig,
    workload: Any,
    groups: dict[int, list[int]],
    rank_gpu: np.ndarray,
    cluster: ClusterConfig,
    decompose: Callable[..., Any],
) -> FoldedRun:
    """Replica 0's traces and communicators, and its folded collectives timed on the full fabric."""
    source = experiment.source
    if not isinstance(workload, Workload):
        raise UserError(
            f"{source or 'experiment'}: {KEY}: fold: needs a generated workload, not imported traces"
        )
    fold = fold_replicas(workload.layout, groups, rank_gpu, cluster, source)
    traces = replica_traces(workload, fold, source)
    keys = folded_collectives(traces, fold, source)
    blocks = [
        [decompose(comm_type, size, [int(g) for g in rank_gpu[fold.folded[gid]]]) for gid in gids]
        for (comm_type, size), gids in keys.items()
    ]
    # routes only for the flows that will run: the folded collectives' and any pair of the
    # replica's GPUs (engine/topology.py: the full table grows with the square of the GPUs)
    replica_gpus = np.asarray(rank_gpu, np.int64)[fold.ranks]
    pairs = [np.stack(np.meshgrid(replica_gpus, replica_gpus), axis=-1).reshape(-1, 2)]
    for block in blocks:
        for p in block:
            flows = p.kind == FLOW
            pairs.append(np.stack([p.gpu[flows], p.dst[flows]], axis=1).astype(np.int64))
    topology = build_topology(cluster, gpu_pairs=np.concatenate(pairs))
    extra: list[dict[str, Any]] = [{} for _ in blocks]
    timed = blocks
    if experiment.simulation.fold_timing == "representative":  # heterosim/simulate/fold_symmetry.py
        host_kind = np.unique(np.asarray(cluster.host_type_of_host), return_inverse=True)[1]
        chosen = [representatives(block, topology, cluster.gpu_host, host_kind) for block in blocks]
        timed = [[block[i] for i in r.timed] for block, r in zip(blocks, chosen)]
        extra = [
            {
                "timed_communicators": len(r.timed),
                "components": r.components,
                "classes": r.classes,
                "timed_flows": int(sum(p.num_flows for p in t)),
                "timed_groups": [_group_json(fold, gids[i]) for i in r.timed],
            }
            for r, t, gids in zip(chosen, timed, keys.values())
        ]
    timings = time_folded_collectives(experiment, keys, timed, cluster, topology)
    timings = {
        key: replace(t, communicators=len(block), flows=int(sum(p.num_flows for p in block)), extra=more)
        for (key, t), block, more in zip(timings.items(), blocks, extra)
    }
    return FoldedRun(
        workload=FoldedWorkload(workload, fold, traces),
        traces=traces,
        rank_gpu=np.asarray(rank_gpu, np.int64)[fold.ranks],
        groups=fold.groups,
        decompose=folding_decomposer(decompose, timings),
        topology=topology,
        summary=replicas_summary(fold, timings, experiment.simulation.fold_timing),
    )


def _group_json(fold: ReplicaFold, gid: int) -> dict[str, Any]:
    """A folded communicator as results.json names it: its id and its global ranks."""
    return {"group": int(gid), "ranks": [int(r) for r in fold.folded[gid]]}


def time_folded_collectives(
    experiment: ExperimentConfig,
    keys: dict[tuple, list[int]],
    blocks: list[list[Any]],
    cluster: ClusterConfig,
    topology: Topology,
) -> dict[tuple, FoldedTiming]:
    """(type, size) -> its time with every listed communicator running it together.

    ``blocks[k]``: the decomposition of the k-th (type, size) of ``keys`` on each of its
    communicators. All (type, size) run in one engine run, one after another (the next starts
    when every collective of the one before has ended, on an idle fabric), so the topology is
    handed to the engine once; ``wall_s`` of each is the run's wall time shared out evenly.
    """
    simulation = replace(experiment.simulation, sample_interval_ns=0)
    t0 = time.perf_counter()
    if not blocks:
        return {}
    plan, barriers = in_sequence(blocks, cluster.world_size)
    engine = execute_plan(plan, topology, experiment.network, simulation)  # one engine run for all
    if engine.partial:
        raise RuntimeError("the folded data-parallel collectives did not finish")
    ends = engine.task_end_ns[barriers].astype(np.int64)
    durations = np.diff(np.concatenate([[0], ends]))
    wall = (time.perf_counter() - t0) / len(blocks)
    return {
        key: FoldedTiming(
            comm_type=key[0],
            size_bytes=key[1],
            duration_ns=int(duration),
            communicators=len(block),
            reference=block[0],
            flows=int(sum(p.num_flows for p in block)),
            wall_s=wall,
        )
        for key, block, duration in zip(keys, blocks, durations)
    }


def replicas_summary(
    fold: ReplicaFold, timings: dict[tuple, FoldedTiming], fold_timing: str = "all"
) -> dict[str, Any]:
    """results.json ``sim.replicas``: what was folded and the collective times put in its place
    (with ``fold_timing`` representative: which communicators were simulated)."""
    out: dict[str, Any] = {
        "mode": "fold",
        "replicas": fold.replicas,
        "simulated": 1,
        "folded": fold.replicas - 1,
        "ranks_simulated": int(len(fold.ranks)),
        "simulated_replica": 0,  # the data-parallel index of the replica kept (heterosim/plan/fold.py)
        "simulated_ranks": fold.ranks.tolist(),  # its global ranks: the ids in ranks.csv
        "folded_communicators": len(fold.folded),
        "collectives": [t.as_json(collective_name(t.comm_type)) for t in timings.values()],
        "timing_wall_s": float(sum(t.wall_s for t in timings.values())),
        "approximation": (
            "one data-parallel replica simulated; its data-parallel collectives timed once per "
            "(type, size) with every replica's group on the full fabric, without the other "
            "replicas' pipeline and tensor-parallel traffic; no imbalance between replicas"
        ),
    }
    if fold_timing == "representative":
        out["fold_timing"] = fold_timing
        out["approximation"] += (
            "; of each (type, size) only one of every set of interchangeable link-disjoint "
            "components of communicators simulated (they share spine switches, not links), "
            "its time taken for all"
        )
    return out
