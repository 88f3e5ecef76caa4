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
  combined calls (``_combined_p2p_steps``): in the steady state a forward's output leaves only
  after the paired backward. ``overlap`` (default): only receives block.
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

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import cast

import numpy as np

from heterosim.catalog.gpus import DTYPE_BYTES
from heterosim.config.experiment import ExperimentConfig, ParallelConfig
from heterosim.config.limits import check_experiment_budget
from heterosim.workload.builder import PREVIOUS_TAIL, FrozenUnit, TemplateTable, TraceAssembler, UnitProgram
from heterosim.workload.cp import RingPlacer, is_ring_op
from heterosim.workload.framework import collective_call_op, load_micro_batch_ops, pipeline_payload
from heterosim.workload.groups import ParallelGroups, RankLayout, StagedLayout, boundary_transfers
from heterosim.workload.ops import (
    OpSpec,
    embedding_backward_ops,
    embedding_forward_ops,
    embedding_params_on_rank,
    head_backward_ops,
    head_forward_ops,
    head_params_on_rank,
    layer_backward_ops,
    layer_expert_params_on_rank,
    layer_forward_ops,
    layer_params_on_rank,
    main_grad_bytes,
    optimizer_ops,
    rank_expert_params,
    rank_linear_weights,
    rank_params,
)
from heterosim.workload.ops_base import activation_dtype
from heterosim.workload.partition import CostFn, MemoryFn, Partition, plan_partition
from heterosim.workload.relabel import frozen, relabel
from heterosim.workload.routing import RankRouting, layer_counts, pair_tokens, rank_routing
from heterosim.workload.schedule import Step, pipeline_schedule, warmup_forwards
from heterosim.workload.trace import (
    ALL_GATHER,
    ALL_REDUCE,
    COMM_COLL_NODE,
    COMM_RECV_NODE,
    COMM_SEND_NODE,
    NO_COLLECTIVE,
    REDUCE_SCATTER,
    RankTrace,
)
from heterosim.workload.zero3 import BlockFetch, block_fetches, layer_tensors

EMBEDDING_BLOCK = -1
HEAD_BLOCK = -2


@dataclass(frozen=True)
class Block:
    """A piece of a model chunk with its own parameters: the embedding, one layer or the head."""

    layer: int  # layer index, EMBEDDING_BLOCK or HEAD_BLOCK
    forward: list[OpSpec]
    backward: list[OpSpec]
    params: int  # parameters on this rank
    expert_params: int  # of which routed-expert parameters (synchronised over ep_dp)
    full_params: int = 0  # unsharded parameters (stages whose replicas differ in TP)
    tensors: tuple[int, ...] = ()  # elements per parameter tensor (zero3_impl deepspeed-0.3)

    @property
    def layer_attr(self) -> int:
        return self.layer if self.layer >= 0 else -1


def _comm(
    label: str, phase: str, comm_type: int, size: int, dtype: str, node_type: int, role: str = ""
) -> OpSpec:
    return OpSpec(
        label,
        "comm",
        phase,
        dtype,
        (0, 0, 0, 0),
        node_type=node_type,
        comm_type=comm_type,
        comm_bytes=int(size),
        comm_group=role,
    )


