"""The heterogeneity-aware partitioner: layer ranges per pipeline stage, micro-batches per replica.

Layers: pipeline (virtual) stage ``v`` gets a contiguous range of layers. ``auto`` picks the cut
points by dynamic programming over all contiguous partitions, minimizing the time of the slowest
stage (min-max), where a stage's time for a range is the sum of its layers' forward+backward cost
on the stage's *slowest* member GPU, plus the embedding on the first and the head on the last
stage; every stage must fit in the memory of its smallest member GPU. ``uniform`` splits layers as
evenly as possible (Megatron's homogeneous baseline) and only checks memory. ``explicit``
(``parallel.partition: [l0, l1, ...]``) takes the listed layer counts per virtual stage as given
(e.g. a published plan) and only checks memory.

Micro-batches: replica ``r`` gets micro-batch counts in proportion to its speed (1 / its slowest
stage time), rounded by largest remainder, at least one each, summing to
``global_batch / micro_batch``; ``uniform`` and ``explicit`` give equal counts. With the
interleaved schedule the counts are multiples of ``pp`` (Megatron's requirement).

Costs come from a callback ``cost_fn(gpu_type, ops) -> seconds`` (the plan layer's compute model
can be passed in by the caller; the workload layer never imports it). The default is a roofline
of each op: ``max(flops / peak_flops(dtype), bytes / memory_bandwidth)`` with catalogue peaks —
approximate: it ignores kernel efficiency, so it ranks GPUs by their peak numbers.

Explicit plans (``parallel.stages``, a :class:`~heterosim.workload.groups.StagedLayout`) take
their layers as written; memory is checked per (stage, replica) with that replica's TP degree and
GPU; pipelines with ``micro_batches`` keep them and the others share the rest of the batch in
proportion to their speed (``partition: auto``) or evenly (``uniform``). A pipeline's speed is
1 / its slowest stage time, each stage timed on the replica's own GPU type and TP degree.

Interleaved schedules are partitioned into ``pp * vpp`` contiguous chunks by the same min-max
rule (chunk ``v`` runs on stage ``v mod pp``); memory is then checked per rank for the layers of
all its chunks together (the cut search itself ignores memory in that case).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from heterosim.catalog.gpus import GpuSpec, gpu_spec
from heterosim.config.cluster import ClusterConfig
from heterosim.config.experiment import ExperimentConfig
from heterosim.errors import UserError
from heterosim.units import format_size
from heterosim.workload.groups import RankLayout, StagedLayout
from heterosim.workload.ops import (
    OpSpec,
    embedding_backward_ops,
    embedding_forward_ops,
    head_backward_ops,
    head_forward_ops,
    layer_backward_ops,
    layer_forward_ops,
)

CostFn = Callable[[str, Sequence[OpSpec]], float]
MemoryFn = Callable[[Sequence[int], bool, bool, int], int]


def roofline_cost(gpu_type: str, ops: Sequence[OpSpec], spec: GpuSpec | None = None) -> float:
    """Seconds to run the compute ops of ``ops`` on ``gpu_type`` at catalogue peak (roofline)."""
    spec = spec or gpu_spec(gpu_type)
    total = 0.0
    for op in ops:
        if op.is_comm:
            continue
        dtype = op.dtype if spec.peak_tflops.get(op.dtype) else "bf16"
        compute = op.flops / spec.peak_flops(dtype) if op.flops else 0.0
        memory = op.bytes_moved / spec.memory_bytes_per_s
        total += max(compute, memory)
    return total


def roofline_cost_fn(cluster: ClusterConfig) -> CostFn:
    """:func:`roofline_cost` with the specs the cluster knows (its own ``gpus:`` included)."""

    def cost(gpu_type: str, ops: Sequence[OpSpec]) -> float:
        return roofline_cost(gpu_type, ops, cluster.gpu_spec(gpu_type))

    return cost


@dataclass(frozen=True)
class Partition:
    """The partitioner's result for one experiment."""

    mode: str  # auto | uniform | explicit
    pp: int
    vpp: int
    chunk_layers: tuple[range, ...]  # per virtual stage v = chunk * pp + stage
    replica_micro_batches: tuple[int, ...]  # per data-parallel replica
    chunk_time_s: tuple[float, ...]  # estimated fwd+bwd seconds per micro-batch per virtual stage
    replica_speed: tuple[float, ...]  # micro-batches per second of each replica's slowest stage
    memory_warnings: tuple[str, ...] = ()  # stages over capacity (simulation.memory_check: warn)

    def layers_of(self, stage: int, chunk: int = 0) -> range:
        return self.chunk_layers[chunk * self.pp + stage]

    def stage_layers(self, stage: int) -> list[range]:
        return [self.layers_of(stage, c) for c in range(self.vpp)]


