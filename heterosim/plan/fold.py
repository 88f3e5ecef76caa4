"""Replica folding (``simulation.replicas: fold``): one data-parallel replica's ranks in the plan,
its data-parallel collectives as timed tasks.

When every data-parallel replica runs the same program on hardware of the same shape, the plan
keeps the ranks of replica 0 only (renumbered 0..n-1, their GPUs the real ones of the full
cluster): their compute, their TP / CP / PP traffic on the real fabric. A collective on a
communicator with exactly one member in every replica (gradient reduce-scatter or all-reduce,
parameter all-gather) becomes a start and an end marker; the end marker's delay is the
collective's time, measured once per (type, size) by simulating that collective on every such
communicator at once on the full fabric (:mod:`heterosim.simulate.fold`), as they run in the
iteration, where every (TP, PP) position's data-parallel group reduces the same bucket together.

APPROXIMATION: the other replicas' pipeline and tensor-parallel traffic is not on the fabric
beside the replica's own, nor beside the data-parallel collectives (which are timed alone, all
groups of one (type, size) starting together); the collectives hold no communication blocks
against compute (no compute contention from them); there is no straggler or imbalance between
replicas (they are identical by construction). benchmarks/README.md ("Replica folding") measures
the agreement with full runs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from heterosim.config.cluster import ClusterConfig
from heterosim.errors import UserError
from heterosim.plan.collectives.graph import CollectivePlan, coo_to_csr
from heterosim.plan.execution_plan import MARKER, ExecutionPlan
from heterosim.workload.trace import COMM_COLL_NODE, RankTrace

KEY = "simulation.replicas"


@dataclass(frozen=True)
class ReplicaFold:
    """Which ranks the folded plan keeps and how communicators map onto them."""

    ranks: np.ndarray  # int64: global rank of local rank i (replica 0, ascending)
    replicas: int  # data-parallel replicas folded into one
    groups: dict[int, list[int]]  # communicators in local ranks (folded ones: the replica's member)
    folded: dict[int, list[int]]  # folded communicators: all their global ranks, in order
    # communicators across replicas but not one rank per replica (e.g. the world): size
    spanning: dict[int, int] = field(default_factory=dict)


def _error(source: str, problem: str) -> UserError:
    return UserError(f"{source or 'experiment'}: {KEY}: fold: {problem}; use {KEY}=all")


def fold_replicas(
    layout: Any, groups: dict[int, list[int]], rank_gpu: np.ndarray, cluster: ClusterConfig, source: str = ""
) -> ReplicaFold:
    """Replica 0's ranks and its communicators; a UserError (naming ``simulation.replicas``)
    where replicas are placed on hosts, GPU slots or host types of different pattern.
    Communicators neither inside one replica nor one rank per replica are listed in
    ``spanning`` (a collective on one is refused by :func:`folded_collectives`)."""
    coords = np.asarray(layout.coords)
    dp_of = coords[:, 1].astype(np.int64)
    replicas = int(dp_of.max()) + 1
    if replicas < 2:
        raise _error(source, "needs parallel.dp >= 2")
    cp_of = np.asarray(getattr(layout, "cp_coords", np.zeros(len(dp_of), np.int64)))
    order = np.lexsort((coords[:, 0], cp_of, coords[:, 2], dp_of))  # by replica, then position
    if len(order) % replicas:
        raise _error(source, "replicas of different sizes")
    grid = order.reshape(replicas, -1)
    if np.any(dp_of[grid] != np.arange(replicas)[:, None]):
        raise _error(source, "replicas of different sizes")
    _check_same_shape(grid, np.asarray(rank_gpu, np.int64), cluster, source)
    ranks = np.sort(grid[0])
    local = np.full(len(dp_of), -1, np.int64)
    local[ranks] = np.arange(len(ranks))
    position = (coords[:, 0] * (int(coords[:, 2].max()) + 1) + coords[:, 2]) * (int(cp_of.max()) + 1) + cp_of
    kept: dict[int, list[int]] = {}
    folded: dict[int, list[int]] = {}
    spanning: dict[int, int] = {}
    for gid, members in groups.items():
        m = np.asarray(members, np.int64)
        d = dp_of[m]
        if np.all(d == d[0]):
            if d[0] == 0:
                kept[gid] = local[m].tolist()
        elif (
            m.size == replicas
            and np.array_equal(np.sort(d), np.arange(replicas))
            and np.all(position[m] == position[m[0]])  # the same (TP, PP, CP) place in each
        ):
            folded[gid] = list(members)
            kept[gid] = [int(local[m[d == 0][0]])]
        else:  # refused if the replica issues a collective on it (folded_collectives)
            spanning[gid] = int(m.size)
    return ReplicaFold(ranks, replicas, kept, folded, spanning)


def _check_same_shape(grid: np.ndarray, rank_gpu: np.ndarray, cluster: ClusterConfig, source: str) -> None:
    """Every replica on hosts of one type, its ranks sharing hosts and GPU slots (rails) in the
    same pattern as replica 0's (the same up to an order-keeping renaming of hosts and slots)."""
    gpus = rank_gpu[grid]
    host = cluster.gpu_host[gpus]
    slot = cluster.gpu_local_index[gpus]
    types = np.array([cluster.host_type_of_host[int(h)] for h in np.unique(host)])
    if np.unique(types).size > 1:
        raise _error(source, "replicas run on hosts of different types")
    for what, where in (("hosts", host), ("GPU slots (rails)", slot)):
        pattern0 = np.unique(where[0], return_inverse=True)[1]
        for r in range(1, grid.shape[0]):
            if not np.array_equal(np.unique(where[r], return_inverse=True)[1], pattern0):
                raise _error(source, f"replica {r} shares {what} in a different pattern from replica 0")


