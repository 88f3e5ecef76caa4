"""Least-squares calibration of a GPU's efficiency curves from its measurements.

For each op family with enough measurements on the GPU, the parameters of the roofline model
(:mod:`heterosim.plan.compute.roofline`) are fitted by minimising the squared log error
``sum (ln t_model - ln t_measured)^2`` with scipy's bounded least squares:

- gemm (>= 3 rows): ``gemm_max_efficiency`` of the dominant dtype (bounded above by the GPU's
  published MAMF burst envelope when there is one, not by its lower sustained ceiling),
  ``gemm_k_half`` and ``launch_overhead_ns``; then the ``gemm_max_efficiency`` of every other
  dtype with >= 3 rows alone (the shape terms held), reported as family ``gemm:<dtype>`` (an H100
  profile's fp8 GEMMs set its fp8 ceiling instead of a published envelope);
- attention (>= 3 rows): ``attention_fwd_efficiency``, ``attention_seq_half``, and, when the
  data can tell them apart, ``attention_bwd_ratio`` (needs single-pass rows plus rows with a
  backward) and ``attention_head_dim_half`` (needs two head dims); ``fwd+bwd`` rows are modelled
  as the sum of the two passes;
- memory-bound kinds pooled (>= 2 rows): ``memory_efficiency`` and ``launch_overhead_ns``.

A parameter the data cannot determine keeps its prior value and is listed as fixed; the launch
overhead is fixed when every measured op is much longer than it. Fit quality is reported as RMS
and maximum relative error and R^2 of ln(time).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
from scipy.optimize import least_squares

from heterosim.catalog.gpus import GpuSpec
from heterosim.plan.compute.database import Measurement
from heterosim.plan.compute.efficiency import MEMORY_KINDS, EfficiencyParams
from heterosim.plan.compute.roofline import roofline_time_ns

MIN_ROWS = {"gemm": 3, "attention": 3, "memory": 2}


@dataclass
class FitResult:
    """The outcome of fitting one op family on one GPU."""

    family: str
    values: dict[str, float]
    fixed: list[str]
    n_points: int
    rms_rel_error: float
    max_rel_error: float
    r2_log: float
    citations: list[str] = field(default_factory=list)

    def line(self) -> str:
        vals = ", ".join(f"{k}={v:.4g}" for k, v in self.values.items())
        return (
            f"{self.family}: {vals}; n={self.n_points}, rms err {100 * self.rms_rel_error:.1f}%,"
            f" max err {100 * self.max_rel_error:.1f}%, R2(log)={self.r2_log:.3f}"
        )


@dataclass
class CalibrationReport:
    gpu: str
    fits: dict[str, FitResult] = field(default_factory=dict)

    def gemm_fitted(self, dtype: str) -> bool:
        """Whether the GEMM ceiling of ``dtype`` was fitted to measurements."""
        key = f"gemm_max_efficiency.{dtype}"
        return any(key in fit.values for name, fit in self.fits.items() if name.split(":")[0] == "gemm")

    @property
    def calibrated_kinds(self) -> set[str]:
        kinds: set[str] = set()
        for family in self.fits:
            kinds.update(MEMORY_KINDS if family == "memory" else (family.split(":")[0],))
        return kinds

    def summary(self) -> str:
        if not self.fits:
            return f"{self.gpu}: no measurements to calibrate from (modelled defaults)"
        return "\n".join(f"{self.gpu} {fit.line()}" for fit in self.fits.values())


def _predict(rows: Sequence[Measurement], spec: GpuSpec, params: EfficiencyParams) -> np.ndarray:
    out = np.empty(len(rows))
    for i, r in enumerate(rows):
        args = (r.op_kind, r.dtype, r.shape, r.shape_extra)
        if r.pass_ == "fwd+bwd":
            fwd_flops = r.flops / 3.5
            out[i] = roofline_time_ns(*args, fwd_flops, r.bytes_moved, spec, params) + roofline_time_ns(
                *args, 2.5 * fwd_flops, r.bytes_moved, spec, params
            )
        else:
            out[i] = roofline_time_ns(*args, r.flops, r.bytes_moved, spec, params)
    return out


def _fit(
    family: str,
    rows: Sequence[Measurement],
    spec: GpuSpec,
    base: EfficiencyParams,
    names: list[str],
    x0: list[float],
    lower: list[float],
    upper: list[float],
    build: Callable[[EfficiencyParams, np.ndarray], EfficiencyParams],
    fixed: list[str],
) -> tuple[EfficiencyParams, FitResult]:
    measured = np.array([r.time_ns for r in rows], dtype=float)
    log_measured = np.log(measured)
    scale = np.array(x0, dtype=float)
    scale[scale == 0] = 1.0

    def residuals(z: np.ndarray) -> np.ndarray:
        return np.log(_predict(rows, spec, build(base, z * scale))) - log_measured

    x_start = np.clip(np.array(x0) / scale, np.array(lower) / scale, np.array(upper) / scale)
    sol = least_squares(
        residuals,
        x_start,
        bounds=(np.array(lower) / scale, np.array(upper) / scale),
        x_scale="jac",
        xtol=1e-12,
        ftol=1e-12,
        gtol=1e-12,
        max_nfev=2000,
    )
    fitted = build(base, sol.x * scale)
    rel = np.exp(sol.fun) - 1.0
    ss_tot = float(np.sum((log_measured - log_measured.mean()) ** 2))
    r2 = 1.0 - float(np.sum(sol.fun**2)) / ss_tot if ss_tot > 0 else 1.0
    result = FitResult(
        family=family,
        values=dict(zip(names, (float(v) for v in sol.x * scale))),
        fixed=fixed,
        n_points=len(rows),
        rms_rel_error=float(np.sqrt(np.mean(rel**2))),
        max_rel_error=float(np.max(np.abs(rel))),
        r2_log=r2,
        citations=sorted({r.citation for r in rows if r.citation}),
    )
    return fitted, result


def _launch_identifiable(rows: Sequence[Measurement], base: EfficiencyParams) -> bool:
    return min(r.time_ns for r in rows) < 50.0 * base.launch_overhead_ns


def _fit_gemm(rows, spec, base) -> tuple[EfficiencyParams, list[FitResult]]:
    """The dominant dtype's curve (ceiling, k_half, launch overhead), then each other dtype's
    ceiling with the shape terms held; one result per dtype, the dominant one first."""
    counts = Counter(r.dtype for r in rows)
    dominant = counts.most_common(1)[0][0]
    params, result = _fit_gemm_dtype([r for r in rows if r.dtype == dominant], spec, base, dominant, True)
    results = [result]
    for dtype in sorted(counts):
        if dtype != dominant and counts[dtype] >= MIN_ROWS["gemm"]:
            params, extra = _fit_gemm_dtype([r for r in rows if r.dtype == dtype], spec, params, dtype, False)
            extra.family = f"gemm:{dtype}"
            results.append(extra)
    return params, results


def _fit_gemm_dtype(rows, spec, base, dtype: str, shape_terms: bool):
    """Fit ``dtype``'s GEMM ceiling (and, with ``shape_terms``, k_half and the launch overhead)."""
    ceiling = base.gemm_bound(dtype)
    names = ["gemm_max_efficiency"]
    x0 = [min(base.gemm_ceiling(dtype), 0.95 * ceiling)]
    lo, hi = [0.01], [ceiling]
    fit_launch = shape_terms and _launch_identifiable(rows, base)
    if shape_terms:
        names.append("gemm_k_half")
        x0.append(base.gemm_k_half)
        lo.append(0.0)
        hi.append(1e5)
    if fit_launch:
        names.append("launch_overhead_ns")
        x0.append(base.launch_overhead_ns)
        lo.append(0.0)
        hi.append(1e6)

    def build(p: EfficiencyParams, z: np.ndarray) -> EfficiencyParams:
        by_dtype = dict(p.gemm_max_by_dtype)
        by_dtype[dtype] = float(z[0])
        new = replace(p, gemm_max_by_dtype=by_dtype)
        if shape_terms:
            new = replace(new, gemm_k_half=float(z[1]))
        return replace(new, launch_overhead_ns=float(z[2])) if fit_launch else new

    fixed = [] if fit_launch else ["launch_overhead_ns"]
    if not shape_terms:
        fixed.insert(0, "gemm_k_half")
    fitted, result = _fit("gemm", rows, spec, base, names, x0, lo, hi, build, fixed)
    result.values = {
        ("gemm_max_efficiency." + dtype if k == "gemm_max_efficiency" else k): v
        for k, v in result.values.items()
    }
    return fitted, result


