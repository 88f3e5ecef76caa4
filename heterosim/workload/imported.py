"""A workload read from a directory of Chakra ET traces (ours or another producer's).

``load_trace_workload(directory)`` reads every ``<prefix>.<rank>.et`` file (ranks must be
``0..N-1``) and ``comm_group.json`` when present (missing: group 0 = all ranks, Chakra's
convention; a file without group 0 gets it added). The result has what
:func:`heterosim.simulate.run_experiment` needs of a workload: ``world_size``, ``trace(rank)``,
``groups.as_json()``, ``layout`` (``pp_index``, ``dp_index``) and ``partition`` (``mode``,
``chunk_layers``, ``replica_micro_batches``).

Compute timing. Our traces carry op kinds and shapes, so the plan layer times them with the
compute model for the GPU each rank lands on (as for a generated workload). Another producer's
compute nodes have no op kind we know (the reader names them ``unknown``) and only a recorded
runtime (``duration_micros``, or ``duration_ns`` when present), so those traces are run with the
recorded durations: ``keep_trace_durations`` tells the plan layer which. ``durations="auto"``
picks the recorded durations as soon as one compute node has an op kind the compute model cannot
time; ``"trace"`` and ``"model"`` force a choice. Recorded durations do not change with the GPU a
rank is placed on. Durations on communication nodes are dropped: the network times those.

Ranks, stages and replicas: our traces name their pipeline stage and data-parallel replica in the
GlobalMetadata (``stage``, ``dp_replica``, ``micro_batches``); traces without them report stage 0
and replica 0. ``partition.mode`` is ``"traces"`` and ``chunk_layers`` lists, per virtual stage,
the layers its nodes carry (empty for traces without layer attributes).

Send/recv semantics. HeteroSim's pipeline sends are NCCL send/recv pairs: the transfer starts
when both sides are ready (rendezvous). Chakra consumers such as ASTRA-sim start a send as soon
as the sender's own dependencies are done and let the recv wait for the data (eager); traces
written for them rely on it (a ring whose every rank sends and then receives deadlocks under
rendezvous). ``p2p_rendezvous`` is true only for traces our generator wrote (GlobalMetadata with
its ``schedule`` and ``dp_replica`` keys on every rank), false for every other producer.

``trace_experiment`` builds the experiment half of a trace run: the cluster, network and
simulation settings (with ``--set`` overrides on ``network.*``, ``simulation.*`` and ``name``).
A trace run has no model description: its ``model`` is an empty placeholder named after the
traces, ``training.global_batch`` is 0 (so tokens/s reads 0) and ``parallel`` is tp 1, pp 1,
dp = world size; none of these are used to build or time the plan.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from heterosim.catalog.models import ARCHES, ModelConfig
from heterosim.config.cluster import ClusterConfig, load_cluster
from heterosim.config.experiment import (
    ExperimentConfig,
    ParallelConfig,
    TrainingConfig,
    _network,
    _simulation,
    apply_overrides,
)
from heterosim.config.fields import Section
from heterosim.config.limits import check_budget, collective_flow_floor
from heterosim.errors import UserError
from heterosim.workload.chakra import COMM_GROUP_FILE, read_comm_groups, read_trace, trace_files
from heterosim.workload.trace import (
    COMM_COLL_NODE,
    COMM_RECV_NODE,
    COMM_SEND_NODE,
    COMP_NODE,
    OP_KINDS,
    RankTrace,
)

DURATION_MODES = ("auto", "trace", "model")
TIMED_KINDS = frozenset(k for k in OP_KINDS if k != "comm")
TRACE_OVERRIDE_KEYS = ("name", "network", "simulation")
GENERATOR_KEYS = frozenset({"schedule", "dp_replica"})  # GlobalMetadata our generator writes


@dataclass(frozen=True)
class TraceGroups:
    """Communicators of a trace set: group id -> member ranks."""

    groups: dict[int, tuple[int, ...]]

    def as_json(self) -> dict[str, list[int]]:
        return {str(g): list(r) for g, r in sorted(self.groups.items())}


@dataclass(frozen=True)
class TraceLayout:
    """Pipeline stage and data-parallel replica of each rank, as the traces state them."""

    stages: tuple[int, ...]
    replicas: tuple[int, ...]
    tps: tuple[int, ...] = ()  # TP degree per rank when every trace states it (``tp``)

    @property
    def world_size(self) -> int:
        return len(self.stages)

    def tp_degree(self, rank: int) -> int | None:
        return self.tps[rank] if self.tps else None

    def pp_index(self, rank: int) -> int:
        return self.stages[rank]

    def dp_index(self, rank: int) -> int:
        return self.replicas[rank]


@dataclass(frozen=True)
class TracePartition:
    """What the traces say about layers per virtual stage and micro-batches per replica."""

    chunk_layers: tuple[range, ...]
    replica_micro_batches: tuple[int, ...]
    mode: str = "traces"


@dataclass
class ImportedWorkload:
    """Per-rank traces read from files, with their communicators and layout."""

    directory: Path
    traces: list[RankTrace]
    groups: TraceGroups
    layout: TraceLayout
    partition: TracePartition
    keep_trace_durations: bool
    p2p_rendezvous: bool = True
    producer: str = ""
    files: dict[int, Path] = field(default_factory=dict)

    @property
    def world_size(self) -> int:
        return len(self.traces)

    def trace(self, rank: int) -> RankTrace:
        if not 0 <= rank < self.world_size:
            raise IndexError(f"rank {rank} outside 0..{self.world_size - 1}")
        return self.traces[rank]


def _metadata_int(trace: RankTrace, key: str, default: int, path: Path) -> int:
    text = trace.metadata.get(key)
    if text is None or text == "":
        return default
    try:
        return int(text)
    except ValueError:
        raise UserError(f"{path}: GlobalMetadata {key}: expected an integer, got {text!r}") from None


def _read_groups(directory: Path, world: int) -> TraceGroups:
    path = directory / COMM_GROUP_FILE
    groups = read_comm_groups(path) if path.exists() else {}
    for gid, ranks in groups.items():
        bad = [r for r in ranks if r >= world]
        if bad:
            raise UserError(f"{path}: {gid}: rank {bad[0]} outside the {world} traces (ranks 0..{world - 1})")
        if len(set(ranks)) != len(ranks):
            raise UserError(f"{path}: {gid}: a rank is listed twice")
    groups.setdefault(0, list(range(world)))
    return TraceGroups({g: tuple(r) for g, r in groups.items()})


def _check_trace(trace: RankTrace, path: Path, world: int, groups: TraceGroups) -> None:
    """Peers and communicators must exist and include the rank: one-line errors otherwise."""
    types = trace.node_type
    p2p = (types == COMM_SEND_NODE) | (types == COMM_RECV_NODE)
    bad_peer = p2p & ((trace.peer < 0) | (trace.peer >= world) | (trace.peer == trace.rank))
    if bad_peer.any():
        i = int(np.flatnonzero(bad_peer)[0])
        raise UserError(
            f"{path}: node {i}: send/recv peer {int(trace.peer[i])} is not another rank of the {world} traces"
        )
    t = trace.templates
    for row in np.flatnonzero(t.node_type == COMM_COLL_NODE):
        gid = int(t.comm_group[row])
        members = groups.groups.get(gid)
        if members is None:
            raise UserError(
                f"{path}: a collective uses process group {gid}, which {COMM_GROUP_FILE} does not define"
            )
        if trace.rank not in members:
            raise UserError(
                f"{path}: rank {trace.rank} runs a collective on process group "
                f"{gid} but is not one of its ranks {list(members)}"
            )


def _untimed_kinds(traces: list[RankTrace]) -> set[str]:
    kinds: set[str] = set()
    for trace in traces:
        t = trace.templates
        for row in np.flatnonzero(t.node_type == COMP_NODE):
            name = t.op_kind_names[int(t.op_kind[row])]
            if name not in TIMED_KINDS:
                kinds.add(name)
    return kinds


def _chunk_layers(traces: list[RankTrace]) -> tuple[range, ...]:
    lo: dict[int, int] = {}
    hi: dict[int, int] = {}
    for trace in traces:
        has = trace.layer >= 0
        if not has.any():
            continue
        stages, layers = trace.stage[has].astype(np.int64), trace.layer[has].astype(np.int64)
        for v in np.unique(stages).tolist():
            sel = layers[stages == v]
            lo[v] = min(lo.get(v, int(sel.min())), int(sel.min()))
            hi[v] = max(hi.get(v, int(sel.max())), int(sel.max()))
    if not lo:
        return ()
    return tuple(range(lo.get(v, 0), hi.get(v, -1) + 1) for v in range(max(lo) + 1))


def load_trace_workload(directory: str | Path, durations: str = "auto") -> ImportedWorkload:
    """Read a directory of Chakra ET traces into a workload ``run_experiment`` accepts."""
    directory = Path(directory)
    if durations not in DURATION_MODES:
        raise UserError(f"durations {durations!r}: expected one of {', '.join(DURATION_MODES)}")
    files = trace_files(directory)
    if not files:
        raise UserError(f"{directory}: no Chakra traces (files named <prefix>.<rank>.et)")
    world = len(files)
    missing = sorted(set(range(world)) - set(files))
    if missing:
        raise UserError(
            f"{directory}: {world} traces but no trace for rank {missing[0]} (ranks must be 0..{world - 1})"
        )
    groups = _read_groups(directory, world)
    traces: list[RankTrace] = []
    stages: list[int] = []
    replicas: list[int] = []
    micro: dict[int, int] = {}
    tps: list[int] = []
    for rank, path in files.items():
        trace = read_trace(path, rank)
        _check_trace(trace, path, world, groups)
        stages.append(_metadata_int(trace, "stage", 0, path))
        replica = _metadata_int(trace, "dp_replica", 0, path)
        replicas.append(replica)
        tps.append(_metadata_int(trace, "tp", 0, path))
        count = _metadata_int(trace, "micro_batches", -1, path)
        if count >= 0:
            micro[replica] = max(micro.get(replica, 0), count)
        traces.append(trace)
    untimed = _untimed_kinds(traces)
    if durations == "model" and untimed:
        raise UserError(
            f"{directory}: compute nodes of kind {sorted(untimed)[0]!r} carry no "
            "shapes the compute model can time; run them with their recorded "
            "durations"
        )
    keep = durations == "trace" or (durations == "auto" and bool(untimed))
    _check_trace_budget(directory, traces, groups)
    for trace in traces:
        t = trace.templates
        t.duration_ns = np.where(t.node_type == COMP_NODE, t.duration_ns, 0).astype(np.uint64)
    replica_counts = tuple(micro.get(r, 0) for r in range(max(micro) + 1)) if micro else ()
    ours = all(GENERATOR_KEYS <= t.metadata.keys() for t in traces)
    producers = {t.metadata.get("experiment", "") for t in traces}
    return ImportedWorkload(
        directory=directory,
        traces=traces,
        groups=groups,
        layout=TraceLayout(tuple(stages), tuple(replicas), tuple(tps) if min(tps, default=0) > 0 else ()),
        partition=TracePartition(_chunk_layers(traces), replica_counts),
        keep_trace_durations=keep,
        p2p_rendezvous=ours,
        producer=producers.pop() if len(producers) == 1 else "",
        files=dict(files),
    )


def _check_trace_budget(directory: Path, traces: list[RankTrace], groups: TraceGroups) -> None:
    """Stop before planning when the traces' collectives cannot fit in memory: each collective
    node counts the flows it certainly becomes (:func:`collective_flow_floor`), divided among
    the ranks that all list it; every other node is one task."""
    tasks = 0.0
    for trace in traces:
        t = trace.templates
        counts = np.bincount(trace.template, minlength=len(t)).astype(np.float64)
        tasks += float(counts.sum())
        for row in np.flatnonzero((t.node_type == COMM_COLL_NODE) & (counts > 0)):
            size = len(groups.groups.get(int(t.comm_group[row]), ()))
            if size > 1:
                tasks += counts[row] * collective_flow_floor("allgather", int(t.comm_bytes[row]), size) / size
    check_budget(str(directory), "traces", "their nodes and the flows of their collectives", tasks)


def _placeholder_model(name: str, arch: str = "gpt") -> ModelConfig:
    return ModelConfig(
        name=name, arch=arch, hidden=0, layers=0, heads=0, kv_heads=0, ffn=0, vocab=0, max_seq=0
    )


def _traced_arch(directory: Path) -> str:
    """The model architecture ``heterosim workload`` recorded beside its traces (workload.json),
    ``gpt`` for traces from elsewhere: it picks the host dispatch rate (framework.host_dispatch)."""
    import json

    try:
        arch = json.loads((directory / "workload.json").read_text()).get("model_arch", "gpt")
    except (OSError, ValueError, AttributeError):
        return "gpt"
    return arch if arch in ARCHES else "gpt"


def trace_experiment(
    directory: str | Path, cluster_path: str | Path, world_size: int, overrides: list[str] | None = None
) -> ExperimentConfig:
    """Cluster, network and simulation settings for running a directory of traces.

    The traces' world size must equal the cluster's GPU count (ranks go to GPUs in order).
    """
    directory, cluster_path = Path(directory), Path(cluster_path)
    source = str(directory)
    for item in overrides or []:
        key = item.split("=", 1)[0].strip()
        if key.split(".", 1)[0] not in TRACE_OVERRIDE_KEYS:
            raise UserError(
                f"--set {item!r}: a trace run takes only "
                f"{', '.join(k + '.*' for k in TRACE_OVERRIDE_KEYS[1:])} and name "
                "overrides (the traces fix model and parallelism)"
            )
    data = apply_overrides(
        {"name": directory.resolve().name, "network": {}, "simulation": {}}, overrides or [], source
    )
    cluster: ClusterConfig = load_cluster(cluster_path)
    if cluster.world_size != world_size:
        raise UserError(
            f"{directory}: {world_size} rank traces but the cluster "
            f"{cluster_path} has {cluster.world_size} GPUs (they must be equal)"
        )
    top = Section(data, source)
    name = top.string("name")
    network = _network(top.section("network"))
    simulation = _simulation(top.section("simulation"))
    top.reject_unknown()
    resolved = {"traces": str(directory), "cluster": str(cluster_path), **data}
    return ExperimentConfig(
        name=name,
        model=_placeholder_model(f"traces:{name}", _traced_arch(directory)),
        training=TrainingConfig(global_batch=0, micro_batch=1, seq_len=0, dtype="bf16", recompute="none"),
        parallel=ParallelConfig(dp=world_size, partition="uniform", dp_bucket_bytes=0, zero3_prefetch=0),
        cluster=cluster,
        network=network,
        simulation=simulation,
        source=source,
        resolved=resolved,
    )


__all__ = [
    "DURATION_MODES",
    "ImportedWorkload",
    "TraceGroups",
    "TraceLayout",
    "TracePartition",
    "load_trace_workload",
    "trace_experiment",
]