def replica_traces(workload: Any, fold: ReplicaFold, source: str = "") -> list[RankTrace]:
    """The replica's traces, renumbered to local ranks (send / recv peers included)."""
    local = np.full(workload.world_size, -1, np.int64)
    local[fold.ranks] = np.arange(len(fold.ranks))
    out = []
    for i, rank in enumerate(fold.ranks.tolist()):
        trace = workload.trace(rank)
        has = trace.peer >= 0
        peer = trace.peer
        if has.any():
            mapped = local[np.where(has, peer, 0)]
            if np.any(mapped[has] < 0):
                raise _error(source, f"rank {rank} sends to or receives from another replica")
            peer = np.where(has, mapped, -1).astype(trace.peer.dtype)
        out.append(replace(trace, rank=i, peer=peer))
    return out


def folded_collectives(
    traces: list[RankTrace], fold: ReplicaFold, source: str = ""
) -> dict[tuple, list[int]]:
    """(comm type, size) of every collective the replica issues on a folded communicator ->
    those communicators (ascending); the split (all-to-all-v) ones and any on a communicator
    of one rank that could be mistaken for them are refused."""
    found: dict[tuple, set[int]] = {}
    alone: set[tuple] = set()
    for trace in traces:
        templates = trace.templates
        rows = np.unique(trace.template[trace.node_type == COMM_COLL_NODE])
        splits = templates.split_lengths()
        for row in rows.tolist():
            gid = int(templates.comm_group[row])
            key = (int(templates.comm_type[row]), int(templates.comm_bytes[row]))
            if gid in fold.spanning:
                raise _error(
                    source,
                    f"communicator {gid} ({fold.spanning[gid]} ranks) spans data-parallel replicas "
                    "but is not one rank per replica",
                )
            if gid in fold.folded:
                if splits[row]:
                    raise _error(source, "an all-to-all-v across replicas")
                found.setdefault(key, set()).add(gid)
            elif len(fold.groups.get(gid, ())) == 1:
                alone.add(key)
    if alone & found.keys():
        raise _error(source, "a collective on a one-rank communicator has the size of a folded one")
    return {key: sorted(gids) for key, gids in sorted(found.items())}