def _fit_attention(rows, spec, base) -> tuple[EfficiencyParams, list[FitResult]]:
    passes = {r.pass_ for r in rows}
    has_single = bool(passes & {"fwd", "bwd"})
    has_backward = bool(passes & {"bwd", "fwd+bwd"})
    fit_ratio = has_single and has_backward and len(passes) > 1
    fit_hd = len({r.shape[3] for r in rows}) >= 2
    fit_seq = len({r.shape[1] for r in rows}) >= 2
    names, x0 = ["attention_fwd_efficiency"], [base.attention_fwd_efficiency]
    lo, hi, fixed = [0.01], [1.0], []
    for flag, name, lower, upper in (
        (fit_ratio, "attention_bwd_ratio", 0.1, 1.0 / 0.01),
        (fit_seq, "attention_seq_half", 0.0, 1e5),
        (fit_hd, "attention_head_dim_half", 0.0, 1e4),
    ):
        if flag:
            names.append(name)
            x0.append(getattr(base, name))
            lo.append(lower)
            hi.append(upper)
        else:
            fixed.append(name)

    def build(p: EfficiencyParams, z: np.ndarray) -> EfficiencyParams:
        return p.with_values(**{n: float(v) for n, v in zip(names, z)})

    params, result = _fit("attention", rows, spec, base, names, x0, lo, hi, build, fixed)
    return params, [result]


