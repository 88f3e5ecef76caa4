"""Per-rank traces -> one execution plan: compute tasks, collective sub-DAGs, point-to-point flows.

Every trace node becomes one *node task* on its rank's GPU:

* compute node -> COMPUTE task (duration from the compute model) on stream 0;
* collective node -> MARKER that finishes when the collective instance's end marker does;
* send / recv node -> MARKER that finishes when the matching transfer (one FLOW) does.

Trace edges become edges between node tasks. A collective *instance* is the k-th collective a
rank issues on communicator g: NCCL requires every member to issue its collectives on a
communicator in the same order, so (g, k) names the same operation on every member. Each
instance is decomposed once per distinct (type, size, GPUs) by the NCCL-style decomposer and
copied with numpy for every instance that shares it. Its start marker waits for every member's
trace parents (a collective cannot complete before all members join), and for the previous
instance on the same communicator (NCCL runs one communicator's collectives in order).
A send on rank a to b with tag t matches the recv on b from a with tag t (the n-th such pair
matches the n-th); the transfer waits for both sides' parents (rendezvous, NCCL's send/recv),
or with ``p2p_rendezvous=False`` for the sender's parents only (eager: Chakra consumers such as
ASTRA-sim start a send when its own dependencies are done; the recv still waits for the data).

An all-to-all-v (a collective node whose template carries per-member send sizes,
``OpTemplates.comm_split``) is one instance like any other; its (n, n) matrix of bytes is
assembled from the members' rows in communicator order, and instances are decomposed once per
distinct (type, members, matrix). Its members disagree on ``comm_bytes`` (each sends its own
total); the instance records the matrix's total.

Approximations (documented, tested): a collective's members start together (at the last
arrival) rather than each as soon as its ring neighbours are ready; compute and communication
kernels do not slow each other down (no SM or memory-bandwidth contention).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from heterosim.config.cluster import ClusterConfig
from heterosim.errors import UserError
from heterosim.plan.collectives.graph import CollectivePlan, coo_to_csr
from heterosim.plan.execution_plan import COMPUTE, FLOW, MARKER, ExecutionPlan, amount_dtype
from heterosim.workload.trace import COMM_COLL_NODE, COMM_RECV_NODE, COMM_SEND_NODE, COMP_NODE, RankTrace

# decompose(comm_type, size_bytes, gpus, pair_bytes=None): pair_bytes is the (n, n) matrix of
# an all-to-all-v (bytes member i sends member j, communicator order), else None
Decomposer = Callable[..., CollectivePlan]


@dataclass
class PlanTables:
    """Plan plus the bookkeeping the reports need."""

    plan: ExecutionPlan
    node_task_offset: np.ndarray  # first node task of each rank (node task = offset + node id)
    collectives: dict[str, np.ndarray]  # one row per instance
    algorithms: list[str]  # names indexed by collectives["algorithm"]
    protocols: list[str]
    p2p_bytes: int
    task_iteration: np.ndarray | None = None  # iteration of every task (several iterations)


@dataclass
class _Rows:
    """Accumulates task rows and COO edges as lists of numpy blocks."""

    kind: list
    gpu: list
    dst: list
    size: list
    duration: list
    delay: list
    priority: list
    rank: list
    node: list
    collective: list
    channel: list
    child: list
    parent: list
    count: int = 0

    @classmethod
    def empty(cls) -> _Rows:
        return cls([], [], [], [], [], [], [], [], [], [], [], [], [])

    def add(
        self,
        n: int,
        *,
        kind,
        gpu=-1,
        dst=-1,
        size=0,
        duration=0,
        delay=0,
        priority=0,
        rank=-1,
        node=-1,
        collective=-1,
        channel=-1,
    ) -> int:
        first = self.count
        for store, value, dtype in (
            (self.kind, kind, np.uint8),
            (self.gpu, gpu, np.int32),
            (self.dst, dst, np.int32),
            (self.size, size, np.int64),
            (self.duration, duration, np.int64),
            (self.delay, delay, np.int64),
            (self.priority, priority, np.uint8),
            (self.rank, rank, np.int32),
            (self.node, node, np.int64),
            (self.collective, collective, np.int64),
            (self.channel, channel, np.int16),
        ):
            store.append(np.broadcast_to(np.asarray(value, dtype=dtype), (n,)))
        self.count += n
        return first

    def edges(self, child: np.ndarray, parent: np.ndarray) -> None:
        self.child.append(np.asarray(child, dtype=np.int64))
        self.parent.append(np.asarray(parent, dtype=np.int64))


def build_plan(
    traces: Sequence[RankTrace],
    rank_gpu: np.ndarray,
    durations_ns: Sequence[np.ndarray],
    groups: dict[int, list[int]],
    cluster: ClusterConfig,
    decompose: Decomposer,
    p2p_rendezvous: bool = True,
) -> PlanTables:
    """Assemble the execution plan of all ranks.

    ``durations_ns[r]`` gives a duration per template row of ``traces[r]``; ``groups`` maps a
    communicator id to its ranks in communicator order; ``decompose(comm_type, size_bytes,
    gpus)`` returns the collective's sub-DAG.
    """
    rows = _Rows.empty()
    world = len(traces)
    offsets = np.zeros(world + 1, dtype=np.int64)
    comm = _CommNodes()
    for r, trace in enumerate(traces):
        offsets[r] = _add_rank_tasks(rows, r, trace, int(rank_gpu[r]), durations_ns[r])
        comm.collect(r, trace)
    offsets[world] = rows.count
    parents = _TraceParents(traces, offsets)
    collectives, algorithms, protocols = _add_collectives(
        rows, comm.collectives, rank_gpu, groups, decompose, offsets, parents, comm.splits
    )
    p2p_bytes = _add_p2p(rows, comm.sends, comm.recvs, rank_gpu, offsets, parents, p2p_rendezvous)
    plan = _assemble(rows, cluster.world_size, collectives)
    return PlanTables(plan, offsets[:-1].copy(), collectives, algorithms, protocols, p2p_bytes)


def _add_rank_tasks(rows: _Rows, r: int, trace: RankTrace, gpu: int, durations_ns: np.ndarray) -> int:
    """Rank ``r``'s trace nodes as tasks (compute on its GPU, the rest markers) with their
    dependencies; returns the first task's index."""
    n = len(trace)
    node_type = trace.templates.node_type[trace.template]
    kinds = np.where(node_type == COMP_NODE, COMPUTE, MARKER).astype(np.uint8)
    duration = np.where(node_type == COMP_NODE, np.asarray(durations_ns, dtype=np.int64)[trace.template], 0)
    first = rows.add(
        n,
        kind=kinds,
        gpu=np.where(node_type == COMP_NODE, gpu, -1),
        duration=duration,
        rank=r,
        node=np.arange(n),
    )
    child = np.repeat(np.arange(n), np.diff(trace.dep_ptr)) + first
    rows.edges(child, trace.dep_idx + first)
    return first


