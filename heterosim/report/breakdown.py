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

A folded data-parallel collective (``simulation.replicas: fold``, a MARKER on the rank's GPU
that waits the collective's time) is a communication span of that time; it has no flows, so it
is in neither intra- nor inter-host communication.

So ``compute + exposed_comm + bubble = iteration`` for every rank. The iteration figure in
results.json is the mean over ranks of each term (so the identity holds for it too), and the
per-rank terms are reported beside it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from heterosim.plan.execution_plan import COMPUTE, FLOW, MARKER, ExecutionPlan
from heterosim.report.intervals import union_length

SIDES_PER_BLOCK = 1 << 21  # flow sides per block of ranks in the host unions (bounded memory)


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
    plan: ExecutionPlan,
    start_ns: np.ndarray,
    end_ns: np.ndarray,
    rank_gpu: np.ndarray,
    gpu_host: np.ndarray,
    iteration_ns: int,
) -> RankBreakdown:
    """Compute the breakdown of every rank from task start/end times.

    Sorting is what costs at millions of flows, so each sort is chosen to be cheap on a plan's
    natural order: spans sort flows by (instance, rank) starting from task order, where a
    collective's flows are contiguous; the host-local/remote unions take flows in start order
    (task order is nearly that) and then only sort by rank (a radix sort).
    """
    num_ranks = len(rank_gpu)
    gpu_rank = np.full(max(plan.num_gpus, int(rank_gpu.max()) + 1), -1, dtype=np.int32)
    gpu_rank[rank_gpu] = np.arange(num_ranks)
    ran = end_ns >= 0

    comp = np.flatnonzero((plan.kind == COMPUTE) & ran)
    comp = comp[gpu_rank[plan.gpu[comp]] >= 0]  # compute on a GPU without a rank is no rank's
    comp_rank = gpu_rank[plan.gpu[comp]]
    compute = union_length(start_ns[comp], end_ns[comp], comp_rank, num_ranks)

    flow = np.flatnonzero((plan.kind == FLOW) & ran)
    # Each flow touches two GPUs: its sender and its receiver.
    src_rank, dst_rank = gpu_rank[plan.gpu[flow]], gpu_rank[plan.dst[flow]]
    inter_host = gpu_host[plan.gpu[flow]] != gpu_host[plan.dst[flow]]
    flow_start, flow_end = start_ns[flow], end_ns[flow]
    instance = plan.collective[flow]
    del flow  # large temporaries go as soon as they are used (peak memory)
    span_rank, span_start, span_end = _instance_spans(
        src_rank, dst_rank, instance, flow_start, flow_end, num_ranks
    )
    del instance
    # a folded collective (heterosim/plan/fold.py): a marker on its rank's GPU waiting its time
    folded = np.flatnonzero((plan.kind == MARKER) & (plan.gpu >= 0) & (plan.delay_ns > 0) & ran)
    folded = folded[gpu_rank[plan.gpu[folded]] >= 0]
    if folded.size:
        span_rank = np.concatenate([span_rank, gpu_rank[plan.gpu[folded]]])
        span_start = np.concatenate([span_start, end_ns[folded] - plan.delay_ns[folded]])
        span_end = np.concatenate([span_end, end_ns[folded]])
    comm = union_length(span_start, span_end, span_rank, num_ranks)
    busy = union_length(
        np.concatenate([start_ns[comp], span_start]),
        np.concatenate([end_ns[comp], span_end]),
        np.concatenate([comp_rank, span_rank]),
        num_ranks,
    )
    del span_rank, span_start, span_end
    # Flows in start order (task order is nearly that), then a block of ranks at a time
    order = np.argsort(flow_start, kind="stable")
    flow_start, flow_end = flow_start[order], flow_end[order]
    src_rank, dst_rank, inter_host = src_rank[order], dst_rank[order], inter_host[order]
    del order
    by_host = _host_unions(src_rank, dst_rank, inter_host, flow_start, flow_end, num_ranks)
    intra, inter = by_host[0::2], by_host[1::2]
    return RankBreakdown(
        compute_ns=compute,
        comm_ns=comm,
        busy_ns=busy,
        exposed_comm_ns=busy - compute,
        bubble_ns=np.maximum(iteration_ns - busy, 0),
        intra_host_ns=intra,
        inter_host_ns=inter,
        iteration_ns=int(iteration_ns),
    )


