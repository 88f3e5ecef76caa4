"""Several jobs' execution plans as one plan for one executor on one network.

Job ``j``'s tasks keep their order and follow a *start marker*: a MARKER task whose delay is the
job's start time. Every task of the job without parents waits for that marker, so nothing of
the job runs before its start. Task, rank and collective-instance ids are shifted by the jobs
before it; GPU ids are already global (each job's plan is built on the whole cluster's GPUs), so
flows of different jobs share links and contend.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from heterosim.plan.collectives.graph import coo_to_csr
from heterosim.plan.execution_plan import AMOUNT_COLUMNS, MARKER, TASK_COLUMNS, ExecutionPlan
from heterosim.plan.from_traces import PlanTables


@dataclass
class MergedPlan:
    """The merged plan and where each job sits in it."""

    tables: PlanTables  # merged plan, collectives (ids shifted), algorithm/protocol names
    task_start: np.ndarray  # int64 (J,): first own task of each job
    task_end: np.ndarray  # int64 (J,): one past its last task
    start_marker: np.ndarray  # int64 (J,): the start-marker task of each job
    rank_offset: np.ndarray  # int64 (J+1,)
    collective_offset: np.ndarray  # int64 (J+1,)

    def job_tasks(self, job: int) -> np.ndarray:
        return np.arange(self.task_start[job], self.task_end[job])


def merge_job_plans(
    jobs: Sequence[PlanTables], ranks: Sequence[int], start_ns: Sequence[int], num_gpus: int
) -> MergedPlan:
    """One plan from the jobs' plans (``ranks[j]`` ranks in job j, starting at ``start_ns[j]``).

    Each job's tasks follow one marker task that waits its start time; the job's root tasks
    depend on the marker; ranks, collective ids, groups and algorithm/protocol names are shifted
    or merged so the jobs' tables stay apart."""
    columns: dict[str, list[np.ndarray]] = {k: [] for k in TASK_COLUMNS}
    children: list[np.ndarray] = []
    parents: list[np.ndarray] = []
    task_start, task_end, node_offsets, markers = [], [], [], []
    rank_offset = np.concatenate([[0], np.cumsum(ranks)]).astype(np.int64)
    coll_offset = [0]
    group_base = 0
    algorithms: list[str] = []
    protocols: list[str] = []
    colls: dict[str, list[np.ndarray]] = {}
    base = 0
    for j, tables in enumerate(jobs):
        plan = tables.plan
        marker, first = base, base + 1
        markers.append(marker)
        _append_tasks(columns, plan, int(start_ns[j]), int(rank_offset[j]), coll_offset[-1])
        _append_dependencies(children, parents, plan, marker, first)
        count = _append_collectives(colls, tables, coll_offset[-1], first, group_base, algorithms, protocols)
        if count:
            group_base += int(np.max(tables.collectives["group"])) + 1
        coll_offset.append(coll_offset[-1] + count)
        base = first + len(plan)
        task_start.append(first)
        task_end.append(base)
        node_offsets.append(np.asarray(tables.node_task_offset, np.int64) + first)
    dep_ptr, dep_idx = coo_to_csr(base, np.concatenate(children), np.concatenate(parents))
    merged = ExecutionPlan(
        **{k: np.concatenate(v) for k, v in columns.items()},  # type: ignore[arg-type]
        dep_ptr=dep_ptr,
        dep_idx=dep_idx,
        num_gpus=num_gpus,
    )
    collectives = {k: np.concatenate(v) for k, v in colls.items()}
    merged.collectives = collectives
    p2p = int(sum(t.p2p_bytes for t in jobs))
    tables = PlanTables(merged, np.concatenate(node_offsets), collectives, algorithms, protocols, p2p)
    return MergedPlan(
        tables=tables,
        task_start=np.asarray(task_start, np.int64),
        task_end=np.asarray(task_end, np.int64),
        start_marker=np.asarray(markers, np.int64),
        rank_offset=rank_offset,
        collective_offset=np.asarray(coll_offset, np.int64),
    )


def _append_tasks(
    columns: dict[str, list[np.ndarray]],
    plan: ExecutionPlan,
    start_ns: int,
    rank_offset: int,
    coll_offset: int,
) -> None:
    """The job's start marker (a task that only waits ``start_ns``), then its tasks with ranks and
    collective ids shifted past the jobs before it."""
    marker_row = {
        "kind": MARKER,
        "gpu": -1,
        "dst": -1,
        "bytes": 0,
        "duration_ns": 0,
        "delay_ns": start_ns,
        "stream": 0,
        "priority": 0,
        "rank": -1,
        "node": -1,
        "collective": -1,
        "channel": -1,
        "contention_wave": 0.0,
        "contention_share": 0.0,
        "contention_above": 0,
    }
    for k in TASK_COLUMNS:
        values = getattr(plan, k)
        # a start time may not fit the job's 32-bit delays: the merged plan narrows what fits
        marker_dtype = np.int64 if k in AMOUNT_COLUMNS else values.dtype
        columns[k].append(np.array([marker_row[k]], dtype=marker_dtype))
        if k == "rank":  # int64 here too: the merged plan narrows it
            values = np.where(values >= 0, values.astype(np.int64) + rank_offset, values)
        elif k == "collective":  # int64 here: the merged plan narrows it if the ids fit
            values = np.where(values >= 0, values.astype(np.int64) + coll_offset, values)
        columns[k].append(values)


def _append_dependencies(
    children: list[np.ndarray], parents: list[np.ndarray], plan: ExecutionPlan, marker: int, first: int
) -> None:
    """The job's dependency edges shifted to its first task, and its roots hung on its marker."""
    n = len(plan)
    child = np.repeat(np.arange(n, dtype=np.int64), np.diff(plan.dep_ptr))
    children.append(child + first)
    parents.append(plan.dep_idx.astype(np.int64) + first)
    roots = np.flatnonzero(np.diff(plan.dep_ptr) == 0)
    children.append(roots.astype(np.int64) + first)
    parents.append(np.full(roots.size, marker, np.int64))


def _append_collectives(
    colls: dict[str, list[np.ndarray]],
    tables: PlanTables,
    coll_offset: int,
    first: int,
    group_base: int,
    algorithms: list[str],
    protocols: list[str],
) -> int:
    """The job's collective table with ids, tasks and groups shifted and its algorithm and
    protocol names merged into the shared lists; returns its instance count."""
    table = tables.collectives
    count = len(table.get("id", []))
    algo_map = np.array([_index(algorithms, a) for a in tables.algorithms] or [0], np.int64)
    proto_map = np.array([_index(protocols, p) for p in tables.protocols] or [0], np.int64)
    for key, values in table.items():
        values = np.asarray(values)
        if key == "id":
            values = values + coll_offset
        elif key in ("start_task", "end_task"):
            values = values + first
        elif key == "group":
            values = values + group_base
        elif key == "algorithm" and count:
            values = algo_map[values]
        elif key == "protocol" and count:
            values = proto_map[values]
        colls.setdefault(key, []).append(values)
    return count


def _index(names: list[str], name: str) -> int:
    if name not in names:
        names.append(name)
    return names.index(name)