@dataclass(frozen=True)
class FoldedTiming:
    """One folded (type, size): its time on the full fabric and how it was decomposed."""

    comm_type: int
    size_bytes: int
    duration_ns: int
    communicators: int
    reference: CollectivePlan  # one communicator's decomposition (algorithm, protocol, channels)
    flows: int  # flows of all communicators together
    wall_s: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    def as_json(self, name: str) -> dict[str, Any]:
        return {
            "op": name,
            "size_bytes": self.size_bytes,
            "time_s": self.duration_ns * 1e-9,
            "communicators": self.communicators,
            "ranks": int(len(self.reference.ranks)),
            "algorithm": self.reference.algorithm,
            "protocol": self.reference.protocol,
            "channels": self.reference.channels,
            "flows": self.flows,
            "wall_s": self.wall_s,
            **self.extra,
        }


def timed_plan(timing: FoldedTiming) -> CollectivePlan:
    """A folded collective as two markers; the end one waits the measured time."""
    ref = timing.reference
    z = np.zeros(2, np.int64)
    return CollectivePlan(
        op=ref.op,
        size_bytes=timing.size_bytes,
        ranks=ref.ranks[:1],
        algorithm=ref.algorithm,
        protocol=ref.protocol,
        channels=ref.channels,
        predicted_ns=ref.predicted_ns,
        kind=np.full(2, MARKER, np.uint8),
        gpu=np.full(2, -1, np.int32),
        dst=np.full(2, -1, np.int32),
        bytes=z,
        payload=z,
        delay_ns=np.array([0, timing.duration_ns], np.int64),
        channel=np.full(2, -1, np.int32),
        step=np.full(2, -1, np.int32),
        chunk=np.full(2, -1, np.int32),
        dep_ptr=np.array([0, 0, 1], np.int64),
        dep_idx=np.zeros(1, np.int64),
        granularity=ref.granularity,
    )


def folding_decomposer(
    decompose: Callable[..., CollectivePlan], timings: dict[tuple, FoldedTiming]
) -> Callable:
    """``decompose`` with the folded collectives (one member left, a timed (type, size)) replaced
    by :func:`timed_plan`."""
    plans = {key: timed_plan(t) for key, t in timings.items()}

    def wrapped(comm_type: int, size_bytes: int, gpus: list[int], pair_bytes=None) -> CollectivePlan:
        key = (int(comm_type), int(size_bytes))
        if pair_bytes is None and len(gpus) == 1 and key in plans:  # the end marker on the GPU
            gpu = np.array([-1, gpus[0]], np.int32)  # (report/breakdown.py counts it as comm)
            return replace(plans[key], ranks=np.asarray(gpus, np.int64), gpu=gpu)
        return decompose(comm_type, size_bytes, gpus, pair_bytes=pair_bytes)

    return wrapped