class _CommNodes:
    """The communication nodes of every rank's trace, gathered for decomposition: collectives
    (rank, node, group, type, bytes, split id), sends and receives (rank, node, peer, tag,
    bytes), and the all-to-all-v send vectors."""

    def __init__(self) -> None:
        self.collectives: list[np.ndarray] = []
        self.sends: list[np.ndarray] = []
        self.recvs: list[np.ndarray] = []
        self.splits = _SplitTable()

    def collect(self, r: int, trace: RankTrace) -> None:
        """Add rank ``r``'s collective, send and receive nodes."""
        node_type = trace.templates.node_type[trace.template]
        coll = np.flatnonzero(node_type == COMM_COLL_NODE)
        if coll.size:
            t = trace.template[coll]
            columns = [
                np.full(coll.size, r),
                coll,
                trace.templates.comm_group[t],
                trace.templates.comm_type[t],
                trace.templates.comm_bytes[t],
                self.splits.ids(trace.templates)[t],
            ]
            self.collectives.append(np.stack(columns, axis=1).astype(np.int64))
        for wanted, parts in ((COMM_SEND_NODE, self.sends), (COMM_RECV_NODE, self.recvs)):
            idx = np.flatnonzero(node_type == wanted)
            if idx.size:
                columns = [
                    np.full(idx.size, r),
                    idx,
                    trace.peer[idx],
                    trace.tag[idx],
                    trace.templates.comm_bytes[trace.template[idx]],
                ]
                parts.append(np.stack(columns, axis=1).astype(np.int64))


