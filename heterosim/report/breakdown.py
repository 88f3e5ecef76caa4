"""Iteration-time breakdown per rank: compute, communication, exposed communication, bubble.

Definitions (per rank ``r`` on GPU ``g``, all in seconds of simulated time):

* ``compute``: length of the union of ``g``'s compute-task intervals;
* ``comm``: length of the union of the communication spans ``g`` takes part in. A span is, for
  each collective instance (or point-to-point transfer) and each GPU in it, the interval from
  the first start to the last end of that instance's flows sent or received by ``g`` — the time
  an NCCL kernel for it would be resident on ``g``;
* ``exposed_comm = |compute ∪ comm| - compute``: communication not hidden behind compute;
* ``bubble = iteration - |compute ∪ comm|``: idle time (pipeline bubbles, waiting for peers);
* ``intra_host_comm`` / ``inter_host_comm``: union of ``g``'s flow intervals whose other end is
  on the same host / another host.

So ``compute + exposed_comm + bubble = iteration`` for every rank. The iteration figure in
results.json is the mean over ranks of each term (so the identity holds for it too), and the
per-rank terms are reported beside it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from heterosim.plan.execution_plan import COMPUTE, FLOW, ExecutionPlan
from heterosim.report.intervals import union_length


@dataclass(frozen=True)
class RankBreakdown:
    """Per-rank terms (ns, int64 arrays indexed by rank)."""

    compute_ns: np.ndarray
    comm_ns: np.ndarray
    busy_ns: np.ndarray
    exposed_comm_ns: np.ndarray
    bubble_ns: np.ndarray
    intra_host_ns: np.ndarray
    inter_host_ns: np.ndarray
    iteration_ns: int


def rank_breakdown(
    plan: ExecutionPlan, start_ns: np.ndarray, end_ns: np.ndarray, rank_gpu: np.ndarray,
    gpu_host: np.ndarray, iteration_ns: int,
) -> RankBreakdown:
    """Compute the breakdown of every rank from task start/end times."""
    num_ranks = len(rank_gpu)
    gpu_rank = np.full(max(plan.num_gpus, int(rank_gpu.max()) + 1), -1, dtype=np.int64)
    gpu_rank[rank_gpu] = np.arange(num_ranks)
    ran = end_ns >= 0

    comp = (plan.kind == COMPUTE) & ran
    comp_rank = gpu_rank[plan.gpu[comp]]
    compute = union_length(start_ns[comp], end_ns[comp], comp_rank, num_ranks)

    flow = np.flatnonzero((plan.kind == FLOW) & ran)
    # Each flow touches two GPUs: its sender and its receiver.
    side_gpu = np.concatenate([plan.gpu[flow], plan.dst[flow]])
    other_gpu = np.concatenate([plan.dst[flow], plan.gpu[flow]])
    side_rank = gpu_rank[side_gpu]
    side_start = np.concatenate([start_ns[flow], start_ns[flow]])
    side_end = np.concatenate([end_ns[flow], end_ns[flow]])
    side_instance = np.concatenate([plan.collective[flow], plan.collective[flow]])
    on_rank = side_rank >= 0
    side_rank, side_gpu, other_gpu = side_rank[on_rank], side_gpu[on_rank], other_gpu[on_rank]
    side_start, side_end, side_instance = side_start[on_rank], side_end[on_rank], side_instance[on_rank]

    span_rank, span_start, span_end = _instance_spans(
        side_rank, side_instance, side_start, side_end, num_ranks
    )
    comm = union_length(span_start, span_end, span_rank, num_ranks)
    busy = union_length(
        np.concatenate([start_ns[comp], span_start]),
        np.concatenate([end_ns[comp], span_end]),
        np.concatenate([comp_rank, span_rank]),
        num_ranks,
    )
    same_host = gpu_host[side_gpu] == gpu_host[other_gpu]
    intra = union_length(side_start[same_host], side_end[same_host], side_rank[same_host], num_ranks)
    inter = union_length(side_start[~same_host], side_end[~same_host], side_rank[~same_host], num_ranks)
    return RankBreakdown(
        compute_ns=compute, comm_ns=comm, busy_ns=busy, exposed_comm_ns=busy - compute,
        bubble_ns=np.maximum(iteration_ns - busy, 0), intra_host_ns=intra, inter_host_ns=inter,
        iteration_ns=int(iteration_ns),
    )


def _instance_spans(
    rank: np.ndarray, instance: np.ndarray, start: np.ndarray, end: np.ndarray, num_ranks: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One span per (rank, instance): first start to last end. Flows without an instance
    (instance < 0) are their own spans."""
    if rank.size == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty
    # One int64 key per (rank, instance); a flow without an instance gets a key of its own.
    alone = instance < 0
    first_alone = int(instance.max()) + 1 if instance.size else 0
    key_instance = np.where(alone, first_alone + np.cumsum(alone) - 1, instance).astype(np.int64)
    stride = int(key_instance.max()) + 1
    unique, inverse = np.unique(rank.astype(np.int64) * stride + key_instance, return_inverse=True)
    span_start = np.full(unique.size, np.iinfo(np.int64).max, dtype=np.int64)
    span_end = np.full(unique.size, np.iinfo(np.int64).min, dtype=np.int64)
    np.minimum.at(span_start, inverse, start)
    np.maximum.at(span_end, inverse, end)
    return unique // stride, span_start, span_end