def _fit_memory(rows, spec, base) -> tuple[EfficiencyParams, list[FitResult]]:
    names, x0, lo, hi = ["memory_efficiency"], [base.memory_efficiency], [0.01], [1.0]
    fit_launch = _launch_identifiable(rows, base) and len({r.bytes_moved for r in rows}) >= 2
    if fit_launch:
        names.append("launch_overhead_ns")
        x0.append(base.launch_overhead_ns)
        lo.append(0.0)
        hi.append(1e6)

    def build(p: EfficiencyParams, z: np.ndarray) -> EfficiencyParams:
        return p.with_values(**{n: float(v) for n, v in zip(names, z)})

    fixed = [] if fit_launch else ["launch_overhead_ns"]
    params, result = _fit("memory", rows, spec, base, names, x0, lo, hi, build, fixed)
    return params, [result]


def calibrate(
    spec: GpuSpec, measurements: Sequence[Measurement], base: EfficiencyParams
) -> tuple[EfficiencyParams, CalibrationReport]:
    """Fit ``base`` to the GPU's ``measurements``; families without enough rows keep ``base``."""
    report = CalibrationReport(gpu=spec.name)
    params = base
    families = {
        "attention": [m for m in measurements if m.op_kind == "attention"],
        "memory": [m for m in measurements if m.op_kind in MEMORY_KINDS],
        "gemm": [m for m in measurements if m.op_kind == "gemm"],
    }
    fitters = {"gemm": _fit_gemm, "attention": _fit_attention, "memory": _fit_memory}
    # Memory first: its launch overhead is the best-determined one; GEMM may refine it.
    for family in ("memory", "attention", "gemm"):
        rows = families[family]
        if len(rows) < MIN_ROWS[family]:
            continue
        params, results = fitters[family](rows, spec, params)
        for fit in results:  # gemm: one per dtype fitted
            report.fits[fit.family] = fit
    return params, report
