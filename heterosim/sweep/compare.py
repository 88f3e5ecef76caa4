"""Two runs side by side: two experiment files, or one experiment with two sets of overrides.

Both sides run with the same seed (paired): side A's seed, after the common overrides, is set on
both unless a variant sets ``simulation.seed`` itself. They run in parallel worker processes;
each writes its full ``heterosim run`` outputs into ``OUT/A`` and ``OUT/B``.
"""

from __future__ import annotations

import re
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from heterosim.config.fidelity_scope import differing_keys, fidelity_of, no_effect_warnings
from heterosim.config.jobs import load_any_experiment
from heterosim.errors import UserError
from heterosim.interrupts import sigterm_as_interrupt
from heterosim.report.compare_report import comparison_dict, write_comparison
from heterosim.report.staging import check_output_folder, mark_output_folder, staged_output
from heterosim.report.task_progress import TaskProgress, to_stderr
from heterosim.sweep.local import run_local
from heterosim.sweep.task import OK, PARTIAL, RunTask, prepare_task

SIDE_DIRS = ("A", "B")
_VARIANT_SPLIT = re.compile(r",(?=\s*[A-Za-z_][\w.]*\s*=)")


@dataclass(frozen=True)
class Side:
    """One side of a comparison: an experiment file plus its own overrides."""

    label: str
    experiment: Path
    overrides: list[str] = field(default_factory=list)


def parse_variant(text: str) -> tuple[str, list[str]]:
    """``NAME:KEY=VALUE[,KEY=VALUE...]`` -> (NAME, ["KEY=VALUE", ...]).

    A comma starts a new override only where it is followed by ``key=``, so values such as
    ``[1, 2]`` keep their commas.
    """
    name, sep, rest = text.partition(":")
    name = name.strip()
    if not sep or not name or not rest.strip():
        raise UserError(f"--variant {text!r}: expected NAME:KEY=VALUE[,KEY=VALUE], e.g. hpcc:network.cc=hpcc")
    overrides = [part.strip() for part in _VARIANT_SPLIT.split(rest)]
    for item in overrides:
        if "=" not in item or not item.split("=", 1)[0].strip():
            raise UserError(f"--variant {text!r}: {item!r}: expected KEY=VALUE")
    return name, overrides


def sides_from_arguments(experiments: list[str], variants: list[str]) -> tuple[Side, Side]:
    """Two files and no variants, or one file and one or two variants (one: compared with the base)."""
    if len(experiments) == 2 and not variants:
        a, b = (Path(p) for p in experiments)
        labels = [_experiment_label(a), _experiment_label(b)]
        if labels[0] == labels[1]:
            labels = [a.stem, b.stem] if a.stem != b.stem else list(SIDE_DIRS)
        return Side(labels[0], a), Side(labels[1], b)
    if len(experiments) == 1 and 1 <= len(variants) <= 2:
        path = Path(experiments[0])
        parsed = [parse_variant(v) for v in variants]
        if len(parsed) == 1:
            parsed.insert(0, ("base", []))
        if parsed[0][0] == parsed[1][0]:
            raise UserError(f"--variant: both variants are named {parsed[0][0]!r}; give them different names")
        return Side(parsed[0][0], path, parsed[0][1]), Side(parsed[1][0], path, parsed[1][1])
    raise UserError(
        "compare: give two experiment files (A.yaml B.yaml), or one experiment file "
        "with one or two --variant NAME:KEY=VALUE[,KEY=VALUE]"
    )


def _experiment_label(path: Path) -> str:
    from heterosim.config.fields import read_yaml_mapping

    name = read_yaml_mapping(path).get("name")
    return name if isinstance(name, str) and name else path.stem


def _has_key(overrides: list[str], key: str) -> bool:
    return any(item.split("=", 1)[0].strip() == key for item in overrides)


