"""The execution plan: the DAG the engine runs, as flat arrays.

Three kinds of task:

* ``COMPUTE``: runs for ``duration_ns`` on stream ``stream`` of GPU ``gpu``; tasks of one
  (gpu, stream) run one at a time, in task-index order among those that are ready;
* ``FLOW``: moves ``bytes`` from GPU ``gpu`` to GPU ``dst`` through the network with priority
  ``priority``; flows run concurrently, sharing the network;
* ``MARKER``: zero-time join point (e.g. "collective done"), finishes as soon as its parents do
  (and its ``delay_ns``); ``gpu`` is -1, except for a folded data-parallel collective
  (heterosim/plan/fold.py): its end marker names the rank's GPU and waits the collective's time.

A task starts when all its parents (``dep_idx[dep_ptr[i]:dep_ptr[i+1]]``) have finished.
``delay_ns`` is a fixed latency added before a FLOW starts or a COMPUTE runs (e.g. NCCL's
per-step protocol latency); it is 0 unless the plan says otherwise.
Bookkeeping columns (``rank``, ``node``, ``collective``) tie tasks back to trace nodes and to
collective instances for the reports. ``channel`` is the NCCL channel of a collective's flow
(-1 otherwise); with ``collective`` it names the flow's NCCL connection (:func:`connection_ids`):
flows of one collective instance on the same channel from the same GPU to the same GPU are
messages on one connection, which NCCL drives as one queue pair. The engine can send them as
such (``simulation.queue_pairs``); otherwise no bookkeeping column affects execution.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

COMPUTE, FLOW, MARKER = 0, 1, 2
TASK_KIND_NAMES = ("compute", "flow", "marker")


# The per-task columns of an ExecutionPlan (dependencies, in CSR form, apart)
TASK_COLUMNS = (
    "kind",
    "gpu",
    "dst",
    "bytes",
    "duration_ns",
    "delay_ns",
    "stream",
    "priority",
    "rank",
    "node",
    "collective",
    "channel",
    "contention_wave",
    "contention_share",
    "contention_above",
)

# Flow sizes, durations and delays: int32 together when every value of the three fits (12 bytes
# per task less; the engine reads them as 64-bit values, PlanExecutor::BorrowPlanNarrow), int64
# together otherwise (a flow of 2 GiB or more, a task of 2.1 s or more)
AMOUNT_COLUMNS = ("bytes", "duration_ns", "delay_ns")

# The columns only the engine reads (dependencies, flow traffic classes, NCCL channels, the
# contention terms): a finished run's reports never do (:meth:`ExecutionPlan.release_schedule`).
SCHEDULE_COLUMNS = (
    "dep_ptr",
    "dep_idx",
    "priority",
    "channel",
    "contention_wave",
    "contention_share",
    "contention_above",
)


@dataclass
class ExecutionPlan:
    kind: np.ndarray  # uint8 (T,)
    # GPU ids in int16 together when both columns fit (clusters up to 32,767 GPUs), else int32
    # (endpoint_columns)
    gpu: np.ndarray  # GPU running a compute task / sending a flow; -1 for markers
    dst: np.ndarray  # flow destination GPU, -1 otherwise
    bytes: np.ndarray  # int32, or int64 (see AMOUNT_COLUMNS): flow size
    duration_ns: np.ndarray  # int32 / int64: compute duration
    delay_ns: np.ndarray  # int32 / int64: fixed latency before the task
    stream: np.ndarray  # int16: compute stream on the GPU
    priority: np.ndarray  # uint8: flow traffic class
    dep_ptr: np.ndarray  # int64 (T+1,); int32 once narrow_dependencies() narrowed it
    dep_idx: np.ndarray  # int64 (E,); likewise
    # id columns in the narrowest of int16 (rank, node) / int32 / int64 that holds every id
    # (index_column: plans hold millions of tasks, the reports only index with these)
    rank: np.ndarray  # rank whose trace the task came from (-1 if none)
    node: np.ndarray  # trace node id in that rank (-1 if none)
    collective: np.ndarray  # collective instance id (-1 if none); at least int32
    num_gpus: int = 0
    collectives: dict[str, np.ndarray] = field(default_factory=dict)  # per-instance table
    channel: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int16))  # -1: none
    # compute/communication contention per compute task (heterosim.plan.compute.contention):
    # wave term, share of the GPU per communication block, blocks above which the wave term
    # applies; zeros: the task is not slowed
    contention_wave: np.ndarray = field(default_factory=lambda: np.zeros(0))
    contention_share: np.ndarray = field(default_factory=lambda: np.zeros(0))
    contention_above: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))
    released: bool = False  # release_schedule() freed SCHEDULE_COLUMNS: not runnable any more

    def __post_init__(self) -> None:
        n = len(self)
        self.rank = index_column(self.rank, np.int16)
        self.node = index_column(self.node, np.int16)
        self.collective = index_column(self.collective)
        self.gpu, self.dst = endpoint_columns(self.gpu, self.dst)
        self.bytes, self.duration_ns, self.delay_ns = amount_columns(
            self.bytes, self.duration_ns, self.delay_ns
        )
        if self.channel.shape[0] == 0 and n > 0:
            self.channel = np.full(n, -1, np.int16)
        if self.contention_wave.shape[0] == 0 and n > 0:
            self.contention_wave = np.zeros(n)
            self.contention_share = np.zeros(n)
            self.contention_above = np.zeros(n, np.int32)

    def __len__(self) -> int:
        return int(self.kind.shape[0])

    def release_schedule(self, durations: bool = False) -> int:
        """Free :data:`SCHEDULE_COLUMNS` (empty arrays of the same dtypes take their place) once
        every run of the plan is over; return the bytes they held. The plan's other columns, which
        the reports read, stay; the plan cannot run again (``released``). ``durations``: also
        ``duration_ns``, which the reports read only for fault records (a straggler window's
        slowed tasks, :mod:`heterosim.engine.faults`), once the run is over."""
        freed = 0
        for name in SCHEDULE_COLUMNS + (("duration_ns",) if durations else ()):
            column: np.ndarray = getattr(self, name)
            freed += column.nbytes
            setattr(self, name, np.zeros(0, column.dtype))
        self.released = True
        return freed

    def narrow_dependencies(self) -> int:
        """Hold the dependency CSR (``dep_ptr``, ``dep_idx``) in int32 when every offset and
        parent index fits: the same values, 4 bytes per task and per dependency less. For a plan
        that is run once and then released (``execute_plan(release_schedule=True)``): the engine
        reads either width (``PlanExecutor::BorrowParentsNarrow``), the plan's other readers
        (folding, iterations, merging) build int64 ones. Returns the bytes saved."""
        limit = np.iinfo(np.int32).max
        if self.released or self.dep_ptr.dtype == np.int32 or len(self) >= limit:
            return 0
        if self.dep_ptr.size and int(self.dep_ptr[-1]) > limit:  # dependencies counted 32-bit
            return 0
        before = self.dep_ptr.nbytes + self.dep_idx.nbytes
        self.dep_ptr = self.dep_ptr.astype(np.int32)
        self.dep_idx = self.dep_idx.astype(np.int32)
        return before - self.dep_ptr.nbytes - self.dep_idx.nbytes

    def check(self) -> None:
        """Assert structural invariants; raises AssertionError with the broken one."""
        assert not self.released, "the plan's schedule columns were released"
        n = len(self)
        for name in TASK_COLUMNS:
            assert getattr(self, name).shape == (n,), f"{name} has the wrong length"
        assert self.dep_ptr.shape == (n + 1,) and self.dep_ptr[0] == 0
        assert self.dep_ptr[-1] == self.dep_idx.shape[0]
        flows = self.kind == FLOW
        assert np.all(self.bytes[flows] > 0), "every flow moves at least one byte"
        assert np.all((self.dst[flows] >= 0) & (self.dst[flows] < self.num_gpus))
        assert np.all(self.gpu[flows] != self.dst[flows]), "a flow needs two different GPUs"
        if self.dep_idx.size:
            assert self.dep_idx.min() >= 0 and self.dep_idx.max() < n


def index_column(values: np.ndarray, narrowest: type = np.int32) -> np.ndarray:
    """An id column (``rank``, ``node``, ``collective``) in the narrowest signed integer type
    from ``narrowest`` up (int16, int32, int64) that holds every value: the same values, 2 to 6
    bytes per task less for the plans that exist (ids count ranks, trace nodes or instances).
    ``values`` itself when it already has that dtype."""
    values = np.asarray(values)
    for dtype in (np.int16, np.int32):
        if np.iinfo(dtype).bits >= np.iinfo(narrowest).bits and fits(values, dtype):
            return values.astype(dtype, copy=False)
    return values.astype(np.int64, copy=False)


def endpoint_columns(gpu: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The GPU columns (``gpu``, ``dst``) in int16 together when every id of both fits, else in
    int32 (the engine's GPU ids; ``PlanExecutor::BorrowEndpointsNarrow`` reads 16-bit ones): the
    same values, 4 bytes per task less on clusters of up to 32,767 GPUs. A column already of
    that dtype is kept, not copied."""
    gpu, dst = np.asarray(gpu), np.asarray(dst)
    dtype = np.int16 if fits(gpu, np.int16) and fits(dst, np.int16) else np.int32
    return gpu.astype(dtype, copy=False), dst.astype(dtype, copy=False)


