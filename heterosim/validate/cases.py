"""Validation cases: schema and loading (validation/README.md describes the file).

A case is a published measurement plus what the simulator needs to predict it:

- ``kind: iteration_time | throughput`` (end to end): ``experiment`` (an experiment mapping as in
  docs/config.md, cluster inline), ``compare.quantity`` (``iteration_time_s``, ``tokens_per_s_per_gpu``
  or ``tflops_per_gpu`` with ``compare.flop_convention``) and ``measured.<quantity>``.
- ``kind: layer_time``: the forward, backward (recomputation included) or combined time of one
  transformer layer in ms (``layer_forward_ms``, ``layer_backward_ms``, ``layer_total_ms``), with
  the ``experiment`` whose layer it is.
- ``kind: collective_busbw``: ``collective`` (op, size, ranks, algorithm), an inline ``cluster``
  and ``measured.busbw_GBps`` (nccl-tests definition).

Every problem is a one-line :class:`~heterosim.errors.UserError` naming the file, the case and
the key.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from heterosim.config.choices import COLLECTIVE_ALGORITHMS
from heterosim.config.cluster import parse_cluster
from heterosim.config.experiment import parse_experiment
from heterosim.config.fields import Section, read_yaml_mapping
from heterosim.config.limits import (
    MAX_COLLECTIVE_BYTES,
    SIMPLE_CHUNK_MAX,
    check_budget,
    collective_flow_floor,
)
from heterosim.errors import UserError
from heterosim.plan.collectives.common import COLLECTIVES, collective_name
from heterosim.units import format_size

END_TO_END_KINDS = ("iteration_time", "throughput")
KINDS = (*END_TO_END_KINDS, "layer_time", "collective_busbw")
LAYER_QUANTITIES = ("layer_forward_ms", "layer_backward_ms", "layer_total_ms")
QUANTITIES = ("iteration_time_s", "tokens_per_s_per_gpu", "tflops_per_gpu", "busbw_GBps", *LAYER_QUANTITIES)
FLOP_CONVENTIONS = ("sc21-eq3-hardware", "simulator")
SEPARATE_FLAGS = ("SUSPECT", "CONFLICT", "APPROX")  # reported apart from the error statistics


@dataclass(frozen=True)
class Case:
    """One published measurement and how to predict it."""

    id: str
    group: str
    kind: str
    source: str
    quantity: str
    measured: float
    flop_convention: str | None
    flags: tuple[str, ...]
    ci: bool
    calibration: bool
    assumed: dict[str, Any]
    experiment: dict[str, Any] | None = None  # end-to-end cases
    collective: dict[str, Any] | None = None  # collective_busbw cases
    cluster: dict[str, Any] | None = None  # collective_busbw cases
    measured_all: dict[str, float] = field(default_factory=dict)  # every published number given
    origin: str = field(default="", compare=False)  # "file: cases[i] (id)" for error messages
    base_dir: Path | None = field(default=None, compare=False)  # relative cluster paths
    # mechanisms of the measured run the simulator leaves out: ({"what": ..., "source": ...}, ...)
    not_modelled: tuple[dict[str, str], ...] = ()

    @property
    def separate_flags(self) -> list[str]:
        """Bare SUSPECT / CONFLICT / APPROX flags: such cases are kept out of the statistics."""
        return [f for f in self.flags if f in SEPARATE_FLAGS]

    @property
    def gpus(self) -> int:
        """GPUs the case simulates (hosts x GPUs per host of its cluster)."""
        cluster = self.cluster if self.experiment is None else self.experiment.get("cluster")
        if self.kind == "collective_busbw":
            return int(self.collective["ranks"]) if self.collective else 0
        if isinstance(cluster, str):
            from heterosim.config.cluster import load_cluster

            path = Path(cluster)
            return load_cluster(
                path if path.is_absolute() else (self.base_dir or Path.cwd()) / path
            ).world_size
        total = 0
        types = (cluster or {}).get("host_types", {})
        for host in (cluster or {}).get("hosts", []):
            total += int(types.get(host.get("type"), {}).get("gpus", 0)) * int(host.get("count", 1))
        return total


def _case(entry: Any, source: str, index: int) -> Case:
    label = f"cases[{index}]"
    if isinstance(entry, dict) and isinstance(entry.get("id"), str):
        label = f"cases[{index}] ({entry['id']})"
    top = Section(entry, source, label)
    case_id = top.string("id")
    kind = top.string("kind", choices=KINDS)
    compare = top.section("compare", required=True)
    default_q = "busbw_GBps" if kind == "collective_busbw" else None
    quantity = compare.string("quantity", default_q, choices=QUANTITIES)
    quantity = {q.lower(): q for q in QUANTITIES}[quantity.lower()]
    convention = None
    if quantity == "tflops_per_gpu":
        convention = compare.string("flop_convention", choices=FLOP_CONVENTIONS)
    compare.reject_unknown()
    if (kind == "collective_busbw") != (quantity == "busbw_GBps") or (kind == "layer_time") != (
        quantity in LAYER_QUANTITIES
    ):
        raise compare.error("quantity", f"{quantity!r} does not go with kind {kind!r}")
    measured_section = top.section("measured", required=True)
    measured = measured_section.number(quantity, minimum=0.0)
    if measured <= 0:
        raise measured_section.error(quantity, "expected a positive measured value")
    measured_all = {
        key: float(value)
        for key, value in (top.raw("measured") or {}).items()
        if isinstance(value, (int, float)) and not isinstance(value, bool)
    }
    flags = top.raw("flags", [])
    if not isinstance(flags, list) or not all(isinstance(f, str) for f in flags):
        raise top.error("flags", "expected a list of strings")
    assumed = top.raw("assumed", {})
    if not isinstance(assumed, dict):
        raise top.error("assumed", "expected a mapping of assumed values")
    not_modelled = _not_modelled(top)
    experiment = collective = cluster = None
    if kind == "collective_busbw":
        coll = top.section("collective", required=True)
        collective = {
            "op": coll.string("op"),
            "size": coll.size("size", minimum=1, maximum=MAX_COLLECTIVE_BYTES),  # busbw divides by it
            "ranks": coll.integer("ranks", minimum=2),
            "algorithm": coll.string("algorithm", "auto", choices=COLLECTIVE_ALGORITHMS),
        }
        coll.reject_unknown()
        cluster = top.raw("cluster")
        if not isinstance(cluster, dict):
            raise top.error("cluster", "expected an inline cluster mapping")
        _check_collective(coll, collective, cluster, f"{source}: {label}")
    else:
        experiment = top.raw("experiment")
        if not isinstance(experiment, dict):
            raise top.error("experiment", "expected an experiment mapping (docs/config.md schema)")
        # every value checked when the file is read, not when (or whether) the case runs
        parse_experiment(
            copy.deepcopy(experiment), f"{source}: {label}.experiment", base_dir=Path(source).parent
        )
    case = Case(
        id=case_id,
        group=top.string("group"),
        kind=kind,
        source=top.string("source"),
        quantity=quantity,
        measured=float(measured),
        flop_convention=convention,
        flags=tuple(flags),
        ci=top.boolean("ci", False),
        calibration=top.boolean("calibration", False),
        assumed=dict(assumed),
        experiment=experiment,
        collective=collective,
        cluster=cluster,
        measured_all=measured_all,
        not_modelled=not_modelled,
        origin=f"{source}: {label}",
        base_dir=Path(source).parent,
    )
    top.reject_unknown(("published", "note", "extra"))
    return case


def _check_collective(coll: Section, collective: dict[str, Any], cluster: dict[str, Any], where: str) -> None:
    """A collective case checked when the file is read, as ``heterosim collective`` checks its
    options: the op is a known collective, the inline cluster is valid and has the ranks, and
    the flows fit the task budget."""
    try:
        op = collective_name(collective["op"])
    except UserError:
        known = ", ".join(COLLECTIVES)
        raise coll.error("op", f"unknown collective {collective['op']!r}; known: {known}") from None
    world = parse_cluster(copy.deepcopy(cluster), f"{where}.cluster").world_size
    ranks, size = int(collective["ranks"]), int(collective["size"])
    if ranks > world:
        raise coll.error("ranks", f"{ranks} ranks; the case's cluster has {world} GPUs")
    chunk = format_size(SIMPLE_CHUNK_MAX)
    what = f"{op} of {format_size(size)} over {ranks} ranks in chunks of at most {chunk}"
    check_budget(where, "collective.size", what, collective_flow_floor(op, size, ranks))


def _not_modelled(top: Section) -> tuple[dict[str, str], ...]:
    """``not_modelled``: a list of ``{what, source}``, each a mechanism of the measured run that
    the simulator does not model, named with the source that shows the run used it."""
    entries = top.raw("not_modelled", [])
    if not isinstance(entries, list):
        raise top.error("not_modelled", "expected a list of {what: TEXT, source: TEXT}")
    out = []
    for i, entry in enumerate(entries):
        if (
            not isinstance(entry, dict)
            or set(entry) != {"what", "source"}
            or not all(isinstance(v, str) and v.strip() for v in entry.values())
        ):
            raise top.error(f"not_modelled[{i}]", "expected {what: TEXT, source: TEXT}, both non-empty")
        out.append({"what": entry["what"].strip(), "source": entry["source"].strip()})
    return tuple(out)


def load_cases(path: str | Path) -> list[Case]:
    """Read and check a cases file; ids must be unique."""
    path = Path(path)
    data = read_yaml_mapping(path)
    entries = data.get("cases")
    if not isinstance(entries, list) or not entries:
        raise UserError(f"{path}: cases: expected a non-empty list of cases")
    cases: list[Case] = []
    seen: set[str] = set()
    for index, entry in enumerate(entries):
        case = _case(entry, str(path), index)
        if case.id in seen:
            raise UserError(f"{path}: cases[{index}].id: duplicate id {case.id!r}")
        seen.add(case.id)
        cases.append(case)
    return cases


def select_cases(
    cases: list[Case],
    *,
    groups: list[str] | None = None,
    only: list[str] | None = None,
    ci: bool = False,
    max_gpus: int | None = None,
) -> tuple[list[Case], list[tuple[Case, str]]]:
    """Cases to run and (case, reason) for those left out. Unknown ids or groups are errors."""
    if only:
        unknown = sorted(set(only) - {c.id for c in cases})
        if unknown:
            raise UserError(f"--only: unknown case id(s): {', '.join(unknown)}")
    if groups:
        known = {c.group for c in cases}
        unknown = sorted(set(groups) - known)
        if unknown:
            raise UserError(
                f"--group: unknown group(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}"
            )
    chosen, skipped = [], []
    for case in cases:
        if only and case.id not in only:
            continue
        if groups and case.group not in groups:
            continue
        if ci and not case.ci:
            continue
        if max_gpus is not None and case.gpus > max_gpus:
            skipped.append((case, f"{case.gpus} GPUs > --max-gpus {max_gpus}"))
            continue
        chosen.append(case)
    return chosen, skipped
