"""Prune candidates before simulating: validity rules and the memory model, reason recorded.

A candidate is parsed as the experiment file would be (divisibility, head counts, GPU counts,
ZeRO rules: the config's own one-line error becomes the reason), then laid out and partitioned
by the workload layer (the caller's ``workload_fn``) with ``simulation.memory_check: error``
(the partitioner's memory model: weights, gradients, optimizer states and in-flight activations
per rank, see heterosim/workload/memory.py); a rank over its GPU's memory prunes it with that
message. The survivors carry their partition and per-GPU-type peak memory for ranking and
printing.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from heterosim.config.experiment import ExperimentConfig, parse_experiment
from heterosim.errors import UserError
from heterosim.search.candidates import Candidate
from heterosim.workload.generator import Workload
from heterosim.workload.memory import estimate_rank_memory

INVALID, MEMORY = "invalid", "memory"
WorkloadFn = Callable[[ExperimentConfig], Workload]


@dataclass
class Assessment:
    """A candidate after pruning: pruned with a reason, or its experiment and partition."""

    candidate: Candidate
    pruned: str | None = None  # invalid | memory
    reason: str = ""
    experiment: ExperimentConfig | None = None
    workload: Workload | None = None
    memory_bytes: dict[str, int] = field(default_factory=dict)  # GPU type -> largest rank peak
    stage_params: list[int] = field(default_factory=list)  # most parameters a rank of each stage holds

    @property
    def ok(self) -> bool:
        return self.pruned is None


def _strip_source(message: str, source: str) -> str:
    first = message.strip().splitlines()[0] if message.strip() else message
    prefix = f"{source}: "
    return first[len(prefix) :] if source and first.startswith(prefix) else first


def memory_by_gpu(exp: ExperimentConfig, workload: Workload) -> tuple[dict[str, int], list[int]]:
    """Largest estimated peak memory of any rank per GPU type (bytes), and per pipeline stage the
    most parameters one of its ranks holds (its gradient reduction volume)."""
    layout, part = workload.layout, workload.partition
    par = exp.parallel
    out: dict[str, int] = {}
    params = [0] * part.pp
    done: set[tuple] = set()
    for rank in range(layout.world_size):
        stage, replica = layout.pp_index(rank), layout.dp_index(rank)
        gpu = workload.gpu_type(rank)
        tp = layout.tp_degree(rank) or par.tp
        key = (stage, replica if par.plan is not None else 0, gpu, tp)
        if key in done:
            continue
        done.add(key)
        m = part.replica_micro_batches[replica]
        in_flight = m if par.schedule == "gpipe" else min(par.pp - stage, m)
        if par.schedule == "interleaved":
            in_flight = m  # conservative; search candidates never interleave
        layers = [layer for rng in part.stage_layers(stage) for layer in rng]
        last = (part.vpp - 1) * part.pp + stage == part.pp * part.vpp - 1
        rank_par = workload.rank_parallel(rank)
        est = estimate_rank_memory(
            exp.model, exp.training, rank_par, layers, stage == 0, last, max(1, in_flight)
        )
        out[gpu] = max(out.get(gpu, 0), int(est.total_bytes))
        params[stage] = max(params[stage], int(est.params))
    return out, params


def assess(
    candidate: Candidate, base: dict[str, Any], source: str, base_dir: Path | None, workload_fn: WorkloadFn
) -> Assessment:
    """Validate, lay out and memory-check one candidate (see module docstring).
    ``workload_fn`` generates an experiment's workload (layout, partition; explicit plans placed),
    e.g. :func:`heterosim.simulate.generate_experiment_workload`."""
    data = candidate.experiment_data(base)
    sim = dict(data.get("simulation") or {})
    sim["memory_check"] = "error"
    data["simulation"] = sim
    try:
        exp = parse_experiment(copy.deepcopy(data), source, base_dir=base_dir)
    except UserError as exc:
        return Assessment(candidate, INVALID, _strip_source(str(exc), source))
    try:
        workload = workload_fn(exp)
    except UserError as exc:
        message = _strip_source(str(exc), source)
        kind = MEMORY if "memory" in message else INVALID
        return Assessment(candidate, kind, message)
    memory, params = memory_by_gpu(exp, workload)
    return Assessment(candidate, None, "", exp, workload, memory, params)