class RankProgram:
    """Builds the trace of one rank of a workload."""

    def __init__(self, workload: Workload, rank: int) -> None:
        self.w = workload
        self.rank = rank
        exp = workload.experiment
        self.exp = exp
        self.model, self.training = exp.model, exp.training
        self.par = workload.rank_parallel(rank)
        lay = workload.layout
        self.stage = lay.pp_index(rank)
        self.replica = lay.dp_index(rank)
        self.tp_index = lay.tp_index(rank)
        self.cp_index = lay.cp_index(rank)
        self.mixed_dp = lay.stage_is_mixed(self.stage)
        self.V = self.par.pp * self.par.vpp
        self.templates = TemplateTable()
        self.act_dtype = activation_dtype(self.training.dtype)
        self.grad_bytes = main_grad_bytes(self.training.dtype)
        reduce_dtype = self.training.grad_reduce_dtype
        if reduce_dtype == "auto":  # the main-gradient dtype
            reduce_dtype = "fp16" if self.grad_bytes == 2 else "fp32"
        self.reduce_dtype = reduce_dtype
        self.reduce_bytes = DTYPE_BYTES[reduce_dtype]
        self.param_bytes = 4 if self.training.dtype == "fp32" else 2
        self.micro_batches = workload.partition.replica_micro_batches[self.replica]
        self.ds_zero3 = self.par.zero >= 3 and self.par.zero3_impl == "deepspeed-0.3"
        self._blocks: dict[int, list[Block]] = {}
        # framework.collective_overhead: a marker op before every TP collective and pipeline p2p
        # call carries its cost
        self._call_marker = (
            self.templates.add(collective_call_op(self.act_dtype))
            if exp.framework.has_collective_overhead
            else None
        )

    # -- templates -------------------------------------------------------------------------

    def _template(self, op: OpSpec) -> int | None:
        """Template row for ``op``; None for a collective over a one-rank group (nothing to do)."""
        if op.node_type == COMM_COLL_NODE:
            gid = self.w.groups.group_id(self.rank, op.comm_group)
            if gid is None:
                return None
            return self.templates.add(op, gid)
        return self.templates.add(op)

    # -- blocks ----------------------------------------------------------------------------

    def blocks(self, chunk: int) -> list[Block]:
        if chunk not in self._blocks:
            self._blocks[chunk] = self._make_blocks(chunk)
        return self._blocks[chunk]

    def _make_blocks(self, chunk: int) -> list[Block]:
        m, t, p = self.model, self.training, self.par
        v = chunk * p.pp + self.stage
        out: list[Block] = []
        if v == 0:
            emb = embedding_params_on_rank(m, p)
            positions = m.max_seq * m.hidden if m.learned_positions else 0
            out.append(
                Block(
                    EMBEDDING_BLOCK,
                    embedding_forward_ops(m, t, p),
                    embedding_backward_ops(m, t, p),
                    emb,
                    0,
                    tensors=tuple(x for x in (emb - positions, positions) if x > 0),
                )
            )
        ep_index = self.replica % p.ep
        for layer in self.w.partition.layers_of(self.stage, chunk):
            fwd, bwd = self.w.layer_ops(layer, p.tp, ep_index)
            out.append(
                Block(
                    layer,
                    fwd,
                    bwd,
                    layer_params_on_rank(m, p, layer),
                    layer_expert_params_on_rank(m, p, layer),
                    tensors=tuple(layer_tensors(m, p, layer)) if self.ds_zero3 else (),
                )
            )
        if v == self.V - 1:
            head = head_params_on_rank(m, p, has_embedding=(v == 0))
            norms = m.norm_params()
            tensors = [m.hidden] * (norms // m.hidden) + ([head - norms] if head > norms else [])
            out.append(
                Block(
                    HEAD_BLOCK,
                    head_forward_ops(m, t, p),
                    head_backward_ops(m, t, p),
                    head,
                    0,
                    tensors=tuple(tensors),
                )
            )
        if self.mixed_dp:  # gradient buckets on the stage's full parameters (module docstring)
            full = replace(p, tp=1)
            for i, block in enumerate(out):
                if block.layer == EMBEDDING_BLOCK:
                    params = embedding_params_on_rank(m, full)
                elif block.layer == HEAD_BLOCK:
                    params = head_params_on_rank(m, full, has_embedding=(v == 0))
                else:
                    params = layer_params_on_rank(m, full, block.layer)
                out[i] = replace(block, full_params=params)
        return out

    def _fetch(self, block: Block, phase: str) -> BlockFetch:
        """DeepSpeed 0.3 ZeRO-3 fetch of ``block`` in ``phase`` (heterosim/workload/zero3.py)."""
        fwd, bwd = block_fetches(
            list(block.tensors),
            self.training.recompute == "full",
            self.par.zero3_persistence_threshold,
            self.par.zero3_max_reuse_distance,
        )
        return fwd if phase == "fwd" else bwd

    def _framework(self, label: str, phase: str, ns: int) -> OpSpec:
        return OpSpec(label, "framework", phase, self.act_dtype, (max(1, int(ns)), 0, 0, 0))

    # -- unit programs ---------------------------------------------------------------------

    def _gather(self, block: Block, phase: str) -> OpSpec | None:
        size = block.params * self.param_bytes
        if self.ds_zero3:
            size = self._fetch(block, phase).gather_elements * self.param_bytes
            if size <= 0:
                return None  # every tensor persistent: nothing to gather
        return _comm(
            f"zero3_allgather.{phase}", phase, ALL_GATHER, size, self.act_dtype, COMM_COLL_NODE, "dp"
        )

    def _forward_unit(self, chunk: int) -> FrozenUnit:
        return self._unit(self.blocks(chunk), "fwd", sync=False)

    def _backward_unit(self, chunk: int, sync: bool) -> FrozenUnit:
        return self._unit(list(reversed(self.blocks(chunk))), "bwd", sync)

    def _unit(self, blocks: list[Block], phase: str, sync: bool) -> FrozenUnit:
        unit = UnitProgram()
        zero3 = self.par.zero >= 3
        prefetch = self.par.zero3_prefetch
        gathers: dict[int, int] = {}

        def issue_gather(j: int, deps: list[int]) -> None:
            if zero3 and j < len(blocks) and j not in gathers:
                op = self._gather(blocks[j], phase)
                tmpl = self._template(op) if op is not None else None
                if tmpl is not None:
                    gathers[j] = unit.add(tmpl, blocks[j].layer_attr, deps)

        if prefetch > 0:
            for j in range(min(prefetch, len(blocks))):
                issue_gather(j, [PREVIOUS_TAIL])
        buckets = _Buckets(self, unit, phase) if sync and phase == "bwd" else None
        ring = RingPlacer(*self.w.groups.cp_ring(self.rank))
        deferred = self.par.grad_sync == "after_backward"  # ZeRO < 2 (checked by the config)
        beside: list[list[int]] = []  # [node, chain ops still to run beside it]
        for j, block in enumerate(blocks):
            if prefetch == 0:
                issue_gather(j, [unit.tail if unit.tail >= 0 else PREVIOUS_TAIL])
            ops = block.forward if phase == "fwd" else block.backward
            if self.ds_zero3:  # the blocking fetch runs before the block's kernels
                fetch = self._fetch(block, phase)
                if fetch.gather_calls:
                    ns = fetch.fetch_ns(self.param_bytes, self.w.groups.size(self.rank, "dp"))
                    ops = [self._framework(f"zero3_fetch.{phase}", phase, ns), *ops]
            first = True
            for op in ops:
                tmpl = self._template(op)
                if tmpl is None:
                    continue
                if is_ring_op(op):  # the context-parallel K/V ring beside the attention steps
                    ring.place(unit, tmpl, op, block.layer_attr)
                    continue
                if self._call_marker is not None and op.comm_group == "tp":
                    unit.chain(self._call_marker, block.layer_attr)
                if op.overlap_next > 0:  # runs beside the next ops of the chain (tp_overlap.py)
                    side = unit.add(tmpl, block.layer_attr, [unit.tail if unit.tail >= 0 else PREVIOUS_TAIL])
                    beside.append([side, op.overlap_next])
                    continue
                extra = [gathers[j]] if first and j in gathers else []
                extra += ring.before_chain()
                extra += [side for side, left in beside if left == 0]
                beside = [entry for entry in beside if entry[1] > 0]
                unit.chain(tmpl, block.layer_attr, extra)
                for entry in beside:
                    entry[1] -= 1
                if first and prefetch > 0:
                    issue_gather(j + prefetch, [unit.tail])
                first = False
            if zero3 and phase == "bwd":
                self._zero3_scatter(unit, block)
            if buckets is not None and not deferred:
                buckets.add(block)
        if beside:  # the unit ends when the ops that ran beside its last ones have ended too
            end = self._template(self._framework(f"overlap_join.{phase}", phase, 1))
            assert end is not None
            unit.chain(end, blocks[-1].layer_attr, [side for side, _ in beside])
        if buckets is not None:
            for block in blocks if deferred else ():
                buckets.add(block)  # every bucket waits for the end of the backward
            buckets.flush()
        return unit.freeze()

    def _zero3_scatter(self, unit: UnitProgram, block: Block) -> None:
        if self.ds_zero3:  # per-tensor reduce_scatter calls copy n partitions into a flat buffer
            calls = self._fetch(block, "bwd").reduce_scatter_calls
            ns = BlockFetch(0, 0, calls).scatter_ns(self.w.groups.size(self.rank, "dp"))
            tmpl = self._template(self._framework("zero3_scatter_copies", "bwd", ns))
            if tmpl is not None and ns > 0:
                unit.chain(tmpl, block.layer_attr, [])
        for role, params in (("dp", block.params - block.expert_params), ("ep_dp", block.expert_params)):
            if params <= 0:
                continue
            op = _comm(
                "zero3_reduce_scatter.grad",
                "bwd",
                REDUCE_SCATTER,
                params * self.reduce_bytes,
                self.reduce_dtype,
                COMM_COLL_NODE,
                role,
            )
            tmpl = self._template(op)
            if tmpl is not None:
                unit.grad_sync.append(unit.add(tmpl, block.layer_attr, [unit.tail]))

    # -- pipeline --------------------------------------------------------------------------

    @property
    def _scatter_gather(self) -> bool:
        """1/tp of each activation per TP rank, all-gathered after the receive: on a grid, or on
        an explicit plan whose replicas all have one TP degree (the pieces line up rank to rank)."""
        p, lay = self.par, self.w.layout
        uniform = not isinstance(lay, StagedLayout) or {t for row in lay.cell_tps for t in row} == {p.tp}
        return p.p2p_scatter_gather and p.tp > 1 and not p.sequence_parallel and uniform

    def _p2p_bytes(self) -> int:
        t = self.training
        tokens = t.micro_batch * (t.seq_len // self.par.cp)  # each CP rank sends its own tokens
        if self.par.sequence_parallel or self._scatter_gather:
            tokens = -(-tokens // self.par.tp)
        return tokens * self.model.hidden * DTYPE_BYTES[self.act_dtype]

    def _gathered(
        self, out: TraceAssembler, recvs: tuple[int, ...], gather: int | None, mb: int, v: int
    ) -> tuple[int, ...]:
        """What a step's compute waits for after receiving ``recvs``: the receives themselves, or
        with the scatter/gather optimisation the TP all-gather of the received pieces."""
        if gather is None:
            return recvs
        return (out.node(gather, micro_batch=mb, stage=v, deps=recvs),)

    def _peer(self, virtual_stage: int) -> int:
        lay = self.w.layout
        return cast(int, lay.rank_of(self.tp_index, self.replica, virtual_stage % self.par.pp, self.cp_index))

    def _transfers(self, other: int, receive: bool) -> list[tuple[int, int]]:
        """(peer rank, bytes) of this rank's sends (``receive`` False) or recvs at the boundary
        with virtual stage ``other`` (activations forward and their gradients backward follow
        the same rule, from the sending stage's TP degree to the receiving one's)."""
        lay = self.w.layout
        if not isinstance(lay, StagedLayout):
            return [(self._peer(other), self._p2p_bytes())]
        mine, theirs = lay.cell_tp(self.replica, self.stage), lay.cell_tp(self.replica, other)
        tp_from, tp_to = (theirs, mine) if receive else (mine, theirs)
        t = self.training
        tokens = t.micro_batch * t.seq_len
        width = self.model.hidden * DTYPE_BYTES[self.act_dtype]
        out = []
        sliced = self.par.sequence_parallel or self._scatter_gather  # rank i's 1/tp to rank i
        for src, dst, share in boundary_transfers(tp_from, tp_to, sliced):
            if (dst if receive else src) != self.tp_index:
                continue
            peer = lay.rank_of(src if receive else dst, self.replica, other)
            size = -(-(tokens * share.numerator) // share.denominator)  # ceil(tokens * share)
            out.append((int(peer), size * width))  # type: ignore[arg-type]
        return out

    def _p2p_templates(
        self, label: str, phase: str, node_type: int, transfers: list[tuple[int, int]]
    ) -> list[tuple[int, int]]:
        return [
            (peer, self.templates.add(_comm(label, phase, NO_COLLECTIVE, size, self.act_dtype, node_type)))
            for peer, size in transfers
        ]

    def _tag(self, micro_batch: int, boundary: int, direction: int) -> int:
        return (micro_batch * self.V + boundary) * 2 + direction

    # -- the whole rank --------------------------------------------------------------------

    def _combined_p2p_steps(
        self,
        out: TraceAssembler,
        steps: list[Step],
        last_backward: dict[int, int],
        units: tuple[dict, dict, dict],
        transfers: Callable[[str, int], list[tuple[int, int]]],
        calls: Callable[[int, int, int, tuple[int, ...]], tuple[int, ...]],
        gathers: tuple[int | None, int | None],
    ) -> None:
        """Megatron-LM's interleaved 1F1B with blocking p2p (``p2p_sync: blocking``), call by call
        as ``forward_backward_pipelining_with_interleaving`` issues them (megatron/schedules.py,
        2021-2022; megatron/core/pipeline_parallel/schedules.py without overlap_p2p_comm): a lone
        ``recv_forward`` before the first forward; after each warm-up forward one
        ``send_forward_recv_forward`` (the last one also receives a backward gradient:
        ``send_forward_backward_recv_forward_backward``); in the steady state one forward and one
        backward, *then* one ``send_forward_backward_recv_forward_backward`` that sends both
        results (so a forward's output leaves only after the paired backward); in the cool-down a
        ``send_backward_recv_backward`` after each backward (with every micro-batch in the warm-up,
        m == pp, a lone ``recv_backward`` first). Which calls receive (``recv_prev`` /
        ``recv_next``, the first stage being ahead of the last by pp - 1 steps) follows Megatron's
        code; a received tensor is queued for its model chunk and feeds that chunk's next step.
        Every call posts its sends and receives together (``batch_isend_irecv``), waits for all
        of them and synchronises the device, so the next compute waits for every transfer of the
        call (and, with scatter/gather, the TP all-gather of what it received)."""
        p = self.par
        pp, vpp, stage = p.pp, p.vpp, self.stage
        fwd_units, bwd_units, sync_units = units
        gather_f, gather_b = gathers
        total = len(steps) // 2
        warm = warmup_forwards("interleaved", pp, stage, self.micro_batches, vpp)
        all_warm = warm == total
        remaining = total - warm
        first, last = stage == 0, stage == pp - 1

        def chunk(k: int, forward: bool) -> int:  # Megatron's get_model_chunk_id
            c = (k % (pp * vpp)) // pp
            return c if forward else vpp - c - 1

        def index(k: int, forward: bool) -> int:  # position of virtual step k in ``steps``
            if forward:
                return k if k < warm else warm + 2 * (k - warm)
            return warm + 2 * k + 1 if k < remaining else warm + remaining + k

        # each chunk's steps in order: the j-th tensor received for a chunk feeds its j-th step
        queues: dict[tuple[bool, int], list[int]] = {}
        for k in range(total):
            for forward in (True, False):
                queues.setdefault((forward, chunk(k, forward)), []).append(
                    steps[index(k, forward)].micro_batch
                )
        taken: dict[tuple[bool, int], int] = {}

        def receive(forward: bool, c: int, deps: tuple[int, ...]) -> tuple[int, ...]:
            j = taken.get((forward, c), 0)
            taken[forward, c] = j + 1
            mb, v = queues[forward, c][j], c * pp + stage
            kind, other, boundary, gather = (
                ("recv_f", v - 1, v - 1, gather_f) if forward else ("recv_b", v + 1, v, gather_b)
            )
            recvs = tuple(
                out.node(
                    tmpl,
                    micro_batch=mb,
                    stage=v,
                    peer=peer,
                    tag=self._tag(mb, boundary, 0 if forward else 1),
                    deps=deps,
                )
                for peer, tmpl in transfers(kind, other)
            )
            return self._gathered(out, recvs, gather, mb, v)

        def send(k: int, forward: bool, deps: tuple[int, ...]) -> tuple[int, ...]:
            step = steps[index(k, forward)]
            v, mb = step.chunk * pp + stage, step.micro_batch
            if forward and v < self.V - 1:
                kind, other, boundary = "send_f", v + 1, v
            elif not forward and v > 0:
                kind, other, boundary = "send_b", v - 1, v - 1
            else:
                return ()
            return tuple(
                out.node(
                    tmpl,
                    micro_batch=mb,
                    stage=v,
                    peer=peer,
                    tag=self._tag(mb, boundary, 0 if forward else 1),
                    deps=deps,
                )
                for peer, tmpl in transfers(kind, other)
            )

        def compute(k: int, forward: bool, waits: tuple[int, ...]) -> None:
            i = index(k, forward)
            step = steps[i]
            if forward:
                unit = fwd_units[step.chunk]
            else:
                unit = sync_units[step.chunk] if last_backward[step.chunk] == i else bwd_units[step.chunk]
            out.unit(unit, micro_batch=step.micro_batch, stage=step.chunk * pp + stage, head_deps=waits)

        def call(k: int, forward: bool) -> tuple[int, ...]:
            step = steps[index(k, forward)]
            return calls(1, step.micro_batch, step.chunk * pp + stage, (out.tail,) if out.tail >= 0 else ())

        waits: tuple[int, ...] = () if first else receive(True, 0, call(0, True))
        for k in range(warm):
            compute(k, True, waits)
            deps = call(k, True)
            recv_prev = not (first and chunk(k + 1, True) == 0) and k != total - 1
            waits = send(k, True, deps)
            if recv_prev:
                waits += receive(True, chunk(k + 1, True), deps)
            if k == warm - 1 and not all_warm and not last:
                waits += receive(False, vpp - 1, deps)
        for k in range(remaining):
            fk = k + warm
            compute(fk, True, waits)
            compute(k, False, ())
            deps = call(k, False)
            waits = send(fk, True, deps) + send(k, False, deps)
            if first:
                c = chunk(fk - (pp - 1), True)
                recv_prev, next_f = c != vpp - 1, c + 1
            else:
                recv_prev, next_f = True, chunk(fk + 1, True)
            if last:
                c = chunk(k - (pp - 1), False)
                recv_next, next_b = c != 0, c - 1
            else:
                recv_next, next_b = True, chunk(k + 1, False)
            if recv_prev and k != remaining - 1:
                waits += receive(True, next_f, deps)
            if recv_next:
                waits += receive(False, next_b, deps)
        if all_warm and not last:
            waits += receive(False, vpp - 1, calls(1, -1, stage, waits))
        for k in range(remaining, total):
            compute(k, False, waits)
            deps = call(k, False)
            waits = send(k, False, deps)
            next_b = chunk(k + 1, False)
            if not (last and next_b == vpp - 1) and k != total - 1:
                waits += receive(False, next_b, deps)
        if waits:  # the optimizer step waits for the last call's transfers as well
            out.tail = waits[-1]

    def steps(self) -> list[Step]:
        p = self.par
        return pipeline_schedule(p.schedule, p.pp, self.stage, self.micro_batches, p.vpp)

    def build(self) -> RankTrace:
        p = self.par
        steps = self.steps()
        zero_every_step = p.zero >= 2
        last_backward = {}
        for i, s in enumerate(steps):
            if s.kind == "B":
                last_backward[s.chunk] = i
        fwd_units = {c: self._forward_unit(c) for c in range(p.vpp)}
        bwd_units = {c: self._backward_unit(c, sync=zero_every_step) for c in range(p.vpp)}
        sync_units = (
            bwd_units if zero_every_step else {c: self._backward_unit(c, sync=True) for c in range(p.vpp)}
        )
        staged = isinstance(self.w.layout, StagedLayout)
        p2p: dict[tuple[str, int], list[tuple[int, int]]] = {}

        def transfers(kind: str, other: int) -> list[tuple[int, int]]:
            """(peer, template) of this rank's p2p nodes of ``kind`` toward virtual stage
            ``other`` (stages only differ in TP in explicit plans, so grids cache one entry)."""
            key = (kind, other if staged else -1)
            if key not in p2p:
                receive, direction = kind.startswith("recv"), 0 if kind.endswith("f") else 1
                label = f"pp_{'recv' if receive else 'send'}.{'fwd' if direction == 0 else 'bwd'}"
                node = COMM_RECV_NODE if receive else COMM_SEND_NODE
                p2p[key] = self._p2p_templates(
                    label, "fwd" if direction == 0 else "bwd", node, self._transfers(other, receive)
                )
            if not staged:
                return [(self._peer(other), tmpl) for _, tmpl in p2p[key]]
            return p2p[key]

        deepspeed = self.exp.framework.name == "deepspeed"
        if not staged and not deepspeed:  # the grid's four p2p templates, in their historical order
            for kind in ("recv_f", "send_f", "recv_b", "send_b"):
                transfers(kind, 0)
        gather_f = gather_b = None
        if self._scatter_gather:
            size = self._p2p_bytes() * p.tp  # nccl-tests size convention: the gathered bytes
            gid = self.w.groups.group_id(self.rank, "tp")
            assert gid is not None  # scatter/gather needs tp > 1, so the rank has a TP group
            gather_f = self.templates.add(
                _comm("pp_recv_allgather.fwd", "fwd", ALL_GATHER, size, self.act_dtype, COMM_COLL_NODE, "tp"),
                gid,
            )
            gather_b = self.templates.add(
                _comm("pp_recv_allgather.bwd", "bwd", ALL_GATHER, size, self.act_dtype, COMM_COLL_NODE, "tp"),
                gid,
            )
        out = TraceAssembler()

        def calls(count: int, mb: int, v: int, deps: tuple[int, ...]) -> tuple[int, ...]:
            """``count`` collective-call markers (framework.collective_overhead) after ``deps``."""
            marker = self._call_marker
            for _ in range(count if marker is not None else 0):
                assert marker is not None
                deps = (out.node(marker, micro_batch=mb, stage=v, deps=deps),)
            return deps

        if deepspeed:
            self._deepspeed_steps(out, steps, last_backward, fwd_units, bwd_units, sync_units, calls)
        blocking = p.p2p_sync == "blocking"
        combined = blocking and p.schedule == "interleaved" and not deepspeed
        if combined:
            self._combined_p2p_steps(
                out,
                steps,
                last_backward,
                (fwd_units, bwd_units, sync_units),
                transfers,
                calls,
                (gather_f, gather_b),
            )
        pending: tuple[int, ...] = ()  # sends the next compute waits for (p2p_sync blocking)
        for i, step in enumerate(() if deepspeed or combined else steps):
            v = step.chunk * p.pp + self.stage
            mb = step.micro_batch
            if step.kind == "F":
                deps: tuple[int, ...] = pending
                if v > 0:
                    prev = calls(1, mb, v, (out.tail,) if out.tail >= 0 else ())
                    recvs = tuple(
                        out.node(
                            tmpl, micro_batch=mb, stage=v, peer=peer, tag=self._tag(mb, v - 1, 0), deps=prev
                        )
                        for peer, tmpl in transfers("recv_f", v - 1)
                    )
                    deps = (*deps, *self._gathered(out, recvs, gather_f, mb, v))
                out.unit(fwd_units[step.chunk], micro_batch=mb, stage=v, head_deps=deps)
                pending = ()
                if v < self.V - 1:
                    sends = tuple(
                        out.node(
                            tmpl,
                            micro_batch=mb,
                            stage=v,
                            peer=peer,
                            tag=self._tag(mb, v, 0),
                            deps=calls(1, mb, v, (out.tail,)),
                        )
                        for peer, tmpl in transfers("send_f", v + 1)
                    )
                    pending = sends if blocking else ()
            else:
                deps = pending
                if v < self.V - 1:
                    prev = calls(1, mb, v, (out.tail,) if out.tail >= 0 else ())
                    recvs = tuple(
                        out.node(tmpl, micro_batch=mb, stage=v, peer=peer, tag=self._tag(mb, v, 1), deps=prev)
                        for peer, tmpl in transfers("recv_b", v + 1)
                    )
                    deps = (*deps, *self._gathered(out, recvs, gather_b, mb, v))
                unit = sync_units[step.chunk] if last_backward[step.chunk] == i else bwd_units[step.chunk]
                out.unit(unit, micro_batch=mb, stage=v, head_deps=deps)
                pending = ()
                if v > 0:
                    sends = tuple(
                        out.node(
                            tmpl,
                            micro_batch=mb,
                            stage=v,
                            peer=peer,
                            tag=self._tag(mb, v - 1, 1),
                            deps=calls(1, mb, v, (out.tail,)),
                        )
                        for peer, tmpl in transfers("send_b", v - 1)
                    )
                    pending = sends if blocking else ()
        if pending:  # the optimizer step waits for the last blocking sends as well
            out.tail = pending[-1]
        self._finish_iteration(out)
        exp = self.exp
        meta = {
            "experiment": exp.name,
            "model": exp.model.name,
            "rank": str(self.rank),
            "world_size": str(self.w.layout.world_size),
            "stage": str(self.stage),
            "dp_replica": str(self.replica),
            "schedule": p.schedule,
            "micro_batches": str(self.micro_batches),
            "tp": str(p.tp),
        }
        gpu = self.w.gpu_type(self.rank)
        return out.finish(self.rank, self.templates.build(), gpu, meta)

    def _deepspeed_steps(
        self,
        out: TraceAssembler,
        steps: list[Step],
        last_backward: dict,
        fwd_units: dict,
        bwd_units: dict,
        sync_units: dict,
        calls,
    ) -> None:
        """The steps in DeepSpeed's PipelineEngine order (workload.framework): every p2p call
        blocks the rank until the transfer is done, and a result is sent at the start of the
        rank's next schedule step (TrainSchedule: a forward step runs RecvActivation, then
        SendGrad of the previous backward, then ForwardPass; a backward step SendActivation of the
        previous forward, then RecvGrad, then BackwardPass)."""
        p = self.par
        payload = pipeline_payload(self.exp)
        recv_f = self.templates.add(
            _comm("pp_recv.fwd", "fwd", NO_COLLECTIVE, payload.forward_bytes, self.act_dtype, COMM_RECV_NODE)
        )
        send_f = self.templates.add(
            _comm("pp_send.fwd", "fwd", NO_COLLECTIVE, payload.forward_bytes, self.act_dtype, COMM_SEND_NODE)
        )
        recv_b = self.templates.add(
            _comm("pp_recv.bwd", "bwd", NO_COLLECTIVE, payload.backward_bytes, self.act_dtype, COMM_RECV_NODE)
        )
        send_b = self.templates.add(
            _comm("pp_send.bwd", "bwd", NO_COLLECTIVE, payload.backward_bytes, self.act_dtype, COMM_SEND_NODE)
        )
        gather_f = gather_b = None
        if payload.gather_bytes:  # the partitioned activations (workload.framework)
            gather_f = self._template(
                _comm(
                    "pp_partition_allgather.fwd",
                    "fwd",
                    ALL_GATHER,
                    payload.gather_bytes,
                    self.act_dtype,
                    COMM_COLL_NODE,
                    "tp",
                )
            )
            gather_b = self._template(
                _comm(
                    "pp_partition_allgather.bwd",
                    "bwd",
                    ALL_GATHER,
                    payload.gather_bytes,
                    self.act_dtype,
                    COMM_COLL_NODE,
                    "tp",
                )
            )
        # LoadMicroBatch on the first and last stage: Megatron's get_batch_pipe broadcasts the
        # batch over the TP group (mpu.broadcast_data: the sizes, then the int64 tokens)
        loads = [t for t in (self._template(op) for op in load_micro_batch_ops(self.exp)) if t is not None]

        def chain(template: int, mb: int, v: int, count: int = 0, **where) -> None:
            deps = calls(count, mb, v, (out.tail,) if out.tail >= 0 else ())
            out.tail = out.node(template, micro_batch=mb, stage=v, deps=deps, **where)

        def send(pending: tuple) -> None:
            template, mb, v, peer, tag, count = pending
            chain(template, mb, v, count, peer=peer, tag=tag)

        pending: tuple | None = None  # the last result's send, issued at the next step's start
        for i, step in enumerate(steps):
            v = step.chunk * p.pp + self.stage
            mb = step.micro_batch
            if step.kind == "F":
                if pending is not None and pending[0] == send_f:  # a warm-up step in between
                    send(pending)
                    pending = None
                if v > 0:
                    chain(
                        recv_f,
                        mb,
                        v,
                        payload.forward_calls,
                        peer=self._peer(v - 1),
                        tag=self._tag(mb, v - 1, 0),
                    )
                if pending is not None:  # SendGrad of the previous backward
                    send(pending)
                    pending = None
                if v in (0, self.V - 1):
                    for template in loads:
                        chain(template, mb, v, 1)
                if v > 0 and gather_f is not None:
                    chain(gather_f, mb, v, 1)
                out.unit(
                    fwd_units[step.chunk],
                    micro_batch=mb,
                    stage=v,
                    head_deps=(out.tail,) if out.tail >= 0 else (),
                )
                if v < self.V - 1:
                    pending = (send_f, mb, v, self._peer(v + 1), self._tag(mb, v, 0), payload.forward_calls)
            else:
                if pending is not None:  # SendActivation (or a cool-down SendGrad)
                    send(pending)
                    pending = None
                if v < self.V - 1:
                    if gather_b is not None:  # re-gather the partitioned output first
                        chain(gather_b, mb, v, 1)
                    chain(
                        recv_b, mb, v, payload.backward_calls, peer=self._peer(v + 1), tag=self._tag(mb, v, 1)
                    )
                unit = sync_units[step.chunk] if last_backward[step.chunk] == i else bwd_units[step.chunk]
                out.unit(unit, micro_batch=mb, stage=v, head_deps=(out.tail,) if out.tail >= 0 else ())
                if v > 0:
                    pending = (
                        send_b,
                        mb,
                        v,
                        self._peer(v - 1),
                        self._tag(mb, v - 1, 1),
                        payload.backward_calls,
                    )
        if pending is not None:
            send(pending)

    def _finish_iteration(self, out: TraceAssembler) -> None:
        p, m = self.par, self.model
        chunks = [self.w.partition.layers_of(self.stage, c) for c in range(p.vpp)]
        layers = [layer for rng in chunks for layer in rng]
        has_embedding = self.stage == 0
        has_head = self.stage == (self.V - 1) % p.pp
        waits = list(out.grad_sync)
        embd = self.w.groups.group_id(self.rank, "embd")
        shards = self.w.groups.shards(self.rank, "embd")
        if shards and m.tied_embeddings:  # first and last stage differ in TP (groups.py)
            full = m.vocab * m.hidden * self.grad_bytes
            parts = [(gid, full * k // total) for gid, k, total in shards]
        elif embd is not None and m.tied_embeddings:
            parts = [(embd, -(-m.vocab // p.tp) * m.hidden * self.grad_bytes)]
        else:
            parts = []
        for gid, size in parts:
            tmpl = self.templates.add(
                _comm("embedding_grad_allreduce", "bwd", ALL_REDUCE, size, "fp32", COMM_COLL_NODE, "embd"),
                gid,
            )
            waits.append(
                out.node(
                    tmpl,
                    stage=self.stage,
                    deps=tuple([out.tail, *out.grad_sync] if out.tail >= 0 else out.grad_sync),
                )
            )
        params = rank_params(m, p, layers, has_embedding, has_head)
        expert = rank_expert_params(m, p, layers)
        first = True
        for op in optimizer_ops(m, self.training, p, params, expert, rank_linear_weights(m, p, layers)):
            opt_tmpl = self._template(op)
            if opt_tmpl is None:
                continue
            deps = [out.tail] + (waits if first else [])
            out.tail = out.node(opt_tmpl, stage=self.stage, deps=tuple(d for d in deps if d >= 0))
            first = False
        if p.zero in (1, 2) or (p.zero == 0 and p.distributed_optimizer):
            for role, count in (("dp", params - expert), ("ep_dp", expert)):
                for size in _bucket_sizes(count * self.param_bytes, p.dp_bucket_bytes):
                    op = _comm(
                        "param_allgather", "opt", ALL_GATHER, size, self.act_dtype, COMM_COLL_NODE, role
                    )
                    gather_tmpl = self._template(op)
                    if gather_tmpl is not None:
                        out.node(gather_tmpl, stage=self.stage, deps=(out.tail,))


def _bucket_sizes(total: int, bucket: int) -> list[int]:
    if total <= 0:
        return []
    full, rest = divmod(total, max(1, bucket))
    return [bucket] * full + ([rest] if rest else [])


class _Buckets:
    # (stages whose replicas differ in TP: one collective per gradient-shard group per bucket)
    """Gradient buckets filled block by block during a synchronising backward."""

    def __init__(self, program: RankProgram, unit: UnitProgram, phase: str) -> None:
        self.prog = program
        self.unit = unit
        self.pending = {"dp": 0, "ep_dp": 0}
        par = program.par
        self.zero3 = par.zero >= 3
        if par.zero == 0 and not par.distributed_optimizer:
            self.comm_type, self.label = ALL_REDUCE, "dp_grad_allreduce"
        else:
            self.comm_type, self.label = REDUCE_SCATTER, "dp_grad_reduce_scatter"
        self.layer = -1

    def add(self, block: Block) -> None:
        if self.zero3:
            return  # ZeRO-3 scatters per block instead
        self.layer = block.layer_attr
        params = block.full_params if self.prog.mixed_dp else block.params
        self.pending["dp"] += (params - block.expert_params) * self.prog.reduce_bytes
        self.pending["ep_dp"] += block.expert_params * self.prog.reduce_bytes
        for role in self.pending:
            if self.pending[role] >= self.prog.par.dp_bucket_bytes:
                self._emit(role)

    def flush(self) -> None:
        if self.zero3:
            return
        for role in self.pending:
            if self.pending[role] > 0:
                self._emit(role)

    def _emit(self, role: str) -> None:
        if role == "dp" and self.prog.mixed_dp:
            self._emit_shards()
            return
        op = _comm(
            self.label,
            "bwd",
            self.comm_type,
            self.pending[role],
            self.prog.reduce_dtype,
            COMM_COLL_NODE,
            role,
        )
        self.pending[role] = 0
        tmpl = self.prog._template(op)
        if tmpl is not None:
            self.unit.grad_sync.append(self.unit.add(tmpl, self.layer, [self.unit.tail]))

    def _emit_shards(self) -> None:
        prog = self.prog
        full = self.pending["dp"]
        self.pending["dp"] = 0
        for gid, pieces, total in prog.w.groups.dp_shards(prog.rank):
            op = _comm(
                self.label,
                "bwd",
                self.comm_type,
                full * pieces // total,
                prog.reduce_dtype,
                COMM_COLL_NODE,
                "dp",
            )
            tmpl = prog.templates.add(op, gid)
            self.unit.grad_sync.append(self.unit.add(tmpl, self.layer, [self.unit.tail]))


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
