"""One typed entry point per kind of run; the only layer that calls workload, plan and engine.

- :func:`run_experiment` (:mod:`.experiment`): one training iteration of an experiment
  (``heterosim run``, ``compare``, ``sweep``, ``validate``'s end-to-end cases);
- :func:`simulate_collective` / :func:`simulate_collective_sizes` (:mod:`.collective`): one
  collective, or a size range, nccl-tests style (``heterosim collective``, ``validate``'s
  collective cases);
- :func:`simulate_flow_set` / :func:`run_netbench` (:mod:`.flowset`): a scenario's flows on the
  network alone, once or once per congestion control (``heterosim netbench``);
- :func:`run_jobs` / :func:`run_any` (:mod:`.jobs`): several jobs sharing one cluster
  (``jobs:``), their flows contending on one network; :func:`run_for_reports` (``heterosim
  run``): :func:`run_any`, then the plan's schedule freed for the reports.

A search over plans (``heterosim plan``) is many runs, not one: it lives above this package and the
sweep executors, in :mod:`heterosim.search.plan_search`.

Each returns a dataclass (:mod:`heterosim.results`) and takes the run's settings as one
:class:`~heterosim.config.experiment.SimulationConfig` (:func:`engine_config` builds one for the
fidelity its caller names). Commands only parse arguments, call one of these and print. A new kind of
run gets its own module here with its own result type.
"""

from __future__ import annotations

from heterosim.engine.executor import engine_config
from heterosim.results import CollectiveResult, CollectiveSpec, FlowSetRun, PreparedRun, RunArtifacts
from heterosim.simulate.collective import decompose_spec, simulate_collective, simulate_collective_sizes
from heterosim.simulate.experiment import (
    ProgressFn,
    generate_experiment_workload,
    intra_host_note,
    prepare_run,
    run_experiment,
)
from heterosim.simulate.flowset import run_netbench, simulate_flow_set
from heterosim.simulate.jobs import JobsArtifacts, run_any, run_for_reports, run_jobs

__all__ = [
    "CollectiveResult",
    "CollectiveSpec",
    "FlowSetRun",
    "JobsArtifacts",
    "PreparedRun",
    "ProgressFn",
    "RunArtifacts",
    "decompose_spec",
    "engine_config",
    "generate_experiment_workload",
    "intra_host_note",
    "prepare_run",
    "run_any",
    "run_for_reports",
    "run_experiment",
    "run_jobs",
    "run_netbench",
    "simulate_collective",
    "simulate_collective_sizes",
    "simulate_flow_set",
]
