"""The execution plan: the DAG the engine runs, as flat arrays.

Three kinds of task:

* ``COMPUTE``: runs for ``duration_ns`` on stream ``stream`` of GPU ``gpu``; tasks of one
  (gpu, stream) run one at a time, in task-index order among those that are ready;
* ``FLOW``: moves ``bytes`` from GPU ``gpu`` to GPU ``dst`` through the network with priority
  ``priority``; flows run concurrently, sharing the network;
* ``MARKER``: zero-time join point (e.g. "collective done"), finishes as soon as its parents do.

A task starts when all its parents (``dep_idx[dep_ptr[i]:dep_ptr[i+1]]``) have finished.
``delay_ns`` is a fixed latency added before a FLOW starts or a COMPUTE runs (e.g. NCCL's
per-step protocol latency); it is 0 unless the plan says otherwise.
Bookkeeping columns (``rank``, ``node``, ``collective``) tie tasks back to trace nodes and to
collective instances for the reports; they do not affect execution.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

COMPUTE, FLOW, MARKER = 0, 1, 2
TASK_KIND_NAMES = ("compute", "flow", "marker")


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

    def __len__(self) -> int:
        return int(self.kind.shape[0])

    def check(self) -> None:
        """Assert structural invariants; raises AssertionError with the broken one."""
        n = len(self)
        for name in ("gpu", "dst", "bytes", "duration_ns", "delay_ns", "stream", "priority",
                     "rank", "node", "collective"):
            assert getattr(self, name).shape == (n,), f"{name} has the wrong length"
        assert self.dep_ptr.shape == (n + 1,) and self.dep_ptr[0] == 0
        assert self.dep_ptr[-1] == self.dep_idx.shape[0]
        flows = self.kind == FLOW
        assert np.all(self.bytes[flows] > 0), "every flow moves at least one byte"
        assert np.all((self.dst[flows] >= 0) & (self.dst[flows] < self.num_gpus))
        assert np.all(self.gpu[flows] != self.dst[flows]), "a flow needs two different GPUs"
        if self.dep_idx.size:
            assert self.dep_idx.min() >= 0 and self.dep_idx.max() < n


def empty_plan(num_gpus: int) -> ExecutionPlan:
    """A plan with no tasks."""
    z = np.zeros(0, dtype=np.int64)
    return ExecutionPlan(
        kind=z.astype(np.uint8), gpu=z.astype(np.int32), dst=z.astype(np.int32), bytes=z.copy(),
        duration_ns=z.copy(), delay_ns=z.copy(), stream=z.astype(np.int16),
        priority=z.astype(np.uint8), dep_ptr=np.zeros(1, np.int64), dep_idx=z.copy(),
        rank=z.astype(np.int32), node=z.copy(), collective=z.copy(), num_gpus=num_gpus,
    )
