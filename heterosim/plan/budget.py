"""Estimated size of an experiment's plan, from the configuration alone, before it is built.

:func:`heterosim.config.limits.experiment_task_floor` counts what certainly exists with one flow
per ring step; this estimate decomposes one representative collective of each kind with the
experiment's own network settings (algorithm, protocol, channels, granularity), exactly as the
plan builder will, and multiplies by how many the workload issues:

* tensor parallelism: 4 collectives per layer and micro-batch (Megatron-LM: two in the forward,
  two in the backward pass) of ``micro_batch x seq_len x hidden`` 2-byte activations, in every
  tensor-parallel group;
* data parallelism: the rank's gradients (12 h^2 parameters per layer, 2 bytes each) in
  ``dp_bucket`` buckets, each one all-reduce over the data-parallel group;
* compute: one forward and one backward op per layer and micro-batch.

The estimate ignores pipeline sends, embeddings, optimizer steps and MoE all-to-alls (so it is
low for MoE models) and assumes consecutive ranks share a tensor-parallel group. Against plans
actually built (chunk granularity): tiny 16-GPU experiment 0.59 M estimated / 0.71 M tasks
(gb 64), 2.37 M / 2.84 M (gb 256); GPT-3 13B TP2 DP64 45 M / 49.3 M flows and GPT-3 175B TP8 PP8
DP2 10 M / 5.8 M flows (benchmarks/README.md) -- within a factor of two either way. Measured
memory per task: 268 bytes (tiny 16-GPU experiment at 0.71 M and 2.84 M tasks, flow fidelity,
no plots: peak RSS 0.60 GB and 1.16 GB); :data:`BYTES_PER_TASK` keeps that figure.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from heterosim.config.limits import MAX_TASKS, check_sample_budget, memory_budget_bytes
from heterosim.errors import UserError
from heterosim.plan.collectives.decompose import decompose_collective
from heterosim.plan.execution_plan import COMPUTE, ExecutionPlan
from heterosim.units import format_size

BYTES_PER_TASK = 268
BASE_BYTES = 400 << 20  # the interpreter, numpy, the ns-3 libraries


def _flows(experiment: Any, op: str, size_bytes: int, gpus: list[int]) -> int:
    if len(gpus) < 2 or size_bytes <= 0:
        return 0
    network = experiment.network
    plan = decompose_collective(
        op,
        int(size_bytes),
        gpus,
        experiment.cluster,
        algorithm=network.collective_algorithm,
        protocol=network.collective_protocol,
        channels=network.channels,
        strict=False,
        granularity=experiment.simulation.collective_granularity,
    )
    return int(plan.num_flows)


def estimate_plan_tasks(experiment: Any) -> dict[str, float]:
    """Estimated tasks by term: ``compute``, ``tensor_parallel``, ``data_parallel``. Under
    ``simulation.replicas: fold`` the plan holds one replica's ranks, and each data-parallel
    collective is a start and an end marker per rank (:mod:`heterosim.plan.fold`)."""
    train, par, model = experiment.training, experiment.parallel, experiment.model
    world = experiment.cluster.world_size
    folded = getattr(experiment.simulation, "replicas", "all") == "fold" and par.dp > 1
    if folded:
        world = max(1, world // par.dp)
    iterations = experiment.simulation.iterations
    micro_batches = train.global_batch / max(1, train.micro_batch * par.dp)
    layers_per_rank = math.ceil(model.layers / max(1, par.pp))
    tp_gpus = list(range(min(par.tp, world)))
    dp_gpus = [r * par.tp for r in range(par.dp) if r * par.tp < world]
    activation = min(train.micro_batch * train.seq_len * model.hidden * 2, 1 << 40)
    tp_instances = 4.0 * micro_batches * layers_per_rank * (world / par.tp)
    grad_bytes = 2.0 * 12 * model.hidden * model.hidden * layers_per_rank / par.tp
    buckets = max(1, math.ceil(grad_bytes / max(1, par.dp_bucket_bytes)))
    bucket = min(int(grad_bytes / buckets), 1 << 40)
    return {
        "compute": 2.0 * micro_batches * layers_per_rank * world * iterations,
        "tensor_parallel": tp_instances * _flows(experiment, "allreduce", activation, tp_gpus) * iterations,
        "data_parallel": (
            world * buckets * 2.0 * iterations
            if folded
            else (world / par.dp) * buckets * _flows(experiment, "allreduce", bucket, dp_gpus) * iterations
        ),
    }


def check_plan_budget(experiment: Any, stop_ns: int | None = None) -> None:
    """A one-line UserError when the estimated plan, or its time series, does not fit the memory
    budget, naming the term that dominates (and the key that drives it). ``stop_ns``
    (``--until``) caps the simulated time the time series cover
    (:func:`heterosim.config.limits.check_sample_budget`; checked after the task count and before
    the plan's memory, so neither message depends on the machine's free memory). Several jobs:
    the time series only (each job's plan is checked when its workload is built)."""
    if getattr(experiment, "jobs", None) is not None:
        check_sample_budget(experiment, stop_ns)
        return
    terms = estimate_plan_tasks(experiment)
    tasks = sum(terms.values())
    source = experiment.source or "experiment"
    name = max(terms, key=lambda k: terms[k])
    train, par = experiment.training, experiment.parallel
    micro_batches = train.global_batch / max(1, train.micro_batch * par.dp)
    layers = math.ceil(experiment.model.layers / max(1, par.pp))
    key = {
        "compute": "training.global_batch x model.layers",
        "tensor_parallel": "training.global_batch x model.layers (tensor-parallel all-reduces)",
        "data_parallel": "parallel.dp_bucket (data-parallel gradient buckets)",
    }[name]
    detail = f"{micro_batches:.3g} micro-batches per replica x {layers} layers per rank; " + ", ".join(
        f"{k} {v:.3g}" for k, v in terms.items()
    )
    if tasks > MAX_TASKS:
        raise UserError(
            f"{source}: {key}: about {tasks:.3g} tasks ({detail}); at most {MAX_TASKS:,} can be simulated"
        )
    check_sample_budget(experiment, stop_ns)
    needed = BASE_BYTES + tasks * BYTES_PER_TASK
    budget, why = memory_budget_bytes()
    if needed > budget:
        raise UserError(
            f"{source}: {key}: about {tasks:.3g} tasks ({detail}) need about "
            f"{format_size(needed)} of memory; {why} is {format_size(budget)} "
            "(simulation.collective_granularity=connection needs the least)"
        )


def plan_time_floor_ns(plan: ExecutionPlan) -> float:
    """Lower bound of a built plan's simulated time, in ns: the busiest compute stream's summed
    task durations (a (GPU, stream) queue runs one task at a time). Framework overheads are in
    the durations, so a run of hours of host time per op is known before the engine starts."""
    compute = (plan.kind == COMPUTE) & (plan.gpu >= 0)
    if not compute.any():
        return 0.0
    streams = int(plan.stream[compute].max()) + 1
    queue = plan.gpu[compute].astype(np.int64) * streams + plan.stream[compute].astype(np.int64)
    busy = np.bincount(queue, weights=plan.duration_ns[compute].astype(np.float64))
    return float(busy.max())


def check_plan_sample_budget(
    experiment: Any, plan: ExecutionPlan, stop_ns: int | None = None, interval_ns: int | None = None
) -> None:
    """The time-series bound of :func:`~heterosim.config.limits.check_sample_budget` again, once
    the plan is built, over :func:`plan_time_floor_ns` (which sees every op and its framework
    overhead, where the configuration's floor counts two ops per layer): the progress series
    never outgrows the memory budget (``--max-memory``) during a long simulated run."""
    check_sample_budget(
        experiment,
        stop_ns,
        floor_ns=plan_time_floor_ns(plan),
        basis="the busiest GPU's compute stream in the plan",
        interval_ns=interval_ns,
    )
