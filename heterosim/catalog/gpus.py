"""The GPU catalogue: peak FLOP/s per dtype, memory size and bandwidth, NVLink and PCIe bandwidth.

Numbers live in ``gpus.yaml`` beside this file, each with its source. Names match
case-insensitively, and common aliases (``A100``, ``H100-80GB``) resolve to a canonical name.
A cluster file may define more accelerators in the same fields (``gpus:``); those specs live in
its :class:`~heterosim.config.cluster.ClusterConfig`, built with :func:`make_gpu_spec`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from importlib import resources

import yaml

from heterosim.errors import UserError

DTYPE_BYTES: dict[str, int] = {"fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "fp8": 1}
# Fields of one catalogue entry (gpus.yaml) and of a cluster file's ``gpus:`` entry.
GPU_FIELDS = (
    "aliases",
    "vendor",
    "generation",
    "segment",
    "tflops",
    "memory_gb",
    "memory_mib",
    "memory_tbps",
    "nvlink_gbps_per_dir",
    "nvlink_bridge",
    "pcie_gen",
    "pcie_p2p",
    "sm_count",
    "power_limit_w",
    "sources",
)
GPU_REQUIRED_FIELDS = ("tflops", "memory_gb", "memory_tbps")
SEGMENTS = ("datacenter", "workstation", "consumer")


@dataclass(frozen=True)
class GpuSpec:
    """One GPU model. Rates are per direction; FLOP/s are dense peaks."""

    name: str
    vendor: str
    generation: str
    peak_tflops: dict[str, float | None]
    memory_bytes: int
    memory_bytes_per_s: float
    nvlink_bytes_per_s: float
    pcie_bytes_per_s: float
    pcie_gen: int
    sources: dict[str, str] = field(default_factory=dict, compare=False)
    # datacenter | workstation | consumer (GeForce: fp32-accumulate tensor math at half rate)
    segment: str = "datacenter"
    sm_count: int | None = None  # SMs / compute units, when the entry gives them
    nvlink_bridge: bool = False  # NVLink only between bridged pairs (no NVSwitch)
    pcie_p2p: bool = True  # the driver offers peer-to-peer over PCIe (GeForce: no; NCCL then uses SHM)
    # a board power limit below the default (W); None: the default limit (power_curve's tdp_w)
    power_limit_w: float | None = None

    def peak_flops(self, dtype: str) -> float:
        """Peak dense FLOP/s for ``dtype``; an unsupported dtype is a UserError."""
        value = self.peak_tflops.get(dtype)
        if value is None:
            supported = sorted(k for k, v in self.peak_tflops.items() if v)
            raise UserError(
                f"GPU {self.name} has no {dtype} peak in the catalogue; supported: " + ", ".join(supported)
            )
        return float(value) * 1e12

    @property
    def has_nvlink(self) -> bool:
        return self.nvlink_bytes_per_s > 0


def pcie_x16_bytes_per_s(generation: int) -> float | None:
    """Per-direction bandwidth of a PCIe x16 link of ``generation``; None if not tabulated."""
    value = _raw()["pcie_x16_gbps_per_dir"].get(int(generation))
    return None if value is None else float(value) * 1e9


def memory_capacity_bytes(entry: dict) -> int:
    """Device memory a rank can fill: the driver-reported total ``memory_mib`` (MiB) where the
    entry has it, else the datasheet's ``memory_gb`` (decimal GB, a lower bound: an "80 GB" HBM
    part reports about 80 GiB)."""
    mib = entry.get("memory_mib")
    if mib is not None:
        return int(float(mib) * 2**20)
    return int(float(entry["memory_gb"]) * 1e9)


def make_gpu_spec(name: str, entry: dict) -> GpuSpec:
    """A :class:`GpuSpec` from one entry in the catalogue's fields (already validated).

    ``vendor``/``generation`` default to ``unknown``, ``segment`` to ``datacenter``,
    ``nvlink_gbps_per_dir`` to 0 (PCIe only), ``pcie_gen`` to 4 and ``pcie_p2p`` to true except
    on consumer (GeForce) parts.
    """
    pcie_gen = int(entry.get("pcie_gen", 4))
    pcie = pcie_x16_bytes_per_s(pcie_gen)
    if pcie is None:
        raise ValueError(f"PCIe generation {pcie_gen} not tabulated")
    sm_count = entry.get("sm_count")
    return GpuSpec(
        name=name,
        vendor=str(entry.get("vendor", "unknown")),
        generation=str(entry.get("generation", "unknown")),
        peak_tflops={str(k): (None if v is None else float(v)) for k, v in entry["tflops"].items()},
        memory_bytes=memory_capacity_bytes(entry),
        memory_bytes_per_s=float(entry["memory_tbps"]) * 1e12,
        nvlink_bytes_per_s=float(entry.get("nvlink_gbps_per_dir", 0)) * 1e9,
        pcie_bytes_per_s=pcie,
        pcie_gen=pcie_gen,
        sources={str(k): str(v) for k, v in (entry.get("sources") or {}).items()},
        segment=str(entry.get("segment", "datacenter")),
        sm_count=None if sm_count is None else int(sm_count),
        nvlink_bridge=bool(entry.get("nvlink_bridge", False)),
        pcie_p2p=bool(entry.get("pcie_p2p", entry.get("segment", "datacenter") != "consumer")),
        power_limit_w=None if entry.get("power_limit_w") is None else float(entry["power_limit_w"]),
    )


@dataclass(frozen=True)
class PowerCurve:
    """How one GPU part's SM clock falls under a power limit (catalogue ``power_curves:``).

    ``floor_w``: board power busy at the maximum clock with almost no switching;
    ``clock_at_tdp_mhz``: the clock compute-bound work sustains at the default limit ``tdp_w``;
    ``voltage_slope``: ``k`` in ``V(f) / V(f_max) = 1 - k (1 - f / f_max)``.
    """

    name: str
    tdp_w: float
    limit_range_w: tuple[float, float]
    floor_w: float
    clock_at_tdp_mhz: float
    max_clock_mhz: float
    voltage_slope: float
    sources: dict[str, str] = field(default_factory=dict, compare=False)


def power_curve_names() -> list[str]:
    """Catalogue parts with a measured clock-power curve."""
    return list(_raw().get("power_curves") or {})


def power_curve(name: str) -> PowerCurve | None:
    """The measured clock-power curve of the catalogue part ``name`` (aliases accepted), or None."""
    canonical = canonical_gpu_name(name)
    entry = (_raw().get("power_curves") or {}).get(canonical)
    if entry is None:
        return None
    low, high = (float(v) for v in entry["limit_range_w"])
    return PowerCurve(
        name=str(canonical),
        tdp_w=float(entry["tdp_w"]),
        limit_range_w=(low, high),
        floor_w=float(entry["floor_w"]),
        clock_at_tdp_mhz=float(entry["clock_at_tdp_mhz"]),
        max_clock_mhz=float(entry["max_clock_mhz"]),
        voltage_slope=float(entry["voltage_slope"]),
        sources={str(k): str(v) for k, v in (entry.get("sources") or {}).items()},
    )


@cache
def _raw() -> dict:
    text = resources.files("heterosim.catalog").joinpath("gpus.yaml").read_text()
    raw = yaml.safe_load(text)
    raw["pcie_x16_gbps_per_dir"] = {int(k): v for k, v in raw["pcie_x16_gbps_per_dir"].items()}
    return raw


@cache
def _load() -> tuple[dict[str, GpuSpec], dict[str, str]]:
    raw = _raw()
    specs: dict[str, GpuSpec] = {}
    aliases: dict[str, str] = {}
    for name, entry in raw["gpus"].items():
        unknown = set(entry) - set(GPU_FIELDS)
        if unknown:
            raise ValueError(f"gpus.yaml: {name}: unknown fields {sorted(unknown)}")
        spec = make_gpu_spec(name, entry)
        specs[name] = spec
        for alias in [name, *entry.get("aliases", [])]:
            aliases[alias.lower()] = name
    return specs, aliases


def known_gpu_names() -> list[str]:
    """Canonical names of every catalogued GPU."""
    return list(_load()[0])


def canonical_gpu_name(name: str) -> str | None:
    """The canonical name for ``name`` (case-insensitive, aliases accepted), or None."""
    return _load()[1].get(str(name).strip().lower())


def gpu_spec(name: str) -> GpuSpec:
    """The catalogue entry for ``name``; an unknown name is a UserError listing the known ones."""
    canonical = canonical_gpu_name(name)
    if canonical is None:
        raise UserError(f"unknown GPU {name!r}; known: {', '.join(known_gpu_names())}")
    return _load()[0][canonical]
