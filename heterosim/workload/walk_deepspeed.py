"""The pipeline steps in DeepSpeed's PipelineEngine order (heterosim/workload/framework.py).

Every p2p call blocks the rank until the transfer is done, and a result is sent at the start of
the rank's next schedule step (TrainSchedule: a forward step runs RecvActivation, then SendGrad
of the previous backward, then ForwardPass; a backward step SendActivation of the previous
forward, then RecvGrad, then BackwardPass).
"""

from __future__ import annotations

from typing import NamedTuple

from heterosim.workload.builder import TraceAssembler
from heterosim.workload.chunk_units import ChunkUnits
from heterosim.workload.framework import load_micro_batch_ops, pipeline_payload
from heterosim.workload.ops_base import comm_op
from heterosim.workload.pipeline_p2p import PipelineP2P
from heterosim.workload.rank_context import RankContext
from heterosim.workload.schedule import Step
from heterosim.workload.trace import ALL_GATHER, COMM_COLL_NODE, COMM_RECV_NODE, COMM_SEND_NODE, NO_COLLECTIVE


class _Send(NamedTuple):
    """A result's send, issued at the start of the rank's next step."""

    template: int
    micro_batch: int
    stage: int
    peer: int
    tag: int
    calls: int  # collective-call markers before it


class DeepSpeedWalk:
    """Writes the schedule steps of ``ctx``'s rank into ``out``, DeepSpeed's way.

    Creating it adds its templates: the four p2p ones, the partitioned activations' all-gathers
    and the micro-batch loads, in that order."""

    def __init__(self, ctx: RankContext, out: TraceAssembler, p2p: PipelineP2P, units: ChunkUnits) -> None:
        self.ctx, self.out, self.p2p, self.units = ctx, out, p2p, units
        payload = self.payload = pipeline_payload(ctx.exp)
        self.recv_f, self.send_f, self.recv_b, self.send_b = (
            ctx.templates.add(comm_op(f"pp_{verb}.{ph}", ph, NO_COLLECTIVE, size, ctx.act_dtype, node))
            for ph, size in (("fwd", payload.forward_bytes), ("bwd", payload.backward_bytes))
            for verb, node in (("recv", COMM_RECV_NODE), ("send", COMM_SEND_NODE))
        )
        self.gather_f: int | None = None
        self.gather_b: int | None = None
        if payload.gather_bytes:  # the partitioned activations (workload.framework)
            self.gather_f, self.gather_b = (
                ctx.template(
                    comm_op(
                        f"pp_partition_allgather.{ph}",
                        ph,
                        ALL_GATHER,
                        payload.gather_bytes,
                        ctx.act_dtype,
                        COMM_COLL_NODE,
                        "tp",
                    )
                )
                for ph in ("fwd", "bwd")
            )
        # LoadMicroBatch on the first and last stage: Megatron's get_batch_pipe broadcasts the
        # batch over the TP group (mpu.broadcast_data: the sizes, then the int64 tokens)
        self.loads = [t for t in (ctx.template(op) for op in load_micro_batch_ops(ctx.exp)) if t is not None]

    def chain(self, template: int, mb: int, v: int, count: int = 0, peer: int = -1, tag: int = -1) -> None:
        """``template`` after the compute stream's tail and ``count`` call markers; it blocks."""
        deps = self.p2p.calls(count, mb, v, self.p2p.after_tail())
        self.out.tail = self.out.node(template, micro_batch=mb, stage=v, deps=deps, peer=peer, tag=tag)

    def send(self, pending: _Send) -> None:
        template, mb, v, peer, tag, calls = pending
        self.chain(template, mb, v, calls, peer, tag)

    def run(self, steps: list[Step]) -> None:
        pending: _Send | None = None  # the last result's send, issued at the next step's start
        for i, step in enumerate(steps):
            if step.kind == "F":
                pending = self._forward(step, pending)
            else:
                pending = self._backward(i, step, pending)
        if pending is not None:
            self.send(pending)

    def _forward(self, step: Step, pending: _Send | None) -> _Send | None:
        """RecvActivation, SendGrad of the previous backward, LoadMicroBatch, ForwardPass."""
        ctx, p2p, payload = self.ctx, self.p2p, self.payload
        v, mb = ctx.virtual_stage(step.chunk), step.micro_batch
        if pending is not None and pending.template == self.send_f:  # a warm-up step in between
            self.send(pending)
            pending = None
        if v > 0:
            self.chain(self.recv_f, mb, v, payload.forward_calls, p2p.peer(v - 1), p2p.tag(mb, v - 1, 0))
        if pending is not None:  # SendGrad of the previous backward
            self.send(pending)
        if v in (0, ctx.V - 1):
            for template in self.loads:
                self.chain(template, mb, v, 1)
        if v > 0 and self.gather_f is not None:
            self.chain(self.gather_f, mb, v, 1)
        self.out.unit(self.units.forward[step.chunk], micro_batch=mb, stage=v, head_deps=p2p.after_tail())
        if v < ctx.V - 1:
            return _Send(self.send_f, mb, v, p2p.peer(v + 1), p2p.tag(mb, v, 0), payload.forward_calls)
        return None

    def _backward(self, index: int, step: Step, pending: _Send | None) -> _Send | None:
        """SendActivation (or a cool-down SendGrad), RecvGrad, BackwardPass."""
        ctx, p2p, payload = self.ctx, self.p2p, self.payload
        v, mb = ctx.virtual_stage(step.chunk), step.micro_batch
        if pending is not None:
            self.send(pending)
        if v < ctx.V - 1:
            if self.gather_b is not None:  # re-gather the partitioned output first
                self.chain(self.gather_b, mb, v, 1)
            self.chain(self.recv_b, mb, v, payload.backward_calls, p2p.peer(v + 1), p2p.tag(mb, v, 1))
        unit = self.units.backward(index, step)
        self.out.unit(unit, micro_batch=mb, stage=v, head_deps=p2p.after_tail())
        if v > 0:
            return _Send(self.send_b, mb, v, p2p.peer(v - 1), p2p.tag(mb, v - 1, 1), payload.backward_calls)
        return None
