"""The per-flow table of a run (``EngineResult.flows``), derived from the plan on demand.

Most of its columns repeat the plan's (source, destination, bytes, collective of each flow task)
or the run's task times; storing them again costs ~70 bytes per flow (half a gigabyte at 7 M
flows). :class:`FlowTable` keeps only the connection ids, references to the plan and the
times, and the columns the network model measured that are not all zero; it builds a column
(or a block of rows, :meth:`FlowTable.rows`) when asked, with the same values and dtypes a
plain dict of arrays would hold. The flow task indices are not kept either: they are the
plan's FLOW tasks in order, found again from its kinds (a count of flows per block of
:data:`TASK_BLOCK` tasks locates a block of rows).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import numpy as np

from heterosim.plan.execution_plan import FLOW, ExecutionPlan

# Columns, in order, and the dtype each is given
FLOW_TABLE_COLUMNS = {
    "task": np.int64,
    "src": np.int32,
    "dst": np.int32,
    "bytes": np.int64,
    "start_ns": np.int64,
    "end_ns": np.int64,
    "retransmits": np.int64,
    "collective": np.int64,
    "connection": np.int64,
    "out_of_order": np.int64,
    "max_reorder_depth": np.int64,
}
# Columns measured by the network model (per flow row); the others come from the plan and times
MEASURED = ("retransmits", "out_of_order", "max_reorder_depth")
# Tasks per block of the flow counts that locate a row's task (4 bytes per 65,536 tasks)
TASK_BLOCK = 1 << 16


class FlowTable(Mapping[str, np.ndarray]):
    """Per FLOW task: task, src, dst, bytes, start_ns, end_ns, retransmits, collective,
    connection, out_of_order, max_reorder_depth (see ``EngineResult.flows``).

    ``flow_tasks`` are every FLOW task of ``plan``, ascending (a row per flow task); the table
    finds them again from ``plan.kind`` when read, keeping only a count of flows per block of
    :data:`TASK_BLOCK` tasks. ``start_ns``/``end_ns`` are the run's per-task times, read in
    place with ``plan``, so they must not change while the table is used; ``connection`` is a
    per-task array (None: -1 everywhere) of which the table keeps the flows' values.
    ``measured`` holds per-flow-row columns of :data:`MEASURED` (missing or all-zero ones are
    stored as nothing and read as zeros). Connection ids are held in 32 bits when they fit
    (4 bytes per flow), and every column is read out in the dtypes of :data:`FLOW_TABLE_COLUMNS`.
    """

    def __init__(
        self,
        plan: ExecutionPlan,
        flow_tasks: np.ndarray,
        start_ns: np.ndarray,
        end_ns: np.ndarray,
        connection: np.ndarray | None,
        measured: Mapping[str, np.ndarray | None],
    ) -> None:
        self._plan = plan
        flow_tasks = np.asarray(flow_tasks)
        self._before = _flows_before_blocks(plan.kind)  # flows in the tasks before each block
        if int(self._before[-1]) != flow_tasks.size:
            raise ValueError("flow table: flow_tasks must be every FLOW task of the plan")
        self._start, self._end = start_ns, end_ns
        self._connection = None  # per flow row
        if connection is not None and np.any(connection >= 0):
            self._connection = _gather_narrow(np.asarray(connection), flow_tasks)
        self._measured: dict[str, np.ndarray] = {}
        for key, values in measured.items():
            if key not in MEASURED:
                raise KeyError(f"flow table: {key} is not a measured column")
            if values is not None and np.any(values):
                self._measured[key] = np.asarray(values, dtype=np.int64)

    def __len__(self) -> int:
        return len(FLOW_TABLE_COLUMNS)

    def __iter__(self) -> Iterator[str]:
        return iter(FLOW_TABLE_COLUMNS)

    def __getitem__(self, key: str) -> np.ndarray:
        return self._column(key, 0, self.flows)

    def __contains__(self, key: object) -> bool:
        return key in FLOW_TABLE_COLUMNS

    @property
    def flows(self) -> int:
        """Rows (flow tasks) in the table."""
        return int(self._before[-1])

    def rows(self, lo: int, hi: int) -> dict[str, np.ndarray]:
        """Every column for rows ``lo:hi`` (new arrays; a block of a large table at a time)."""
        return {key: self._column(key, lo, hi) for key in FLOW_TABLE_COLUMNS}

    def retained_bytes(self) -> int:
        """Bytes of the arrays this table holds of its own (not the plan's or the times)."""
        own = [self._before, *self._measured.values()]
        if self._connection is not None:
            own.append(self._connection)
        return int(sum(v.nbytes for v in own))

    def _column(self, key: str, lo: int, hi: int) -> np.ndarray:
        dtype = FLOW_TABLE_COLUMNS[key]  # KeyError for an unknown column, as a dict would
        task = self._tasks(lo, hi)
        if key in MEASURED:
            values = self._measured.get(key)
            return values[lo:hi].copy() if values is not None else np.zeros(task.size, dtype)
        if key == "task":
            return task.astype(dtype)
        if key == "connection":
            if self._connection is None:
                return np.full(task.size, -1, dtype)
            return self._connection[lo:hi].astype(dtype)
        source = {
            "src": self._plan.gpu,
            "dst": self._plan.dst,
            "bytes": self._plan.bytes,
            "start_ns": self._start,
            "end_ns": self._end,
            "collective": self._plan.collective,
        }[key]
        return source[task].astype(dtype, copy=False)

    def _tasks(self, lo: int, hi: int) -> np.ndarray:
        """The task indices of rows ``lo:hi`` (ascending; int32 where every task index fits),
        found from the plan's kinds in the blocks of tasks that hold those rows."""
        hi = min(hi, self.flows)
        lo = min(lo, hi)
        kind = self._plan.kind
        dtype = np.int32 if kind.size <= np.iinfo(np.int32).max else np.int64
        if lo == hi:
            return np.zeros(0, dtype)
        first = int(np.searchsorted(self._before, lo, side="right")) - 1  # block holding row lo
        last = int(np.searchsorted(self._before, hi, side="left"))  # blocks before it hold row hi - 1
        base = first * TASK_BLOCK
        tasks = np.flatnonzero(kind[base : last * TASK_BLOCK] == FLOW).astype(dtype)
        tasks += base
        skip = lo - int(self._before[first])
        return tasks[skip : skip + hi - lo]


def _flows_before_blocks(kind: np.ndarray) -> np.ndarray:
    """Per block of :data:`TASK_BLOCK` tasks, the FLOW tasks before it, then the total (int64,
    blocks + 1 values)."""
    blocks = -(-kind.size // TASK_BLOCK)
    counts = np.zeros(blocks + 1, np.int64)
    for b in range(blocks):
        counts[b + 1] = np.count_nonzero(kind[b * TASK_BLOCK : (b + 1) * TASK_BLOCK] == FLOW)
    return np.cumsum(counts)


def _narrow(values: np.ndarray) -> np.ndarray:
    """Ids of -1 and up (task indices, connection ids) as int32 when they fit, else as int64
    (``values`` itself when it has that dtype)."""
    if values.size and int(values.max()) > np.iinfo(np.int32).max:
        return values.astype(np.int64, copy=False)
    return values.astype(np.int32, copy=False)


def _gather_narrow(values: np.ndarray, index: np.ndarray, block: int = 1 << 20) -> np.ndarray:
    """``_narrow(values[index])``, gathered a block of ``block`` indices at a time (no 64-bit
    copy of them all)."""
    if not index.size or int(values.max()) > np.iinfo(np.int32).max:
        return values[index].astype(np.int64, copy=False)
    out = np.empty(index.size, np.int32)
    for lo in range(0, index.size, block):
        out[lo : lo + block] = values[index[lo : lo + block]]
    return out
