"""Eager dispatch: a layer pass lasts as long as the GPU's work or the host's, whichever is longer.

Training frameworks that run eagerly (Megatron-LM, NeMo, DeepSpeed without CUDA graphs) issue
every kernel from the host: Python module calls and PyTorch's dispatcher in the forward, the
autograd engine in the backward. The host runs ahead of the GPU while kernels are long; when they
are short it cannot keep up, and the GPU idles between kernels. Over a layer pass, a two-stage
pipeline (host issues, GPU runs) whose queue is deep enough to absorb the order of long and short
kernels finishes in ``max(GPU time, host time)``.

The host time per op of the simulator's op lists (``framework.host_dispatch``, forward and
backward) is measured, not fitted to a training run: each of the 14 dense standard layers
(:func:`heterosim.plan.compute.layer_profiler.standard_layers`) rebuilt with its structure and
tiny dimensions, run back to back on the H100 machine whose layers ship in ``validation/``,
runs at the rate its host issues kernels (``benchmarks/gpu/host_dispatch.py``,
``validation/h100_2026-11-27b/host_dispatch.json``): host time of the pass / the simulator's
compute ops of that layer pass, median over the layers of each architecture: GPT (9 layers)
42 us per forward op and 79 us per backward op, Llama (5 layers: RoPE and SwiGLU each launch
several kernels) 77 and 136 us. Per kernel the host spends 24-54 us on that machine's Xeon
either way; an eager layer launches 1.2-3.3 kernels per op the simulator lists.

Each rank's layer passes are found in its trace (the compute nodes of its first layer and first
micro-batch, per phase: forward, recomputed forward, backward), so runs of recorded traces are
stretched the same way as generated ones.

APPROXIMATION: one host rate per architecture for every framework and host CPU (the measuring
machine's eager PyTorch; a faster CPU, fused kernels or CUDA graphs dispatch faster: set the
rate, or 0 to turn the model off); the pass is treated as one pipeline, so a pass whose long
kernels all come first and short ones last is under-estimated; every layer of a rank is taken
to have its first layer's ops. The measured rate varies by about +-20 % between runs on the same
machine. Layers matched by a user's whole-layer measurement (``layer_gap``) take that
measurement instead, which includes the host.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from heterosim.workload.framework import COLLECTIVE_CALL_LABEL
from heterosim.workload.trace import COMP_NODE, PHASES, RankTrace

# the layer passes stretched, each with the host rate of its kind
_PASSES = (("forward", "fwd", 0), ("recompute", "recompute", 0), ("backward", "bwd", 1))


@dataclass(frozen=True)
class DispatchStretch:
    """How one rank's layer passes were stretched to the host's dispatch time."""

    gpu: str
    factors: dict[str, float]  # pass -> host time / GPU time (1.0: the GPU is the slower side)
    gaps_ns: dict[str, float]  # pass -> time added per pass

    def as_json(self) -> dict[str, object]:
        return {
            "gpu": self.gpu,
            "layer": "host dispatch",
            "mode": "host-dispatch",
            "forward_factor": self.factors["forward"],
            "backward_factor": self.factors["backward"],
            "recompute_factor": self.factors["recompute"],
            "forward_gap_us": self.gaps_ns["forward"] / 1e3,
            "backward_gap_us": self.gaps_ns["backward"] / 1e3,
            "rule": "a layer pass lasts max(GPU time, ops x host time per op); its ops scaled in "
            "proportion to their modelled time",
        }


def stretch_to_host_dispatch(
    durations_ns: np.ndarray, trace: RankTrace, per_op_ns: tuple[int, int], gpu: str
) -> tuple[np.ndarray, DispatchStretch | None]:
    """``durations_ns`` (per template of ``trace``) with each layer pass's compute templates
    scaled so that the pass lasts the host's dispatch time where that is longer, and what was
    done (None: no pass is host-bound, durations unchanged)."""
    out = np.asarray(durations_ns, dtype=np.float64).copy()
    layer = np.asarray(trace.layer)
    t = trace.templates
    marker = np.asarray(t.label_names + [""], dtype=object)[np.asarray(t.label)] == COLLECTIVE_CALL_LABEL
    compute = (t.node_type == COMP_NODE) & ~marker  # a collective call's marker is no kernel
    compute = compute[trace.template]
    in_layers = compute & (layer >= 0)
    if not in_layers.any():
        return np.asarray(durations_ns, dtype=np.int64), None
    first = in_layers & (layer == layer[in_layers].min())
    mb = np.asarray(trace.micro_batch)
    first &= mb == mb[first].min()
    phase = t.phase[trace.template]
    factors, gaps = {}, {}
    scaled = np.zeros(len(out), dtype=bool)
    for name, phase_name, rate in _PASSES:
        nodes = first & (phase == PHASES.index(phase_name))
        rows = np.asarray(trace.template)[nodes]
        gpu_ns = float(out[rows].sum())
        host_ns = float(per_op_ns[rate]) * rows.size
        factor = host_ns / gpu_ns if gpu_ns > 0 and host_ns > gpu_ns else 1.0
        factors[name], gaps[name] = factor, (factor - 1.0) * gpu_ns
        if factor > 1.0:
            out[np.unique(rows)] *= factor
            scaled[rows] = True
    result = np.asarray(durations_ns, dtype=np.int64).copy()
    if not scaled.any():
        return result, None
    result[scaled] = np.maximum(np.rint(out[scaled]), 1).astype(np.int64)
    return result, DispatchStretch(gpu, factors, gaps)


__all__ = ["DispatchStretch", "stretch_to_host_dispatch"]
