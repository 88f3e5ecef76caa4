"""The per-flow table of a run (``EngineResult.flows``), derived from the plan on demand.

Most of its columns repeat the plan's (source, destination, bytes, collective of each flow task)
or the run's task times; storing them again costs ~70 bytes per flow (half a gigabyte at 7 M
flows). :class:`FlowTable` keeps only the flow task indices, references to the plan and the
times, and the columns the network model measured that are not all zero; it builds a column
(or a block of rows, :meth:`FlowTable.rows`) when asked, with the same values and dtypes a
plain dict of arrays would hold.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import numpy as np

from heterosim.plan.execution_plan import ExecutionPlan

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


class FlowTable(Mapping[str, np.ndarray]):
    """Per FLOW task: task, src, dst, bytes, start_ns, end_ns, retransmits, collective,
    connection, out_of_order, max_reorder_depth (see ``EngineResult.flows``).

    ``start_ns``/``end_ns`` are the run's per-task times and ``connection`` a per-task array
    (None: -1 everywhere); the table reads them, and ``plan``, in place, so they must not change
    while it is used. ``measured`` holds per-flow-row columns of :data:`MEASURED` (missing or
    all-zero ones are stored as nothing and read as zeros).
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
        self._task = np.asarray(flow_tasks, dtype=np.int64)
        self._start, self._end = start_ns, end_ns
        self._connection = connection if connection is not None and np.any(connection >= 0) else None
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
        return int(self._task.size)

    def rows(self, lo: int, hi: int) -> dict[str, np.ndarray]:
        """Every column for rows ``lo:hi`` (new arrays; a block of a large table at a time)."""
        return {key: self._column(key, lo, hi) for key in FLOW_TABLE_COLUMNS}

    def retained_bytes(self) -> int:
        """Bytes of the arrays this table holds of its own (not the plan's or the times)."""
        return int(self._task.nbytes + sum(v.nbytes for v in self._measured.values()))

    def _column(self, key: str, lo: int, hi: int) -> np.ndarray:
        dtype = FLOW_TABLE_COLUMNS[key]  # KeyError for an unknown column, as a dict would
        task = self._task[lo:hi]
        if key in MEASURED:
            values = self._measured.get(key)
            return values[lo:hi].copy() if values is not None else np.zeros(task.size, dtype)
        if key == "task":
            return task.copy()
        if key == "connection" and self._connection is None:
            return np.full(task.size, -1, dtype)
        source = {
            "src": self._plan.gpu,
            "dst": self._plan.dst,
            "bytes": self._plan.bytes,
            "start_ns": self._start,
            "end_ns": self._end,
            "collective": self._plan.collective,
            "connection": self._connection,
        }[key]
        assert source is not None
        return source[task].astype(dtype, copy=False)
