"""The end of a rank's iteration: embedding gradient all-reduce, optimizer, parameter all-gathers.

With tied embeddings and pp > 1 the word-embedding gradient is all-reduced between the first
and last stage (Megatron's embedding group) after the data-parallel synchronisation; the
optimizer ops (gradient norm, Adam) wait for every gradient collective; ZeRO-1/2 and the
distributed optimizer then all-gather the updated parameters in ``dp_bucket`` pieces.
"""

from __future__ import annotations

from heterosim.workload.builder import TraceAssembler
from heterosim.workload.grad_buckets import bucket_sizes
from heterosim.workload.ops import optimizer_ops, rank_expert_params, rank_linear_weights, rank_params
from heterosim.workload.ops_base import comm_op
from heterosim.workload.rank_context import RankContext
from heterosim.workload.trace import ALL_GATHER, ALL_REDUCE, COMM_COLL_NODE


def finish_iteration(ctx: RankContext, out: TraceAssembler) -> None:
    """Append the embedding all-reduce, the optimizer step and the parameter all-gathers."""
    p = ctx.par
    layers = [layer for c in range(p.vpp) for layer in ctx.w.partition.layers_of(ctx.stage, c)]
    has_embedding = ctx.stage == 0
    has_head = ctx.stage == (ctx.V - 1) % p.pp
    waits = list(out.grad_sync) + _embedding_allreduce(ctx, out)
    params = rank_params(ctx.model, p, layers, has_embedding, has_head)
    expert = rank_expert_params(ctx.model, p, layers)
    _optimizer(ctx, out, layers, params, expert, waits)
    if p.zero in (1, 2) or (p.zero == 0 and p.distributed_optimizer):
        _param_allgathers(ctx, out, params, expert)


def _embedding_parts(ctx: RankContext) -> list[tuple[int, int]]:
    """(embedding group id, gradient bytes) of each embedding all-reduce of this rank."""
    m, p = ctx.model, ctx.par
    embd = ctx.w.groups.group_id(ctx.rank, "embd")
    shards = ctx.w.groups.shards(ctx.rank, "embd")
    if shards and m.tied_embeddings:  # first and last stage differ in TP (groups.py)
        full = m.vocab * m.hidden * ctx.grad_bytes
        return [(gid, full * k // total) for gid, k, total in shards]
    if embd is not None and m.tied_embeddings:
        return [(embd, -(-m.vocab // p.tp) * m.hidden * ctx.grad_bytes)]
    return []


def _embedding_allreduce(ctx: RankContext, out: TraceAssembler) -> list[int]:
    """The tied-embedding gradient all-reduces, after the stream and the gradient collectives."""
    nodes = []
    for gid, size in _embedding_parts(ctx):
        op = comm_op("embedding_grad_allreduce", "bwd", ALL_REDUCE, size, "fp32", COMM_COLL_NODE, "embd")
        tmpl = ctx.templates.add(op, gid)
        deps = tuple([out.tail, *out.grad_sync] if out.tail >= 0 else out.grad_sync)
        nodes.append(out.node(tmpl, stage=ctx.stage, deps=deps))
    return nodes


def _optimizer(
    ctx: RankContext, out: TraceAssembler, layers: list[int], params: int, expert: int, waits: list[int]
) -> None:
    """The optimizer ops on the compute stream; the first waits for ``waits`` too."""
    m, p = ctx.model, ctx.par
    first = True
    for op in optimizer_ops(m, ctx.training, p, params, expert, rank_linear_weights(m, p, layers)):
        tmpl = ctx.template(op)
        if tmpl is None:
            continue
        deps = [out.tail] + (waits if first else [])
        out.tail = out.node(tmpl, stage=ctx.stage, deps=tuple(d for d in deps if d >= 0))
        first = False


def _param_allgathers(ctx: RankContext, out: TraceAssembler, params: int, expert: int) -> None:
    """ZeRO-1/2 and distributed-optimizer parameter all-gathers, bucket by bucket."""
    for role, count in (("dp", params - expert), ("ep_dp", expert)):
        for size in bucket_sizes(count * ctx.param_bytes, ctx.par.dp_bucket_bytes):
            op = comm_op("param_allgather", "opt", ALL_GATHER, size, ctx.act_dtype, COMM_COLL_NODE, role)
            tmpl = ctx.template(op)
            if tmpl is not None:
                out.node(tmpl, stage=ctx.stage, deps=(out.tail,))