class _TraceParents:
    """``parents(ranks, nodes)``: the (input row, parent task) pairs of trace nodes
    ``(ranks[i], nodes[i])``, from each rank's dependency CSR and its first task's index."""

    def __init__(self, traces: Sequence[RankTrace], offsets: np.ndarray) -> None:
        self.dep_ptr_of = [t.dep_ptr for t in traces]
        self.dep_idx_of = [t.dep_idx for t in traces]
        self.offsets = offsets

    def __call__(self, ranks: np.ndarray, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        out_row, out_parent = [], []
        by_rank = np.argsort(ranks, kind="stable")
        sorted_ranks = ranks[by_rank]
        present = np.unique(sorted_ranks)
        bounds = np.searchsorted(
            sorted_ranks, np.append(present, present[-1] + 1) if present.size else present
        )
        for k, r in enumerate(present):
            sel = by_rank[bounds[k] : bounds[k + 1]]
            lo, hi = self.dep_ptr_of[r][nodes[sel]], self.dep_ptr_of[r][nodes[sel] + 1]
            counts = hi - lo
            starts = np.repeat(lo - np.concatenate([[0], np.cumsum(counts)[:-1]]), counts)
            flat = self.dep_idx_of[r][np.arange(counts.sum()) + starts]
            out_row.append(np.repeat(sel, counts))
            out_parent.append(flat + self.offsets[r])
        if not out_row:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        return np.concatenate(out_row), np.concatenate(out_parent)


def _assemble(rows: _Rows, num_gpus: int, collectives: dict) -> ExecutionPlan:
    """The plan's columns, each concatenated once (its blocks freed as soon as it is one array)."""
    cat = _take
    dep_ptr, dep_idx = coo_to_csr(rows.count, cat(rows.child, np.int64), cat(rows.parent, np.int64))
    amounts = [cat(rows.size), cat(rows.duration), cat(rows.delay)]
    dtype = amount_dtype(*amounts)
    for i in range(len(amounts)):  # narrowed here, one column's copy alive at a time (memory)
        amounts[i] = amounts[i].astype(dtype, copy=False)
    return ExecutionPlan(
        kind=cat(rows.kind),
        gpu=cat(rows.gpu),
        dst=cat(rows.dst),
        bytes=amounts[0],
        duration_ns=amounts[1],
        delay_ns=amounts[2],
        stream=np.zeros(rows.count, np.int16),
        priority=cat(rows.priority),
        dep_ptr=dep_ptr,
        dep_idx=dep_idx,
        rank=cat(rows.rank),
        node=cat(rows.node),
        collective=cat(rows.collective),
        num_gpus=num_gpus,
        collectives=collectives,
        channel=cat(rows.channel),
    )


def _take(blocks: list, dtype: type | None = None) -> np.ndarray:
    """The blocks as one array; the list is emptied, so each block is freed once copied."""
    if not blocks:
        return np.zeros(0, dtype if dtype is not None else np.int64)
    out = np.concatenate(blocks)
    blocks.clear()
    return out


def _occurrence(keys: np.ndarray) -> np.ndarray:
    """For each row, how many earlier rows (in the given order) have the same key."""
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]
    start = np.flatnonzero(np.concatenate([[True], sorted_keys[1:] != sorted_keys[:-1]]))
    run_start = np.repeat(start, np.diff(np.concatenate([start, [len(keys)]])))
    occurrence = np.empty(len(keys), dtype=np.int64)
    occurrence[order] = np.arange(len(keys)) - run_start
    return occurrence


class _SplitTable:
    """Distinct all-to-all-v send vectors of all ranks, each with a global id."""

    def __init__(self) -> None:
        self.vectors: list[np.ndarray] = []
        self._index: dict[bytes, int] = {}

    def ids(self, templates) -> np.ndarray:
        """Global split id of every template row (-1: none); one dict lookup per split row."""
        out = np.full(len(templates), -1, np.int64)
        for row in np.flatnonzero(templates.split_lengths()):
            vector = templates.split_of(int(row))
            key = vector.tobytes()
            found = self._index.get(key)
            if found is None:
                found = self._index[key] = len(self.vectors)
                self.vectors.append(vector)
            out[row] = found
        return out


