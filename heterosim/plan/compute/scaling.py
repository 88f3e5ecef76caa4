"""Cross-GPU scaling of a measured op time by the ratio of the two GPUs' specs (SimAI-CP-Model).

``t_target = t_source * peak_source / peak_target`` for compute-bound ops and
``t_target = t_source * bandwidth_source / bandwidth_target`` for memory-bound ones. An op is
compute-bound when its arithmetic intensity (shape-derived FLOPs / bytes) is at or above the
source GPU's ridge point (peak FLOP/s of the op's dtype / DRAM bandwidth): a large GEMM scales
with FLOP/s, a LayerNorm or a skinny GEMM with bandwidth.

This is the coarsest method: it assumes the target reaches the same fraction of its peak as the
source did, which fails across architectures with different tensor-core generations or cache
sizes (SimAI reports 13-15 % error for this model). The nearest source GPU is the one with the
smallest ``|ln(peak ratio)| + |ln(bandwidth ratio)|``, preferring the same vendor.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from heterosim.catalog.gpus import GpuSpec
from heterosim.plan.compute.roofline import is_compute_bound


def _peak(spec: GpuSpec, dtype: str) -> float:
    value = spec.peak_tflops.get(dtype)
    return float(value) * 1e12 if value else 0.0


def scale_time_ns(
    time_ns: float,
    op_kind: str,
    dtype: str,
    shape: tuple,
    shape_extra: tuple,
    flops: float,
    bytes_moved: float,
    source: GpuSpec,
    target: GpuSpec,
) -> float | None:
    """Time on ``target`` from a time measured on ``source``; None if a peak is missing."""
    if is_compute_bound(op_kind, dtype, shape, shape_extra, flops, bytes_moved, source):
        src, dst = _peak(source, dtype), _peak(target, dtype)
        if not src or not dst:
            return None
        return time_ns * src / dst
    return time_ns * source.memory_bytes_per_s / target.memory_bytes_per_s


def spec_distance(a: GpuSpec, b: GpuSpec, dtype: str) -> float:
    pa, pb = _peak(a, dtype), _peak(b, dtype)
    flops_term = abs(math.log(pa / pb)) if pa and pb else 10.0
    vendor_term = 0.0 if a.vendor == b.vendor else 1.0
    return flops_term + abs(math.log(a.memory_bytes_per_s / b.memory_bytes_per_s)) + vendor_term


def nearest_sources(target: GpuSpec, candidates: Iterable[GpuSpec], dtype: str) -> list[GpuSpec]:
    """Candidates ordered nearest first (ties broken by name for determinism)."""
    return sorted(
        (c for c in candidates if c.name != target.name),
        key=lambda c: (spec_distance(target, c, dtype), c.name),
    )
