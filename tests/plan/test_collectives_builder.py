"""PlanBuilder: compute tasks and collective sub-DAGs concatenated into one valid plan."""

from __future__ import annotations

import numpy as np

from heterosim.config.cluster import load_cluster
from heterosim.plan.builder import PlanBuilder
from heterosim.plan.collectives import decompose_collective
from heterosim.plan.execution_plan import COMPUTE, FLOW, MARKER


def test_builder_wires_collectives_between_compute(repo_root):
    c = load_cluster(repo_root / "topologies" / "two_host_h100.yaml")
    ranks = list(range(16))
    ar = decompose_collective("allreduce", 2**24, ranks, c, algorithm="ring")
    b = PlanBuilder(16)
    fwd = b.add_compute(np.arange(16), np.full(16, 1000))
    start, end = b.add_collective(ar, fwd, priority=3)
    bwd = b.add_compute(np.arange(16), np.full(16, 500), deps=[[end]] * 16)
    start2, end2 = b.add_collective(ar, bwd)
    plan = b.build()
    assert len(plan) == 32 + 2 * len(ar)
    assert list(plan.dep_idx[plan.dep_ptr[start]:plan.dep_ptr[start + 1]]) == list(fwd)
    assert np.all(plan.kind[fwd] == COMPUTE) and plan.kind[end] == MARKER
    # the second copy is the first shifted: same flows, dependencies offset by the copy's start
    n = len(ar)
    assert np.array_equal(plan.bytes[start:start + n], plan.bytes[start2:start2 + n])
    first = plan.dep_idx[plan.dep_ptr[start + 1]:plan.dep_ptr[end + 1]]
    second = plan.dep_idx[plan.dep_ptr[start2 + 1]:plan.dep_ptr[end2 + 1]]
    assert np.array_equal(second - first, np.full(first.shape, start2 - start))
    assert np.all(plan.priority[start:end + 1][plan.kind[start:end + 1] == FLOW] == 3)
    assert list(plan.collectives["start_task"]) == [start, start2]
    assert plan.collectives["algorithm"][0] == ar.algorithm
    assert np.all(plan.collective[start:end + 1] == 0) and np.all(plan.collective[fwd] == -1)
