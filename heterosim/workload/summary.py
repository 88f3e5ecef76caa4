"""workload.json: a per-rank summary of the traces (keys fixed in docs/results.md).

Per rank: GPU type, host, pipeline stage, data-parallel replica, first and last layer, micro-
batches, compute node count and FLOPs, collectives by Chakra type name with count and bytes
(``comm_bytes`` summed, nccl-tests size convention), PP send and recv bytes, and the memory
estimate. ``total_flops`` sums every rank's compute FLOPs; ``groups`` lists every communicator.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from heterosim.workload.trace import (
    COLLECTIVE_NAMES,
    COMM_COLL_NODE,
    COMM_RECV_NODE,
    COMM_SEND_NODE,
    COMP_NODE,
    RankTrace,
)

if TYPE_CHECKING:
    from heterosim.workload.generator import Workload


def trace_counts(trace: RankTrace) -> dict[str, Any]:
    """Compute nodes, FLOPs, collectives by type, send and recv bytes of one trace."""
    t = trace.templates
    uses = np.bincount(trace.template, minlength=len(t)).astype(np.int64)
    comp = t.node_type == COMP_NODE
    collectives: dict[str, dict[str, int]] = {}
    coll = np.flatnonzero((t.node_type == COMM_COLL_NODE) & (uses > 0))
    for row in coll:
        name = COLLECTIVE_NAMES.get(int(t.comm_type[row]), str(int(t.comm_type[row])))
        entry = collectives.setdefault(name, {"count": 0, "bytes": 0})
        entry["count"] += int(uses[row])
        entry["bytes"] += int(uses[row]) * int(t.comm_bytes[row])
    return {
        "compute_nodes": int(uses[comp].sum()),
        "flops": int((uses[comp] * t.flops[comp]).sum()),
        "collectives": dict(sorted(collectives.items())),
        "send_bytes": int((uses * t.comm_bytes)[t.node_type == COMM_SEND_NODE].sum()),
        "recv_bytes": int((uses * t.comm_bytes)[t.node_type == COMM_RECV_NODE].sum()),
        "nodes": len(trace),
    }


def rank_summary(workload: Workload, trace: RankTrace) -> dict[str, Any]:
    """One entry of workload.json's ``ranks`` list."""
    rank = trace.rank
    lay, exp = workload.layout, workload.experiment
    ranges = workload.rank_layers(rank)
    layers = [layer for rng in ranges for layer in rng]
    counts = trace_counts(trace)
    entry: dict[str, Any] = {
        "rank": rank,
        "gpu": workload.gpu_type(rank),
        "host": int(exp.cluster.gpu_host[workload.gpu_of(rank)]),
        "stage": lay.pp_index(rank),
        "dp_replica": lay.dp_index(rank),
        "tp": lay.tp_degree(rank),
        "layers": [min(layers), max(layers)],
        "micro_batches": workload.partition.replica_micro_batches[lay.dp_index(rank)],
        "compute_nodes": counts["compute_nodes"],
        "flops": counts["flops"],
        "collectives": counts["collectives"],
        "send_bytes": counts["send_bytes"],
        "recv_bytes": counts["recv_bytes"],
        "memory_bytes": workload.memory_bytes(rank),
        "nodes": counts["nodes"],
    }
    if len(ranges) > 1:
        entry["chunks"] = [[r.start, r.stop - 1] for r in ranges]
    return entry


def workload_summary(
    workload: Workload, ranks: Sequence[int] | None = None, traces: Sequence[RankTrace] | None = None
) -> dict[str, Any]:
    """The whole workload.json mapping, from ``traces`` or by building each rank's trace."""
    exp = workload.experiment
    entries = []
    source = traces if traces is not None else workload.iter_traces(ranks)
    for trace in source:
        entries.append(rank_summary(workload, trace))
    part = workload.partition
    return {
        "world_size": workload.world_size,
        "model": exp.model.name,
        "model_arch": exp.model.arch,  # read back by a trace run (its host dispatch rate)
        "params": int(exp.model.param_count()),
        "total_flops": int(sum(e["flops"] for e in entries)),
        "experiment": exp.name,
        "parallel": {
            "tp": exp.parallel.tp,
            "pp": exp.parallel.pp,
            "dp": exp.parallel.dp,
            "ep": exp.parallel.ep,
            "cp": exp.parallel.cp,
            "cp_comm": exp.parallel.cp_comm,
            "cp_impl": exp.parallel.cp_impl,
            "vpp": exp.parallel.vpp,
            "schedule": exp.parallel.schedule,
            "zero": exp.parallel.zero,
            "partition": part.mode,
            **({"stages": exp.parallel.plan.as_dict()} if exp.parallel.plan is not None else {}),
        },
        "partition": {
            "chunk_layers": [[r.start, r.stop - 1] for r in part.chunk_layers],
            "replica_micro_batches": list(part.replica_micro_batches),
        },
        "ranks": entries,
        "groups": workload.groups.listing(),
    }