def _matrices(
    inverse: np.ndarray,
    rank: np.ndarray,
    group: np.ndarray,
    split: np.ndarray,
    n_inst: int,
    groups: dict[int, list[int]],
    splits: _SplitTable,
    world: int,
) -> tuple[np.ndarray, list[np.ndarray]]:
    """(matrix id of every instance, -1 for an even collective; the distinct matrices): the
    members' send vectors stacked in communicator order."""
    inst_matrix = np.full(n_inst, -1, np.int64)
    matrices: list[np.ndarray] = []
    v = np.flatnonzero(split >= 0)
    if v.size == 0:
        return inst_matrix, matrices
    keys, positions = [], []
    for g in np.unique(group[v]):
        members = np.asarray(groups[int(g)], np.int64)
        keys.append(int(g) * world + members)
        positions.append(np.arange(members.size))
    key, pos_of = np.concatenate(keys), np.concatenate(positions)
    order = np.argsort(key)
    pos = pos_of[order][np.searchsorted(key[order], group[v] * world + rank[v])]
    ordered = np.lexsort((pos, inverse[v]))
    inst_sorted, sid_sorted = inverse[v][ordered], split[v][ordered]
    inst_ids, starts, counts = np.unique(inst_sorted, return_index=True, return_counts=True)
    for n in np.unique(counts):
        sel = counts == n
        table = sid_sorted[starts[sel][:, None] + np.arange(n)[None, :]]
        distinct, which = np.unique(table, axis=0, return_inverse=True)
        first = len(matrices)
        for row in distinct:
            matrix = np.stack([splits.vectors[int(s)] for s in row])
            if matrix.shape != (n, n):
                raise UserError(
                    f"traces: an all-to-all-v of {n} ranks carries {matrix.shape[1]} sizes per rank"
                )
            matrices.append(matrix)
        inst_matrix[inst_ids[sel]] = first + which.reshape(-1)
    return inst_matrix, matrices


COLLECTIVE_COLUMNS = (
    "id",
    "comm_type",
    "group",
    "size_bytes",
    "ranks",
    "algorithm",
    "protocol",
    "channels",
    "start_task",
    "end_task",
    "predicted_ns",
)


@dataclass
class _Instances:
    """Collective nodes matched into instances: the k-th collective of every member of a
    communicator is one instance. Per node (rank-major): ``rank``, ``node``, ``group``,
    ``ctype``, ``size``, ``split``, and ``inverse`` (its instance); per instance: ``group_of``,
    ``occurrence``, ``members``, ``type_of``, ``size_of``."""

    rank: np.ndarray
    node: np.ndarray
    group: np.ndarray
    ctype: np.ndarray
    size: np.ndarray
    split: np.ndarray
    inverse: np.ndarray
    group_of: np.ndarray
    occurrence: np.ndarray
    members: np.ndarray
    type_of: np.ndarray
    size_of: np.ndarray

    @property
    def count(self) -> int:
        return int(self.group_of.size)


def _add_collectives(rows, coll_parts, rank_gpu, groups, decompose, offsets, parents, splits):
    """Every collective node's instance decomposed into flows (once per distinct signature,
    copied per instance) and linked to its members' traces; returns the collectives table,
    the algorithm and the protocol names."""
    if not coll_parts:
        return {k: np.zeros(0, np.int64) for k in COLLECTIVE_COLUMNS}, [], []
    inst = _match_instances(np.concatenate(coll_parts), groups)
    inst_matrix, matrices = _matrices(
        inst.inverse, inst.rank, inst.group, inst.split, inst.count, groups, splits, len(offsets) - 1
    )
    for m, matrix in enumerate(matrices):
        inst.size_of[inst_matrix == m] = int(matrix.sum())
    out = {k: np.zeros(inst.count, np.int64) for k in COLLECTIVE_COLUMNS}
    out["id"] = np.arange(inst.count)
    out["comm_type"], out["group"], out["size_bytes"] = inst.type_of, inst.group_of, inst.size_of
    out["ranks"] = inst.members
    algorithms: list[str] = []
    protocols: list[str] = []
    for (ctype, size, gpus, matrix_id), members in _signatures(inst, inst_matrix, rank_gpu, groups).items():
        if matrix_id >= 0:
            sub = decompose(ctype, 0, list(gpus), pair_bytes=matrices[matrix_id])
        else:
            sub = decompose(ctype, size, list(gpus))
        _add_instances(rows, sub, members, out)
        name = str(sub.algorithm)
        if name not in algorithms:
            algorithms.append(name)
        if sub.protocol not in protocols:
            protocols.append(sub.protocol)
        out["algorithm"][members] = algorithms.index(name)
        out["protocol"][members] = protocols.index(sub.protocol)
    _link_instances(rows, inst, out["start_task"], out["end_task"], offsets, parents)
    return out, algorithms, protocols


