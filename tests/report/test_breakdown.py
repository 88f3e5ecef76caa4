"""Interval unions and the per-rank breakdown identity compute + exposed + bubble = iteration."""

from __future__ import annotations

import numpy as np

from heterosim.plan.execution_plan import COMPUTE, FLOW, MARKER, ExecutionPlan
from heterosim.report.breakdown import rank_breakdown
from heterosim.report.intervals import union_length


def brute_union(starts, ends, groups, n):
    out = np.zeros(n, dtype=np.int64)
    for g in range(n):
        covered = set()
        for s, e, gg in zip(starts, ends, groups):
            if gg == g:
                covered.update(range(s, e))
        out[g] = len(covered)
    return out


def test_union_matches_brute_force():
    rng = np.random.default_rng(3)
    for _ in range(50):
        k = rng.integers(1, 40)
        starts = rng.integers(0, 200, k)
        ends = starts + rng.integers(-5, 60, k)
        groups = rng.integers(0, 4, k)
        assert np.array_equal(union_length(starts, ends, groups, 4), brute_union(starts, ends, groups, 4))


def plan_of(rows, deps=None):
    kind, gpu, dst, size, coll = zip(*rows)
    n = len(rows)
    return ExecutionPlan(
        kind=np.array(kind, np.uint8),
        gpu=np.array(gpu, np.int32),
        dst=np.array(dst, np.int32),
        bytes=np.array(size, np.int64),
        duration_ns=np.zeros(n, np.int64),
        delay_ns=np.zeros(n, np.int64),
        stream=np.zeros(n, np.int16),
        priority=np.zeros(n, np.uint8),
        dep_ptr=np.zeros(n + 1, np.int64),
        dep_idx=np.zeros(0, np.int64),
        rank=np.zeros(n, np.int32),
        node=np.zeros(n, np.int64),
        collective=np.array(coll, np.int64),
        num_gpus=4,
    )


def test_breakdown_of_a_hand_built_timeline():
    # GPU 0 computes [0,100) and [150,200); a flow 0->1 of collective 7 runs [80,160);
    # GPU 1 computes [0,50); a flow 1->2 (other host) [170,190) of collective 8.
    plan = plan_of(
        [
            (COMPUTE, 0, -1, 0, -1),
            (COMPUTE, 0, -1, 0, -1),
            (FLOW, 0, 1, 10, 7),
            (COMPUTE, 1, -1, 0, -1),
            (FLOW, 1, 2, 10, 8),
            (MARKER, -1, -1, 0, 7),
        ]
    )
    start = np.array([0, 150, 80, 0, 170, 160])
    end = np.array([100, 200, 160, 50, 190, 160])
    gpu_host = np.array([0, 0, 1, 1])
    b = rank_breakdown(plan, start, end, rank_gpu=np.arange(3), gpu_host=gpu_host, iteration_ns=200)
    assert list(b.compute_ns) == [150, 50, 0]
    assert list(b.comm_ns) == [80, 100, 20]  # rank 1: [80,160) + [170,190)
    assert list(b.exposed_comm_ns) == [50, 100, 20]  # rank 0: comm outside compute is [100,150)
    assert list(b.intra_host_ns) == [80, 80, 0]
    assert list(b.inter_host_ns) == [0, 20, 20]
    assert np.array_equal(b.compute_ns + b.exposed_comm_ns + b.bubble_ns, np.full(3, 200))
