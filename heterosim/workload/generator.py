"""From an experiment to one trace per rank: layout, groups, partition, schedule, communication.

``generate_workload(experiment)`` returns a :class:`Workload`; each rank's
:class:`~heterosim.workload.trace.RankTrace` is built on demand (``workload.trace(rank)``,
``workload.traces[rank]`` or by iterating ``workload.traces``), so a realistic iteration never
holds every rank's arrays at once. What a rank's trace contains, in issue order:

- per schedule step (forward or backward of one model chunk for one micro-batch): a PP recv
  (activations forward / gradients backward) unless the chunk is the first (forward) or last
  (backward) virtual stage, the chunk's op chain (embedding / layers / head, TP and EP
  collectives from the op lists), then a PP send. Activations are ``b*s*h`` elements of the
  activation dtype per TP rank, ``b*s*h/tp`` with sequence parallelism (each TP rank sends its own
  sequence shard, Megatron-core's behaviour). Tags: ``(micro_batch * V + boundary) * 2 + dir``
  with ``boundary`` the lower virtual stage of the link and ``dir`` 0 forward, 1 backward, so a
  send and its recv agree on (peer, tag, bytes).
- data-parallel gradient synchronisation in buckets of ``parallel.dp_bucket`` bytes, walking the
  blocks (head, layers in reverse, embedding) of the *last* backward of each model chunk; a
  bucket's collective depends only on the block whose gradients complete it, so it overlaps the
  rest of the backward (Megatron DDP with overlap); with ``parallel.grad_sync: after_backward``
  every bucket waits for the end of that backward (DeepSpeed's pipeline engine reduces
  gradients after the last micro-batch). ZeRO-0: all-reduce; ZeRO-1 and the
  distributed optimizer: reduce-scatter, then an all-gather of the updated parameters after the
  optimizer (Megatron distributed optimizer). ZeRO-2 (DeepSpeed semantics): bucketed
  reduce-scatter in *every* micro-batch's backward, all-gather after the optimizer. ZeRO-3/FSDP:
  per block a parameter all-gather in forward and again in backward, issued ``zero3_prefetch``
  blocks ahead, and a gradient reduce-scatter after each block's backward, every micro-batch
  (``parallel.zero3_impl: deepspeed-0.3``: DeepSpeed 0.3's per-tensor blocking fetches,
  heterosim/workload/zero3.py).
  Routed-expert gradients use the expert-data-parallel group. Gradients travel as
  ``training.grad_reduce_dtype`` (default ``main_grad_bytes(dtype)``: fp32 for bf16), parameters
  as 16-bit values.
- ``parallel.p2p_sync: blocking`` (Megatron-LM's pipeline communication without
  ``overlap_p2p_comm``: ``_communicate`` posts the sends and receives with ``batch_isend_irecv``,
  waits on every request and then calls ``torch.cuda.synchronize()`` "to protect against race
  condition when using batch_isend_irecv()", ``batch_p2p_sync`` default True,
  megatron/core/pipeline_parallel/p2p_communication.py; the 2021-2022 megatron/p2p_communication.py
  hard-codes it): the compute that follows a send waits for the send to finish, as it waits for a
  receive. With the interleaved schedule the sends and receives are grouped into Megatron's
  combined calls (heterosim/workload/walk_interleaved_blocking.py): in the steady state a
  forward's output leaves only after the paired backward. ``overlap`` (default): only receives
  block.
- ``parallel.p2p_scatter_gather`` (Megatron-LM v2-v3 ``--scatter-gather-tensors-in-pipeline``,
  Narayanan et al. SC'21 §4.1), tp > 1 without sequence parallelism: each TP rank sends 1/tp of
  the activation to its peer, and the receiving TP group all-gathers the pieces over NVLink
  before the step's compute. Also on explicit plans whose replicas all share one TP degree
  (DeepSpeed's ``PipelineEngine``, which Sailor runs, partitions both the activation and its
  gradient this way: ``PartitionedTensor`` over the slice-parallel group, eth-easl/sailor
  deepspeed/pipe_engine.py ``_exec_forward_pass`` and ``_exec_send_grads``).
- ``parallel.cp`` (context parallelism, heterosim/workload/cp.py): every op sees the rank's
  ``seq_len/cp`` tokens (pipeline activations too, sent to the same CP index of the next stage);
  core attention runs as ``cp`` steps with the K/V ring's sends and recvs beside them (peers: the
  CP group's neighbours; tags ``CP_TAG_BASE`` + the exchange's index in its schedule step), or
  behind K/V all-gathers of the "cp" group; gradients are reduced over dp x cp ranks.
- with tied embeddings and pp > 1, the all-reduce of the word-embedding gradient between the first
  and last stage (Megatron's embedding group), after the DP synchronisation.
- the optimizer step (gradient norm, Adam) after every gradient collective, then the parameter
  all-gathers of ZeRO-1/2 and the distributed optimizer.

Explicit plans (``parallel.stages``, :class:`~heterosim.workload.groups.StagedLayout`): each rank
builds its ops with its own replica's TP degree; the activation between stages of different TP
degrees travels as the send/recv pairs of :func:`~heterosim.workload.groups.boundary_transfers`
(the full tensor from TP rank ``j mod tp_from`` to each TP rank ``j``, or a re-sharding of the
sequence shards under sequence parallelism), in both directions; in a stage whose replicas differ
in TP degree the gradient buckets are cut on the stage's full (unsharded) parameters, so every
replica closes the same buckets, and each bucket is reduced over the gradient-shard groups
(:meth:`~heterosim.workload.groups.ParallelGroups.dp_shards`). Replicas with different
micro-batch counts or GPU types meet in the gradient collective, which (like every collective)
starts when its last member arrives: the reduction waits for the slowest replica.

Approximations (documented, not hidden): the tiny all-reduces of the gradient norm and of
sequence-parallel norm weights are omitted; bucket boundaries follow whole blocks' parameter
bytes (a bucket closes once it holds at least ``dp_bucket`` bytes).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property

import numpy as np

from heterosim.config.experiment import ExperimentConfig, ParallelConfig
from heterosim.config.limits import check_experiment_budget
from heterosim.workload.builder import TraceAssembler
from heterosim.workload.chunk_units import ChunkUnits
from heterosim.workload.groups import ParallelGroups, RankLayout, StagedLayout
from heterosim.workload.ops import OpSpec, layer_backward_ops, layer_forward_ops
from heterosim.workload.optimizer_step import finish_iteration
from heterosim.workload.partition import CostFn, MemoryFn, Partition, plan_partition
from heterosim.workload.pipeline_p2p import PipelineP2P
from heterosim.workload.rank_context import RankContext
from heterosim.workload.relabel import frozen, relabel
from heterosim.workload.routing import RankRouting, layer_counts, pair_tokens, rank_routing
from heterosim.workload.schedule import Step, pipeline_schedule
from heterosim.workload.trace import RankTrace
from heterosim.workload.walk_deepspeed import DeepSpeedWalk
from heterosim.workload.walk_interleaved_blocking import InterleavedBlockingWalk
from heterosim.workload.walk_megatron import MegatronWalk


class RankProgram:
    """Builds the trace of one rank of a workload from its pieces: the model-chunk units
    (chunk_units.py), the pipeline p2p endpoints (pipeline_p2p.py), the walk of the schedule
    (walk_megatron.py, walk_interleaved_blocking.py or walk_deepspeed.py) and the optimizer step
    (optimizer_step.py), all sharing the rank's :class:`RankContext`."""

    def __init__(self, workload: Workload, rank: int) -> None:
        self.w = workload
        self.rank = rank
        self.ctx = RankContext(workload, rank)

    def steps(self) -> list[Step]:
        ctx = self.ctx
        p = ctx.par
        return pipeline_schedule(p.schedule, p.pp, ctx.stage, ctx.micro_batches, p.vpp)

    def build(self) -> RankTrace:
        ctx = self.ctx
        p = ctx.par
        steps = self.steps()
        units = ChunkUnits(ctx, steps)
        deepspeed = ctx.exp.framework.name == "deepspeed"
        out = TraceAssembler()
        p2p = PipelineP2P(ctx, out, deepspeed)
        if deepspeed:
            DeepSpeedWalk(ctx, out, p2p, units).run(steps)
        elif p.p2p_sync == "blocking" and p.schedule == "interleaved":
            InterleavedBlockingWalk(ctx, out, p2p, units, steps).run()
        else:
            MegatronWalk(ctx, out, p2p, units).run(steps)
        finish_iteration(ctx, out)
        meta = {
            "experiment": ctx.exp.name,
            "model": ctx.model.name,
            "rank": str(self.rank),
            "world_size": str(self.w.layout.world_size),
            "stage": str(ctx.stage),
            "dp_replica": str(ctx.replica),
            "schedule": p.schedule,
            "micro_batches": str(ctx.micro_batches),
            "tp": str(p.tp),
        }
        gpu = self.w.gpu_type(self.rank)
        return out.finish(self.rank, ctx.templates.build(), gpu, meta)


