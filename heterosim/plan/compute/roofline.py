"""Roofline time of one op on one GPU from its FLOPs, bytes and the GPU's efficiency curves.

``time = launch_overhead + max(work / (peak_flops * e_compute), bytes / (bandwidth * e_memory))``

``work`` is the op's FLOPs, except for attention, where it is recomputed from the shape
(4*b*s^2*H*d forward, halved when causal, 2.5x for backward) so the result does not depend on
whether the producer of the trace halved causal FLOPs. Compute efficiencies come from
:mod:`heterosim.plan.compute.efficiency`; memory-bound kinds use only the bandwidth term (their
FLOPs are checked against the fp32/vector peak too). Efficiencies never exceed 1, so the time is
never below FLOPs / peak or bytes / bandwidth.
"""

from __future__ import annotations

from heterosim.catalog.gpus import GpuSpec
from heterosim.plan.compute.efficiency import (
    EfficiencyParams,
    attention_efficiency,
    attention_forward_flops,
    attention_is_backward,
    gemm_efficiency,
)


def compute_peak(spec: GpuSpec, dtype: str) -> float:
    """Peak FLOP/s the op's dtype runs at (UserError if the GPU lacks it)."""
    return spec.peak_flops(dtype)


def effective_flops(op_kind: str, shape: tuple, shape_extra: tuple, flops: float) -> float:
    """The FLOPs the roofline charges: shape-derived for attention, the op's own otherwise."""
    if op_kind == "attention":
        b, s, h, d = (int(x) for x in shape[:4])
        causal = bool(shape_extra[1]) if len(shape_extra) > 1 else False
        fwd = attention_forward_flops(b, s, h, d, causal)
        return fwd * 2.5 if attention_is_backward(shape, shape_extra, flops) else fwd
    if op_kind == "gemm":
        m, n, k, batch = (int(x) for x in shape[:4])
        return 2.0 * m * n * k * max(batch, 1) if m and n and k else float(flops)
    return float(flops)


def compute_efficiency(
    op_kind: str, dtype: str, shape: tuple, shape_extra: tuple, flops: float, params: EfficiencyParams
) -> float | None:
    """Efficiency of the compute term, or None for memory-bound kinds."""
    if op_kind == "gemm":
        m, n, k, batch = (max(int(x), 1) for x in shape[:4])
        return gemm_efficiency(params, dtype, m, n, k, batch)
    if op_kind == "attention":
        b, s, h, d = (int(x) for x in shape[:4])
        causal = bool(shape_extra[1]) if len(shape_extra) > 1 else False
        return attention_efficiency(params, s, d, causal, attention_is_backward(shape, shape_extra, flops))
    return None


def roofline_time_ns(
    op_kind: str,
    dtype: str,
    shape: tuple,
    shape_extra: tuple,
    flops: float,
    bytes_moved: float,
    spec: GpuSpec,
    params: EfficiencyParams,
) -> float:
    """Roofline duration in ns (float; the caller rounds)."""
    work = effective_flops(op_kind, shape, shape_extra, flops)
    eff = compute_efficiency(op_kind, dtype, shape, shape_extra, flops, params)
    if eff is not None:
        compute_s = work / (compute_peak(spec, dtype) * max(eff, 1e-6))
    else:
        vector_peak = spec.peak_tflops.get("fp32") or spec.peak_tflops.get(dtype) or 0.0
        compute_s = work / (float(vector_peak) * 1e12) if vector_peak else 0.0
    memory_s = bytes_moved / (spec.memory_bytes_per_s * params.memory_efficiency)
    return params.launch_overhead_ns + 1e9 * max(compute_s, memory_s)


def is_compute_bound(
    op_kind: str,
    dtype: str,
    shape: tuple,
    shape_extra: tuple,
    flops: float,
    bytes_moved: float,
    spec: GpuSpec,
) -> bool:
    """Arithmetic intensity at or above the GPU's ridge point (peak FLOP/s / bandwidth)."""
    if bytes_moved <= 0:
        return True
    work = effective_flops(op_kind, shape, shape_extra, flops)
    peak = spec.peak_tflops.get(dtype) or spec.peak_tflops.get("fp32") or 0.0
    ridge = float(peak) * 1e12 / spec.memory_bytes_per_s
    return work / bytes_moved >= ridge
