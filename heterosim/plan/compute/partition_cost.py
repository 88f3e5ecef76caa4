"""The partitioner's cost callback backed by the compute model.

The workload layer's partitioner asks "how long do these ops take on this GPU type?" through a
callback so that it does not import the plan layer. ``heterosim run`` and ``heterosim workload``
both pass this one, so they cut the pipeline at the same layers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from heterosim.plan.compute.model import ComputeModel


def partition_cost_fn(model: ComputeModel) -> Callable[[str, Iterable[Any]], float]:
    """``cost(gpu_type, ops) -> seconds`` summing the compute model's time of every compute op."""
    cache: dict[tuple[str, Any], float] = {}

    def cost(gpu_type: str, ops: Iterable[Any]) -> float:
        total = 0.0
        for op in ops:
            if op.is_comm:
                continue
            key = (gpu_type, op)
            seconds = cache.get(key)
            if seconds is None:
                ns, _ = model.time_op(
                    op.op_kind, op.dtype, op.shape, op.shape_extra, op.flops, op.bytes_moved, gpu_type
                )
                seconds = cache[key] = ns * 1e-9
            total += seconds
        return total

    return cost