@dataclass
class Workload:
    """An experiment's layout, communicators, partition and (lazily built) per-rank traces."""

    experiment: ExperimentConfig
    layout: RankLayout | StagedLayout
    groups: ParallelGroups
    partition: Partition
    memory_fn: MemoryFn | None = None
    # global GPU of every rank once placed (the plan layer places explicit plans); None: rank r
    # on GPU r
    rank_gpu: Sequence[int] | None = None
    _layer_ops: dict[tuple, tuple[list[OpSpec], list[OpSpec]]] = field(default_factory=dict, repr=False)
    _routing: dict[int, np.ndarray] = field(default_factory=dict, repr=False)
    _prototypes: dict[tuple, RankTrace] = field(default_factory=dict, repr=False)

    def layer_ops(
        self, layer: int, tp: int | None = None, ep_index: int = 0
    ) -> tuple[list[OpSpec], list[OpSpec]]:
        """(forward, backward) ops of ``layer`` at TP degree ``tp`` (default: the experiment's)
        on EP rank ``ep_index``; layers differ only in being dense or MoE, and with uneven
        routing (``model.moe_routing``) in what each EP rank routes and receives."""
        par = self.experiment.parallel if tp is None else replace(self.experiment.parallel, tp=tp)
        if par.tp_backward_overlap is None:  # a config built in code: as load_experiment resolves it
            par = replace(par, tp_backward_overlap=par.backward_overlap(self.experiment.framework.name))
        moe = self.experiment.model.is_moe_layer(layer)
        routing = self.rank_routing(layer, ep_index) if moe else None
        key = (moe, par.tp, routing)
        if key not in self._layer_ops:
            e = self.experiment
            forward = layer_forward_ops(e.model, e.training, par, layer, routing)
            self._layer_ops[key] = (
                forward * e.framework.layer_forward_passes,
                layer_backward_ops(e.model, e.training, par, layer, routing),
            )
        return self._layer_ops[key]

    def routing_pairs(self, layer: int) -> np.ndarray | None:
        """(ep, ep) token copies EP rank i dispatches to EP rank j in MoE layer ``layer`` (one
        micro-batch); None under even routing (heterosim/workload/routing.py)."""
        model, par = self.experiment.model, self.experiment.parallel
        if not model.uneven_routing or not model.is_moe_layer(layer):
            return None
        assert model.moe is not None and model.moe_routing is not None
        index = model.moe_layer_index(layer)
        if index not in self._routing:
            tokens = self.experiment.training.micro_batch * self.experiment.training.seq_len
            counts = layer_counts(model.moe_routing, model.moe, index, tokens, par.ep)
            self._routing[index] = pair_tokens(counts, par.ep)
        return self._routing[index]

    def rank_routing(self, layer: int, ep_index: int) -> RankRouting | None:
        pairs = self.routing_pairs(layer)
        return None if pairs is None else rank_routing(pairs, ep_index)

    def rank_parallel(self, rank: int) -> ParallelConfig:
        """The parallel settings as ``rank`` sees them (its replica's TP degree)."""
        par = self.experiment.parallel
        tp = self.layout.tp_degree(rank)
        return par if tp == par.tp else replace(par, tp=tp)

    def gpu_of(self, rank: int) -> int:
        """Global GPU of ``rank`` (``rank_gpu`` when placed, else GPU ``rank``)."""
        return int(self.rank_gpu[rank]) if self.rank_gpu is not None else rank

    def gpu_type(self, rank: int) -> str:
        """GPU type of ``rank``: the plan's for explicit plans, else GPU ``rank`` of the cluster
        (the default placement)."""
        if isinstance(self.layout, StagedLayout):
            return self.layout.gpu_type(rank)
        return self.experiment.cluster.gpu_type[rank]

    @property
    def world_size(self) -> int:
        return self.layout.world_size

    def trace(self, rank: int) -> RankTrace:
        """Build rank ``rank``'s trace (not cached: a big iteration has millions of nodes)."""
        if not 0 <= rank < self.world_size:
            raise IndexError(f"rank {rank} outside 0..{self.world_size - 1}")
        key = self._prototype_key(rank)
        if key is None:
            return RankProgram(self, rank).build()
        proto = self._prototypes.get(key)
        if proto is None:
            proto = self._prototypes[key] = frozen(RankProgram(self, rank).build())
        assert isinstance(self.layout, RankLayout)
        trace = relabel(proto, rank, self.layout, self.groups)
        return trace if trace is not None else RankProgram(self, rank).build()

    def _prototype_key(self, rank: int) -> tuple | None:
        """Ranks with equal keys have the same trace up to group ids and peers
        (heterosim/workload/relabel.py); None: build this rank's trace directly (explicit plans,
        expert parallelism, whose routing differs per EP rank)."""
        lay = self.layout
        if not isinstance(lay, RankLayout) or lay.ep != 1:
            return None
        replica = lay.dp_index(rank)
        return (
            lay.pp_index(rank),
            lay.cp_index(rank),
            self.partition.replica_micro_batches[replica],
            self.gpu_type(rank),
        )

    def iter_traces(self, ranks: Sequence[int] | None = None) -> Iterator[RankTrace]:
        for rank in range(self.world_size) if ranks is None else ranks:
            yield self.trace(rank)

    @cached_property
    def traces(self) -> LazyTraces:
        return LazyTraces(self)

    def schedule(self, rank: int) -> list[Step]:
        return RankProgram(self, rank).steps()

    def rank_layers(self, rank: int) -> list[range]:
        stage = self.layout.pp_index(rank)
        return self.partition.stage_layers(stage)

    def memory_bytes(self, rank: int) -> int:
        """Estimated peak memory of ``rank`` (weights, gradients, optimizer, activations)."""
        from heterosim.workload.partition import in_flight_micro_batches

        par = self.rank_parallel(rank)
        stage = self.layout.pp_index(rank)
        layers = [layer for rng in self.rank_layers(rank) for layer in rng]
        fn = self.memory_fn
        if fn is None:
            from heterosim.workload.memory import estimate_rank_memory

            e = self.experiment
            in_flight = in_flight_micro_batches(e, stage)
            if par.plan is not None:
                m = self.partition.replica_micro_batches[self.layout.dp_index(rank)]
                in_flight = min(par.pp - stage, m) if par.schedule == "1f1b" else m
            est = estimate_rank_memory(
                e.model,
                e.training,
                par,
                layers,
                stage == 0,
                stage == (par.pp * par.vpp - 1) % par.pp,
                in_flight,
            )
            return int(est.total_bytes)
        return int(
            fn(
                layers,
                stage == 0,
                stage == (par.pp * par.vpp - 1) % par.pp,
                in_flight_micro_batches(self.experiment, stage),
            )
        )

    def summary(self, ranks: Sequence[int] | None = None) -> dict:
        """workload.json content (see docs/results.md); builds each listed rank's trace once."""
        from heterosim.workload.summary import workload_summary

        return workload_summary(self, ranks)


