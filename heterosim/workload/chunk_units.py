"""The forward and backward unit programs of a rank's model chunks.

A unit is one schedule step's nodes (heterosim/workload/builder.py), written once per chunk and
kind and stamped out per micro-batch: the blocks' op chains with their TP and EP collectives,
the context-parallel K/V ring beside the attention steps (cp.py), collectives overlapped with
the next ops (tp_overlap.py), ZeRO-3 parameter gathers (prefetched ``zero3_prefetch`` blocks
ahead) and gradient scatters (zero3.py), and in a synchronising backward the data-parallel
gradient buckets (grad_buckets.py).
"""

from __future__ import annotations

from heterosim.workload.blocks import Block, chunk_blocks
from heterosim.workload.builder import PREVIOUS_TAIL, FrozenUnit, UnitProgram
from heterosim.workload.cp import RingPlacer, is_ring_op
from heterosim.workload.grad_buckets import GradBuckets
from heterosim.workload.ops import OpSpec
from heterosim.workload.ops_base import comm_op
from heterosim.workload.rank_context import RankContext
from heterosim.workload.schedule import Step
from heterosim.workload.trace import ALL_GATHER, COMM_COLL_NODE, REDUCE_SCATTER
from heterosim.workload.zero3 import BlockFetch, block_fetches


class ChunkUnits:
    """Every chunk's forward unit, backward unit and synchronising backward unit (the chunk's
    last backward, which reduces the gradients; with ZeRO-2/3 every backward does)."""

    def __init__(self, ctx: RankContext, steps: list[Step]) -> None:
        vpp = ctx.par.vpp
        every_step = ctx.par.zero >= 2
        self._last_backward = {s.chunk: i for i, s in enumerate(steps) if s.kind == "B"}
        self._blocks: dict[int, list[Block]] = {}
        self.forward = {c: self._unit(ctx, c, "fwd", sync=False) for c in range(vpp)}
        self._backward = {c: self._unit(ctx, c, "bwd", sync=every_step) for c in range(vpp)}
        self._sync = (
            self._backward if every_step else {c: self._unit(ctx, c, "bwd", sync=True) for c in range(vpp)}
        )

    def backward(self, index: int, step: Step) -> FrozenUnit:
        """The unit of backward step ``step``, the ``index``-th step of the schedule."""
        if self._last_backward[step.chunk] == index:
            return self._sync[step.chunk]
        return self._backward[step.chunk]

    def _unit(self, ctx: RankContext, chunk: int, phase: str, sync: bool) -> FrozenUnit:
        if chunk not in self._blocks:
            self._blocks[chunk] = chunk_blocks(ctx, chunk)
        blocks = self._blocks[chunk]
        return UnitWriter(ctx, blocks if phase == "fwd" else blocks[::-1], phase, sync).write()


def block_fetch(ctx: RankContext, block: Block, phase: str) -> BlockFetch:
    """DeepSpeed 0.3 ZeRO-3 fetch of ``block`` in ``phase`` (heterosim/workload/zero3.py)."""
    fwd, bwd = block_fetches(
        list(block.tensors),
        ctx.training.recompute == "full",
        ctx.par.zero3_persistence_threshold,
        ctx.par.zero3_max_reuse_distance,
    )
    return fwd if phase == "fwd" else bwd