def _match_instances(table: np.ndarray, groups: dict[int, list[int]]) -> _Instances:
    """Collective nodes (rank, node, group, type, bytes, split id; rank-major) matched into
    instances, each checked: every member issues it, with one type and size."""
    rank, node, group, ctype, size, split = table.T
    size = np.where(split >= 0, -2, size)  # an all-to-all-v's members send different totals
    # k-th collective of each rank on each group, in the rank's issue order.
    occurrence = _occurrence(rank * (int(group.max()) + 2) + (group + 1))
    # (group, occurrence) pairs in lexicographic order, as np.unique(axis=1) gives them, from
    # one int64 key per row (a 1-D sort instead of a sort of row tuples)
    low, base = int(group.min()), int(occurrence.max()) + 1
    flat, inverse = np.unique((group - low) * base + occurrence, return_inverse=True)
    group_of, occurrence_of = flat // base + low, flat % base
    del flat
    inverse = inverse.reshape(-1)
    n_inst = group_of.size
    members = np.bincount(inverse, minlength=n_inst)
    type_of = np.full(n_inst, -1, np.int64)
    size_of = np.full(n_inst, -1, np.int64)
    type_of[inverse] = ctype
    size_of[inverse] = size
    known = [g for g in groups if low <= g <= int(group.max())]
    group_size = np.zeros(int(group.max()) - low + 1, np.int64)
    group_size[np.array(known, dtype=np.int64) - low] = [len(groups[g]) for g in known]
    for short in np.flatnonzero(members != group_size[group_of - low]):
        g = int(group_of[short])
        raise UserError(
            f"traces: collective #{int(occurrence_of[short])} on communicator {g} is issued by "
            f"{members[short]} of its {len(groups.get(g, []))} ranks"
        )
    mismatch = (type_of[inverse] != ctype) | (size_of[inverse] != size)
    if mismatch.any():
        i = int(np.flatnonzero(mismatch)[0])
        raise UserError(
            f"traces: rank {int(rank[i])} node {int(node[i])}: collective on communicator "
            f"{int(group[i])} disagrees with its peers on type or size"
        )
    return _Instances(
        rank, node, group, ctype, size, split, inverse, group_of, occurrence_of, members, type_of, size_of
    )


def _signatures(
    inst: _Instances, inst_matrix: np.ndarray, rank_gpu: np.ndarray, groups: dict[int, list[int]]
) -> dict[tuple, np.ndarray]:
    """The instances of each distinct (type, size, member GPUs, all-to-all-v matrix), ascending,
    the signatures in the order of their first instance: each is decomposed once."""
    n_inst = inst.count
    signature: dict[tuple, list[np.ndarray]] = {}
    # instances grouped by (type, size, communicator, all-to-all-v matrix), each group's
    # instances ascending; groups taken in the order of their first instance
    by_sig = np.lexsort((np.arange(n_inst), inst_matrix, inst.group_of, inst.size_of, inst.type_of))
    cols = np.stack([inst.type_of, inst.size_of, inst.group_of, inst_matrix])[:, by_sig]
    starts = np.flatnonzero(np.concatenate([[True], (cols[:, 1:] != cols[:, :-1]).any(axis=0)]))
    sig_bounds = np.append(starts, n_inst)
    for j in np.argsort(by_sig[starts], kind="stable"):
        ctype_j, size_j, group_j, matrix_j = (int(x) for x in cols[:, starts[j]])
        gpus = tuple(int(g) for g in rank_gpu[groups[group_j]])
        signature.setdefault((ctype_j, size_j, gpus, matrix_j), []).append(
            by_sig[sig_bounds[j] : sig_bounds[j + 1]]
        )
    return {key: np.sort(np.concatenate(parts)) for key, parts in signature.items()}


def _add_instances(rows: _Rows, sub, inst: np.ndarray, out: dict[str, np.ndarray]) -> None:
    """One copy of the decomposed sub-DAG ``sub`` per instance in ``inst``, with its edges;
    the instances' start and end tasks, channels and predicted times go to ``out``."""
    copies, n = inst.size, len(sub)
    first = rows.add(
        copies * n,
        kind=np.tile(sub.kind, copies),
        gpu=np.tile(sub.gpu, copies),
        dst=np.tile(sub.dst, copies),
        size=np.tile(sub.bytes, copies),
        delay=np.tile(sub.delay_ns, copies),
        collective=np.repeat(inst, n),
        channel=np.tile(sub.channel, copies),
    )
    base = first + np.arange(copies) * n
    sub_child = np.repeat(np.arange(n), np.diff(sub.dep_ptr))
    rows.edges((base[:, None] + sub_child[None, :]).ravel(), (base[:, None] + sub.dep_idx[None, :]).ravel())
    out["start_task"][inst] = base
    out["end_task"][inst] = base + sub.end_task
    out["channels"][inst] = sub.channels
    out["predicted_ns"][inst] = sub.predicted_ns