class LazyTraces(Sequence[RankTrace]):
    """``workload.traces``: a sequence whose items are built when accessed."""

    def __init__(self, workload: Workload) -> None:
        self._w = workload

    def __len__(self) -> int:
        return self._w.world_size

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self._w.trace(r) for r in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        return self._w.trace(index)

    def __iter__(self) -> Iterator[RankTrace]:
        return self._w.iter_traces()


def generate_workload(
    experiment: ExperimentConfig, *, cost_fn: CostFn | None = None, memory_fn: MemoryFn | None = None
) -> Workload:
    """Lay out ranks, list communicators and partition layers and micro-batches.

    ``cost_fn(gpu_type, ops) -> seconds`` times op lists for the partitioner (default: catalogue
    roofline); ``memory_fn(layers, has_embedding, has_head, in_flight) -> bytes`` overrides the
    memory estimate. Traces are built lazily from the returned :class:`Workload`. An experiment
    whose plan cannot fit in memory stops here, before anything is built
    (:func:`heterosim.config.limits.check_experiment_budget`).
    """
    check_experiment_budget(experiment)
    par = experiment.parallel
    layout: RankLayout | StagedLayout
    if par.plan is not None:
        layout = StagedLayout(
            tuple(tuple(r.tp for r in s.replicas) for s in par.plan.stages),
            tuple(tuple(r.gpu for r in s.replicas) for s in par.plan.stages),
        )
    else:
        layout = RankLayout(par.tp, par.dp, par.pp, par.ep, par.rank_order, par.cp)
    groups = ParallelGroups(layout, tied_embeddings=experiment.model.tied_embeddings)
    partition = plan_partition(experiment, layout, cost_fn, memory_fn)
    return Workload(experiment, layout, groups, partition, memory_fn)


__all__ = ["LazyTraces", "RankProgram", "Workload", "generate_workload"]
