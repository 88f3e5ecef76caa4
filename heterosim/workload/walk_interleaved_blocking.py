"""Megatron-LM's interleaved 1F1B with blocking p2p (``p2p_sync: blocking``), call by call.

As ``forward_backward_pipelining_with_interleaving`` issues them (megatron/schedules.py,
2021-2022; megatron/core/pipeline_parallel/schedules.py without overlap_p2p_comm): a lone
``recv_forward`` before the first forward; after each warm-up forward one
``send_forward_recv_forward`` (the last one also receives a backward gradient:
``send_forward_backward_recv_forward_backward``); in the steady state one forward and one
backward, *then* one ``send_forward_backward_recv_forward_backward`` that sends both results (so
a forward's output leaves only after the paired backward); in the cool-down a
``send_backward_recv_backward`` after each backward (with every micro-batch in the warm-up,
m == pp, a lone ``recv_backward`` first). Which calls receive (``recv_prev`` / ``recv_next``, the
first stage being ahead of the last by pp - 1 steps) follows Megatron's code; a received tensor
is queued for its model chunk and feeds that chunk's next step. Every call posts its sends and
receives together (``batch_isend_irecv``), waits for all of them and synchronises the device, so
the next compute waits for every transfer of the call (and, with scatter/gather, the TP
all-gather of what it received).
"""

from __future__ import annotations

from heterosim.workload.builder import TraceAssembler
from heterosim.workload.chunk_units import ChunkUnits
from heterosim.workload.pipeline_p2p import Deps, PipelineP2P
from heterosim.workload.rank_context import RankContext
from heterosim.workload.schedule import Step, warmup_forwards


