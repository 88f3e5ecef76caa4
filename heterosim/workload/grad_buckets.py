"""Data-parallel gradient buckets filled block by block during a synchronising backward.

ZeRO-0: one all-reduce per bucket; ZeRO-1/2 and the distributed optimizer: one reduce-scatter.
A bucket closes once it holds at least ``parallel.dp_bucket`` bytes; routed-expert gradients
fill their own buckets, reduced over the expert-data-parallel group. In a stage whose replicas
differ in TP degree a bucket is cut on the full parameters and reduced once per gradient-shard
group (:meth:`~heterosim.workload.groups.ParallelGroups.dp_shards`). ZeRO-3 scatters per block
instead (heterosim/workload/chunk_units.py), so its buckets stay empty.
"""

from __future__ import annotations

from heterosim.workload.blocks import Block
from heterosim.workload.builder import UnitProgram
from heterosim.workload.ops import OpSpec
from heterosim.workload.ops_base import comm_op
from heterosim.workload.rank_context import RankContext
from heterosim.workload.trace import ALL_REDUCE, COMM_COLL_NODE, REDUCE_SCATTER


def bucket_sizes(total: int, bucket: int) -> list[int]:
    """``total`` bytes cut into buckets of ``bucket`` bytes, the rest in a last smaller one."""
    if total <= 0:
        return []
    full, rest = divmod(total, max(1, bucket))
    return [bucket] * full + ([rest] if rest else [])


class GradBuckets:
    """The gradient collectives of one backward unit, appended to its ``grad_sync`` nodes."""

    def __init__(self, ctx: RankContext, unit: UnitProgram) -> None:
        self.ctx = ctx
        self.unit = unit
        self.pending = {"dp": 0, "ep_dp": 0}
        par = ctx.par
        self.zero3 = par.zero >= 3
        if par.zero == 0 and not par.distributed_optimizer:
            self.comm_type, self.label = ALL_REDUCE, "dp_grad_allreduce"
        else:
            self.comm_type, self.label = REDUCE_SCATTER, "dp_grad_reduce_scatter"
        self.layer = -1

    def add(self, block: Block) -> None:
        if self.zero3:
            return  # ZeRO-3 scatters per block instead
        ctx = self.ctx
        self.layer = block.layer_attr
        params = block.full_params if ctx.mixed_dp else block.params
        self.pending["dp"] += (params - block.expert_params) * ctx.reduce_bytes
        self.pending["ep_dp"] += block.expert_params * ctx.reduce_bytes
        for role in self.pending:
            if self.pending[role] >= ctx.par.dp_bucket_bytes:
                self._emit(role)

    def flush(self) -> None:
        if self.zero3:
            return
        for role in self.pending:
            if self.pending[role] > 0:
                self._emit(role)

    def _op(self, size: int, role: str) -> OpSpec:
        return comm_op(self.label, "bwd", self.comm_type, size, self.ctx.reduce_dtype, COMM_COLL_NODE, role)

    def _emit(self, role: str) -> None:
        if role == "dp" and self.ctx.mixed_dp:
            self._emit_shards()
            return
        op = self._op(self.pending[role], role)
        self.pending[role] = 0
        tmpl = self.ctx.template(op)
        if tmpl is not None:
            self.unit.grad_sync.append(self.unit.add(tmpl, self.layer, [self.unit.tail]))

    def _emit_shards(self) -> None:
        ctx = self.ctx
        full = self.pending["dp"]
        self.pending["dp"] = 0
        for gid, pieces, total in ctx.w.groups.dp_shards(ctx.rank):
            tmpl = ctx.templates.add(self._op(full * pieces // total, "dp"), gid)
            self.unit.grad_sync.append(self.unit.add(tmpl, self.layer, [self.unit.tail]))