def prepare_sides(
    side_a: Side,
    side_b: Side,
    out_dir: Path,
    *,
    common: list[str] | None = None,
    fidelity: str | None = None,
    plots: bool = True,
) -> tuple[list[RunTask], list[dict]]:
    """Validated tasks for both sides (paired seeds) and their descriptions for comparison.json."""
    common = list(common or [])
    if fidelity:
        common.append(f"simulation.fidelity={fidelity}")
    seed = load_any_experiment(side_a.experiment, common + side_a.overrides).simulation.seed
    tasks: list[RunTask] = []
    described = []
    for side, folder in zip((side_a, side_b), SIDE_DIRS):
        paired = [] if _has_key(side.overrides, "simulation.seed") else [f"simulation.seed={seed}"]
        overrides = common + paired + side.overrides
        try:
            tasks.append(
                prepare_task(
                    side.experiment,
                    overrides,
                    task_id=folder,
                    label=side.label,
                    out_dir=out_dir / folder,
                    plots=plots,
                )
            )
        except UserError as exc:
            raise UserError(f"side {folder} ({side.label}): {str(exc).strip().splitlines()[0]}") from None
        described.append(
            {"label": side.label, "experiment": str(side.experiment), "overrides": overrides, "dir": folder}
        )
    return tasks, described


def compare(
    side_a: Side,
    side_b: Side,
    out_dir: str | Path,
    *,
    common: list[str] | None = None,
    fidelity: str | None = None,
    workers: int = 2,
    plots: bool = True,
    progress: bool = False,
) -> dict[str, Any]:
    """Run both sides with paired seeds, write comparison.* and OUT/A, OUT/B; return comparison.json.

    ``plots`` controls each side's run plots; comparison.png is always written. ``progress``
    prints a line on stderr as each side starts and ends. A setting the sides differ in that
    cannot act at their fidelity (``network.cc`` at flow fidelity) is a warning on stderr and in
    comparison.json (``warnings``).
    """
    out_dir = Path(out_dir)
    check_output_folder(out_dir)
    tasks, described = prepare_sides(side_a, side_b, out_dir, common=common, fidelity=fidelity, plots=plots)
    warnings = side_warnings(tasks)
    for line in warnings:
        print(f"heterosim compare: warning: {line}", file=sys.stderr)
    records: dict[str, dict[str, Any]] = {}
    created = not out_dir.exists()
    out_dir.mkdir(parents=True, exist_ok=True)
    mark_output_folder(out_dir)  # A/ and B/ appear in it before comparison.* do
    shown = TaskProgress("compare", len(tasks), workers=workers, emit=to_stderr if progress else None)
    shown.message(f"running A = {side_a.label} and B = {side_b.label}, {workers} at a time")

    def done(task: RunTask, record: dict[str, Any]) -> None:
        records[task.id] = record
        label = f"{task.id} ({task.label}) {record['status']}"
        shown.done(label, _run_detail(record), record.get("run_wall_s"))

    with sigterm_as_interrupt():  # SIGTERM stops both sides' workers as Ctrl-C does
        run_local(tasks, done, workers=workers)
    for folder, side in zip(SIDE_DIRS, (side_a, side_b)):
        record = records[folder]
        if record["status"] not in (OK, PARTIAL):
            if created:  # bad input on one side: leave no half comparison (the other side's run)
                shutil.rmtree(out_dir, ignore_errors=True)
            raise UserError(f"side {folder} ({side.label}) failed: {record.get('error')}")
    comparison = comparison_dict(described[0], records["A"]["results"], described[1], records["B"]["results"])
    if warnings:
        comparison["warnings"] = warnings
    with staged_output(out_dir, replace=False) as stage:
        write_comparison(stage, comparison)
    return comparison


def side_warnings(tasks: list[RunTask]) -> list[str]:
    """A line per setting the two sides differ in that cannot change a run at their fidelity."""
    a, b = (task.data for task in tasks)
    keys = [key for key in differing_keys(a, b) if key != "name"]
    return no_effect_warnings(keys, (fidelity_of(a), fidelity_of(b)), "the two sides")


def _run_detail(record: dict[str, Any]) -> str:
    """The iteration time of a finished side, or why it has none."""
    iteration = (record.get("results") or {}).get("iteration_time_s")
    return f"iteration {iteration * 1e3:.3f} ms" if iteration is not None else record.get("error") or ""
