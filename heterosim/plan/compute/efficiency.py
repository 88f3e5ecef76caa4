"""Per-GPU, per-op-kind efficiency curves: the fraction of a GPU's peak an operation reaches.

Approximate models (their limits are tested in tests/plan/test_compute_roofline.py):

- GEMM: ``e = gemm_max * quantization(m, n, batch) * k / (k + gemm_k_half)``. Quantization is
  the best, over the tile sizes of the GPU's tile set, of ``tile_rel * wave_fill * tile_fill``:
  ``tile_fill`` is the useful share of the padded output tiles, ``wave_fill`` the share of SM
  slots busy over the waves (``tiles / (ceil(tiles / SMs) * SMs)``). ``gemm_max`` is the GPU's
  published sustained GEMM rate where one exists (random data at the power limit, as training
  runs), else its best-shape (MAMF) envelope, a boost-clock burst (:func:`gemm_envelopes`).
- Attention (fused flash kernel): ``e = a_pass * s_e / (s_e + seq_half) * d / (d + hd_half)``,
  with ``s_e = seq / 2`` under a causal mask (half the tiles are skipped, so the kernel behaves like
  a non-causal one of half the length) and ``a_bwd = a_fwd * bwd_ratio``.
- Memory-bound ops (norm, elementwise, softmax_loss, embedding, optimizer): a constant fraction
  ``memory_efficiency`` of peak DRAM bandwidth.
- Every op also pays ``launch_overhead_ns`` once: kernel launch, the tail of the last wave and
  the gap to the next kernel. It is what makes tiny ops cost more than their bytes.

All efficiencies are <= 1, so a roofline time is never below FLOPs / peak or bytes / bandwidth.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import cache
from importlib import resources

import yaml

from heterosim.catalog.gpus import GpuSpec

COMPUTE_KINDS = ("gemm", "attention")
MEMORY_KINDS = ("norm", "elementwise", "softmax_loss", "embedding", "optimizer")
SIXTEEN_BIT = ("bf16", "fp16")


@dataclass(frozen=True)
class EfficiencyParams:
    """The tunable constants of one GPU's curves (see the module docstring for the formulas)."""

    sm_count: int
    tiles: tuple[tuple[int, int, float], ...]
    gemm_max_efficiency: float
    gemm_k_half: float
    attention_fwd_efficiency: float
    attention_bwd_ratio: float
    attention_seq_half: float
    attention_head_dim_half: float
    memory_efficiency: float
    launch_overhead_ns: float
    gemm_max_by_dtype: dict[str, float] = field(default_factory=dict)
    gemm_burst_by_dtype: dict[str, float] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict, compare=False)

    def with_values(self, **values: float) -> EfficiencyParams:
        return replace(self, **values)  # type: ignore[arg-type]  # the float fields only

    def gemm_ceiling(self, dtype: str) -> float:
        """Asymptotic GEMM efficiency for ``dtype``: the dtype's envelope if published."""
        return min(self.gemm_max_by_dtype.get(dtype, self.gemm_max_efficiency), 1.0)

    def gemm_bound(self, dtype: str) -> float:
        """The most a fit of measured GEMMs may reach: the MAMF burst envelope where one is
        published (above the sustained ceiling), else the ceiling's envelope, else 1."""
        return min(self.gemm_burst_by_dtype.get(dtype, self.gemm_max_by_dtype.get(dtype, 1.0)), 1.0)


def gemm_quantization(
    m: int, n: int, batch: int, sm_count: int, tiles: tuple[tuple[int, int, float], ...]
) -> float:
    """Best achievable fill of the SMs over the tile choices (0 < q <= 1)."""
    best = 0.0
    batch = max(int(batch), 1)
    for tile_m, tile_n, rel in tiles:
        tm, tn = math.ceil(m / tile_m), math.ceil(n / tile_n)
        tile_fill = (m * n) / (tm * tile_m * tn * tile_n)
        count = tm * tn * batch
        waves = math.ceil(count / sm_count)
        wave_fill = count / (waves * sm_count)
        best = max(best, rel * tile_fill * wave_fill)
    return best