def task_indices(mask: np.ndarray, block: int = 1 << 20) -> np.ndarray:
    """``np.flatnonzero(mask)`` (ascending task indices), in int32 where every index fits, found
    a block of ``block`` tasks at a time: no 64-bit array of them all (memory)."""
    if mask.size > np.iinfo(np.int32).max:
        return np.flatnonzero(mask)
    out = np.empty(int(np.count_nonzero(mask)), np.int32)
    at = 0
    for lo in range(0, mask.size, block):
        where = np.flatnonzero(mask[lo : lo + block])
        where += lo
        out[at : at + where.size] = where
        at += where.size
    return out


def fits_int32(values: np.ndarray) -> bool:
    """Whether every value of an integer array fits int32 (no copy of it)."""
    return fits(values, np.int32)


def fits(values: np.ndarray, dtype: type) -> bool:
    """Whether every value of an integer array fits ``dtype`` (no copy of it)."""
    info = np.iinfo(dtype)
    if values.size == 0 or (values.dtype.kind == "i" and values.dtype.itemsize <= info.bits // 8):
        return True
    return int(values.min()) >= info.min and int(values.max()) <= info.max


def amount_dtype(*columns: np.ndarray) -> type:
    """The dtype the plan holds its :data:`AMOUNT_COLUMNS` in: int32 when every value of the
    three fits, else int64."""
    return np.int32 if all(fits_int32(np.asarray(c)) for c in columns) else np.int64


def amount_columns(*columns: np.ndarray) -> tuple[np.ndarray, ...]:
    """The :data:`AMOUNT_COLUMNS` in :func:`amount_dtype` (the same values; a column already of
    that dtype is kept, not copied)."""
    dtype = amount_dtype(*columns)
    return tuple(np.asarray(c).astype(dtype, copy=False) for c in columns)


def connection_ids(plan: ExecutionPlan) -> np.ndarray:
    """Connection id per task (-1 for tasks that are not on a connection): int32, as every id
    fits (a connection has two flows or more, so ids stay below half the tasks) for plans of
    fewer than 2^32 tasks, the most the engine runs; int64 beyond.

    Flows of a collective instance (``collective`` >= 0) with a channel (``channel`` >= 0) are
    grouped by (instance, channel, source GPU, destination GPU); each group of two or more flows
    gets one id, dense from 0 in order of first appearance. A group of one flow is that flow alone
    (-1: routed and sent exactly as an independent flow, so ``connection`` granularity, one flow
    per pair, is unaffected), as are point-to-point flows outside collectives; other tasks get -1.

    Memory: the group key and the task index are packed into one int64 per flow and sorted in
    place, the rest read a block of rows at a time (a few bytes per flow beyond the result);
    keys too wide for that are sorted column by column (:func:`_connection_ids_by_columns`).
    """
    out = np.full(len(plan), -1, np.int32 if len(plan) < 2**32 else np.int64)
    on = (plan.kind == FLOW) & (plan.collective >= 0) & (plan.channel >= 0)
    count = int(np.count_nonzero(on))
    if count == 0:
        return out
    sources = (plan.collective, plan.channel, plan.gpu, plan.dst)
    sizes = [
        max(
            int(c[lo : lo + CONNECTION_BLOCK][on[lo : lo + CONNECTION_BLOCK]].max(initial=-1)) + 1
            for lo in range(0, len(plan), CONNECTION_BLOCK)
        )
        for c in sources
    ]
    task_bits = max(len(plan) - 1, 1).bit_length()
    if float(np.prod(np.array(sizes, dtype=np.float64))) >= 2.0 ** (63 - task_bits):
        return _connection_ids_by_columns(plan, np.flatnonzero(on), sources, out)
    packed = _packed_group_keys(on, count, sources, sizes, task_bits)
    del on
    new_group, ids = _group_ids(packed, task_bits, out.dtype)
    task_mask = (1 << task_bits) - 1
    groups_before = 0
    for lo in range(0, count, CONNECTION_BLOCK):
        hi = min(lo + CONNECTION_BLOCK, count)
        group = np.cumsum(new_group[lo:hi], dtype=np.int64)
        group += groups_before - 1
        groups_before = int(group[-1]) + 1
        out[packed[lo:hi] & task_mask] = ids[group]
    return out


def _packed_group_keys(
    on: np.ndarray, count: int, sources: tuple[np.ndarray, ...], sizes: list[int], task_bits: int
) -> np.ndarray:
    """One int64 per flow that ``on`` marks: its key (instance, channel, source, destination)
    above its task index, sorted in place, which orders the flows by group and, within a group,
    by task. Built a block of rows at a time."""
    packed = np.empty(count, np.int64)
    filled = 0
    for lo in range(0, len(on), CONNECTION_BLOCK):
        tasks = np.flatnonzero(on[lo : lo + CONNECTION_BLOCK]) + lo
        key = sources[0][tasks].astype(np.int64)
        for column, size in zip(sources[1:], sizes[1:]):
            key *= size
            key += column[tasks]
        key <<= task_bits
        key |= tasks
        packed[filled : filled + tasks.size] = key
        filled += tasks.size
    packed.sort()
    return packed


def _group_ids(packed: np.ndarray, task_bits: int, dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """For the sorted keys of :func:`_packed_group_keys`: per row whether it starts a group, and
    per group its connection id (-1 for a group of one flow), dense from 0 in order of the
    groups' earliest tasks."""
    count = packed.size
    task_mask = (1 << task_bits) - 1
    new_group = np.empty(count, dtype=bool)
    new_group[0] = True
    for lo in range(1, count, CONNECTION_BLOCK):
        hi = min(lo + CONNECTION_BLOCK, count)
        np.not_equal(packed[lo:hi] >> task_bits, packed[lo - 1 : hi - 1] >> task_bits, out=new_group[lo:hi])
    group_start = task_indices(new_group)  # 32-bit where they fit, as the ids below (memory)
    shared = np.diff(group_start, append=count) >= 2
    first_task = np.empty(group_start.size, group_start.dtype)  # a group's earliest task
    for lo in range(0, group_start.size, CONNECTION_BLOCK):
        first_task[lo : lo + CONNECTION_BLOCK] = packed[group_start[lo : lo + CONNECTION_BLOCK]] & task_mask
    del group_start
    ids = np.full(first_task.size, -1, dtype)
    by_first = task_indices(shared)
    by_first = by_first[np.argsort(first_task[by_first], kind="stable")]
    ids[by_first] = np.arange(by_first.size)
    return new_group, ids


CONNECTION_BLOCK = 1 << 20  # rows per block of connection_ids' passes (8 MiB of int64)


def _connection_ids_by_columns(
    plan: ExecutionPlan, on: np.ndarray, sources: tuple[np.ndarray, ...], out: np.ndarray
) -> np.ndarray:
    """:func:`connection_ids` for keys too wide to pack with the task index: a stable sort of
    the flows ``on`` by every column of ``sources`` (more memory, same ids)."""
    columns = [c[on].astype(np.int64) for c in sources]
    order = np.lexsort(columns[::-1])
    sorted_cols = [c[order] for c in columns]
    new_group = np.ones(on.size, dtype=bool)
    new_group[1:] = np.any([c[1:] != c[:-1] for c in sorted_cols], axis=0)
    del columns, sorted_cols
    # The sort is stable: each group's rows come in task order, its first row is its earliest.
    group_start = np.flatnonzero(new_group)
    first_row = order[group_start]
    shared = np.diff(group_start, append=on.size) >= 2
    group = np.cumsum(new_group, dtype=np.int64) - 1  # group of each sorted row
    rank_of_group = np.full(group_start.size, -1, np.int64)
    by_first = np.argsort(first_row, kind="stable")
    by_first = by_first[shared[by_first]]
    rank_of_group[by_first] = np.arange(by_first.size)
    out[on[order]] = rank_of_group[group]
    return out
