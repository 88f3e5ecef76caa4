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

from heterosim.plan.execution_plan import COMPUTE, FLOW, MARKER, ExecutionPlan, task_indices
from heterosim.report.intervals import union_length

SIDES_PER_BLOCK = 1 << 19  # flow sides per block of ranks in the host unions (bounded memory)
FLOWS_PER_BLOCK = 1 << 18  # flows per block in the per-instance spans (bounded memory)


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
    natural order and bounded in memory: spans sort a block of flows at a time by (instance,
    rank) starting from task order, where a collective's flows are contiguous; the
    host-local/remote unions take a block of ranks at a time and sort its sides by (group,
    start).
    """
    num_ranks = len(rank_gpu)
    gpu_rank = np.full(max(plan.num_gpus, int(rank_gpu.max()) + 1), -1, dtype=np.int32)
    gpu_rank[rank_gpu] = np.arange(num_ranks)
    ran = end_ns >= 0

    comp = np.flatnonzero((plan.kind == COMPUTE) & ran)
    comp = comp[gpu_rank[plan.gpu[comp]] >= 0]  # compute on a GPU without a rank is no rank's
    comp_rank = gpu_rank[plan.gpu[comp]]
    compute = union_length(start_ns[comp], end_ns[comp], comp_rank, num_ranks)

    # Each flow touches two GPUs: its sender and its receiver. Per flow only its task and ranks
    # are kept; times, instance and hosts are read a block of flows at a time (peak memory).
    flows = _Flows(plan, task_indices((plan.kind == FLOW) & ran), gpu_rank, gpu_host, start_ns, end_ns)
    span_rank, span_start, span_end = _instance_spans(flows, num_ranks)
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
    by_host = _host_unions(flows, num_ranks)
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


class _Flows:
    """The flows that ran: task index and sender / receiver rank per flow (-1: a GPU without a
    rank); :meth:`times`, :meth:`instance` and :meth:`inter_host` read the plan and the task
    times for a selection of them."""

    def __init__(
        self,
        plan: ExecutionPlan,
        task: np.ndarray,
        gpu_rank: np.ndarray,
        gpu_host: np.ndarray,
        start_ns: np.ndarray,
        end_ns: np.ndarray,
    ) -> None:
        self.task = task
        # ranks in 8 or 16 bits where they fit (memory: two per flow), gathered a block at a time
        top = int(gpu_rank.max()) if gpu_rank.size else 0
        small = next(t for t in (np.int8, np.int16, np.int32) if top <= np.iinfo(t).max)
        ranks = gpu_rank.astype(small)
        self.src_rank, self.dst_rank = np.empty(task.size, small), np.empty(task.size, small)
        for lo in range(0, task.size, FLOWS_PER_BLOCK):
            block = task[lo : lo + FLOWS_PER_BLOCK]
            np.take(ranks, plan.gpu[block], out=self.src_rank[lo : lo + FLOWS_PER_BLOCK])
            np.take(ranks, plan.dst[block], out=self.dst_rank[lo : lo + FLOWS_PER_BLOCK])
        self._plan, self._gpu_host = plan, gpu_host
        self._start, self._end = start_ns, end_ns

    def times(self, which: slice | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        task = self.task[which]
        return self._start[task], self._end[task]

    def instance(self, which: slice | np.ndarray) -> np.ndarray:
        return self._plan.collective[self.task[which]]

    def inter_host(self, which: slice | np.ndarray) -> np.ndarray:
        task = self.task[which]
        return self._gpu_host[self._plan.gpu[task]] != self._gpu_host[self._plan.dst[task]]


def _host_unions(flows: _Flows, num_ranks: int, sides_per_block: int = SIDES_PER_BLOCK) -> np.ndarray:
    """Union length per (rank, host side) group ``2 * rank + inter_host`` of the flows' sides
    (sender, receiver). A block of ranks is taken at a time, about ``sides_per_block`` sides
    each (bounded memory; a group's union does not depend on the order of its intervals)."""
    src_rank, dst_rank = flows.src_rank, flows.dst_rank
    by_host = np.zeros(2 * num_ranks, dtype=np.int64)
    sides = int(np.count_nonzero(src_rank >= 0) + np.count_nonzero(dst_rank >= 0))
    block = max(1, num_ranks * sides_per_block // max(sides, 1))
    for lo in range(0, num_ranks, block):
        hi = min(num_ranks, lo + block)
        side = _sides_of_ranks(src_rank, dst_rank, lo, hi)  # 2 * flow + (0 sender, 1 receiver)
        flow = side >> 1
        group = np.where(side & 1, dst_rank[flow], src_rank[flow]).astype(np.int64)
        del side
        group -= lo
        group *= 2
        group += flows.inter_host(flow)
        start, end = flows.times(flow)
        by_host[2 * lo : 2 * hi] = union_length(start, end, group, 2 * (hi - lo))
    return by_host


def _sides_of_ranks(src_rank: np.ndarray, dst_rank: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """Ascending ``2 * flow + side`` of the flow sides (0 sender, 1 receiver) whose rank is in
    ``[lo, hi)``, found a block of flows at a time (no mask of every flow's two sides)."""
    parts = []
    for first in range(0, src_rank.size, FLOWS_PER_BLOCK):
        src, dst = src_rank[first : first + FLOWS_PER_BLOCK], dst_rank[first : first + FLOWS_PER_BLOCK]
        mine = np.stack([(src >= lo) & (src < hi), (dst >= lo) & (dst < hi)], axis=1)
        part = np.flatnonzero(mine.ravel())
        part += 2 * first
        parts.append(part)
    return np.concatenate(parts) if parts else np.zeros(0, np.int64)


def _instance_spans(
    flows: _Flows, num_ranks: int, flows_per_block: int = FLOWS_PER_BLOCK
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One span per (rank, instance) over the flows that rank sends or receives: first start to
    last end. Flows without an instance (instance < 0) are their own spans; ranks < 0 (GPUs
    without a rank) are skipped. Spans come in no particular order.

    Each side (sender, receiver) of a block of ``flows_per_block`` flows gets the key
    instance * num_ranks + rank (-1: not grouped) and is sorted with a stable sort, which is
    cheap when flows come in task order (one collective's flows are contiguous there); the
    spans of a key from every block and side are then merged (the same spans as one pass, in
    bounded memory)."""
    count = int(flows.task.size)
    step = max(int(flows_per_block), 1)
    blocks = [slice(lo, lo + step) for lo in range(0, count, step)]
    top = max((int(flows.instance(block).max()) for block in blocks), default=-1)
    cells = (top + 1) * num_ranks if count else 0
    key_type = np.int32 if cells < np.iinfo(np.int32).max else np.int64
    alone_spans: tuple[list, list] = ([], [])  # per side (sender, receiver): (rank, start, end)
    keys, firsts, lasts = [], [], []
    for block in blocks:
        instance = flows.instance(block)
        start, end = flows.times(block)
        alone = instance < 0
        for side, rank in enumerate((flows.src_rank[block], flows.dst_rank[block])):
            if alone.any():
                own = np.flatnonzero(alone & (rank >= 0))
                alone_spans[side].append((rank[own], start[own], end[own]))
            key = np.multiply(instance, num_ranks, dtype=key_type, casting="unsafe")
            key += rank
            key[alone | (rank < 0)] = -1
            grouped = _group_spans(key, start, end)
            del key
            if grouped is not None:
                keys.append(grouped[0])
                firsts.append(grouped[1])
                lasts.append(grouped[2])
    spans = alone_spans[0] + alone_spans[1]  # the senders' own spans, then the receivers'
    ranks, starts, ends = [r for r, _, _ in spans], [a for _, a, _ in spans], [b for _, _, b in spans]
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
