"""Sweep files: a base experiment plus a grid of overrides, expanded into variants.

A sweep file reads::

    name: cc-x-nic                      # optional; default: the file's stem
    experiment: ../compare/tiny_4gpu.yaml   # base experiment, relative to this file
    fidelity: flow                      # optional: packet | flow, applied to every variant
    set: {network.pfc: true}            # optional: overrides applied to every variant
    grid:                               # dotted experiment key -> list of values
      network.cc: [dcqcn, hpcc]
      cluster: [../../topologies/h0_128gpu.yaml, ../../topologies/h4_128gpu.yaml]
      simulation.seed: [1, 2, 3]
    metrics: [iteration_time_s, breakdown.exposed_comm_s]   # optional: what the plots show
    workers: 2                          # optional default for --workers
    max_variants: 20000                 # optional: allow a grid above 10,000 variants

The variants are the cartesian product of the grid, in the order the keys are written (the last
key varies fastest). A ``cluster`` value that is a file path is relative to the sweep file.
A variant's identity is a hash of its full override set (``set``, its grid point and the
fidelity), so re-running the sweep with more grid values only runs the new combinations.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from heterosim.config.choices import FIDELITIES, require_choice
from heterosim.config.fields import parse_override_value, positive_int, read_yaml_mapping
from heterosim.config.limits import check_sweep_size
from heterosim.errors import UserError

EXPERIMENT_SECTIONS = (
    "name",
    "model",
    "training",
    "parallel",
    "cluster",
    "network",
    "simulation",
    "jobs",
    "faults",
)
SWEEP_KEYS = (
    "name",
    "experiment",
    "fidelity",
    "set",
    "grid",
    "metrics",
    "workers",
    "description",
    "max_variants",
)
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")  # a sweep name is one folder name
SEED_KEY = "simulation.seed"
DEFAULT_METRICS = ("iteration_time_s",)
METRIC_ROOTS = ("iteration_time_s", "breakdown", "throughput", "network", "sim", "jobs", "makespan_s")


@dataclass(frozen=True)
class Variant:
    """One point of the grid: its overrides (dotted key -> YAML value) and identity."""

    index: int
    overrides: dict[str, Any]  # every override, fixed ones included, in application order
    point: dict[str, Any]  # only the grid keys, as written in the sweep file

    @property
    def id(self) -> str:
        return variant_id(self.overrides)

    def override_strings(self, base_dir: Path) -> list[str]:
        """``key=value`` strings for :func:`~heterosim.config.experiment.apply_overrides`."""
        return [
            f"{key}={json.dumps(resolve_value(key, value, base_dir))}"
            for key, value in self.overrides.items()
        ]

    def label(self) -> str:
        return " ".join(f"{key}={format_value(value)}" for key, value in self.point.items()) or "base"


@dataclass(frozen=True)
class SweepSpec:
    """A validated sweep file."""

    source: Path
    name: str
    experiment: Path  # absolute
    fidelity: str | None
    fixed: dict[str, Any]
    grid: dict[str, list[Any]]
    metrics: tuple[str, ...]
    workers: int | None

    @property
    def base_dir(self) -> Path:
        return self.source.parent

    def variants(self) -> list[Variant]:
        keys = list(self.grid)
        out = []
        for index, values in enumerate(itertools.product(*(self.grid[k] for k in keys))):
            point = dict(zip(keys, values))
            overrides = dict(self.fixed)
            overrides.update(point)
            if self.fidelity is not None:
                overrides["simulation.fidelity"] = self.fidelity
            out.append(Variant(index=index, overrides=overrides, point=point))
        return out


def variant_id(overrides: dict[str, Any]) -> str:
    """12 hex digits of the SHA-256 of the override set (order-independent)."""
    canonical = json.dumps(overrides, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:12]


def resolve_value(key: str, value: Any, base_dir: Path) -> Any:
    """A ``cluster`` file path becomes absolute (relative to ``base_dir``); other values pass."""
    if key == "cluster" and isinstance(value, str):
        path = Path(value)
        return str(path if path.is_absolute() else (base_dir / path).resolve())
    return value


def format_value(value: Any) -> str:
    """Short text for a grid value: file paths by their stem, mappings as compact JSON."""
    if isinstance(value, str) and value.endswith((".yaml", ".yml")):
        return Path(value).stem
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def _check_key(source: str, where: str, key: Any) -> str:
    if not isinstance(key, str) or not key.strip() or any(not p for p in key.split(".")):
        raise UserError(f"{source}: {where}: {key!r}: expected a dotted experiment key such as network.cc")
    if key.split(".")[0] not in EXPERIMENT_SECTIONS:
        raise UserError(
            f"{source}: {where}.{key}: unknown experiment section {key.split('.')[0]!r}; "
            f"expected one of: {', '.join(EXPERIMENT_SECTIONS)}"
        )
    return key


def _fixed(source: str, raw: Any) -> dict[str, Any]:
    if raw is None:
        return {}
    if isinstance(raw, list):  # ["key=value", ...] like --set
        out = {}
        for item in raw:
            if not isinstance(item, str) or "=" not in item:
                raise UserError(f"{source}: set: {item!r}: expected KEY=VALUE")
            key, text = item.split("=", 1)
            out[_check_key(source, "set", key.strip())] = parse_override_value(text, f"{source}: set")
        return out
    if not isinstance(raw, dict):
        raise UserError(f"{source}: set: expected a mapping of dotted keys to values")
    return {_check_key(source, "set", k): v for k, v in raw.items()}


def _grid(source: str, raw: Any) -> dict[str, list[Any]]:
    if not isinstance(raw, dict) or not raw:
        raise UserError(f"{source}: grid: expected a non-empty mapping of dotted keys to lists of values")
    grid: dict[str, list[Any]] = {}
    for key, values in raw.items():
        _check_key(source, "grid", key)
        if not isinstance(values, list) or not values:
            raise UserError(f"{source}: grid.{key}: expected a non-empty list of values, got {values!r}")
        seen = set()
        for value in values:
            text = json.dumps(value, sort_keys=True, default=str)
            if text in seen:
                raise UserError(f"{source}: grid.{key}: value {value!r} is listed twice")
            seen.add(text)
        grid[key] = list(values)
    return grid


def _metrics(source: str, raw: Any) -> tuple[str, ...]:
    if raw is None:
        return DEFAULT_METRICS
    if isinstance(raw, str):
        raw = [raw]
    if not isinstance(raw, list) or not raw or not all(isinstance(m, str) for m in raw):
        raise UserError(f"{source}: metrics: expected a list of result keys such as iteration_time_s")
    for metric in raw:
        parts = metric.split(".")
        if parts[0] not in METRIC_ROOTS or not all(p.strip() for p in parts) or len(metric) > 200:
            raise UserError(
                f"{source}: metrics: {metric!r}: expected iteration_time_s, makespan_s or a "
                f"key under breakdown., throughput., network., sim. or jobs."
            )
    return tuple(raw)


def parse_sweep(data: dict[str, Any], path: Path) -> SweepSpec:
    """Validate a sweep mapping read from ``path``."""
    source = str(path)
    unknown = [k for k in data if k not in SWEEP_KEYS]
    if unknown:
        raise UserError(f"{source}: {unknown[0]}: unknown key; expected one of: {', '.join(SWEEP_KEYS)}")
    experiment = data.get("experiment")
    if not isinstance(experiment, str) or not experiment:
        raise UserError(
            f"{source}: experiment: missing; expected the base experiment file, relative to the sweep file"
        )
    experiment_path = Path(experiment)
    if not experiment_path.is_absolute():
        experiment_path = (path.parent / experiment_path).resolve()
    if not experiment_path.is_file():
        raise UserError(f"{source}: experiment: {experiment}: file not found (looked at {experiment_path})")
    fidelity = data.get("fidelity")
    if fidelity is not None:
        require_choice(f"{source}: fidelity", fidelity, FIDELITIES)
    name = data.get("name", re.sub(r"[^A-Za-z0-9._-]+", "_", path.stem).lstrip("._-") or "sweep")
    if not isinstance(name, str) or not NAME.match(name):
        raise UserError(
            f"{source}: name: expected a plain folder name (letters, digits, . _ -; "
            f"no / or ..), got {name!r:.60}"
        )
    if "max_variants" in data:
        max_variants = positive_int(data["max_variants"], "max_variants", source, maximum=10**7)
    else:
        max_variants = None
    workers = data.get("workers")
    if workers is not None and (
        not isinstance(workers, int) or isinstance(workers, bool) or not 1 <= workers <= 256
    ):
        raise UserError(f"{source}: workers: expected a positive integer up to 256, got {workers!r}")
    grid = _grid(source, data.get("grid"))
    check_sweep_size(source, [len(v) for v in grid.values()], max_variants)
    fixed = _fixed(source, data.get("set"))
    clash = [k for k in grid if k in fixed]
    if clash:
        raise UserError(f"{source}: grid.{clash[0]}: also given under set; keep it in one place")
    if fidelity is not None and "simulation.fidelity" in grid:
        raise UserError(f"{source}: grid.simulation.fidelity: also given as fidelity; keep it in one place")
    for key, values in grid.items():
        if key == "cluster":
            for value in values:
                if isinstance(value, str) and not Path(resolve_value(key, value, path.parent)).is_file():
                    raise UserError(
                        f"{source}: grid.cluster: {value}: file not found "
                        f"(paths are relative to the sweep file)"
                    )
    return SweepSpec(
        source=path,
        name=name,
        experiment=experiment_path,
        fidelity=fidelity,
        fixed=fixed,
        grid=grid,
        metrics=_metrics(source, data.get("metrics")),
        workers=workers,
    )


def load_sweep(path: str | Path) -> SweepSpec:
    """Read and validate a sweep YAML file."""
    path = Path(path)
    return parse_sweep(read_yaml_mapping(path), path)
