"""Megatron-LM's pipeline steps with one p2p call per receive and per send.

Every schedule step (gpipe, 1F1B, or interleaved 1F1B with ``p2p_sync: overlap``) receives its
input from the previous virtual stage (activations forward, gradients backward), runs the
chunk's unit and sends its output on. Receives block the compute; with ``p2p_sync: blocking``
the next step's compute waits for the sends too (heterosim/workload/generator.py docstring).
Interleaved 1F1B with blocking p2p pairs its calls differently: walk_interleaved_blocking.py.
"""

from __future__ import annotations

from heterosim.workload.builder import TraceAssembler
from heterosim.workload.chunk_units import ChunkUnits
from heterosim.workload.pipeline_p2p import Deps, PipelineP2P
from heterosim.workload.rank_context import RankContext
from heterosim.workload.schedule import Step


class MegatronWalk:
    """Writes the schedule steps of ``ctx``'s rank into ``out``."""

    def __init__(self, ctx: RankContext, out: TraceAssembler, p2p: PipelineP2P, units: ChunkUnits) -> None:
        self.ctx, self.out, self.p2p, self.units = ctx, out, p2p, units
        self.blocking = ctx.par.p2p_sync == "blocking"

    def run(self, steps: list[Step]) -> None:
        pending: Deps = ()  # sends the next compute waits for (p2p_sync blocking)
        for i, step in enumerate(steps):
            pending = self._step(i, step, pending)
        if pending:  # the optimizer step waits for the last blocking sends as well
            self.out.tail = pending[-1]

    def _step(self, index: int, step: Step, pending: Deps) -> Deps:
        """Receive, compute and send one step; returns the sends the next compute waits for."""
        ctx, out, p2p = self.ctx, self.out, self.p2p
        v, mb = ctx.virtual_stage(step.chunk), step.micro_batch
        if step.kind == "F":
            source, target, direction, gather = v - 1, v + 1, 0, p2p.gather_f
            unit = self.units.forward[step.chunk]
        else:
            source, target, direction, gather = v + 1, v - 1, 1, p2p.gather_b
            unit = self.units.backward(index, step)
        suffix = "f" if direction == 0 else "b"
        deps = pending
        if 0 <= source < ctx.V:
            prev = p2p.calls(1, mb, v, p2p.after_tail())
            tag = p2p.tag(mb, min(v, source), direction)
            recvs = p2p.nodes(f"recv_{suffix}", source, mb, v, tag, prev)
            deps = (*deps, *p2p.gathered(recvs, gather, mb, v))
        out.unit(unit, micro_batch=mb, stage=v, head_deps=deps)
        if not 0 <= target < ctx.V:
            return ()
        tag = p2p.tag(mb, min(v, target), direction)
        sends = p2p.nodes(f"send_{suffix}", target, mb, v, tag, lambda: p2p.calls(1, mb, v, (out.tail,)))
        return sends if self.blocking else ()
