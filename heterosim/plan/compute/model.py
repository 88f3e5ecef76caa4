"""The compute model: a duration and a provenance for every compute op on a given GPU.

Lookup order for one op on GPU ``G`` (the provenance recorded is in quotes):

1. "measured": the same op (kind, dtype class, shape; bytes for memory-bound kinds; pass for
   attention) measured on ``G`` in any database (the user's first, then the shipped profiler
   databases of ``data/measured/``: ops timed back to back on real GPUs, then the shipped
   publication tables).
2. "interpolated": between measured sizes of the same op family on ``G``, monotone in log-log,
   only inside the measured range (:mod:`heterosim.plan.compute.interpolation`).
3. "roofline" with ``G``'s *calibrated* curves, when ``G`` has measurements of its own for this op
   kind (fitted by :mod:`heterosim.plan.compute.calibration`): a curve fitted on ``G`` carries
   ``G``'s own kernel behaviour and beats a spec-ratio guess from another GPU.
4. "scaled": the same op measured (or interpolated) on the nearest other GPU (a shipped profile
   only for GPUs of its generation), scaled by the
   FLOP/s ratio (compute-bound) or the bandwidth ratio (memory-bound)
   (:mod:`heterosim.plan.compute.scaling`). A measurement of the very op on another GPU keeps
   shape effects (tile choice, kernel selection) that default curves only approximate, so it is
   preferred over uncalibrated curves.
5. "roofline" with ``G``'s default (modelled, uncalibrated) curves.

So the issue's order "roofline before scaling" holds for calibrated curves, and scaling comes
before the uncalibrated roofline; tests/plan/test_compute_model.py checks both branches.
Attention tables are per kernel implementation: each GPU uses the published series of the kernel
it runs (``attention_impl`` in data/gpu_compute.yaml: cuDNN fused attention on Hopper and later,
as Transformer Engine selects there; FlashAttention-2 before), and attention is scaled only from a
GPU with the same implementation. ``ComputeModel(attention_impl=...)`` sets one implementation for
every GPU (e.g. ``flash-attention-2`` for a framework that calls FlashAttention directly).

Communication rows get 0 ns and provenance "none"; "framework" rows (blocking costs of the
training framework, duration in shape[0] from the workload model) keep their duration and get
provenance "framework". GPUs are catalogue names (aliases accepted),
GPUs a cluster file defines (``ComputeModel(gpus=cluster.gpus)``; they shadow catalogue entries
of the same name), or device labels that occur only in a database (e.g. ``cpu`` from a CPU
profile); such a device has no specs, so an op outside its measurements is a UserError.

A cluster-defined GPU that shadows a catalogue entry with other peaks or DRAM bandwidth (an
HBM2e H100 under the name H100-SXM) keeps that entry's curves, but the database rows under its
name were measured on the catalogue part: they are scaled to the file's numbers as in step 4
(provenance "scaled"). APPROXIMATION: the same fraction of peak (compute-bound) or of bandwidth
(memory-bound) on both parts, as for any spec scaling.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from heterosim.catalog.gpus import GpuSpec, canonical_gpu_name, gpu_spec, known_gpu_names
from heterosim.errors import UserError
from heterosim.plan.compute.calibration import CalibrationReport, calibrate
from heterosim.plan.compute.database import (
    LayerMeasurement,
    Measurement,
    OpDatabase,
    shipped_measured_databases,
)
from heterosim.plan.compute.efficiency import EfficiencyParams, attention_impl, default_params
from heterosim.plan.compute.interpolation import MeasurementIndex
from heterosim.plan.compute.power_limit import compute_slowdown
from heterosim.plan.compute.roofline import roofline_time_ns
from heterosim.plan.compute.scaling import nearest_sources, scale_time_ns
from heterosim.workload.ops_eager import STRIDED
from heterosim.workload.trace import DTYPES, OpTemplates

# Norms and attention are profiled in a Python loop (GEMMs and elementwise ops in CUDA graphs):
# those timed shorter than this ran at the loop's launch rate (7.6 us per call at the least on the
# H100 host, validation/h100_2026-11-27), not the GPU's; they are left out of the shipped
# profiles, and such ops are timed by the curves the longer ones calibrate.
HOST_BOUND_NS = 15_000
# A backward timed in that loop is one autograd call: a norm's backward (input-gradient and
# weight-gradient kernels) costs the host about 2 x 42 us (the H100 machine's host time per
# backward kernel, validation/h100_2026-11-27b/host_dispatch.json), and the shipped profile's
# norm backward rows bottom out at 83-98 us for 31-168 MB (time independent of size). Loop-timed
# backward rows under this are host-bound, not the GPU's: inside a layer the GPU runs a 256 x
# 12288 norm backward in 28 us (validation/h100_2026-11-27/layer_kernels.json), the loop read 89.
HOST_BOUND_BWD_NS = 100_000
# Elementwise kernels on strided operands (PyTorch's non-vectorized elementwise_kernel<128, 4>,
# heterosim.workload.ops_eager) against the contiguous rate of the same op: on an H100, the eager
# reference layers' non-vectorized kernels took 1/0.562 of the op model's contiguous time for the
# same work (six TP-1 standard layers, validation/h100_2026-11-27/layer_kernels.json; held out on
# a second machine's five TP-1 layers, validation/h100_2026-11-27c/layer_kernels_large.json: 0.558;
# raw kernel bandwidth 1.73 against 3.14 TB/s vectorized).
STRIDED_BANDWIDTH_RATIO = 0.56
LOOP_TIMED_KINDS = ("norm", "attention")
PROVENANCES = ("measured", "interpolated", "roofline", "scaled", "none", "framework")
PROVENANCE_CODE = {name: i for i, name in enumerate(PROVENANCES)}
_NOTES_GIVEN: set[str] = set()


class ComputeModel:
    """Times compute ops per GPU from layered operation databases, curves and spec scaling."""

    def __init__(
        self,
        databases: Sequence[str | Path] | None = None,
        *,
        include_shipped: bool = True,
        profiled: bool = True,
        attention_impl: str | None = None,
        gpus: Mapping[str, GpuSpec] | None = None,
    ) -> None:
        self._own: dict[str, GpuSpec] = {}
        self._own_alias: dict[str, str] = {}
        layers: list[list[Measurement]] = []
        profiled_layers: list[int] = []  # shipped profiles: scaled to GPUs of their generation only
        self.database_names: list[str] = []
        # whole layers timed by the user (profile --layers): heterosim.plan.compute.layer_gap
        self.layer_measurements: list[LayerMeasurement] = []
        for path in databases or []:
            db = OpDatabase(path)
            layers.append(db.measurements())
            self.layer_measurements += db.layers()
            self.database_names.append(db.name)
            db.close()
        if include_shipped:
            for path in shipped_measured_databases() if profiled else []:
                db = OpDatabase(path)
                rows = [m for m in db.measurements() if not _host_bound(m)]
                profiled_layers.append(len(layers))
                layers.append(_own_kernel_rows(rows, attention_impl))
                self.database_names.append(f"<shipped {path.name}>")
                db.close()
            shipped = OpDatabase.shipped(attention_impl)
            layers.append(shipped.measurements())
            self.database_names.append(shipped.name)
            shipped.close()
        self.attention_impl = attention_impl
        self._index = MeasurementIndex(layers)
        # A shipped profile's ops carry its GPU's kernels (cuBLAS tile choices, cuDNN attention):
        # they are scaled to GPUs of the same generation (an H800 or H200 from an H100), while
        # other generations scale from user databases and the publication tables only.
        self._cross_generation_index = MeasurementIndex(
            [rows for i, rows in enumerate(layers) if i not in profiled_layers]
        )
        self._uncalibrated_gemm: set[tuple[str, str]] = set()
        self._capped_gpus: dict[str, float] = {}  # GPU -> slowdown of compute-bound ops applied
        self._slowdowns: dict[str, float] = {}  # GPU -> power-limit slowdown (1: no limit)
        self._params: dict[str, tuple[EfficiencyParams, CalibrationReport]] = {}
        self._cache: dict[tuple, tuple[int, str]] = {}
        self.add_gpus(gpus or {})

    # ------------------------------------------------------------------ GPUs and calibration

    def add_gpus(self, gpus: Mapping[str, GpuSpec]) -> None:
        """Make GPUs defined outside the catalogue (a cluster file's ``gpus:``) known by name.

        A name given twice with different specs is a UserError (one model cannot time one name two
        ways); results already cached for a shadowed catalogue name are dropped.
        """
        for name, spec in gpus.items():
            old = self._own.get(name)
            if old is not None and old != spec:
                raise UserError(f"GPU {name!r} is defined twice with different numbers")
            self._own[name] = spec
            self._own_alias[name.lower()] = name
        if gpus:
            self._cache.clear()
            self._params = {k: v for k, v in self._params.items() if k not in gpus}
            self._slowdowns = {k: v for k, v in self._slowdowns.items() if k not in gpus}

    def _spec(self, gpu: str) -> GpuSpec:
        return self._own[gpu] if gpu in self._own else gpu_spec(gpu)

    def _shadowed(self, gpu: str) -> GpuSpec | None:
        """The catalogue entry a cluster-defined ``gpu`` shadows when their peaks or DRAM
        bandwidth differ (database rows under that name were measured on the catalogue part),
        else None."""
        own = self._own.get(gpu)
        if own is None or canonical_gpu_name(gpu) != gpu:
            return None
        catalogued = gpu_spec(gpu)
        same = (
            own.peak_tflops == catalogued.peak_tflops
            and own.memory_bytes_per_s == catalogued.memory_bytes_per_s
        )
        return None if same else catalogued

    def _has_spec(self, gpu: str) -> bool:
        return gpu in self._own or gpu in known_gpu_names()

    def known_devices(self) -> list[str]:
        specs = [*self._own, *(n for n in known_gpu_names() if n not in self._own)]
        extra = sorted(d for d in self._index.devices if d not in specs)
        return [*specs, *extra]

    def resolve_gpu(self, gpu: str) -> str:
        """Cluster-defined or catalogue name, or database-only device label; UserError listing
        the known ones."""
        own = self._own_alias.get(str(gpu).strip().lower())
        if own is not None:
            return own
        name = canonical_gpu_name(gpu)
        if name is not None:
            return name
        label = str(gpu).strip().lower()
        if label in self._index.devices:
            return label
        raise UserError(f"unknown GPU {gpu!r}; known: {', '.join(self.known_devices())}")

    def _calibrated(self, gpu: str) -> tuple[EfficiencyParams, CalibrationReport]:
        if gpu not in self._params:
            spec = self._spec(gpu)
            # fractions of peak are fitted against the part the rows were measured on
            measured_on = self._shadowed(gpu) or spec
            self._params[gpu] = calibrate(
                measured_on, self._index.per_gpu.get(gpu, []), default_params(gpu, spec)
            )
        return self._params[gpu]

    def gpu_attention_impl(self, gpu: str) -> str:
        """The attention kernel implementation the model assumes on ``gpu``."""
        return self.attention_impl or attention_impl(self.resolve_gpu(gpu))

    def spec(self, gpu: str) -> GpuSpec | None:
        """The specs of ``gpu`` (None for a device known only from a database)."""
        name = self.resolve_gpu(gpu)
        return self._spec(name) if self._has_spec(name) else None

    def params(self, gpu: str) -> EfficiencyParams:
        """The efficiency parameters used for ``gpu`` (defaults refitted to its measurements)."""
        return self._calibrated(self.resolve_gpu(gpu))[0]

    def calibration(self, gpu: str) -> CalibrationReport:
        return self._calibrated(self.resolve_gpu(gpu))[1]

    # ------------------------------------------------------------------ timing

    def time_op(
        self,
        op_kind: str,
        dtype: str,
        shape: tuple,
        shape_extra: tuple,
        flops: int,
        bytes_moved: int,
        gpu: str,
    ) -> tuple[int, str]:
        """(duration_ns, provenance) of one op on ``gpu``; comm ops are (0, "none")."""
        name = self.resolve_gpu(gpu)
        if op_kind == "comm":
            return 0, "none"
        if op_kind == "framework":  # duration set by the workload model (trace.OP_KINDS)
            return _ns(float(shape[0])), "framework"
        shape = tuple(int(x) for x in shape) + (0,) * (4 - len(shape))
        shape_extra = tuple(int(x) for x in shape_extra) + (0,) * (2 - len(shape_extra))
        key = (name, op_kind, dtype, shape, shape_extra, int(flops), int(bytes_moved))
        if op_kind == "elementwise" and shape_extra[0] == STRIDED and key not in self._cache:
            contiguous, provenance = self.time_op(op_kind, dtype, shape, (0, 0), flops, bytes_moved, name)
            self._cache[key] = (_ns(contiguous / STRIDED_BANDWIDTH_RATIO), provenance)
        if key not in self._cache:
            ns, provenance = self._time(
                name, op_kind, dtype, shape, shape_extra, float(flops), float(bytes_moved)
            )
            self._cache[key] = (
                self._power_limited(name, dtype, ns, float(flops), float(bytes_moved)),
                provenance,
            )
        return self._cache[key]

    def _power_limited(self, gpu: str, dtype: str, ns: int, flops: float, bytes_moved: float) -> int:
        """``ns`` of an op on ``gpu`` under the GPU's ``power_limit_w``: compute-bound ops (their
        FLOPs at peak take longer than their bytes at DRAM bandwidth) run at the lower clock
        (:mod:`power_limit`); memory-bound ones keep their time."""
        if not self._has_spec(gpu):
            return ns
        spec = self._spec(gpu)
        if gpu not in self._slowdowns:  # one solve of the clock per GPU, not per op
            self._slowdowns[gpu] = compute_slowdown(spec)
        slowdown = self._slowdowns[gpu]
        peak = spec.peak_tflops.get(dtype)
        if slowdown == 1.0 or not peak or flops / (peak * 1e12) < bytes_moved / spec.memory_bytes_per_s:
            return ns
        self._capped_gpus[gpu] = slowdown
        return _ns(ns * slowdown)

    def _time(
        self,
        gpu: str,
        op_kind: str,
        dtype: str,
        shape: tuple,
        shape_extra: tuple,
        flops: float,
        bytes_moved: float,
    ) -> tuple[int, str]:
        args = (op_kind, dtype, shape, shape_extra, flops, bytes_moved)
        found = self._index.lookup(gpu, *args)
        if found is not None:
            catalogued = self._shadowed(gpu)
            if catalogued is not None:  # measured on the catalogue part, run on the file's variant
                value = scale_time_ns(found[0], *args, catalogued, self._own[gpu])
                if value is not None:
                    return _ns(value), "scaled"
            return _ns(found[0]), found[1]
        if not self._has_spec(gpu):
            raise UserError(
                f"device {gpu!r} is known only from its database, which has no"
                f" measurement covering {op_kind} {dtype} shape {shape}"
            )
        spec = self._spec(gpu)
        params, report = self._calibrated(gpu)
        if op_kind not in report.calibrated_kinds:
            scaled = self._scaled(gpu, *args)
            if scaled is not None:
                return _ns(scaled), "scaled"
        if op_kind == "gemm" and not report.gemm_fitted(dtype):
            self._uncalibrated_gemm.add((gpu, dtype))  # its ceiling was not fitted
        return _ns(roofline_time_ns(*args, spec, params)), "roofline"

    def _scaled(
        self,
        gpu: str,
        op_kind: str,
        dtype: str,
        shape: tuple,
        shape_extra: tuple,
        flops: float,
        bytes_moved: float,
    ) -> float | None:
        target = self._spec(gpu)
        others = [
            self._spec(d)
            for d in self._index.devices
            if d != gpu
            and self._has_spec(d)
            and (op_kind != "attention" or self.gpu_attention_impl(d) == self.gpu_attention_impl(gpu))
        ]
        for source in nearest_sources(target, others, dtype):
            index = self._index if source.generation == target.generation else self._cross_generation_index
            found = index.lookup(source.name, op_kind, dtype, shape, shape_extra, flops, bytes_moved)
            if found is None:
                continue
            value = scale_time_ns(
                found[0], op_kind, dtype, shape, shape_extra, flops, bytes_moved, source, target
            )
            if value is not None:
                return value
        return None

    def notes(self, new_only: bool = False) -> list[str]:
        """One line per GPU whose GEMMs so far were timed by the roofline with a ceiling no
        measurement of that GPU and dtype fitted (and no GPU to scale from): the ceiling comes from
        one large shape (a MAMF envelope or a sustained GEMM) or is a modelled default;
        the line says how to replace it with measurements; and one per GPU whose compute-bound ops
        a ``power_limit_w`` slowed. ``new_only``: only lines this process has not
        returned with ``new_only`` before (a sweep or validation prints each once)."""
        lines = self._notes()
        if not new_only:
            return lines
        fresh = [line for line in lines if line not in _NOTES_GIVEN]
        _NOTES_GIVEN.update(fresh)
        return fresh

    def _notes(self) -> list[str]:
        by_gpu: dict[str, list[str]] = {}
        for gpu, dtype in sorted(self._uncalibrated_gemm):
            by_gpu.setdefault(gpu, []).append(dtype)
        lines = []
        for gpu, dtypes in by_gpu.items():
            params = self.params(gpu)
            bounds = []
            for dtype in dtypes:
                source = params.sources.get(f"gemm_max_efficiency.{dtype}")
                if source:
                    kind = "an upper bound" if source.startswith("MAMF") else "one large shape"
                    bounds.append(
                        f"{dtype}: {params.gemm_ceiling(dtype):.0%} of peak, from the "
                        f"{source} ({kind}, optimistic for other shapes)"
                    )
                else:
                    bounds.append(f"{dtype}: {params.gemm_ceiling(dtype):.0%} of peak, a modelled default")
            lines.append(
                f"{gpu}: GEMMs timed by the roofline without GEMM measurements of "
                f"their dtype; "
                f"ceiling {'; '.join(bounds)}. To use measurements, run `heterosim "
                f"profile --out PROFILE.db --experiment E.yaml` on that GPU and pass "
                f"the database (`heterosim run E.yaml --db PROFILE.db`)"
            )
        for gpu, slowdown in sorted(self._capped_gpus.items()):
            limit = self._spec(gpu).power_limit_w
            lines.append(
                f"{gpu}: power limit {limit:g} W: compute-bound ops run x{slowdown:.2f} as long, at the"
                f" clock the catalogue's measured clock-power curve gives there; memory-bound ops keep"
                f" their time"
            )
        return lines

    def time_templates(self, templates: OpTemplates, gpu: str) -> tuple[np.ndarray, np.ndarray]:
        """Durations (uint64 ns, 0 for comm rows) and provenance codes (uint8, PROVENANCES)."""
        n = len(templates)
        durations = np.zeros(n, dtype=np.uint64)
        provenance = np.full(n, PROVENANCE_CODE["none"], dtype=np.uint8)
        names = templates.op_kind_names
        for i in range(n):
            kind = names[int(templates.op_kind[i])]
            if kind == "comm":
                continue
            t, prov = self.time_op(
                kind,
                DTYPES[int(templates.dtype[i])],
                tuple(templates.shape[i]),
                tuple(templates.shape_extra[i]),
                int(templates.flops[i]),
                int(templates.bytes_moved[i]),
                gpu,
            )
            durations[i] = t
            provenance[i] = PROVENANCE_CODE[prov]
        return durations, provenance

    def relative_speed(self, gpu: str, reference_ops: OpTemplates) -> float:
        """Speed of ``gpu`` on a reference op set: 1 / (sum of its template durations in s).

        Higher is faster; the ratio of two GPUs' speeds is the inverse ratio of their times.
        """
        durations, _ = self.time_templates(reference_ops, gpu)
        total_s = float(durations.sum()) * 1e-9
        if total_s <= 0:
            raise ValueError("reference op set has no compute time")
        return 1.0 / total_s


def provenance_shares(
    durations_ns: np.ndarray, provenance: np.ndarray, counts: np.ndarray | None = None
) -> dict[str, float]:
    """Share of total compute time (duration x count) per provenance; shares sum to 1."""
    d = np.asarray(durations_ns, dtype=float)
    w = d * (np.asarray(counts, dtype=float) if counts is not None else 1.0)
    total = float(w.sum())
    codes = np.asarray(provenance, dtype=np.int64)
    return {
        name: (float(w[codes == i].sum()) / total if total > 0 else 0.0) for i, name in enumerate(PROVENANCES)
    }


def _host_bound(m: Measurement) -> bool:
    floor = HOST_BOUND_BWD_NS if m.pass_ == "bwd" else HOST_BOUND_NS
    return m.op_kind in LOOP_TIMED_KINDS and m.time_ns < floor


def _own_kernel_rows(rows: list[Measurement], impl: str | None) -> list[Measurement]:
    """Profiled rows, without the attention rows of GPUs whose own attention kernel (the one the
    profiler ran: PyTorch's default backend there) is not ``impl`` when one is forced."""
    if impl is None:
        return rows
    return [m for m in rows if m.op_kind != "attention" or attention_impl(m.gpu) == impl]


def _ns(value: float) -> int:
    return max(int(round(value)), 1)