def _host_unions(
    src_rank: np.ndarray,
    dst_rank: np.ndarray,
    inter_host: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    num_ranks: int,
    sides_per_block: int = SIDES_PER_BLOCK,
) -> np.ndarray:
    """Union length per (rank, host side) group ``2 * rank + inter_host`` of the flows' sides
    (sender, receiver), flows given in start order. A block of ranks is taken at a time, about
    ``sides_per_block`` sides each, in the order the sides of all flows interleaved would have
    (so each group's union is the one a single pass would give, in bounded memory)."""
    by_host = np.zeros(2 * num_ranks, dtype=np.int64)
    sides = int(np.count_nonzero(src_rank >= 0) + np.count_nonzero(dst_rank >= 0))
    block = max(1, num_ranks * sides_per_block // max(sides, 1))
    for lo in range(0, num_ranks, block):
        hi = min(num_ranks, lo + block)
        mine = np.stack([(src_rank >= lo) & (src_rank < hi), (dst_rank >= lo) & (dst_rank < hi)], axis=1)
        side = np.flatnonzero(mine.ravel())  # 2 * flow + (0 sender, 1 receiver)
        del mine
        flow = side >> 1
        group = np.where(side & 1, dst_rank[flow], src_rank[flow]).astype(np.int64)
        del side
        group -= lo
        group *= 2
        group += inter_host[flow]
        by_host[2 * lo : 2 * hi] = union_length(
            start[flow], end[flow], group, 2 * (hi - lo), starts_sorted=True
        )
    return by_host


def _instance_spans(
    src_rank: np.ndarray,
    dst_rank: np.ndarray,
    instance: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    num_ranks: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One span per (rank, instance) over the flows that rank sends or receives: first start to
    last end. Flows without an instance (instance < 0) are their own spans; ranks < 0 (GPUs
    without a rank) are skipped. Spans come in no particular order.

    Each side (sender, receiver) of the flows gets the key instance * num_ranks + rank (-1: not
    grouped) and is sorted with a stable sort, which is cheap when flows come in task order (one
    collective's flows are contiguous there); the two sides' spans of a key are then merged."""
    count = instance.size
    alone = instance < 0
    ranks, starts, ends = [], [], []
    if alone.any():
        for rank in (src_rank, dst_rank):
            own = np.flatnonzero(alone & (rank >= 0))
            ranks.append(rank[own])
            starts.append(start[own])
            ends.append(end[own])
    cells = (int(instance.max()) + 1) * num_ranks if count else 0
    key_type = np.int32 if cells < np.iinfo(np.int32).max else np.int64
    # Each side (sender, receiver) grouped apart, then the two sides' spans of a group merged:
    # the sorts take one side's flows at a time (half the memory of sorting both at once).
    keys, firsts, lasts = [], [], []
    for rank in (src_rank, dst_rank):
        key = np.multiply(instance, num_ranks, dtype=key_type, casting="unsafe")
        key += rank
        key[alone | (rank < 0)] = -1
        side = _group_spans(key, start, end)
        del key
        if side is not None:
            keys.append(side[0])
            firsts.append(side[1])
            lasts.append(side[2])
    if keys:
        merged = _group_spans(np.concatenate(keys), np.concatenate(firsts), np.concatenate(lasts))
        assert merged is not None
        ranks.append(merged[0] % num_ranks)
        starts.append(merged[1])
        ends.append(merged[2])
    if not ranks:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty
    return (
        np.concatenate(ranks).astype(np.int64),
        np.concatenate(starts).astype(np.int64),
        np.concatenate(ends).astype(np.int64),
    )


def _group_spans(
    key: np.ndarray, start: np.ndarray, end: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(key, first start, last end) per distinct key >= 0 (keys < 0 are left out); None when
    there is none. A stable sort, cheap when equal keys come in runs."""
    order = np.argsort(key, kind="stable")
    key = key[order]
    bounds = np.flatnonzero(np.concatenate([[True], key[1:] != key[:-1]])) if key.size else order
    if bounds.size and key[bounds[0]] < 0:
        bounds = bounds[1:]  # the ungrouped sort first; reduceat skips what precedes bounds[0]
    if not bounds.size:
        return None
    keys = key[bounds]
    del key
    return keys, np.minimum.reduceat(start[order], bounds), np.maximum.reduceat(end[order], bounds)
