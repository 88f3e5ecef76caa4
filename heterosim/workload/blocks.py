"""The blocks of one model chunk on one rank: embedding, transformer layers, head.

A block is the unit of parameters: gradient buckets close on block boundaries and ZeRO-3 gathers
and scatters one block at a time (heterosim/workload/chunk_units.py).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from heterosim.workload.ops import (
    OpSpec,
    embedding_backward_ops,
    embedding_forward_ops,
    embedding_params_on_rank,
    head_backward_ops,
    head_forward_ops,
    head_params_on_rank,
    layer_expert_params_on_rank,
    layer_params_on_rank,
)
from heterosim.workload.rank_context import RankContext
from heterosim.workload.zero3 import layer_tensors

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


def chunk_blocks(ctx: RankContext, chunk: int) -> list[Block]:
    """The blocks of model chunk ``chunk`` of ``ctx``'s rank, in forward order."""
    v = ctx.virtual_stage(chunk)
    out: list[Block] = []
    if v == 0:
        out.append(_embedding_block(ctx))
    out.extend(_layer_block(ctx, layer) for layer in ctx.w.partition.layers_of(ctx.stage, chunk))
    if v == ctx.V - 1:
        out.append(_head_block(ctx, has_embedding=(v == 0)))
    if ctx.mixed_dp:  # gradient buckets on the stage's full parameters (generator docstring)
        out = [_with_full_params(ctx, block, has_embedding=(v == 0)) for block in out]
    return out


def _embedding_block(ctx: RankContext) -> Block:
    m, t, p = ctx.model, ctx.training, ctx.par
    emb = embedding_params_on_rank(m, p)
    positions = m.max_seq * m.hidden if m.learned_positions else 0
    return Block(
        EMBEDDING_BLOCK,
        embedding_forward_ops(m, t, p),
        embedding_backward_ops(m, t, p),
        emb,
        0,
        tensors=tuple(x for x in (emb - positions, positions) if x > 0),
    )


def _layer_block(ctx: RankContext, layer: int) -> Block:
    m, p = ctx.model, ctx.par
    fwd, bwd = ctx.w.layer_ops(layer, p.tp, ctx.replica % p.ep)
    return Block(
        layer,
        fwd,
        bwd,
        layer_params_on_rank(m, p, layer),
        layer_expert_params_on_rank(m, p, layer),
        tensors=tuple(layer_tensors(m, p, layer)) if ctx.ds_zero3 else (),
    )


def _head_block(ctx: RankContext, has_embedding: bool) -> Block:
    m, t, p = ctx.model, ctx.training, ctx.par
    head = head_params_on_rank(m, p, has_embedding=has_embedding)
    norms = m.norm_params()
    tensors = [m.hidden] * (norms // m.hidden) + ([head - norms] if head > norms else [])
    return Block(
        HEAD_BLOCK, head_forward_ops(m, t, p), head_backward_ops(m, t, p), head, 0, tensors=tuple(tensors)
    )


def _with_full_params(ctx: RankContext, block: Block, has_embedding: bool) -> Block:
    """``block`` with its parameters counted unsharded (TP 1)."""
    m, full = ctx.model, replace(ctx.par, tp=1)
    if block.layer == EMBEDDING_BLOCK:
        params = embedding_params_on_rank(m, full)
    elif block.layer == HEAD_BLOCK:
        params = head_params_on_rank(m, full, has_embedding=has_embedding)
    else:
        params = layer_params_on_rank(m, full, block.layer)
    return replace(block, full_params=params)
