"""Eager dispatch: a layer pass as a two-stage pipeline, the host issuing kernels and the GPU running them.

Training frameworks that run eagerly (Megatron-LM, NeMo, DeepSpeed without CUDA graphs) issue
every kernel from the host: Python module calls and PyTorch's dispatcher in the forward, the
autograd engine in the backward. The host runs ahead of the GPU while kernels are long; when they
are short it cannot keep up, and the GPU idles between kernels. A pass of ``n`` ops, the host
issuing op ``k`` at ``k * h`` and the GPU running them in order (one CUDA stream, an unbounded
launch queue), ends at

    T = max over k of (k * h + g_k + g_{k+1} + ... + g_{n-1})

(the GPU finishes op ``k`` no earlier than its issue plus everything after it): about ``n * h``
when the host is the slower side, and more when short kernels come first and long ones last (the
GPU waits for the host through the short ones, then runs the long ones after it). A pass whose
host time ``n * h`` is shorter than its GPU time lasts its GPU time: layer after layer such
passes let the host run further and further ahead, so the GPU never waits for it.

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

Each rank's layer passes are found in its trace (the compute nodes of each layer in its first
micro-batch, per phase: forward, recomputed forward, backward, in trace order), so runs of
recorded traces are stretched the same way as generated ones. A stretched pass scales its ops
by ``T / GPU time``.

APPROXIMATION: one host rate per architecture for every framework and host CPU (the measuring
machine's eager PyTorch; a faster CPU, fused kernels or CUDA graphs dispatch faster: set the
rate, or 0 to turn the model off); every op of a pass costs the host the same, but for the
context-parallel copies and merges, one kernel each, which cost the per-kernel rate (36 and
42 us on that machine); each pass starts
with the host and GPU together when it is host-bound (a lead from GPU-bound passes before it is
not credited); a
rank's micro-batches are taken to dispatch like its first, and a template two different passes
share takes the larger factor. The measured rate varies by about +-20 % between runs on the same
machine, and more between sessions (tiny twins on a second H100 machine: 2.0-4.4 ms against
1.97-3.64 ms, ``validation/h100_2026-11-27c/``). Layers matched by a user's whole-layer
measurement (``layer_gap``) take that measurement instead, which includes the host.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from heterosim.workload.framework import COLLECTIVE_CALL_LABEL
from heterosim.workload.trace import COMP_NODE, PHASES, RankTrace

# the layer passes stretched, each with the host rate of its kind
_PASSES = (("forward", "fwd", 0), ("recompute", "recompute", 0), ("backward", "bwd", 1))
# compute ops that are one kernel each, outside the measured layers' structure: the context-
# parallel copies and merges (heterosim/workload/cp.py labels them cp_*)
ONE_KERNEL_PREFIX = "cp_"


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
    durations_ns: np.ndarray,
    trace: RankTrace,
    per_op_ns: tuple[int, int],
    gpu: str,
    per_kernel_ns: tuple[int, int] | None = None,
) -> tuple[np.ndarray, DispatchStretch | None]:
    """``durations_ns`` (per template of ``trace``) with each layer pass's compute templates
    scaled so that the pass lasts the host's dispatch time where that is longer, and what was
    done (None: no pass is host-bound, durations unchanged).

    Every layer's passes of the rank's first micro-batch are measured apart (layers differ:
    uneven expert routing gives each MoE layer its own expert GEMMs); a template shared by
    several passes takes the largest of their factors. The context-parallel copies and merges
    (:data:`ONE_KERNEL_PREFIX`) cost the host ``per_kernel_ns`` each (default ``per_op_ns``):
    they are single kernels outside the layers the per-op rate was measured on."""
    t = trace.templates
    template = np.asarray(trace.template)
    names = np.asarray(t.label_names + [""], dtype=object)[np.asarray(t.label)]
    marker = names == COLLECTIVE_CALL_LABEL
    kernel = ((t.node_type == COMP_NODE) & ~marker)[template]  # a collective call's marker is no kernel
    one_kernel = np.array([str(n).startswith(ONE_KERNEL_PREFIX) for n in names], dtype=bool)[template]
    layer = np.asarray(trace.layer)
    phase = np.asarray(t.phase)[template]
    rate_of_phase = np.full(len(PHASES), -1, dtype=np.int64)
    for _, phase_name, rate in _PASSES:
        rate_of_phase[PHASES.index(phase_name)] = rate
    sel = kernel & (layer >= 0) & (rate_of_phase[phase] >= 0)
    if not sel.any():
        return np.asarray(durations_ns, dtype=np.int64), None
    mb = np.asarray(trace.micro_batch)
    sel &= mb == mb[sel].min()
    key = layer[sel].astype(np.int64) * len(PHASES) + phase[sel]
    keys, inverse = np.unique(key, return_inverse=True)
    ns = np.asarray(durations_ns, dtype=np.float64)
    op_rate = rate_of_phase[phase[sel]]
    op_host = np.where(
        one_kernel[sel],
        np.asarray(per_kernel_ns or per_op_ns, dtype=np.float64)[op_rate],
        np.asarray(per_op_ns, dtype=np.float64)[op_rate],
    )
    gpu_ns, pass_ns = pipelined_pass_ns(inverse, ns[template[sel]], op_host=op_host)
    host_bound = np.bincount(inverse, weights=op_host, minlength=keys.size) > gpu_ns
    factor = np.where((gpu_ns > 0) & host_bound, pass_ns / np.maximum(gpu_ns, 1.0), 1.0)
    per_template = np.ones(len(ns))
    np.maximum.at(per_template, template[sel], factor[inverse])
    scaled = per_template > 1.0
    result = np.asarray(durations_ns, dtype=np.int64).copy()
    if not scaled.any():
        return result, None
    result[scaled] = np.maximum(np.rint(ns[scaled] * per_template[scaled]), 1).astype(np.int64)
    return result, _first_layer_stretch(gpu, keys, factor, gpu_ns)


def pipelined_pass_ns(
    group: np.ndarray,
    gpu_ns: np.ndarray,
    host_ns: np.ndarray | None = None,
    *,
    op_host: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(GPU time, pipelined time) of each pass: ``group[i]`` is op ``i``'s pass (ops in issue
    order within a pass), ``gpu_ns[i]`` its GPU time, ``host_ns[p]`` pass ``p``'s host time per
    op, or ``op_host[i]`` op ``i``'s own. The pipelined time is ``max_k (issue_k + sum of GPU
    times from op k on)``, ``issue_k`` the host time of the pass's ops before op ``k``."""
    order = np.argsort(group, kind="stable")
    g = np.asarray(gpu_ns, dtype=np.float64)[order]
    grp = np.asarray(group)[order]
    if op_host is None:
        assert host_ns is not None
        op_host = np.asarray(host_ns, dtype=np.float64)[np.asarray(group)]
    h = np.asarray(op_host, dtype=np.float64)[order]
    passes = int(grp.max()) + 1 if host_ns is None else host_ns.size
    total = np.bincount(grp, weights=g, minlength=passes)
    counts = np.bincount(grp, minlength=passes)
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    before = np.cumsum(g) - g  # GPU time of all earlier ops in the sorted order
    suffix = total[grp] - (before - before[starts][grp])  # this op and the rest of its pass
    host_before = np.cumsum(h) - h
    issue = host_before - host_before[starts][grp]
    finish = np.full(passes, -np.inf)
    np.maximum.at(finish, grp, issue + suffix)
    return total, np.where(counts > 0, finish, 0.0)


def _first_layer_stretch(
    gpu: str, keys: np.ndarray, factor: np.ndarray, gpu_ns: np.ndarray
) -> DispatchStretch:
    """What the rank's first layer's passes were stretched by (the report's summary)."""
    first = keys // len(PHASES) == keys.min() // len(PHASES)
    factors, gaps = {}, {}
    for name, phase_name, _ in _PASSES:
        hit = first & (keys % len(PHASES) == PHASES.index(phase_name))
        f = float(factor[hit][0]) if hit.any() else 1.0
        factors[name], gaps[name] = f, (f - 1.0) * (float(gpu_ns[hit][0]) if hit.any() else 0.0)
    return DispatchStretch(gpu, factors, gaps)


__all__ = ["ONE_KERNEL_PREFIX", "DispatchStretch", "pipelined_pass_ns", "stretch_to_host_dispatch"]