def gemm_tile_count(m: int, n: int, batch: int, p: EfficiencyParams) -> int:
    """Output tiles of the tile choice :func:`gemm_quantization` rates best (what the kernel's
    CTAs work through)."""
    best, count_of_best = -1.0, 1
    batch = max(int(batch), 1)
    for tile_m, tile_n, rel in p.tiles:
        tm, tn = math.ceil(m / tile_m), math.ceil(n / tile_n)
        count = tm * tn * batch
        waves = math.ceil(count / p.sm_count)
        q = rel * (m * n) / (tm * tile_m * tn * tile_n) * count / (waves * p.sm_count)
        if q > best:
            best, count_of_best = q, count
    return count_of_best


def gemm_efficiency(p: EfficiencyParams, dtype: str, m: int, n: int, k: int, batch: int) -> float:
    q = gemm_quantization(m, n, batch, p.sm_count, p.tiles)
    return p.gemm_ceiling(dtype) * q * k / (k + p.gemm_k_half)


def attention_efficiency(p: EfficiencyParams, seq: int, head_dim: int, causal: bool, backward: bool) -> float:
    s_e = seq / 2 if causal else float(seq)
    peak = p.attention_fwd_efficiency * (p.attention_bwd_ratio if backward else 1.0)
    e = peak * s_e / (s_e + p.attention_seq_half) * head_dim / (head_dim + p.attention_head_dim_half)
    return min(e, 1.0)


def attention_forward_flops(batch: int, seq: int, heads: int, head_dim: int, causal: bool) -> float:
    """FLOPs of the fused forward kernel: 4*b*s^2*H*d, halved under a causal mask."""
    flops = 4.0 * batch * seq * seq * heads * head_dim
    return flops / 2 if causal else flops


def attention_is_backward(shape: tuple, shape_extra: tuple, flops: float) -> bool:
    """Infer the pass of an attention op from its FLOPs: backward counts 2.5x forward.

    Works whether or not the producer halved causal FLOPs: forward ratios are 0.5 or 1 of the
    unmasked count, backward ratios 1.25 or 2.5, so a threshold of 1.125 separates them.
    """
    b, s, h, d = (int(x) for x in shape[:4])
    full = attention_forward_flops(b, s, h, d, False)
    return full > 0 and flops / full > 1.125


# ----------------------------------------------------------------------------- defaults


@cache
def _compute_yaml() -> dict:
    text = resources.files("heterosim.plan.compute.data").joinpath("gpu_compute.yaml").read_text()
    return yaml.safe_load(text)


@cache
def published_kernels() -> dict:
    """The shipped publication table (data/published_kernels.yaml)."""
    text = resources.files("heterosim.plan.compute.data").joinpath("published_kernels.yaml").read_text()
    return yaml.safe_load(text)


def attention_impl(gpu: str) -> str:
    """The fused attention kernel of a GPU (catalogue name or device label) whose published tables
    describe it (data/gpu_compute.yaml ``attention_impl``, cited there)."""
    raw = _compute_yaml()
    return str(raw["gpus"].get(gpu, {}).get("attention_impl", raw["default_attention_impl"]))


def attention_impls() -> set[str]:
    """Every attention implementation the shipped tables or the GPU entries name."""
    raw = _compute_yaml()
    names = {str(raw["default_attention_impl"])}
    names.update(str(e["attention_impl"]) for e in raw["gpus"].values() if "attention_impl" in e)
    names.update(str(s["impl"]) for s in published_kernels()["attention"])
    return names