def in_sequence(blocks: list[list[CollectivePlan]], num_gpus: int) -> tuple[ExecutionPlan, np.ndarray]:
    """Blocks of collectives as one runnable plan: the collectives of a block start together,
    each its own instance, once every collective of the block before has ended (a barrier
    marker after each block). Returns the plan and the barrier tasks: block k lasts from the
    end of barrier k-1 (or 0) to the end of barrier k."""
    plans: list[CollectivePlan] = []
    barrier = CollectivePlan(
        op="barrier",
        size_bytes=0,
        ranks=np.zeros(0, np.int64),
        algorithm="",
        protocol="",
        channels=0,
        predicted_ns=0,
        kind=np.full(1, MARKER, np.uint8),
        gpu=np.full(1, -1, np.int32),
        dst=np.full(1, -1, np.int32),
        bytes=np.zeros(1, np.int64),
        payload=np.zeros(1, np.int64),
        delay_ns=np.zeros(1, np.int64),
        channel=np.full(1, -1, np.int32),
        step=np.full(1, -1, np.int32),
        chunk=np.full(1, -1, np.int32),
        dep_ptr=np.zeros(2, np.int64),
        dep_idx=np.zeros(0, np.int64),
    )
    for block in blocks:
        plans += [*block, barrier]
    plan = side_by_side(plans, num_gpus)
    sizes = np.array([len(p) for p in plans], np.int64)
    first = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    kind = np.array([1 if p is barrier else 0 for p in plans])
    barriers = first[kind == 1]
    child, parent = [], []
    start = 0
    for k, block in enumerate(blocks):  # barrier k <- the block's end markers <- barrier k-1
        members = first[start : start + len(block)]
        ends = members + sizes[start : start + len(block)] - 1
        child.append(np.full(len(block), barriers[k]))
        parent.append(ends)
        if k:
            child.append(members)
            parent.append(np.full(len(block), barriers[k - 1]))
        start += len(block) + 1
    extra_child, extra_parent = np.concatenate(child), np.concatenate(parent)
    own_child = np.repeat(np.arange(len(plan)), np.diff(plan.dep_ptr))
    plan.dep_ptr, plan.dep_idx = coo_to_csr(
        len(plan), np.concatenate([own_child, extra_child]), np.concatenate([plan.dep_idx, extra_parent])
    )
    return plan, barriers


def side_by_side(plans: list[CollectivePlan], num_gpus: int) -> ExecutionPlan:
    """Several collectives as one runnable plan, started together; each its own instance."""
    sizes = np.array([len(p) for p in plans], np.int64)
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    edges = np.array([p.dep_ptr[-1] for p in plans], np.int64)
    n = int(sizes.sum())
    cat = np.concatenate
    dep_ptr = cat([[0], *[p.dep_ptr[1:] + e for p, e in zip(plans, np.cumsum(edges) - edges)]])
    return ExecutionPlan(
        kind=cat([p.kind for p in plans]),
        gpu=cat([p.gpu for p in plans]),
        dst=cat([p.dst for p in plans]),
        bytes=cat([p.bytes for p in plans]),
        duration_ns=np.zeros(n, np.int64),
        delay_ns=cat([p.delay_ns for p in plans]),
        stream=np.zeros(n, np.int16),
        priority=np.zeros(n, np.uint8),
        dep_ptr=dep_ptr.astype(np.int64),
        dep_idx=cat([p.dep_idx + o for p, o in zip(plans, offsets)]).astype(np.int64),
        rank=np.full(n, -1, np.int32),
        node=np.full(n, -1, np.int64),
        collective=np.repeat(np.arange(len(plans), dtype=np.int64), sizes),
        num_gpus=num_gpus,
        channel=cat([p.channel for p in plans]).astype(np.int16),
    )


class FoldedLayout:
    """The workload's layout seen through the replica's local rank numbers (for the reports)."""

    def __init__(self, layout: Any, ranks: np.ndarray) -> None:
        self._layout, self._ranks = layout, ranks

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._layout, name)
        if name.endswith(("_index", "_degree")) and callable(attr):
            return lambda rank, *a: attr(int(self._ranks[rank]), *a)
        return attr

    @property
    def world_size(self) -> int:
        return int(len(self._ranks))


class FoldedWorkload:
    """The workload restricted to the replica's ranks (local numbering), for the reports;
    ``global_ranks[i]``: local rank i's rank in the full job (the id the reports print)."""

    def __init__(self, workload: Any, fold: ReplicaFold, traces: list[RankTrace]) -> None:
        self._workload, self._traces = workload, traces
        self.layout = FoldedLayout(workload.layout, fold.ranks)
        self.world_size = len(fold.ranks)
        self.global_ranks = fold.ranks

    def trace(self, rank: int) -> RankTrace:
        return self._traces[rank]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._workload, name)
