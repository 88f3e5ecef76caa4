"""Host (CPU) time per kernel that the GPU waits for: ``framework.host_op_overhead``.

Eager PyTorch dispatches every kernel from Python: module calls, autograd bookkeeping, the
framework's own wrappers. When that host work per kernel exceeds the kernel's GPU time, or when
the framework synchronises host and GPU around every pipeline instruction (DeepSpeed 0.3's
``wall_clock_breakdown`` timers call ``torch.cuda.synchronize()`` at each start and stop,
``deepspeed/utils/timer.py``), the GPU idles for it. The roofline's ``launch_overhead_ns`` (a few
microseconds) covers the launch itself; this is the rest, per framework and host.

APPROXIMATION: the host time is added to each compute op (GPU and host work in series). That is
exact when the two do not overlap and an over-estimate by at most ``ops x overhead`` per pass when
the GPU is the bottleneck and the host runs ahead.

:func:`host_overhead_from_layer_forward` derives the per-op value from a measured, synchronised
layer-forward time (a profile): measured / passes minus the compute model's GPU time of the same
op list, spread over its compute ops. :func:`collective_overhead_from_layer_forward` does the same
for the cost per tensor-parallel collective call (``framework.collective_overhead``, carried by a
marker op before each TP collective) from a profile at tp > 1.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from heterosim.workload.framework import COLLECTIVE_CALL_LABEL
from heterosim.workload.trace import COMP_NODE, OpTemplates


def add_host_overhead(
    durations_ns: np.ndarray, templates: OpTemplates, overhead_ns: int, collective_overhead_ns: int = 0
) -> np.ndarray:
    """``durations_ns`` with ``overhead_ns`` added to every compute template (comm rows keep 0)
    and the collective-call markers (:data:`COLLECTIVE_CALL_LABEL`) set to
    ``collective_overhead_ns``."""
    out = np.asarray(durations_ns, dtype=np.int64).copy()
    compute = np.asarray(templates.node_type) == COMP_NODE
    names = np.asarray(templates.label_names + [""], dtype=object)
    marker = compute & (names[np.asarray(templates.label, dtype=np.int64)] == COLLECTIVE_CALL_LABEL)
    if overhead_ns > 0:
        out[compute & ~marker] += int(overhead_ns)
    out[marker] = int(collective_overhead_ns)
    return out


def collective_overhead_from_layer_forward(
    measured_forward_ns: float,
    passes: int,
    gpu_op_ns: Sequence[int],
    host_op_ns: int,
    collective_ns: Sequence[int],
) -> int:
    """Cost per TP collective call from a synchronised per-layer forward measurement at tp > 1:
    measured / passes minus the ops' GPU and host time and the collectives' modelled transfer
    time, per collective (0 if the model is already slower)."""
    if passes < 1 or not collective_ns:
        raise ValueError("need at least one pass and one collective")
    rest = (
        measured_forward_ns / passes
        - float(sum(gpu_op_ns))
        - host_op_ns * len(gpu_op_ns)
        - float(sum(collective_ns))
    )
    return max(0, round(rest / len(collective_ns)))


def host_overhead_from_layer_forward(
    measured_forward_ns: float, passes: int, gpu_op_ns: Sequence[int]
) -> int:
    """Host ns per compute op from a synchronised per-layer forward measurement.

    ``measured_forward_ns`` covers ``passes`` evaluations of the layer forward whose compute ops
    the compute model times as ``gpu_op_ns``; the difference per pass, spread over the ops, is
    the host time per op (0 if the model is already slower than the measurement).
    """
    if passes < 1 or not gpu_op_ns:
        raise ValueError("need at least one pass and one compute op")
    per_pass = measured_forward_ns / passes
    return max(0, round((per_pass - float(sum(gpu_op_ns))) / len(gpu_op_ns)))


__all__ = ["add_host_overhead", "collective_overhead_from_layer_forward", "host_overhead_from_layer_forward"]
