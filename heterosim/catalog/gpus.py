"""The GPU catalogue: peak FLOP/s per dtype, memory size and bandwidth, NVLink and PCIe bandwidth.

Numbers live in ``gpus.yaml`` beside this file, each with its source. Names match
case-insensitively, and common aliases (``A100``, ``H100-80GB``) resolve to a canonical name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from importlib import resources

import yaml

from heterosim.errors import UserError

DTYPE_BYTES: dict[str, int] = {"fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "fp8": 1}


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

    def peak_flops(self, dtype: str) -> float:
        """Peak dense FLOP/s for ``dtype``; an unsupported dtype is a UserError."""
        value = self.peak_tflops.get(dtype)
        if value is None:
            supported = sorted(k for k, v in self.peak_tflops.items() if v)
            raise UserError(
                f"GPU {self.name} has no {dtype} peak in the catalogue; supported: "
                + ", ".join(supported)
            )
        return float(value) * 1e12

    @property
    def has_nvlink(self) -> bool:
        return self.nvlink_bytes_per_s > 0


@cache
def _load() -> tuple[dict[str, GpuSpec], dict[str, str]]:
    text = resources.files("heterosim.catalog").joinpath("gpus.yaml").read_text()
    raw = yaml.safe_load(text)
    pcie_table = {int(k): float(v) for k, v in raw["pcie_x16_gbps_per_dir"].items()}
    specs: dict[str, GpuSpec] = {}
    aliases: dict[str, str] = {}
    for name, entry in raw["gpus"].items():
        spec = GpuSpec(
            name=name,
            vendor=entry["vendor"],
            generation=entry["generation"],
            peak_tflops=dict(entry["tflops"]),
            memory_bytes=int(entry["memory_gb"] * 1e9),
            memory_bytes_per_s=float(entry["memory_tbps"]) * 1e12,
            nvlink_bytes_per_s=float(entry["nvlink_gbps_per_dir"]) * 1e9,
            pcie_bytes_per_s=pcie_table[int(entry["pcie_gen"])] * 1e9,
            pcie_gen=int(entry["pcie_gen"]),
            sources=dict(entry["sources"]),
        )
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
