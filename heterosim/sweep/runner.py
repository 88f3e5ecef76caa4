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
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from heterosim.config.fidelity_scope import fidelity_of, no_effect_warnings
from heterosim.errors import Interrupted, UserError
from heterosim.interrupts import interrupt_status, sigterm_as_interrupt
from heterosim.report.staging import check_output_folder, mark_output_folder, write_file_atomically
from heterosim.report.task_progress import TaskProgress
from heterosim.sweep.grid import SweepSpec, Variant
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


def _write_json(path: Path, data: Any) -> None:
    write_file_atomically(path, json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")


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
    if executor not in EXECUTORS:
        raise UserError(f"--executor {executor}: expected one of {', '.join(EXECUTORS)}")
    if executor == "ray":
        from heterosim.sweep.ray_executor import import_ray

        import_ray()  # fail before any work if the extra is missing
    if workers is not None and not 1 <= workers <= MAX_WORKERS:
        raise UserError(f"--workers {workers}: expected 1..{MAX_WORKERS} worker processes")
    log = log or (lambda _msg: None)
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise UserError(f"--out {out_dir}: exists and is not a folder")
    if not (out_dir / "results.jsonl").is_file():  # a new sweep: never into a user's folder
        check_output_folder(out_dir)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        mark_output_folder(out_dir)
    except OSError as exc:
        raise UserError(f"--out {out_dir}: cannot write there: {exc.strerror or exc}") from None
    store = ResultStore(out_dir / "results.jsonl")
    _check_resume(out_dir, spec, store, resume)
    variants = spec.variants()
    _write_json(out_dir / "sweep.json", _manifest(spec, variants))
    log(
        f"heterosim sweep: {spec.name}: {len(variants)} variants of {spec.experiment.name} "
        f"({executor} executor) -> {out_dir}/"
    )

    done = store.latest()
    todo = [v for v in variants if v.id not in done or (retry_failed and done[v.id].get("status") == ERROR)]
    outcome = SweepOutcome(variants=len(variants), skipped=len(variants) - len(todo))
    by_id = {v.id: v for v in variants}
    total = len(todo)
    parallel = (workers or spec.workers or default_workers()) if executor == "local" else total
    progress = TaskProgress("sweep", total, workers=parallel, emit=log)
    if outcome.skipped:
        log(f"{outcome.skipped} of {len(variants)} variants already done; running {total}")

    def finish(task: RunTask, record: dict[str, Any]) -> None:
        variant = by_id[task.id]
        results = record.pop("results", None)
        if results is not None:
            _write_json(out_dir / "runs" / variant.id / "results.json", results)
            record["results_path"] = f"runs/{variant.id}/results.json"
            record["metrics"] = metric_values(results, spec.metrics)
        record.update({"index": variant.index, "point": variant.point, "overrides": variant.overrides})
        store.append(record)
        outcome.ran.append(variant.id)
        if record["status"] != OK:
            outcome.failed.append(variant.id)
        metrics = record.get("metrics") or {}
        detail = (
            f"iteration {metrics['iteration_time_s'] * 1e3:.3f} ms"
            if record["status"] == OK and metrics.get("iteration_time_s") is not None
            else record.get("error") or ""
        )
        label = f"{record['status']:<7} {variant.id}  {variant.label()}"
        progress.done(label, detail, record.get("run_wall_s"))

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
