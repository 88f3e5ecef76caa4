"""Flow graphs built by the algorithms, and the collective sub-DAG they become.

An algorithm returns a :class:`FlowGraph`: one row per point-to-point transfer (payload bytes,
wire bytes, per-step latency, channel / step / chunk tags) and dependency edges as COO pairs
``(child, parent)``. :func:`finish_plan` wraps it between a start and an end marker, turns
transfers with no payload (possible in uneven "v" collectives) into markers so dependency chains
stay intact, and stores the dependencies as CSR - the layout of
:class:`heterosim.plan.execution_plan.ExecutionPlan`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from heterosim.plan.execution_plan import FLOW, MARKER, ExecutionPlan


@dataclass
class FlowGraph:
    """Transfers of one collective and their dependencies (indices into the rows)."""

    src: np.ndarray  # int64 global GPU
    dst: np.ndarray  # int64 global GPU
    payload: np.ndarray  # int64 user bytes carried
    wire: np.ndarray  # int64 bytes on the wire (protocol overhead included)
    delay_ns: np.ndarray  # int64 per-step latency before the transfer starts
    channel: np.ndarray  # int32
    step: np.ndarray  # int32 algorithm step (ring step, tree level, phase)
    chunk: np.ndarray  # int32 chunk (loop) index
    edge_child: np.ndarray  # int64
    edge_parent: np.ndarray  # int64

    def __len__(self) -> int:
        return int(self.src.shape[0])


def empty_graph() -> FlowGraph:
    z = np.zeros(0, dtype=np.int64)
    return FlowGraph(z, z, z, z, z, z.astype(np.int32), z.astype(np.int32), z.astype(np.int32), z, z)


def concat_graphs(graphs: list[FlowGraph]) -> FlowGraph:
    """One graph holding ``graphs`` side by side (edge indices shifted)."""
    graphs = [g for g in graphs if len(g)]
    if not graphs:
        return empty_graph()
    offsets = np.cumsum([0] + [len(g) for g in graphs[:-1]])
    cat = np.concatenate
    return FlowGraph(
        src=cat([g.src for g in graphs]),
        dst=cat([g.dst for g in graphs]),
        payload=cat([g.payload for g in graphs]),
        wire=cat([g.wire for g in graphs]),
        delay_ns=cat([g.delay_ns for g in graphs]),
        channel=cat([g.channel for g in graphs]),
        step=cat([g.step for g in graphs]),
        chunk=cat([g.chunk for g in graphs]),
        edge_child=cat([g.edge_child + o for g, o in zip(graphs, offsets)]),
        edge_parent=cat([g.edge_parent + o for g, o in zip(graphs, offsets)]),
    )


def coo_to_csr(num_tasks: int, child: np.ndarray, parent: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """CSR (dep_ptr, dep_idx) from COO pairs; parents of one task sorted, duplicates removed."""
    if child.size:
        # one int64 key per edge, built and sorted in place (a few edge-sized temporaries)
        key = child.astype(np.int64, copy=True)
        key *= num_tasks + 1
        key += parent
        key.sort()
        if key.size > 1:
            repeat = key[1:] == key[:-1]
            if repeat.any():
                key = key[np.concatenate([[True], ~repeat])]
            del repeat
        child = key // (num_tasks + 1)
        key %= num_tasks + 1
        parent = key
    counts = np.bincount(child, minlength=num_tasks) if child.size else np.zeros(num_tasks, np.int64)
    ptr = np.zeros(num_tasks + 1, dtype=np.int64)
    np.cumsum(counts, out=ptr[1:])
    return ptr, parent.astype(np.int64)


@dataclass
class CollectivePlan:
    """One collective as a sub-DAG in the execution-plan layout.

    Task 0 is the start marker, the last task the end marker; tasks in between are flows (or
    markers standing for zero-byte transfers). ``dep_idx`` values index this sub-DAG.
    """

    op: str
    size_bytes: int
    ranks: np.ndarray  # global GPUs in communicator order
    algorithm: str
    protocol: str
    channels: int
    predicted_ns: int  # NCCL tuning model time
    kind: np.ndarray  # uint8
    gpu: np.ndarray  # int32 sender (-1 for markers)
    dst: np.ndarray  # int32 receiver (-1 for markers)
    bytes: np.ndarray  # int64 wire bytes
    payload: np.ndarray  # int64 user bytes
    delay_ns: np.ndarray  # int64
    channel: np.ndarray  # int32 (-1 for markers)
    step: np.ndarray  # int32
    chunk: np.ndarray  # int32
    dep_ptr: np.ndarray  # int64
    dep_idx: np.ndarray  # int64
    candidates: dict[str, float] = field(default_factory=dict)  # tuning model "a/p" -> us
    granularity: str = "chunk"  # chunk | step | connection (collectives.granularity)

    def __len__(self) -> int:
        return int(self.kind.shape[0])

    @property
    def num_flows(self) -> int:
        return int(np.count_nonzero(self.kind == FLOW))

    @property
    def end_task(self) -> int:
        return len(self) - 1

    def sent_bytes_per_gpu(self, num_gpus: int, payload: bool = True) -> np.ndarray:
        """Bytes each global GPU sends (payload or wire bytes)."""
        flows = self.kind == FLOW
        values = (self.payload if payload else self.bytes)[flows]
        return np.bincount(self.gpu[flows], weights=values, minlength=num_gpus)

    def to_execution_plan(self, num_gpus: int, priority: int = 0) -> ExecutionPlan:
        """This collective alone as a runnable plan."""
        n = len(self)
        return ExecutionPlan(
            kind=self.kind.copy(),
            gpu=self.gpu.copy(),
            dst=self.dst.copy(),
            bytes=self.bytes.copy(),
            duration_ns=np.zeros(n, np.int64),
            delay_ns=self.delay_ns.copy(),
            stream=np.zeros(n, np.int16),
            priority=np.full(n, priority, np.uint8),
            dep_ptr=self.dep_ptr.copy(),
            dep_idx=self.dep_idx.copy(),
            rank=np.full(n, -1, np.int32),
            node=np.full(n, -1, np.int64),
            collective=np.zeros(n, np.int64),
            num_gpus=num_gpus,
            channel=self.channel.astype(np.int16),
        )


def finish_plan(
    graph: FlowGraph,
    *,
    op: str,
    size_bytes: int,
    ranks: np.ndarray,
    algorithm: str,
    protocol: str,
    channels: int,
    predicted_ns: int,
    candidates: dict[str, float] | None = None,
    granularity: str = "chunk",
) -> CollectivePlan:
    """Wrap ``graph`` between start and end markers (see module docstring)."""
    f = len(graph)
    t = f + 2
    is_flow = graph.payload > 0
    kind = np.concatenate([[MARKER], np.where(is_flow, FLOW, MARKER), [MARKER]]).astype(np.uint8)
    gpu = np.concatenate([[-1], np.where(is_flow, graph.src, -1), [-1]]).astype(np.int32)
    dst = np.concatenate([[-1], np.where(is_flow, graph.dst, -1), [-1]]).astype(np.int32)
    wire = np.concatenate([[0], np.where(is_flow, graph.wire, 0), [0]]).astype(np.int64)
    payload = np.concatenate([[0], graph.payload, [0]]).astype(np.int64)
    delay = np.concatenate([[0], np.where(is_flow, graph.delay_ns, 0), [0]]).astype(np.int64)
    channel = np.concatenate([[-1], graph.channel, [-1]]).astype(np.int32)
    step = np.concatenate([[-1], graph.step, [-1]]).astype(np.int32)
    chunk = np.concatenate([[-1], graph.chunk, [-1]]).astype(np.int32)
    child = graph.edge_child + 1
    parent = graph.edge_parent + 1
    has_parent = np.zeros(f, dtype=bool)
    has_parent[graph.edge_child] = True
    has_child = np.zeros(f, dtype=bool)
    has_child[graph.edge_parent] = True
    roots = np.flatnonzero(~has_parent) + 1
    sinks = np.flatnonzero(~has_child) + 1
    if f == 0:
        sinks = np.zeros(1, dtype=np.int64)
    child = np.concatenate([child, roots, np.full(sinks.size, t - 1)])
    parent = np.concatenate([parent, np.zeros(roots.size, np.int64), sinks])
    ptr, idx = coo_to_csr(t, child, parent)
    return CollectivePlan(
        op=op,
        size_bytes=int(size_bytes),
        ranks=np.asarray(ranks, dtype=np.int64),
        algorithm=algorithm,
        protocol=protocol,
        channels=int(channels),
        predicted_ns=int(predicted_ns),
        kind=kind,
        gpu=gpu,
        dst=dst,
        bytes=wire,
        payload=payload,
        delay_ns=delay,
        channel=channel,
        step=step,
        chunk=chunk,
        dep_ptr=ptr,
        dep_idx=idx,
        candidates=dict(candidates or {}),
        granularity=granularity,
    )
