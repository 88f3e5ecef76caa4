"""Lookup of measured op times: exact keys and monotone interpolation between measured sizes.

Ops are grouped by (GPU, op kind, dtype class, family); within a group the time is a monotone
function of one size coordinate ``x``:

- gemm: ``x`` = 2*m*n*k*batch; family: none (GEMMs of any aspect ratio share the curve).
- attention: ``x`` = shape-derived FLOPs of the pass per (sequence, head) pair, i.e. of one
  head of one sequence, and the curve holds the time per pair (the op's time is the curve's value
  times batch*heads); family: (head_dim, causal, pass). A fused attention kernel's efficiency
  depends on the sequence length (its tiles per head), not on the total FLOPs: published tables
  hold tokens constant, so an op with fewer tokens at the same sequence length has the table's
  efficiency at that length, not that of a shorter sequence with the same total FLOPs. Approximate
  where batch*heads is so small that the kernel's tiles fill the SMs only a few times.
- memory-bound kinds: ``x`` = bytes moved; family: none.

Interpolation is piecewise linear in (log x, log t) through the measured points after a
pool-adjacent-violators pass makes the times non-decreasing in ``x`` (a no-op on monotone data,
so measured points are reproduced exactly). Outside ``[min x, max x]`` there is no answer: the
caller falls through to the next method, it never extrapolates.

bf16 and fp16 share one dtype class on GPUs whose catalogue peaks are equal for both.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from heterosim.catalog.gpus import gpu_spec, known_gpu_names
from heterosim.plan.compute.database import Measurement
from heterosim.plan.compute.efficiency import attention_is_backward
from heterosim.plan.compute.roofline import effective_flops

MEMORY_KEYED = ("norm", "elementwise", "softmax_loss", "embedding", "optimizer")


def dtype_class(gpu: str, dtype: str) -> str:
    """``16bit`` for bf16/fp16 when the GPU runs both at the same peak; else the dtype."""
    if dtype in ("bf16", "fp16") and gpu in known_gpu_names():
        peaks = gpu_spec(gpu).peak_tflops
        if peaks.get("bf16") and peaks.get("bf16") == peaks.get("fp16"):
            return "16bit"
    return dtype


def op_pass(op_kind: str, shape: Sequence[int], shape_extra: Sequence[int], flops: float) -> str:
    if op_kind == "attention":
        return "bwd" if attention_is_backward(tuple(shape), tuple(shape_extra), flops) else "fwd"
    return "fwd"


def exact_key(
    gpu: str,
    op_kind: str,
    dtype: str,
    shape: Sequence[int],
    shape_extra: Sequence[int],
    flops: float,
    bytes_moved: float,
    pass_: str | None = None,
) -> tuple:
    base = (
        gpu,
        op_kind,
        dtype_class(gpu, dtype),
        tuple(int(x) for x in shape),
        tuple(int(x) for x in shape_extra),
    )
    if op_kind == "attention":
        return (*base, pass_ or op_pass(op_kind, shape, shape_extra, flops))
    if op_kind in MEMORY_KEYED:
        return (*base, int(bytes_moved))
    return base


def group_key_and_x(
    gpu: str,
    op_kind: str,
    dtype: str,
    shape: Sequence[int],
    shape_extra: Sequence[int],
    flops: float,
    bytes_moved: float,
    pass_: str | None = None,
) -> tuple[tuple, float, float]:
    """(group key, x, units): the curve of the group holds time / units at x."""
    dclass = dtype_class(gpu, dtype)
    if op_kind == "attention":
        p = pass_ or op_pass(op_kind, shape, shape_extra, flops)
        causal = int(shape_extra[1]) if len(shape_extra) > 1 else 0
        pairs = float(max(int(shape[0]), 1) * max(int(shape[2]), 1))
        x = effective_flops(op_kind, tuple(shape), tuple(shape_extra), flops) / pairs
        return (gpu, op_kind, dclass, int(shape[3]), causal, p), x, pairs
    if op_kind in MEMORY_KEYED:
        return (gpu, op_kind, dclass), float(bytes_moved), 1.0
    return ((gpu, op_kind, dclass), effective_flops(op_kind, tuple(shape), tuple(shape_extra), flops), 1.0)


def monotone_fit(y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Pool adjacent violators: the weighted least-squares non-decreasing fit of ``y``."""
    values: list[float] = []
    weights: list[float] = []
    counts: list[int] = []
    for yi, wi in zip(y.tolist(), w.tolist()):
        values.append(yi)
        weights.append(wi)
        counts.append(1)
        while len(values) > 1 and values[-2] > values[-1]:
            wsum = weights[-2] + weights[-1]
            merged = (values[-2] * weights[-2] + values[-1] * weights[-1]) / wsum
            counts[-2] += counts[-1]
            values[-2], weights[-2] = merged, wsum
            del values[-1], weights[-1], counts[-1]
    return np.repeat(np.array(values), counts)