class UnitWriter:
    """Writes one unit: ``blocks`` (in execution order) in ``phase``, with what runs beside them."""

    def __init__(self, ctx: RankContext, blocks: list[Block], phase: str, sync: bool) -> None:
        self.ctx, self.blocks, self.phase = ctx, blocks, phase
        self.unit = UnitProgram()
        self.zero3 = ctx.par.zero >= 3
        self.prefetch = ctx.par.zero3_prefetch
        self.gathers: dict[int, int] = {}  # block index -> its ZeRO-3 parameter gather
        self.sync = sync and phase == "bwd"
        self.deferred = ctx.par.grad_sync == "after_backward"  # ZeRO < 2 (checked by the config)
        self.beside: list[list[int]] = []  # [node, chain ops still to run beside it]

    def write(self) -> FrozenUnit:
        unit = self.unit
        if self.prefetch > 0:
            for j in range(min(self.prefetch, len(self.blocks))):
                self._issue_gather(j, [PREVIOUS_TAIL])
        buckets = GradBuckets(self.ctx, unit) if self.sync else None
        pytorch_order = self.ctx.par.cp_impl == "pytorch"
        ring = RingPlacer(*self.ctx.w.groups.cp_ring(self.ctx.rank), pytorch_order=pytorch_order)
        for j, block in enumerate(self.blocks):
            if self.prefetch == 0:
                self._issue_gather(j, [unit.tail if unit.tail >= 0 else PREVIOUS_TAIL])
            self._block_ops(j, block, ring)
            if self.zero3 and self.phase == "bwd":
                self._zero3_scatter(block)
            if buckets is not None and not self.deferred:
                buckets.add(block)
        if self.beside:  # the unit ends when the ops that ran beside its last ones have ended too
            end = self.ctx.template(self.ctx.framework_op(f"overlap_join.{self.phase}", self.phase, 1))
            assert end is not None
            unit.chain(end, self.blocks[-1].layer_attr, [side for side, _ in self.beside])
        if buckets is not None:
            for block in self.blocks if self.deferred else ():
                buckets.add(block)  # every bucket waits for the end of the backward
            buckets.flush()
        return unit.freeze()

    def _issue_gather(self, j: int, deps: list[int]) -> None:
        """The ZeRO-3 parameter all-gather of block ``j`` (once, if there is one)."""
        if self.zero3 and j < len(self.blocks) and j not in self.gathers:
            op = self._gather(self.blocks[j])
            tmpl = self.ctx.template(op) if op is not None else None
            if tmpl is not None:
                self.gathers[j] = self.unit.add(tmpl, self.blocks[j].layer_attr, deps)

    def _gather(self, block: Block) -> OpSpec | None:
        ctx, phase = self.ctx, self.phase
        size = block.params * ctx.param_bytes
        if ctx.ds_zero3:
            size = block_fetch(ctx, block, phase).gather_elements * ctx.param_bytes
            if size <= 0:
                return None  # every tensor persistent: nothing to gather
        label = f"zero3_allgather.{phase}"
        return comm_op(label, phase, ALL_GATHER, size, ctx.act_dtype, COMM_COLL_NODE, "dp")

    def _ops(self, block: Block) -> list[OpSpec]:
        """The block's ops in this phase, behind DeepSpeed 0.3's blocking ZeRO-3 fetch if any."""
        ctx, phase = self.ctx, self.phase
        ops = block.forward if phase == "fwd" else block.backward
        if ctx.ds_zero3:  # the blocking fetch runs before the block's kernels
            fetch = block_fetch(ctx, block, phase)
            if fetch.gather_calls:
                ns = fetch.fetch_ns(ctx.param_bytes, ctx.w.groups.size(ctx.rank, "dp"))
                ops = [ctx.framework_op(f"zero3_fetch.{phase}", phase, ns), *ops]
        return ops

    def _block_ops(self, j: int, block: Block, ring: RingPlacer) -> None:
        """Block ``j``'s ops: the chain, the CP ring beside it and overlapped collectives."""
        unit, layer = self.unit, block.layer_attr
        first = True
        for op in self._ops(block):
            tmpl = self.ctx.template(op)
            if tmpl is None:
                continue
            if is_ring_op(op):  # the context-parallel K/V ring beside the attention steps
                ring.place(unit, tmpl, op, layer)
                continue
            if self.ctx.call_marker is not None and op.comm_group == "tp":
                unit.chain(self.ctx.call_marker, layer)
            if op.overlap_next > 0:  # runs beside the next ops of the chain (tp_overlap.py)
                # after the collectives whose ops are done (one communicator's calls run in
                # order); the next chain op still waits for those too
                done = [s for s, left in self.beside if left == 0]
                side = unit.add(tmpl, layer, [unit.tail if unit.tail >= 0 else PREVIOUS_TAIL, *done])
                self.beside.append([side, op.overlap_next])
                continue
            extra = [self.gathers[j]] if first and j in self.gathers else []
            extra += ring.before_chain()
            extra += [side for side, left in self.beside if left == 0]
            self.beside = [entry for entry in self.beside if entry[1] > 0]
            unit.chain(tmpl, layer, extra)
            for entry in self.beside:
                entry[1] -= 1
            if first and self.prefetch > 0:
                self._issue_gather(j + self.prefetch, [unit.tail])
            first = False

    def _zero3_scatter(self, block: Block) -> None:
        """The gradient reduce-scatters after ``block``'s backward (ZeRO-3, every micro-batch)."""
        ctx, unit = self.ctx, self.unit
        if ctx.ds_zero3:  # per-tensor reduce_scatter calls copy n partitions into a flat buffer
            calls = block_fetch(ctx, block, "bwd").reduce_scatter_calls
            ns = BlockFetch(0, 0, calls).scatter_ns(ctx.w.groups.size(ctx.rank, "dp"))
            tmpl = ctx.template(ctx.framework_op("zero3_scatter_copies", "bwd", ns))
            if tmpl is not None and ns > 0:
                unit.chain(tmpl, block.layer_attr, [])
        for role, params in (("dp", block.params - block.expert_params), ("ep_dp", block.expert_params)):
            if params <= 0:
                continue
            size, dtype, label = params * ctx.reduce_bytes, ctx.reduce_dtype, "zero3_reduce_scatter.grad"
            op = comm_op(label, "bwd", REDUCE_SCATTER, size, dtype, COMM_COLL_NODE, role)
            tmpl = ctx.template(op)
            if tmpl is not None:
                unit.grad_sync.append(unit.add(tmpl, block.layer_attr, [unit.tail]))