def gemm_envelopes(gpu: str) -> tuple[dict[str, float], dict[str, str], dict[str, float]]:
    """The GEMM ceiling of each dtype of a GPU, the measurement behind it, and the MAMF burst
    envelopes (the bound a fit of the GPU's own GEMM measurements may reach).

    A training loop keeps the GPU at its power limit with high-entropy data, so a sustained
    measurement (a row with a ``source``: back-to-back GEMMs on random data) describes it better
    than MAMF's best shape, which is timed in short bursts at boost clock. Where a GPU has
    sustained rows for a dtype, their mean fraction of peak is the ceiling, never above the MAMF
    envelope; otherwise the MAMF envelope is.
    """
    burst: dict[str, tuple[float, str]] = {}
    sustained: dict[str, list[tuple[float, str]]] = {}
    for row in published_kernels()["gemm_envelopes"]:
        if row["gpu"] != gpu or not row.get("efficiency"):
            continue
        if "source" in row:
            # fp16 and bf16 share the tensor-core rate: their sustained rows are pooled.
            family = SIXTEEN_BIT[0] if row["dtype"] in SIXTEEN_BIT else row["dtype"]
            sustained.setdefault(family, []).append((float(row["efficiency"]), str(row["case"])))
        else:
            burst[row["dtype"]] = (float(row["efficiency"]), f"MAMF envelope, case {row['case']}")
    for a, b in (SIXTEEN_BIT, SIXTEEN_BIT[::-1]):
        if a in burst and b not in burst:  # the other 16-bit type runs at the same rate
            burst[b] = (burst[a][0], f"{burst[a][1]} ({a})")
    ceilings = {dtype: value for dtype, (value, _) in burst.items()}
    sources = {dtype: text for dtype, (_, text) in burst.items()}
    for family, rows in sustained.items():
        mean = sum(value for value, _ in rows) / len(rows)
        cases = ", ".join(case for _, case in rows)
        for dtype in SIXTEEN_BIT if family in SIXTEEN_BIT else (family,):
            if dtype in ceilings and ceilings[dtype] < mean:
                continue  # a burst envelope below a sustained figure bounds it
            ceilings[dtype] = mean
            sources[dtype] = f"sustained GEMM, mean of {len(rows)} row(s): {cases}"
    return ceilings, sources, {dtype: value for dtype, (value, _) in burst.items()}


def default_params(gpu: str, spec: GpuSpec | None = None) -> EfficiencyParams:
    """Uncalibrated parameters of a GPU (canonical name), with GEMM envelopes applied.

    GPUs listed in data/gpu_compute.yaml use their entry; others (cluster-defined GPUs) take
    ``spec.sm_count`` if given, else no wave quantization (``sm_count`` 1), and the tile set of
    their generation (see the data file's header). Approximate: the curves are the modelled
    defaults, not fitted to the part.
    """
    raw = _compute_yaml()
    d = raw["defaults"]
    entry = raw["gpus"].get(gpu)
    if entry is None:
        generation = spec.generation if spec is not None else ""
        tiles_name = "hopper" if generation in ("hopper", "blackwell") else "ampere"
        sm_count = spec.sm_count if spec is not None and spec.sm_count else 1
        entry = {"sm_count": sm_count, "gemm_tiles": tiles_name}
    tiles = tuple((int(a), int(b), float(c)) for a, b, c in raw["tile_sets"][entry["gemm_tiles"]])
    sources = {k: "modelled default (data/gpu_compute.yaml)" for k in d}
    envelopes, envelope_sources, bursts = gemm_envelopes(gpu)
    sources.update({f"gemm_max_efficiency.{dtype}": text for dtype, text in envelope_sources.items()})
    gemm_max = float(d["gemm_max_efficiency"])
    return EfficiencyParams(
        sm_count=int(entry["sm_count"]),
        tiles=tiles,
        gemm_max_efficiency=gemm_max,
        gemm_k_half=float(d["gemm_k_half"]),
        attention_fwd_efficiency=float(d["attention_fwd_efficiency"]),
        attention_bwd_ratio=float(d["attention_bwd_ratio"]),
        attention_seq_half=float(d["attention_seq_half"]),
        attention_head_dim_half=float(d["attention_head_dim_half"]),
        memory_efficiency=float(d["memory_efficiency"]),
        launch_overhead_ns=float(d["launch_overhead_ns"]),
        gemm_max_by_dtype=envelopes,
        gemm_burst_by_dtype=bursts,
        sources=sources,
    )