class MonotoneCurve:
    """A non-decreasing curve through measured (x, time) points, interpolated in log-log."""

    def __init__(self, x: Sequence[float], t: Sequence[float]) -> None:
        xs = np.asarray(x, dtype=float)
        ts = np.asarray(t, dtype=float)
        order = np.argsort(xs, kind="stable")
        xs, ts = xs[order], ts[order]
        ux, inverse = np.unique(xs, return_inverse=True)
        medians = np.array([np.median(ts[inverse == i]) for i in range(ux.size)])
        weights = np.bincount(inverse).astype(float)
        self.x = ux
        self.t = monotone_fit(medians, weights)
        self._lx = np.log(self.x)
        self._lt = np.log(np.maximum(self.t, 1e-3))

    def __call__(self, x: float) -> float | None:
        if self.x.size == 0 or x <= 0 or x < self.x[0] or x > self.x[-1]:
            return None
        if self.x.size == 1:
            return float(self.t[0])
        return float(math.exp(np.interp(math.log(x), self._lx, self._lt)))


class MeasurementIndex:
    """Exact and interpolated lookups over layered measurement lists (first list wins)."""

    def __init__(self, layers: Sequence[Sequence[Measurement]]) -> None:
        self.exact: dict[tuple, float] = {}
        points: dict[tuple, dict[float, float]] = defaultdict(dict)
        self.devices: set[str] = set()
        self.per_gpu: dict[str, list[Measurement]] = defaultdict(list)
        for layer in layers:
            layer_points: dict[tuple, dict[float, list[float]]] = defaultdict(lambda: defaultdict(list))
            for m in layer:
                self.devices.add(m.gpu)
                self.per_gpu[m.gpu].append(m)
                if m.pass_ == "fwd+bwd":
                    continue
                key = exact_key(
                    m.gpu, m.op_kind, m.dtype, m.shape, m.shape_extra, m.flops, m.bytes_moved, m.pass_
                )
                self.exact.setdefault(key, m.time_ns)
                gkey, x, units = group_key_and_x(
                    m.gpu, m.op_kind, m.dtype, m.shape, m.shape_extra, m.flops, m.bytes_moved, m.pass_
                )
                layer_points[gkey][x].append(m.time_ns / units)
            for gkey, by_x in layer_points.items():
                for x, times in by_x.items():
                    points[gkey].setdefault(x, float(np.median(times)))  # upper layer wins
        self.curves = {g: MonotoneCurve(list(p), list(p.values())) for g, p in points.items()}

    def lookup(
        self,
        gpu: str,
        op_kind: str,
        dtype: str,
        shape: Sequence[int],
        shape_extra: Sequence[int],
        flops: float,
        bytes_moved: float,
    ) -> tuple[float, str] | None:
        """(time_ns, "measured" | "interpolated") on ``gpu``, or None."""
        key = exact_key(gpu, op_kind, dtype, shape, shape_extra, flops, bytes_moved)
        if key in self.exact:
            return self.exact[key], "measured"
        gkey, x, units = group_key_and_x(gpu, op_kind, dtype, shape, shape_extra, flops, bytes_moved)
        curve = self.curves.get(gkey)
        if curve is not None:
            value = curve(x)
            if value is not None:
                return value * units, "interpolated"
        return None
