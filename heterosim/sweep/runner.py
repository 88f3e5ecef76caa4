"""Run a sweep: expand the grid, skip what the store already holds, run the rest, summarise.

Output folder layout::

    sweep.json          the sweep as run: base experiment, fixed overrides, grid, variant ids
    results.jsonl       one record per finished run (the store; appended and fsync'd)
    runs/<id>/results.json   full results of each successful run
    summary.csv, summary.json, <metric>_vs_<parameter>.png

A run's results.json is written before its record is appended, so a record in the store always
points to complete results. The summary is rewritten at the end, also after Ctrl-C or an error.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from heterosim.config.experiment import apply_overrides
from heterosim.config.fidelity_scope import fidelity_of, no_effect_warnings
from heterosim.config.fields import UnknownKeyError, read_yaml_mapping
from heterosim.config.jobs import parse_any_experiment
from heterosim.errors import Interrupted, UserError
from heterosim.interrupts import interrupt_status, sigterm_as_interrupt
from heterosim.report.staging import check_output_folder, mark_output_folder, write_json_atomically
from heterosim.report.task_progress import TaskProgress
from heterosim.sweep.grid import SweepSpec, Variant, resolve_value
from heterosim.sweep.local import default_workers
from heterosim.sweep.store import ResultStore, read_manifest
from heterosim.sweep.summary import metric_values, write_summary
from heterosim.sweep.task import ERROR, OK, RunTask, error_record, prepare_task

EXECUTORS = ("local", "ray")
MAX_WORKERS = 256  # local processes; each loads the simulator (about 0.4 GB)
LogFn = Callable[[str], None]


@dataclass
class SweepOutcome:
    """What one invocation of a sweep did."""

    variants: int = 0
    skipped: int = 0  # already in the store
    ran: list[str] = field(default_factory=list)  # ids finished in this invocation
    failed: list[str] = field(default_factory=list)  # ids recorded as errors in this invocation
    summary: dict[str, Any] = field(default_factory=dict)


def _manifest(spec: SweepSpec, variants: list[Variant]) -> dict[str, Any]:
    return {
        "name": spec.name,
        "source": str(spec.source),
        "experiment": str(spec.experiment),
        "fidelity": spec.fidelity,
        "set": spec.fixed,
        "grid": spec.grid,
        "metrics": list(spec.metrics),
        "variants": [
            {"id": v.id, "index": v.index, "point": v.point, "overrides": v.overrides} for v in variants
        ],
    }


def _check_resume(out_dir: Path, spec: SweepSpec, store: ResultStore, resume: bool) -> None:
    if not store.exists():
        return
    if not resume:
        raise UserError(
            f"--out {out_dir}: already holds results of a sweep; pass --resume to "
            f"continue it, or choose another --out"
        )
    previous = read_manifest(out_dir / "sweep.json", {"experiment": str})
    if previous is not None:
        if previous.get("experiment") != str(spec.experiment):
            raise UserError(
                f"--resume: {out_dir} holds a sweep of {previous.get('experiment')}, not "
                f"{spec.experiment}; choose another --out"
            )


def _check_executor(executor: str, workers: int | None) -> None:
    """``--executor`` and ``--workers``, before any work (Ray's import too)."""
    if executor not in EXECUTORS:
        raise UserError(f"--executor {executor}: expected one of {', '.join(EXECUTORS)}")
    if executor == "ray":
        from heterosim.sweep.ray_executor import import_ray

        import_ray()  # fail before any work if the extra is missing
    if workers is not None and not 1 <= workers <= MAX_WORKERS:
        raise UserError(f"--workers {workers}: expected 1..{MAX_WORKERS} worker processes")


def _open_output(out_dir: Path) -> None:
    """Create and mark ``out_dir``; a new sweep never writes into a folder of the user's."""
    if out_dir.exists() and not out_dir.is_dir():
        raise UserError(f"--out {out_dir}: exists and is not a folder")
    if not (out_dir / "results.jsonl").is_file():  # a new sweep: never into a user's folder
        check_output_folder(out_dir)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        mark_output_folder(out_dir)
    except OSError as exc:
        raise UserError(f"--out {out_dir}: cannot write there: {exc.strerror or exc}") from None


@dataclass
class _Finisher:
    """Records each finished task: its results file, its store record, the outcome, progress."""

    out_dir: Path
    spec: SweepSpec
    store: ResultStore
    outcome: SweepOutcome
    progress: TaskProgress
    by_id: dict[str, Variant]

    def __call__(self, task: RunTask, record: dict[str, Any]) -> None:
        variant = self.by_id[task.id]
        results = record.pop("results", None)
        if results is not None:
            write_json_atomically(self.out_dir / "runs" / variant.id / "results.json", results)
            record["results_path"] = f"runs/{variant.id}/results.json"
            record["metrics"] = metric_values(results, self.spec.metrics)
        record.update({"index": variant.index, "point": variant.point, "overrides": variant.overrides})
        self.store.append(record)
        self.outcome.ran.append(variant.id)
        if record["status"] != OK:
            self.outcome.failed.append(variant.id)
        metrics = record.get("metrics") or {}
        detail = (
            f"iteration {metrics['iteration_time_s'] * 1e3:.3f} ms"
            if record["status"] == OK and metrics.get("iteration_time_s") is not None
            else record.get("error") or ""
        )
        label = f"{record['status']:<7} {variant.id}  {variant.label()}"
        self.progress.done(label, detail, record.get("run_wall_s"))


def run_sweep(
    spec: SweepSpec,
    out_dir: str | Path,
    *,
    executor: str = "local",
    workers: int | None = None,
    address: str | None = None,
    resume: bool = False,
    retry_failed: bool = False,
    plots: bool = True,
    log: LogFn | None = None,
) -> SweepOutcome:
    """Run every variant of ``spec`` not yet in ``out_dir``'s store; return what was done."""
    _check_executor(executor, workers)
    check_sweep_keys(spec)
    log = log or (lambda _msg: None)
    out_dir = Path(out_dir)
    _open_output(out_dir)
    store = ResultStore(out_dir / "results.jsonl")
    _check_resume(out_dir, spec, store, resume)
    variants = spec.variants()
    write_json_atomically(out_dir / "sweep.json", _manifest(spec, variants))
    log(
        f"heterosim sweep: {spec.name}: {len(variants)} variants of {spec.experiment.name} "
        f"({executor} executor) -> {out_dir}/"
    )

    done = store.latest()
    todo = [v for v in variants if v.id not in done or (retry_failed and done[v.id].get("status") == ERROR)]
    outcome = SweepOutcome(variants=len(variants), skipped=len(variants) - len(todo))
    total = len(todo)
    parallel = (workers or spec.workers or default_workers()) if executor == "local" else total
    progress = TaskProgress("sweep", total, workers=parallel, emit=log)
    if outcome.skipped:
        log(f"{outcome.skipped} of {len(variants)} variants already done; running {total}")
    finish = _Finisher(out_dir, spec, store, outcome, progress, {v.id: v for v in variants})

    tasks: list[RunTask] = []
    try:
        with sigterm_as_interrupt():
            _run_tasks(todo, tasks, finish, spec, executor, workers, address)
    except KeyboardInterrupt as exc:  # Ctrl-C or SIGTERM: workers are stopped; say what is kept
        reason, status = interrupt_status(exc)
        raise Interrupted(
            f"{reason}: {len(outcome.ran)} of {total} variants finished and are "
            f"recorded in {out_dir}/results.jsonl; --resume runs the rest",
            status,
        ) from None
    finally:
        outcome.summary = write_summary(out_dir, variants, store.latest(), spec.metrics, plots=plots)
    return outcome


def check_sweep_keys(spec: SweepSpec) -> None:
    """Each ``set`` and ``grid`` key tried alone on the base experiment, before any variant runs.

    A key the base cannot take whatever its value (a list index out of range, a key under a
    value that is not a mapping, a key no reader knows, such as ``training.micro_batch`` on a
    several-jobs file) would fail every variant: the sweep file itself is wrong, so it is one
    error naming the sweep file and the key. A bad value (or one that needs another grid key's
    value) stays an error of its own variants.
    """
    source, experiment = str(spec.source), spec.experiment
    base = read_yaml_mapping(experiment)
    fixed = [(f"set.{key}", key, value) for key, value in spec.fixed.items()]
    grid = [(f"grid.{key}", key, values[0]) for key, values in spec.grid.items()]
    with_fixed = base
    for where, key, value in fixed + grid:
        item = f"{key}={json.dumps(resolve_value(key, value, spec.base_dir))}"
        try:
            data = apply_overrides(with_fixed, [item], str(experiment))
        except UserError as exc:
            reason = str(exc).removeprefix(f"--set {item!r}: ")
            raise UserError(f"{source}: {where}: {reason}") from None
        if where.startswith("set."):
            with_fixed = data
        try:
            parse_any_experiment(data, str(experiment), base_dir=experiment.parent)
        except UnknownKeyError as exc:
            unknown = _dotted_key(exc, str(experiment))
            if key == unknown or key.startswith(f"{unknown}."):
                raise UserError(f"{source}: {where}: {exc}") from None
        except UserError:
            pass  # a bad value: its variants record the error


def _dotted_key(exc: UnknownKeyError, experiment: str) -> str:
    """The unknown key as a dotted override key: ``jobs[0]: experiment`` + ``training.x`` ->
    ``jobs.0.experiment.training.x`` (an inline job's experiment names its place as its source)."""
    place = exc.source.removeprefix(experiment).removeprefix(": ") if exc.source != experiment else ""
    dotted = ".".join(p for p in (place.replace(": ", "."), exc.key_path) if p)
    return re.sub(r"\[(\d+)\]", r".\1", dotted)


def _run_tasks(
    todo: list[Variant],
    tasks: list[RunTask],
    finish: Callable[[RunTask, dict[str, Any]], None],
    spec: SweepSpec,
    executor: str,
    workers: int | None,
    address: str | None,
) -> None:
    """Prepare every variant's task (a bad one is recorded as an error) and run them."""
    for variant in todo:
        try:
            tasks.append(
                prepare_task(
                    spec.experiment,
                    variant.override_strings(spec.base_dir),
                    task_id=variant.id,
                    label=variant.label(),
                )
            )
        except UserError as exc:
            finish(
                RunTask(id=variant.id, label=variant.label(), source=str(spec.experiment), data={}),
                error_record(variant.id, variant.label(), str(exc).strip().splitlines()[0]),
            )
    fidelities = {fidelity_of(task.data) for task in tasks}
    for line in no_effect_warnings(spec.grid, fidelities, "the sweep's variants"):
        print(f"heterosim sweep: warning: {line}", file=sys.stderr, flush=True)
    if executor == "ray":
        from heterosim.sweep.ray_executor import run_ray

        run_ray(tasks, finish, address=address)
    else:
        from heterosim.sweep.local import run_local

        run_local(tasks, finish, workers=workers or spec.workers)