def _link_instances(
    rows: _Rows,
    inst: _Instances,
    start_task: np.ndarray,
    end_task: np.ndarray,
    offsets: np.ndarray,
    parents: _TraceParents,
) -> None:
    """Collective node task <- its instance's end marker; start marker <- every member's trace
    parents; one communicator's instances run in order."""
    rows.edges(offsets[inst.rank] + inst.node, end_task[inst.inverse])
    which, parent = parents(inst.rank, inst.node)
    rows.edges(start_task[inst.inverse[which]], parent)
    order = np.lexsort((inst.occurrence, inst.group_of))
    same = inst.group_of[order[1:]] == inst.group_of[order[:-1]]
    rows.edges(start_task[order[1:][same]], end_task[order[:-1][same]])


def _add_p2p(rows, send_parts, recv_parts, rank_gpu, offsets, parents, rendezvous: bool = True) -> int:
    if not send_parts and not recv_parts:
        return 0
    sends = np.concatenate(send_parts) if send_parts else np.zeros((0, 5), np.int64)
    recvs = np.concatenate(recv_parts) if recv_parts else np.zeros((0, 5), np.int64)
    if len(sends) != len(recvs):
        raise UserError(f"traces: {len(sends)} sends but {len(recvs)} recvs")
    # Match (src, dst, tag, occurrence) on both sides.
    s_key = np.stack([sends[:, 0], sends[:, 2], sends[:, 3]])
    r_key = np.stack([recvs[:, 2], recvs[:, 0], recvs[:, 3]])
    s_occ = _occurrence(np.ravel_multi_index(s_key, _dims(s_key, r_key)))
    r_occ = _occurrence(np.ravel_multi_index(r_key, _dims(s_key, r_key)))
    s_order = np.lexsort((s_occ, *s_key[::-1]))
    r_order = np.lexsort((r_occ, *r_key[::-1]))
    same = np.all(s_key[:, s_order] == r_key[:, r_order], axis=0) & (s_occ[s_order] == r_occ[r_order])
    if not same.all():
        i = s_order[int(np.flatnonzero(~same)[0])]
        raise UserError(
            f"traces: send on rank {int(sends[i, 0])} to {int(sends[i, 2])} tag {int(sends[i, 3])} "
            "has no matching recv"
        )
    sends, recvs = sends[s_order], recvs[r_order]
    if np.any(sends[:, 4] != recvs[:, 4]):
        i = int(np.flatnonzero(sends[:, 4] != recvs[:, 4])[0])
        raise UserError(
            f"traces: send rank {int(sends[i, 0])} -> {int(sends[i, 2])} tag {int(sends[i, 3])} "
            f"has {int(sends[i, 4])} bytes but the recv expects {int(recvs[i, 4])}"
        )
    n = len(sends)
    src_gpu, dst_gpu = rank_gpu[sends[:, 0]], rank_gpu[sends[:, 2]]
    local = src_gpu == dst_gpu
    kinds = np.where(local | (sends[:, 4] == 0), MARKER, FLOW)
    first = rows.add(
        n,
        kind=kinds,
        gpu=np.where(kinds == FLOW, src_gpu, -1),
        dst=np.where(kinds == FLOW, dst_gpu, -1),
        size=np.where(kinds == FLOW, sends[:, 4], 0),
    )
    flow_task = first + np.arange(n)
    rows.edges(offsets[sends[:, 0]] + sends[:, 1], flow_task)
    rows.edges(offsets[recvs[:, 0]] + recvs[:, 1], flow_task)
    for side in (sends, recvs) if rendezvous else (sends,):
        which, parent = parents(side[:, 0], side[:, 1])
        rows.edges(flow_task[which], parent)
    return int(sends[:, 4].sum())


def _dims(*keys: np.ndarray) -> tuple[int, int, int]:
    stacked = np.concatenate(keys, axis=1)
    shift = stacked.min(axis=1)
    assert np.all(shift >= 0), "ranks and tags are non-negative"
    a, b, c = (int(x) + 1 for x in stacked.max(axis=1))
    return a, b, c
