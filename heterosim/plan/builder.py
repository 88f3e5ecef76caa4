"""PlanBuilder: concatenate compute tasks, markers and collective sub-DAGs into one ExecutionPlan.

Tasks are appended in blocks of numpy arrays (never one Python object per task); dependencies
of a block are given as CSR over global task indices, and a collective sub-DAG's local indices
are shifted on append. ``build()`` concatenates everything once.
"""

from __future__ import annotations

import numpy as np

from heterosim.plan.collectives.graph import CollectivePlan
from heterosim.plan.execution_plan import COMPUTE, MARKER, ExecutionPlan

_COLUMNS = ("kind", "gpu", "dst", "bytes", "duration_ns", "delay_ns", "stream", "priority", "rank",
            "node", "collective", "channel")
_DTYPES = {"kind": np.uint8, "gpu": np.int32, "dst": np.int32, "bytes": np.int64,
           "duration_ns": np.int64, "delay_ns": np.int64, "stream": np.int16, "priority": np.uint8,
           "rank": np.int32, "node": np.int64, "collective": np.int64, "channel": np.int16}


class PlanBuilder:
    """Accumulates task blocks; ``build()`` returns the :class:`ExecutionPlan`."""

    def __init__(self, num_gpus: int) -> None:
        self.num_gpus = num_gpus
        self._blocks: dict[str, list[np.ndarray]] = {c: [] for c in _COLUMNS}
        self._dep_counts: list[np.ndarray] = []
        self._dep_idx: list[np.ndarray] = []
        self._size = 0
        self._coll_rows: list[tuple] = []

    def __len__(self) -> int:
        return self._size

    def add_tasks(self, *, kind: np.ndarray, dep_ptr: np.ndarray, dep_idx: np.ndarray,
                  **columns: np.ndarray | int) -> np.ndarray:
        """Append a block; ``dep_idx`` holds global task indices (earlier tasks or this block's,
        given as absolute indices). Missing columns get defaults (-1 ids, 0 amounts)."""
        kind = np.asarray(kind, dtype=np.uint8)
        count = kind.shape[0]
        for name in _COLUMNS:
            if name == "kind":
                value: np.ndarray | int = kind
            else:
                default = -1 if name in ("gpu", "dst", "rank", "node", "collective", "channel") else 0
                value = columns.pop(name, default)
            self._blocks[name].append(np.broadcast_to(np.asarray(value, _DTYPES[name]), (count,)))
        if columns:
            raise TypeError(f"unknown plan columns: {', '.join(columns)}")
        dep_ptr = np.asarray(dep_ptr, dtype=np.int64)
        if dep_ptr.shape != (count + 1,):
            raise ValueError("dep_ptr must have one entry per task plus one")
        self._dep_counts.append(np.diff(dep_ptr))
        self._dep_idx.append(np.asarray(dep_idx, dtype=np.int64)[dep_ptr[0]:dep_ptr[-1]])
        first = self._size
        self._size += count
        return np.arange(first, self._size, dtype=np.int64)

    def add_compute(self, gpu: np.ndarray, duration_ns: np.ndarray, *, deps: list[np.ndarray] | None = None,
                    stream: np.ndarray | int = 0, rank: np.ndarray | int = -1,
                    node: np.ndarray | int = -1) -> np.ndarray:
        """COMPUTE tasks; ``deps[k]`` lists the global parents of the k-th task."""
        gpu = np.atleast_1d(np.asarray(gpu, dtype=np.int32))
        ptr, idx = _lists_to_csr(deps, gpu.shape[0])
        return self.add_tasks(kind=np.full(gpu.shape[0], COMPUTE, np.uint8), dep_ptr=ptr, dep_idx=idx,
                              gpu=gpu, duration_ns=duration_ns, stream=stream, rank=rank, node=node)

    def add_marker(self, deps: np.ndarray | list[int] = ()) -> int:
        """One MARKER that finishes when all ``deps`` have."""
        deps = np.asarray(deps, dtype=np.int64)
        return int(self.add_tasks(kind=np.array([MARKER], np.uint8),
                                  dep_ptr=np.array([0, deps.size]), dep_idx=deps)[0])

    def add_collective(self, plan: CollectivePlan, start_deps: np.ndarray | list[int] = (), *,
                       collective_id: int | None = None, priority: int = 0, rank: int = -1,
                       node: int = -1) -> tuple[int, int]:
        """Append a collective sub-DAG whose start marker waits for ``start_deps``.

        Returns the global (start, end) marker indices. The instance is recorded in the plan's
        ``collectives`` table (op, algorithm, protocol, channels, size, predicted time, tasks).
        """
        offset = self._size
        start_deps = np.asarray(start_deps, dtype=np.int64)
        cid = len(self._coll_rows) if collective_id is None else int(collective_id)
        counts = np.diff(plan.dep_ptr)
        counts[0] = start_deps.size  # the start marker has no local parents
        idx = np.concatenate([start_deps, plan.dep_idx + offset])
        ptr = np.zeros(len(plan) + 1, np.int64)
        np.cumsum(counts, out=ptr[1:])
        self.add_tasks(kind=plan.kind, dep_ptr=ptr, dep_idx=idx, gpu=plan.gpu, dst=plan.dst,
                       bytes=plan.bytes, delay_ns=plan.delay_ns, priority=priority, rank=rank,
                       node=node, collective=cid, channel=plan.channel)
        start, end = offset, offset + len(plan) - 1
        self._coll_rows.append((cid, plan.op, plan.algorithm, plan.protocol, plan.channels,
                                plan.size_bytes, plan.predicted_ns, start, end))
        return start, end

    def build(self) -> ExecutionPlan:
        """The concatenated plan (checked)."""
        cols = {name: (np.concatenate(self._blocks[name]).astype(_DTYPES[name]) if self._blocks[name]
                       else np.zeros(0, _DTYPES[name])) for name in _COLUMNS}
        counts = np.concatenate(self._dep_counts) if self._dep_counts else np.zeros(0, np.int64)
        ptr = np.zeros(self._size + 1, np.int64)
        np.cumsum(counts, out=ptr[1:])
        idx = np.concatenate(self._dep_idx) if self._dep_idx else np.zeros(0, np.int64)
        rows = self._coll_rows
        table = {
            "id": np.array([r[0] for r in rows], np.int64),
            "op": np.array([r[1] for r in rows], dtype=object),
            "algorithm": np.array([r[2] for r in rows], dtype=object),
            "protocol": np.array([r[3] for r in rows], dtype=object),
            "channels": np.array([r[4] for r in rows], np.int64),
            "size_bytes": np.array([r[5] for r in rows], np.int64),
            "predicted_ns": np.array([r[6] for r in rows], np.int64),
            "start_task": np.array([r[7] for r in rows], np.int64),
            "end_task": np.array([r[8] for r in rows], np.int64),
        }
        plan = ExecutionPlan(dep_ptr=ptr, dep_idx=idx, num_gpus=self.num_gpus, collectives=table, **cols)
        plan.check()
        return plan


def _lists_to_csr(deps: list[np.ndarray] | None, count: int) -> tuple[np.ndarray, np.ndarray]:
    if deps is None:
        return np.zeros(count + 1, np.int64), np.zeros(0, np.int64)
    if len(deps) != count:
        raise ValueError("deps must have one entry per task")
    arrays = [np.asarray(d, dtype=np.int64).reshape(-1) for d in deps]
    ptr = np.zeros(count + 1, np.int64)
    np.cumsum([a.size for a in arrays], out=ptr[1:])
    return ptr, (np.concatenate(arrays) if arrays else np.zeros(0, np.int64))