def optimal_cuts(
    layer_cost: np.ndarray,
    first_extra: float = 0.0,
    last_extra: float = 0.0,
    max_end: np.ndarray | None = None,
) -> list[range] | None:
    """Min-max contiguous partition of ``L`` layers into ``V`` non-empty segments.

    ``layer_cost[v, l]`` is the cost of layer ``l`` on segment ``v``'s device; ``first_extra`` is
    added to segment 0 and ``last_extra`` to segment ``V-1``. ``max_end[v, i]`` (optional) is the
    largest exclusive end a segment ``v`` starting at layer ``i`` may have (memory limit).
    Returns the segments, or None when no partition satisfies ``max_end``. O(V * L^2).
    """
    stages, layers = layer_cost.shape
    if stages > layers:
        return None
    prefix = np.concatenate([np.zeros((stages, 1)), np.cumsum(layer_cost, axis=1)], axis=1)
    if max_end is None:
        max_end = np.full((stages, layers), layers, dtype=np.int64)
    inf = np.inf
    # best[v][j]: minimal max-cost covering layers [0, j) with segments 0..v
    best = np.full((stages, layers + 1), inf)
    arg = np.zeros((stages, layers + 1), dtype=np.int64)

    for j in range(1, layers + 1):
        if max_end[0, 0] >= j:
            best[0, j] = prefix[0, j] + first_extra + (last_extra if stages == 1 else 0.0)
    for v in range(1, stages):
        extra = last_extra if v == stages - 1 else 0.0
        starts = np.arange(layers)
        for j in range(v + 1, layers + 1):
            i = starts[v:j]
            ok = max_end[v, i] >= j
            seg = prefix[v, j] - prefix[v, i] + extra
            cand = np.where(ok, np.maximum(best[v - 1, i], seg), inf)
            k = int(np.argmin(cand))
            best[v, j] = cand[k]
            arg[v, j] = i[k]

    if not np.isfinite(best[stages - 1, layers]):
        return None
    cuts = [layers]
    j = layers
    for v in range(stages - 1, 0, -1):
        j = int(arg[v, j])
        cuts.append(j)
    cuts.append(0)
    cuts.reverse()
    return [range(cuts[v], cuts[v + 1]) for v in range(stages)]


def even_cuts(layers: int, stages: int) -> list[range]:
    """Layers split as evenly as possible; earlier segments take the remainder."""
    base, extra = divmod(layers, stages)
    out, start = [], 0
    for v in range(stages):
        size = base + (1 if v < extra else 0)
        out.append(range(start, start + size))
        start += size
    return out


def split_micro_batches(total: int, speeds: Sequence[float], granularity: int = 1) -> list[int]:
    """``total`` micro-batches over replicas in proportion to ``speeds`` (largest remainder).

    Every replica gets at least ``granularity``; counts are multiples of ``granularity`` and sum
    to ``total`` (which must be a multiple of ``granularity`` and at least one unit per replica).
    """
    n = len(speeds)
    units, rest = divmod(total, granularity)
    if rest or units < n:
        raise ValueError(f"{total} micro-batches cannot give {n} replicas {granularity} each")
    weights = np.asarray(speeds, dtype=float)
    if np.any(weights <= 0):
        raise ValueError("replica speeds must be positive")
    spare = units - n  # one unit each first, the rest in proportion
    ideal = weights / weights.sum() * units - 1.0
    ideal = np.clip(ideal, 0.0, None)
    if ideal.sum() > 0:
        ideal *= spare / ideal.sum()
    share = np.floor(ideal).astype(np.int64)
    left = spare - int(share.sum())
    order = np.argsort(-(ideal - share), kind="stable")
    share[order[:left]] += 1
    return [int((s + 1) * granularity) for s in share]


