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
    gpu: np.ndarray  # int32: GPU running a compute task / sending a flow; -1 for markers
    dst: np.ndarray  # int32: flow destination GPU, -1 otherwise
    bytes: np.ndarray  # int64: flow size
    duration_ns: np.ndarray  # int64: compute duration
    delay_ns: np.ndarray  # int64: fixed latency before the task
    stream: np.ndarray  # int16: compute stream on the GPU
    priority: np.ndarray  # uint8: flow traffic class
    dep_ptr: np.ndarray  # int64 (T+1,)
    dep_idx: np.ndarray  # int64 (E,)
    rank: np.ndarray  # int32: rank whose trace the task came from (-1 if none)
    node: np.ndarray  # int64: trace node id in that rank (-1 if none)
    collective: np.ndarray  # int64: collective instance id (-1 if none)
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
        if self.channel.shape[0] == 0 and n > 0:
            self.channel = np.full(n, -1, np.int16)
        if self.contention_wave.shape[0] == 0 and n > 0:
            self.contention_wave = np.zeros(n)
            self.contention_share = np.zeros(n)
            self.contention_above = np.zeros(n, np.int32)

    def __len__(self) -> int:
        return int(self.kind.shape[0])

    def release_schedule(self) -> int:
        """Free :data:`SCHEDULE_COLUMNS` (empty arrays of the same dtypes take their place) once
        every run of the plan is over; return the bytes they held. The plan's other columns, which
        the reports read, stay; the plan cannot run again (``released``)."""
        freed = 0
        for name in SCHEDULE_COLUMNS:
            column: np.ndarray = getattr(self, name)
            freed += column.nbytes
            setattr(self, name, np.zeros(0, column.dtype))
        self.released = True
        return freed

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


def connection_ids(plan: ExecutionPlan) -> np.ndarray:
    """Connection id per task (int64; -1 for tasks that are not on a connection).

    Flows of a collective instance (``collective`` >= 0) with a channel (``channel`` >= 0) are
    grouped by (instance, channel, source GPU, destination GPU); each group of two or more flows
    gets one id, dense from 0 in order of first appearance. A group of one flow is that flow alone
    (-1: routed and sent exactly as an independent flow, so ``connection`` granularity, one flow
    per pair, is unaffected), as are point-to-point flows outside collectives; other tasks get -1.
    """
    out = np.full(len(plan), -1, np.int64)
    on = np.flatnonzero((plan.kind == FLOW) & (plan.collective >= 0) & (plan.channel >= 0))
    if on.size == 0:
        return out
    sources = (plan.collective, plan.channel, plan.gpu, plan.dst)
    sizes = [int(c[on].max()) + 1 for c in sources]
    if float(np.prod(np.array(sizes, dtype=np.float64))) < 2.0**62:  # one int64 key: one sort
        key = plan.collective[on].astype(np.int64, copy=False)  # built in place, a column at a time
        for column, size in zip(sources[1:], sizes[1:]):
            key *= size
            key += column[on]
        order = np.argsort(key, kind="stable")
        key = key[order]
        new_group = np.ones(on.size, dtype=bool)
        new_group[1:] = key[1:] != key[:-1]
        del key
    else:
        columns = [c[on].astype(np.int64) for c in sources]
        order = np.lexsort(columns[::-1])
        sorted_cols = [c[order] for c in columns]
        new_group = np.ones(on.size, dtype=bool)
        new_group[1:] = np.any([c[1:] != c[:-1] for c in sorted_cols], axis=0)
        del columns, sorted_cols
    # The sorts are stable: each group's rows come in task order, its first row is its earliest.
    group_start = np.flatnonzero(new_group)
    first_row = order[group_start]
    shared = np.diff(group_start, append=on.size) >= 2
    group = np.cumsum(new_group, dtype=np.int64)  # group of each sorted row, from 1
    group -= 1
    del new_group
    rank_of_group = np.full(group_start.size, -1, np.int64)
    by_first = np.argsort(first_row, kind="stable")
    by_first = by_first[shared[by_first]]
    rank_of_group[by_first] = np.arange(by_first.size)
    np.take(rank_of_group, group, out=group)  # each sorted row's id, in place (memory)
    on = on[order]
    del order
    out[on] = group
    return out