class InterleavedBlockingWalk:
    """Writes the steps and combined p2p calls of ``ctx``'s rank into ``out``.

    Virtual step ``k`` is the k-th forward (or backward) of the rank; ``steps`` is the rank's
    interleaved schedule (heterosim/workload/schedule.py)."""

    def __init__(
        self, ctx: RankContext, out: TraceAssembler, p2p: PipelineP2P, units: ChunkUnits, steps: list[Step]
    ) -> None:
        self.ctx, self.out, self.p2p, self.units, self.steps = ctx, out, p2p, units, steps
        p = ctx.par
        self.pp, self.vpp, self.stage = p.pp, p.vpp, ctx.stage
        self.total = len(steps) // 2
        self.warm = warmup_forwards("interleaved", p.pp, ctx.stage, ctx.micro_batches, p.vpp)
        self.remaining = self.total - self.warm
        self.first, self.last = ctx.stage == 0, ctx.stage == p.pp - 1
        # each chunk's steps in order: the j-th tensor received for a chunk feeds its j-th step
        self.queues: dict[tuple[bool, int], list[int]] = {}
        for k in range(self.total):
            for forward in (True, False):
                mb = steps[self.index(k, forward)].micro_batch
                self.queues.setdefault((forward, self.chunk(k, forward)), []).append(mb)
        self.taken: dict[tuple[bool, int], int] = {}

    def chunk(self, k: int, forward: bool) -> int:
        """Model chunk of virtual step ``k`` (Megatron's get_model_chunk_id)."""
        c = (k % (self.pp * self.vpp)) // self.pp
        return c if forward else self.vpp - c - 1

    def index(self, k: int, forward: bool) -> int:
        """Position of virtual step ``k`` in ``steps``."""
        warm, remaining = self.warm, self.remaining
        if forward:
            return k if k < warm else warm + 2 * (k - warm)
        return warm + 2 * k + 1 if k < remaining else warm + remaining + k

    # -- one call's pieces -----------------------------------------------------------------

    def receive(self, forward: bool, c: int, deps: Deps) -> Deps:
        """Receive the next queued tensor of chunk ``c`` (and gather it with scatter/gather)."""
        p2p = self.p2p
        j = self.taken.get((forward, c), 0)
        self.taken[forward, c] = j + 1
        mb, v = self.queues[forward, c][j], c * self.pp + self.stage
        if forward:
            kind, other, boundary, gather = "recv_f", v - 1, v - 1, p2p.gather_f
        else:
            kind, other, boundary, gather = "recv_b", v + 1, v, p2p.gather_b
        recvs = p2p.nodes(kind, other, mb, v, p2p.tag(mb, boundary, 0 if forward else 1), deps)
        return p2p.gathered(recvs, gather, mb, v)

    def send(self, k: int, forward: bool, deps: Deps) -> Deps:
        """Send the result of virtual step ``k`` (nothing at either end of the pipeline)."""
        step = self.steps[self.index(k, forward)]
        v, mb = step.chunk * self.pp + self.stage, step.micro_batch
        if forward and v < self.ctx.V - 1:
            kind, other, boundary = "send_f", v + 1, v
        elif not forward and v > 0:
            kind, other, boundary = "send_b", v - 1, v - 1
        else:
            return ()
        return self.p2p.nodes(kind, other, mb, v, self.p2p.tag(mb, boundary, 0 if forward else 1), deps)

    def compute(self, k: int, forward: bool, waits: Deps) -> None:
        i = self.index(k, forward)
        step = self.steps[i]
        unit = self.units.forward[step.chunk] if forward else self.units.backward(i, step)
        stage = step.chunk * self.pp + self.stage
        self.out.unit(unit, micro_batch=step.micro_batch, stage=stage, head_deps=waits)

    def call(self, k: int, forward: bool) -> Deps:
        """The call marker of the p2p call after virtual step ``k``."""
        step = self.steps[self.index(k, forward)]
        return self.p2p.calls(1, step.micro_batch, step.chunk * self.pp + self.stage, self.p2p.after_tail())

    # -- the schedule's phases ---------------------------------------------------------------

    def run(self) -> None:
        waits: Deps = () if self.first else self.receive(True, 0, self.call(0, True))
        waits = self._warmup(waits)
        waits = self._steady(waits)
        if self.warm == self.total and not self.last:
            waits += self.receive(False, self.vpp - 1, self.p2p.calls(1, -1, self.stage, waits))
        waits = self._cooldown(waits)
        if waits:  # the optimizer step waits for the last call's transfers as well
            self.out.tail = waits[-1]

    def _warmup(self, waits: Deps) -> Deps:
        """Each warm-up forward, then its send_forward_recv_forward."""
        for k in range(self.warm):
            self.compute(k, True, waits)
            deps = self.call(k, True)
            recv_prev = not (self.first and self.chunk(k + 1, True) == 0) and k != self.total - 1
            waits = self.send(k, True, deps)
            if recv_prev:
                waits += self.receive(True, self.chunk(k + 1, True), deps)
            if k == self.warm - 1 and self.warm != self.total and not self.last:
                waits += self.receive(False, self.vpp - 1, deps)
        return waits

    def _steady(self, waits: Deps) -> Deps:
        """One forward, one backward, then one send_forward_backward_recv_forward_backward."""
        pp, vpp = self.pp, self.vpp
        for k in range(self.remaining):
            fk = k + self.warm
            self.compute(fk, True, waits)
            self.compute(k, False, ())
            deps = self.call(k, False)
            waits = self.send(fk, True, deps) + self.send(k, False, deps)
            if self.first:
                c = self.chunk(fk - (pp - 1), True)
                recv_prev, next_f = c != vpp - 1, c + 1
            else:
                recv_prev, next_f = True, self.chunk(fk + 1, True)
            if self.last:
                c = self.chunk(k - (pp - 1), False)
                recv_next, next_b = c != 0, c - 1
            else:
                recv_next, next_b = True, self.chunk(k + 1, False)
            if recv_prev and k != self.remaining - 1:
                waits += self.receive(True, next_f, deps)
            if recv_next:
                waits += self.receive(False, next_b, deps)
        return waits

    def _cooldown(self, waits: Deps) -> Deps:
        """Each remaining backward, then its send_backward_recv_backward."""
        for k in range(self.remaining, self.total):
            self.compute(k, False, waits)
            deps = self.call(k, False)
            waits = self.send(k, False, deps)
            next_b = self.chunk(k + 1, False)
            if not (self.last and next_b == self.vpp - 1) and k != self.total - 1:
                waits += self.receive(False, next_b, deps)
        return waits
