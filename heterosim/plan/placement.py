"""Placement: which physical GPU runs each rank.

Default: rank r on global GPU r (cluster order: host 0's GPUs first). With Megatron's rank order
(TP fastest, then DP/PP) and TP dividing the GPUs per host, every TP group then sits inside one
host and each GPU's NIC follows from the cluster file (``cluster.gpu_nic``).
A custom map lists the GPU of every rank; it must place every rank exactly once on a valid GPU.

An explicit plan (``parallel.stages``) is placed as written (:func:`place_plan`): ranks stage by
stage, replica by replica; each replica takes free GPUs of its type in cluster order, its whole
TP group on the first host (in cluster order) with that many free GPUs of the type, or, when no
host has room (TP larger than a host, or hosts partly taken), the first free GPUs of the type in
cluster order across hosts.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from heterosim.config.cluster import ClusterConfig
from heterosim.config.experiment import StagedPlan
from heterosim.errors import UserError


def place_ranks(
    cluster: ClusterConfig,
    world_size: int,
    *,
    custom: Sequence[int] | np.ndarray | None = None,
    source: str = "placement",
) -> np.ndarray:
    """int64 array: global GPU of every rank 0..world_size-1 (see module docstring)."""
    if world_size < 1:
        raise UserError(f"{source}: world_size: expected at least 1 rank, got {world_size}")
    if world_size > cluster.world_size:
        raise UserError(
            f"{source}: world_size: {world_size} ranks do not fit on the cluster's {cluster.world_size} GPUs"
        )
    if custom is None:
        return np.arange(world_size, dtype=np.int64)
    if isinstance(custom, (str, bytes)) or not all(
        isinstance(x, (int, np.integer)) and not isinstance(x, bool) for x in custom
    ):
        raise UserError(f"{source}: custom: expected a list of integer GPU ids, one per rank")
    gpus = np.asarray(list(custom), dtype=np.int64)
    if gpus.size != world_size:
        raise UserError(f"{source}: custom: expected {world_size} GPU ids (one per rank), got {gpus.size}")
    bad = np.flatnonzero((gpus < 0) | (gpus >= cluster.world_size))
    if bad.size:
        raise UserError(
            f"{source}: custom[{int(bad[0])}]: GPU {int(gpus[bad[0]])} does not exist "
            f"(cluster has GPUs 0..{cluster.world_size - 1})"
        )
    values, first, counts = np.unique(gpus, return_index=True, return_counts=True)
    if (counts > 1).any():
        dup = int(values[np.argmax(counts > 1)])
        ranks = np.flatnonzero(gpus == dup)
        raise UserError(
            f"{source}: custom: GPU {dup} is given to ranks {int(ranks[0])} and {int(ranks[1])}; "
            "every rank needs its own GPU"
        )
    return gpus


def placement_table(cluster: ClusterConfig, rank_gpu: np.ndarray) -> dict[str, np.ndarray]:
    """Per rank: GPU, host, local index, NIC (inside the host) and GPU type."""
    rank_gpu = np.asarray(rank_gpu, dtype=np.int64)
    return {
        "gpu": rank_gpu,
        "host": cluster.gpu_host[rank_gpu],
        "local": cluster.gpu_local_index[rank_gpu],
        "nic": cluster.gpu_nic[rank_gpu],
        "gpu_type": np.array([cluster.gpu_type[g] for g in rank_gpu], dtype=object),
    }


def place_plan(cluster: ClusterConfig, plan: StagedPlan, source: str = "parallel.stages") -> np.ndarray:
    """int64 array: global GPU of every rank of an explicit plan (module docstring)."""
    types = np.asarray(cluster.gpu_type, dtype=object)
    free = np.ones(cluster.world_size, dtype=bool)
    hosts = cluster.gpu_host
    out: list[int] = []
    for s, stage in enumerate(plan.stages):
        for r, rep in enumerate(stage.replicas):
            gpu = cluster.resolve_gpu_name(rep.gpu) or rep.gpu
            candidates = np.flatnonzero(free & (types == gpu))
            if candidates.size < rep.tp:
                raise UserError(
                    f"{source}[{s}].replicas[{r}].gpu: needs {rep.tp} free {gpu} GPUs "
                    f"but {candidates.size} are left in the cluster {cluster.name!r}"
                )
            chosen = None
            for host in dict.fromkeys(hosts[candidates].tolist()):
                on_host = candidates[hosts[candidates] == host]
                if on_host.size >= rep.tp:
                    chosen = on_host[: rep.tp]
                    break
            if chosen is None:
                chosen = candidates[: rep.tp]
            free[chosen] = False
            out.extend(int(g) for g in chosen)
    return np.asarray(out, dtype=np.int64)
