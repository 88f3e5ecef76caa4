"""One run of a sweep or comparison, as a picklable task a worker process (or Ray worker) executes.

The driver prepares each task: it reads the base experiment, applies the variant's overrides and
validates the result (so a bad override is reported at once, without using a worker), then
inlines the cluster file, so the task carries everything the run needs and a Ray worker on
another machine does not need the driver's files. The worker parses the mapping again, runs
:func:`~heterosim.simulate.run_experiment` and returns a record; any error in the run becomes an
``error`` record instead of an exception, so one failing variant never stops the others.
"""

from __future__ import annotations

import copy
import os
import socket
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from heterosim.config.experiment import apply_overrides
from heterosim.config.fields import read_yaml_mapping
from heterosim.config.jobs import parse_any_experiment
from heterosim.errors import UserError
from heterosim.plan.budget import check_plan_budget

OK, ERROR, PARTIAL = "ok", "error", "partial"


@dataclass(frozen=True)
class RunTask:
    """Everything a worker needs to run one experiment variant."""

    id: str
    label: str
    source: str  # the experiment file, for messages and results.json
    data: dict[str, Any]  # the experiment mapping: overrides applied, cluster inlined
    overrides: list[str] = field(default_factory=list)  # echoed into results.json
    out_dir: str | None = None  # the worker writes every run output here (its own file system)
    plots: bool = False


def one_line(exc: BaseException) -> str:
    """The first line of an exception's message; the type name for anything but a UserError."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    if isinstance(exc, UserError):
        return text or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def prepare_task(
    experiment_path: str | Path,
    overrides: list[str],
    *,
    task_id: str,
    label: str,
    out_dir: str | Path | None = None,
    plots: bool = False,
) -> RunTask:
    """Read, override and validate an experiment; return the task (UserError if invalid)."""
    path = Path(experiment_path)
    data = apply_overrides(read_yaml_mapping(path), overrides, str(path))
    parsed = parse_any_experiment(copy.deepcopy(data), str(path), base_dir=path.parent)
    check_plan_budget(parsed)  # several jobs: the time series here, each job's plan when it is built
    cluster = data.get("cluster")
    if isinstance(cluster, str):
        cluster_path = Path(cluster)
        if not cluster_path.is_absolute():
            cluster_path = path.parent / cluster_path
        data["cluster"] = read_yaml_mapping(cluster_path)
    for job in data.get("jobs") or []:  # several jobs: inline each job's experiment file too
        if isinstance(job, dict) and isinstance(job.get("experiment"), str):
            job_path = Path(job["experiment"])
            if not job_path.is_absolute():
                job_path = path.parent / job_path
            inlined = read_yaml_mapping(job_path)
            inlined.pop("cluster", None)
            job["experiment"] = inlined
    return RunTask(
        id=task_id,
        label=label,
        source=str(path),
        data=data,
        overrides=list(overrides),
        out_dir=str(out_dir) if out_dir is not None else None,
        plots=plots,
    )


def error_record(task_id: str, label: str, message: str, trace: str | None = None) -> dict[str, Any]:
    """The record of a variant that did not produce results."""
    record: dict[str, Any] = {"id": task_id, "label": label, "status": ERROR, "error": message}
    if trace:
        record["traceback"] = trace
    return record


def execute_task(task: RunTask) -> dict[str, Any]:
    """Run one task in this process; return its record (``results`` holds results.json content)."""
    from heterosim.report.jobs_report import any_results_dict, write_any_outputs
    from heterosim.simulate import run_any

    started = time.perf_counter()
    where = {"host": socket.gethostname(), "pid": os.getpid()}
    try:
        experiment = parse_any_experiment(
            copy.deepcopy(task.data), task.source, base_dir=Path(task.source).parent
        )
        artifacts = run_any(experiment)
        results = any_results_dict(artifacts)
        results["experiment"]["overrides"] = list(task.overrides)
        if task.out_dir is not None:
            write_any_outputs(artifacts, Path(task.out_dir), results, plots=task.plots)
    except UserError as exc:
        record = error_record(task.id, task.label, one_line(exc))
    except Exception as exc:  # a bug or an engine failure: keep the sweep going, keep the trace
        record = error_record(task.id, task.label, one_line(exc), traceback.format_exc())
    else:
        partial = bool(results["sim"].get("partial"))
        record = {
            "id": task.id,
            "label": task.label,
            "status": PARTIAL if partial else OK,
            "error": "the run stopped early; results are partial" if partial else None,
            "results": results,
        }
    record.update(where)
    record["run_wall_s"] = time.perf_counter() - started
    return record