def in_flight_micro_batches(experiment: ExperimentConfig, stage: int) -> int:
    """Micro-batches whose activations a stage holds at peak under the configured schedule."""
    par = experiment.parallel
    m = experiment.micro_batches_per_replica
    if par.schedule == "gpipe":
        return m
    if par.schedule == "1f1b":
        return min(par.pp - stage, m)
    warm = min((par.pp - stage - 1) * 2 + (par.vpp - 1) * par.pp + 1, m * par.vpp)
    return max(1, -(-warm // par.vpp))


class _Costs:
    """Per-GPU-type forward+backward cost of every layer, the embedding and the head."""

    def __init__(self, experiment: ExperimentConfig, cost_fn: CostFn) -> None:
        self.exp = experiment
        self.cost_fn = cost_fn
        self._layer: dict[tuple[str, bool], float] = {}
        self._ends: dict[str, tuple[float, float]] = {}

    def layer(self, gpu: str, layer: int) -> float:
        moe = self.exp.model.is_moe_layer(layer)
        key = (gpu, moe)
        if key not in self._layer:
            e = self.exp
            ops = layer_forward_ops(e.model, e.training, e.parallel, layer) + layer_backward_ops(
                e.model, e.training, e.parallel, layer
            )
            self._layer[key] = float(self.cost_fn(gpu, ops))
        return self._layer[key]

    def ends(self, gpu: str) -> tuple[float, float]:
        if gpu not in self._ends:
            e = self.exp
            emb = embedding_forward_ops(e.model, e.training, e.parallel) + embedding_backward_ops(
                e.model, e.training, e.parallel
            )
            head = head_forward_ops(e.model, e.training, e.parallel) + head_backward_ops(
                e.model, e.training, e.parallel
            )
            self._ends[gpu] = (float(self.cost_fn(gpu, emb)), float(self.cost_fn(gpu, head)))
        return self._ends[gpu]

    def table(self, gpus: Sequence[str]) -> np.ndarray:
        """Per-layer cost on the slowest of ``gpus`` (element-wise max over types)."""
        layers = self.exp.model.layers
        return np.max([[self.layer(g, layer) for layer in range(layers)] for g in sorted(set(gpus))], axis=0)


def _default_memory_fn(experiment: ExperimentConfig) -> MemoryFn:
    from heterosim.workload.memory import estimate_rank_memory

    def memory(layers: Sequence[int], has_embedding: bool, has_head: bool, in_flight: int) -> int:
        e = experiment
        est = estimate_rank_memory(
            e.model, e.training, e.parallel, layers, has_embedding, has_head, in_flight
        )
        return int(est.total_bytes)

    return memory


def _stage_gpus(
    experiment: ExperimentConfig, layout: RankLayout, stage: int, replica: int | None = None
) -> list[str]:
    types = experiment.cluster.gpu_type
    return [types[r] for r in layout.stage_ranks(stage) if replica is None or layout.dp_index(r) == replica]


def _with_tp(experiment: ExperimentConfig, tp: int) -> ExperimentConfig:
    """``experiment`` as one replica of TP degree ``tp`` sees it (ops and memory)."""
    par = experiment.parallel
    if par.tp == tp:
        return experiment
    return replace(experiment, parallel=replace(par, tp=tp))


def _staged_partition(
    experiment: ExperimentConfig, layout: StagedLayout, cost_fn: CostFn, memory_fn: MemoryFn | None
) -> Partition:
    """The partition of an explicit plan (module docstring)."""
    par, cluster = experiment.parallel, experiment.cluster
    plan = par.plan
    assert plan is not None
    pp, dp = layout.pp, layout.dp
    ends = np.cumsum(par.stage_layers)
    chunks = [range(int(end) - n, int(end)) for n, end in zip(par.stage_layers, ends)]
    total_mb = experiment.training.global_batch // experiment.training.micro_batch
    costs: dict[int, _Costs] = {}
    cell_time = np.zeros((pp, dp))
    for stage in range(pp):
        for replica in range(dp):
            tp, gpu = layout.cell_tp(replica, stage), layout.cell_gpus[stage][replica]
            c = costs.setdefault(tp, _Costs(_with_tp(experiment, tp), cost_fn))
            t = sum(c.layer(gpu, layer) for layer in chunks[stage])
            t += c.ends(gpu)[0] if stage == 0 else 0.0
            t += c.ends(gpu)[1] if stage == pp - 1 else 0.0
            cell_time[stage, replica] = t
    speeds = [1.0 / float(cell_time[:, r].max()) if cell_time[:, r].max() > 0 else 1.0 for r in range(dp)]
    given = [plan.pipeline_micro_batches(r) for r in range(dp)]
    free = [r for r in range(dp) if given[r] is None]
    rest = total_mb - sum(g for g in given if g is not None)
    counts: list[int] = [g or 0 for g in given]  # free replicas filled below
    if free:
        if par.micro_batch_split == "uniform" or len({round(speeds[r], 12) for r in free}) == 1:
            base, extra = divmod(rest, len(free))
            shares = [base + (1 if i < extra else 0) for i in range(len(free))]
        else:
            shares = split_micro_batches(rest, [speeds[r] for r in free])
        for r, share in zip(free, shares):
            counts[r] = share
    warnings: list[str] = []
    strict = experiment.simulation.memory_check == "error"
    for stage in range(pp):
        layers = list(chunks[stage])
        for replica in range(dp):
            tp, gpu = layout.cell_tp(replica, stage), layout.cell_gpus[stage][replica]
            in_flight = (
                min(pp - stage, int(counts[replica])) if par.schedule == "1f1b" else int(counts[replica])
            )
            fn = memory_fn or _default_memory_fn(_with_tp(experiment, tp))
            need = fn(layers, stage == 0, stage == pp - 1, in_flight)
            capacity = cluster.gpu_spec(gpu).memory_bytes
            if need > capacity:
                what = (
                    f"stage {stage} replica {replica} ({gpu}, tp {tp}, layers "
                    f"{layers[0]}-{layers[-1]}) needs {format_size(need)} of memory but has "
                    f"{format_size(capacity)}"
                )
                if strict:
                    raise UserError(
                        f"{experiment.source or 'experiment'}: parallel.stages: {what};"
                        " use more stages, recompute or a smaller micro-batch (or "
                        "simulation.memory_check: warn)"
                    )
                warnings.append(f"estimated memory over capacity: {what}")
    return Partition(
        mode="explicit",
        pp=pp,
        vpp=1,
        chunk_layers=tuple(chunks),
        replica_micro_batches=tuple(int(c) for c in counts),
        chunk_time_s=tuple(float(cell_time[s].max()) for s in range(pp)),
        replica_speed=tuple(speeds),
        memory_warnings=tuple(warnings),
    )


def _check_memory(
    experiment: ExperimentConfig, layout: RankLayout, chunks: Sequence[range], memory_fn: MemoryFn
) -> tuple[str, ...]:
    """Ranks whose estimated memory exceeds their GPU's: a UserError naming the first one, or
    with ``simulation.memory_check: warn`` one message per over-full stage, returned."""
    pp, vpp = layout.pp, len(chunks) // layout.pp
    last = len(chunks) - 1
    strict = experiment.simulation.memory_check == "error"
    warnings: list[str] = []
    for stage in range(pp):
        mine = [chunks[c * pp + stage] for c in range(vpp)]
        held = [layer for rng in mine for layer in rng]
        need = memory_fn(
            held, stage == 0, (vpp - 1) * pp + stage == last, in_flight_micro_batches(experiment, stage)
        )
        for rank in layout.stage_ranks(stage):
            gpu = experiment.cluster.gpu_type[rank]
            capacity = experiment.cluster.gpu_spec(gpu).memory_bytes
            if need > capacity:
                layers = ", ".join(f"{r.start}-{r.stop - 1}" for r in mine)
                what = (
                    f"rank {rank} ({gpu}, stage {stage}, layers {layers}) needs "
                    f"{format_size(need)} of memory but has {format_size(capacity)}"
                )
                if strict:
                    raise UserError(
                        f"{experiment.source or 'experiment'}: parallel: {what}; use more pipeline "
                        f"stages, ZeRO, recompute, context parallelism or a smaller micro-batch (or "
                        f"simulation.memory_check: warn)"
                    )
                warnings.append(f"estimated memory over capacity: {what}")
                break  # one message per stage
    return tuple(warnings)


def _max_ends(experiment: ExperimentConfig, layout: RankLayout, memory_fn: MemoryFn) -> np.ndarray:
    """max_end[v, i]: largest exclusive end of a stage-v segment from layer i that fits."""
    layers = experiment.model.layers
    pp = layout.pp
    out = np.zeros((pp, layers), dtype=np.int64)
    for v in range(pp):
        capacity = min(
            experiment.cluster.gpu_spec(g).memory_bytes for g in _stage_gpus(experiment, layout, v)
        )
        in_flight = in_flight_micro_batches(experiment, v)
        for i in range(layers):
            if v == 0 and i > 0:
                continue  # the first stage always starts at layer 0
            lo, hi = i, layers  # find the largest end in (i, layers] that fits
            if memory_fn(range(i, i + 1), v == 0, v == pp - 1 and i + 1 == layers, in_flight) > capacity:
                out[v, i] = i
                continue
            lo = i + 1
            while lo < hi:
                mid = (lo + hi + 1) // 2
                fits = memory_fn(range(i, mid), v == 0, v == pp - 1 and mid == layers, in_flight) <= capacity
                lo, hi = (mid, hi) if fits else (lo, mid - 1)
            out[v, i] = lo
    return out


def _layer_chunks(
    experiment: ExperimentConfig,
    layout: RankLayout,
    table: np.ndarray,
    emb: float,
    head: float,
    memory_fn: MemoryFn,
) -> list[range]:
    """Layer range per (virtual) stage: even, as the config lists them, or the cheapest cuts
    that fit in memory (``auto``)."""
    par, model = experiment.parallel, experiment.model
    stages = par.pp * par.vpp
    if par.partition == "uniform":
        return even_cuts(model.layers, stages)
    if par.partition == "explicit":
        ends = np.cumsum(par.stage_layers)
        return [range(int(end) - n, int(end)) for n, end in zip(par.stage_layers, ends)]
    max_end = _max_ends(experiment, layout, memory_fn) if par.vpp == 1 else None
    found = optimal_cuts(table, emb, head, max_end)
    if found is None:
        # nothing fits: report the rank that is furthest over under the unconstrained optimum
        # (with memory_check: warn, simulate that optimum and report it over capacity)
        found = optimal_cuts(table, emb, head) or even_cuts(model.layers, stages)
        if experiment.simulation.memory_check == "error":
            _check_memory(experiment, layout, found, memory_fn)
            raise UserError(
                f"{experiment.source or 'experiment'}: parallel: no layer partition fits in GPU "
                f"memory; use more pipeline stages, ZeRO, recompute or a smaller micro-batch"
            )
    return found


def _replica_speeds(
    experiment: ExperimentConfig, layout: RankLayout, costs: _Costs, chunks: Sequence[range]
) -> list[float]:
    """Per data-parallel replica, 1 / the time of its slowest stage over its layer chunks."""
    par = experiment.parallel
    pp, vpp = par.pp, par.vpp
    stages = pp * vpp
    speeds = []
    for replica in range(par.dp):
        slowest = 0.0
        for stage in range(pp):
            gpus = _stage_gpus(experiment, layout, stage, replica)
            t = 0.0
            for c in range(vpp):
                v = c * pp + stage
                rng = chunks[v]
                t += sum(max(costs.layer(g, layer) for g in set(gpus)) for layer in rng)
                t += max(costs.ends(g)[0] for g in set(gpus)) if v == 0 else 0.0
                t += max(costs.ends(g)[1] for g in set(gpus)) if v == stages - 1 else 0.0
            slowest = max(slowest, t)
        speeds.append(1.0 / slowest if slowest > 0 else 1.0)
    return speeds


def plan_partition(
    experiment: ExperimentConfig,
    layout: RankLayout | StagedLayout,
    cost_fn: CostFn | None = None,
    memory_fn: MemoryFn | None = None,
) -> Partition:
    """Layer ranges per (virtual) stage and micro-batches per replica for ``experiment``."""
    par = experiment.parallel
    cost_fn = cost_fn or roofline_cost_fn(experiment.cluster)
    if isinstance(layout, StagedLayout):
        return _staged_partition(experiment, layout, cost_fn, memory_fn)
    memory_fn = memory_fn or _default_memory_fn(experiment)
    costs = _Costs(experiment, cost_fn)
    pp, vpp = par.pp, par.vpp
    stages = pp * vpp
    stage_tables = [costs.table(_stage_gpus(experiment, layout, s)) for s in range(pp)]
    table = np.stack([stage_tables[v % pp] for v in range(stages)])
    first_gpus, last_gpus = (
        _stage_gpus(experiment, layout, 0),
        _stage_gpus(experiment, layout, (stages - 1) % pp),
    )
    emb = max(costs.ends(g)[0] for g in set(first_gpus))
    head = max(costs.ends(g)[1] for g in set(last_gpus))
    chunks = _layer_chunks(experiment, layout, table, emb, head, memory_fn)
    memory_warnings = _check_memory(experiment, layout, chunks, memory_fn)

    chunk_time = []
    for v, rng in enumerate(chunks):
        t = float(table[v, rng.start : rng.stop].sum())
        t += emb if v == 0 else 0.0
        t += head if v == stages - 1 else 0.0
        chunk_time.append(t)

    total_mb = experiment.training.global_batch // experiment.training.micro_batch
    speeds = _replica_speeds(experiment, layout, costs, chunks)
    granularity = pp if par.schedule == "interleaved" else 1
    if par.partition != "auto" or len(set(np.round(speeds, 12))) == 1:
        counts = [total_mb // par.dp] * par.dp
    else:
        counts = split_micro_batches(total_mb, speeds, granularity)
    return Partition(
        mode=par.partition,
        pp=pp,
        vpp=vpp,
        chunk_layers=tuple(chunks),
        replica_micro_batches=tuple(counts),
        chunk_time_s=tuple(chunk_time),
        replica_speed=tuple(speeds),
        memory_warnings=memory_warnings,
    )
