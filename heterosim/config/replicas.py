"""``simulation.replicas: fold``: what an experiment needs for its replicas to be folded into one.

Folding (heterosim/plan/fold.py) simulates data-parallel replica 0 and times the data-parallel
collectives on the full fabric; it is only sound when every replica runs the same program on
hardware of the same shape. Here the experiment-level conditions are checked; the communicator
and placement ones (one rank per replica, same GPU slots and host pattern) are checked when the
plan is built.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from heterosim.errors import UserError

if TYPE_CHECKING:
    from heterosim.config.experiment import ExperimentConfig

KEY = "simulation.replicas"
TIMING_KEY = "simulation.fold_timing"


def fold_refusal(experiment: ExperimentConfig) -> str | None:
    """Why ``experiment``'s replicas cannot be folded (None: they can, as far as the file says)."""
    par = experiment.parallel
    if par.plan is not None:
        return "an explicit plan (parallel.stages) may give replicas different programs"
    if par.dp < 2:
        return "needs parallel.dp >= 2"
    if par.cp > 1:
        return "parallel.cp > 1: the gradient reduction spans context-parallel ranks of one replica"
    if par.ep > 1:
        return "parallel.ep > 1: expert-parallel groups span replicas"
    if experiment.faults:
        return "faults make replicas differ"
    if len(set(experiment.cluster.gpu_type)) > 1:
        return "the cluster has more than one GPU type"
    return None


def fold_timing_refusal(experiment: ExperimentConfig) -> str | None:
    """Why ``simulation.fold_timing: representative`` cannot be used (None: it can):
    heterosim/simulate/fold_symmetry.py needs folding and a two-tier fabric in one zone, where
    communicators attached to different leaves share no link."""
    if experiment.simulation.replicas != "fold":
        return f"needs {KEY}: fold"
    cluster = experiment.cluster
    if cluster.zones:
        return "the cluster has zones (zone links are shared by every zone-crossing flow)"
    if cluster.fabric.kind == "rail-only":
        return "a rail-only fabric forwards across rails through other GPUs' ports (PXN)"
    return None


def check_replica_folding(experiment: ExperimentConfig) -> None:
    """A one-line UserError naming ``simulation.replicas`` where ``fold`` is asked for and refused
    (``simulation.fold_timing`` where ``representative`` is)."""
    source = experiment.source or "experiment"
    if experiment.simulation.fold_timing != "all":
        why = fold_timing_refusal(experiment)
        if why is not None:
            raise UserError(
                f"{source}: {TIMING_KEY}: {experiment.simulation.fold_timing}: {why}; use {TIMING_KEY}=all"
            )
    if experiment.simulation.replicas != "fold":
        return
    reason = fold_refusal(experiment)
    if reason is not None:
        raise UserError(f"{source}: {KEY}: fold: {reason}; use {KEY}=all")
