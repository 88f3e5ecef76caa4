"""Several training iterations back to back: the one-iteration plan repeated with offsets.

Iteration ``i + 1`` of a rank starts after that rank's last node task of iteration ``i`` (its
optimizer step): every node task of the rank without parents gets that task as a parent. Other
tasks (flows, markers of collectives) keep their own dependencies, shifted.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from heterosim.plan.collectives.graph import coo_to_csr
from heterosim.plan.execution_plan import ExecutionPlan


def repeat_plan(
    plan: ExecutionPlan, node_task_offset: np.ndarray, iterations: int
) -> tuple[ExecutionPlan, np.ndarray]:
    """``plan`` repeated ``iterations`` times; also returns the iteration index of every task."""
    if iterations == 1:
        return plan, np.zeros(len(plan), dtype=np.int32)
    n = len(plan)
    ranks = len(node_task_offset)
    node_end = np.append(node_task_offset[1:], _node_task_end(plan, node_task_offset))
    child = np.repeat(np.arange(n), np.diff(plan.dep_ptr))
    parent = plan.dep_idx
    has_parent = np.zeros(n, dtype=bool)
    has_parent[child] = True
    roots, lasts = [], []
    for r in range(ranks):
        first, stop = int(node_task_offset[r]), int(node_end[r])
        if stop > first:
            local = np.arange(first, stop)
            roots.append(local[~has_parent[local]])
            lasts.append(np.full(roots[-1].size, stop - 1))
    roots_all = np.concatenate(roots) if roots else np.zeros(0, np.int64)
    lasts_all = np.concatenate(lasts) if lasts else np.zeros(0, np.int64)
    children, parents = [], []
    for i in range(iterations):
        children.append(child + i * n)
        parents.append(parent + i * n)
        if i:
            children.append(roots_all + i * n)
            parents.append(lasts_all + (i - 1) * n)
    dep_ptr, dep_idx = coo_to_csr(n * iterations, np.concatenate(children), np.concatenate(parents))

    def tile(values: np.ndarray) -> np.ndarray:
        return np.tile(values, iterations)

    repeated = replace(
        plan,
        kind=tile(plan.kind),
        gpu=tile(plan.gpu),
        dst=tile(plan.dst),
        bytes=tile(plan.bytes),
        duration_ns=tile(plan.duration_ns),
        delay_ns=tile(plan.delay_ns),
        stream=tile(plan.stream),
        priority=tile(plan.priority),
        dep_ptr=dep_ptr,
        dep_idx=dep_idx,
        rank=tile(plan.rank),
        node=tile(plan.node),
        collective=tile(plan.collective),
        channel=tile(plan.channel),
        contention_wave=tile(plan.contention_wave),
        contention_share=tile(plan.contention_share),
        contention_above=tile(plan.contention_above),
    )
    return repeated, np.repeat(np.arange(iterations, dtype=np.int32), n)


def _node_task_end(plan: ExecutionPlan, node_task_offset: np.ndarray) -> int:
    """End (exclusive) of the last rank's node tasks: node tasks carry their rank."""
    last = int(node_task_offset[-1])
    rank = plan.rank[last:]
    same = np.flatnonzero(rank != plan.rank[last])
    return last + (int(same[0]) if same.size else len(rank))


def iteration_end_times(end_ns: np.ndarray, iteration: np.ndarray, iterations: int) -> np.ndarray:
    """Finish time of each iteration (last task of that iteration)."""
    out = np.full(iterations, -1, dtype=np.int64)
    np.maximum.at(out, iteration, end_ns)
    return out
