"""The Python API, for notebooks and scripts (``docs/python_api.md``).

Load an experiment (with overrides, as ``--set`` takes them), run it with
:func:`run_experiment`, and turn each run into a flat row with :func:`result_row`; a list of rows
becomes a pandas DataFrame with :func:`rows_to_dataframe` where pandas is installed::

    from heterosim import api

    rows = []
    for bucket in ("10MB", "40MB"):
        experiment = api.load_experiment(overrides=[f"parallel.dp_bucket={bucket}"], fidelity="flow")
        rows.append(api.result_row(api.run_experiment(experiment), bucket=bucket))

Row keys are results.json's dotted keys (``iteration_time_s``, ``breakdown.compute_s``, ...),
the names ``sweep`` and ``compare`` use, in seconds, bytes and counts.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from heterosim.config.defaults import default_experiment
from heterosim.config.experiment import ExperimentConfig
from heterosim.config.experiment import load_experiment as _load_experiment
from heterosim.errors import UserError
from heterosim.report.compare_report import COMPARED_METRICS, lookup
from heterosim.report.jobs_report import any_results_dict, write_any_outputs
from heterosim.simulate import RunArtifacts, run_experiment

__all__ = [
    "ROW_METRICS",
    "ExperimentConfig",
    "RunArtifacts",
    "load_experiment",
    "result_row",
    "results_of",
    "rows_to_dataframe",
    "run_experiment",
    "write_outputs",
]

ROW_METRICS: tuple[str, ...] = tuple(key for key, _, _ in COMPARED_METRICS) + ("sim.wall_s",)
RowValue = str | int | float | bool | None


def load_experiment(
    path: str | Path | None = None, overrides: Sequence[str] = (), fidelity: str | None = None
) -> ExperimentConfig:
    """The experiment in ``path`` (default: the shipped ``workloads/default.yaml``) with
    ``KEY=VALUE`` overrides and, if given, ``simulation.fidelity``; a bad value raises
    :class:`~heterosim.errors.UserError` naming the key."""
    items = list(overrides) + ([f"simulation.fidelity={fidelity}"] if fidelity else [])
    return _load_experiment(path if path is not None else default_experiment(), items)


def results_of(artifacts: RunArtifacts) -> dict[str, Any]:
    """What ``heterosim run`` writes to results.json, as a dict."""
    return any_results_dict(artifacts)


def result_row(run: RunArtifacts | dict[str, Any], **labels: RowValue) -> dict[str, RowValue]:
    """One flat row: ``labels`` first (the swept values), then :data:`ROW_METRICS` of the run
    (a run's artifacts or its results dict); a partial run's iteration time is None."""
    results = run if isinstance(run, dict) else results_of(run)
    row: dict[str, RowValue] = dict(labels)
    row.update({key: lookup(results, key) for key in ROW_METRICS})
    return row


def rows_to_dataframe(rows: Sequence[dict[str, RowValue]]) -> Any:
    """The rows as a ``pandas.DataFrame`` (one column per key); needs pandas installed."""
    try:
        pandas = importlib.import_module("pandas")  # optional: only this function needs it
    except ModuleNotFoundError:
        raise UserError("rows_to_dataframe needs pandas (pip install pandas); rows are plain dicts") from None
    return pandas.DataFrame.from_records(list(rows))


def write_outputs(artifacts: RunArtifacts, out_dir: str | Path, plots: bool = True) -> Path:
    """Write every file ``heterosim run --out OUT_DIR`` writes (results.json, CSVs, trace, plots)."""
    out = Path(out_dir)
    write_any_outputs(artifacts, out, results_of(artifacts), plots=plots)
    return out
