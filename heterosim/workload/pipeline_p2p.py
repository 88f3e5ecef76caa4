"""One rank's pipeline send/recv endpoints: peers, sizes, tags, templates and call markers.

Activations travel forward and their gradients backward between neighbouring virtual stages;
sizes, the scatter/gather optimisation and the tags are described in the generator's docstring
(heterosim/workload/generator.py). The schedule walks (walk_*.py) ask this class for the nodes of
a receive or send and for the framework's call markers before each p2p call.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

from heterosim.catalog.gpus import DTYPE_BYTES
from heterosim.workload.builder import TraceAssembler
from heterosim.workload.groups import StagedLayout, boundary_transfers
from heterosim.workload.ops_base import comm_op
from heterosim.workload.rank_context import RankContext
from heterosim.workload.trace import ALL_GATHER, COMM_COLL_NODE, COMM_RECV_NODE, COMM_SEND_NODE, NO_COLLECTIVE

Deps = tuple[int, ...]


class PipelineP2P:
    """The p2p nodes of ``ctx``'s rank, written into ``out``.

    Creating it adds the grid's four p2p templates (not for DeepSpeed, whose walk has its own)
    and the scatter/gather all-gather templates, in that order: the trace's template rows keep
    their historical order."""

    def __init__(self, ctx: RankContext, out: TraceAssembler, deepspeed: bool) -> None:
        self.ctx, self.out = ctx, out
        self.staged = isinstance(ctx.w.layout, StagedLayout)
        self._templates: dict[tuple[str, int], list[tuple[int, int]]] = {}
        if not self.staged and not deepspeed:  # the grid's four p2p templates, in their historical order
            for kind in ("recv_f", "send_f", "recv_b", "send_b"):
                self.transfers(kind, 0)
        self.gather_f: int | None = None  # TP all-gather after a forward recv (scatter/gather)
        self.gather_b: int | None = None
        if self.scatter_gather:
            size = self.p2p_bytes() * ctx.par.tp  # nccl-tests size convention: the gathered bytes
            gid = ctx.w.groups.group_id(ctx.rank, "tp")
            assert gid is not None  # scatter/gather needs tp > 1, so the rank has a TP group
            dtype = ctx.act_dtype
            self.gather_f, self.gather_b = (
                ctx.templates.add(
                    comm_op(f"pp_recv_allgather.{ph}", ph, ALL_GATHER, size, dtype, COMM_COLL_NODE, "tp"), gid
                )
                for ph in ("fwd", "bwd")
            )

    # -- sizes and peers -------------------------------------------------------------------

    @property
    def scatter_gather(self) -> bool:
        """1/tp of each activation per TP rank, all-gathered after the receive: on a grid, or on
        an explicit plan whose replicas all have one TP degree (the pieces line up rank to rank)."""
        p, lay = self.ctx.par, self.ctx.w.layout
        uniform = not isinstance(lay, StagedLayout) or {t for row in lay.cell_tps for t in row} == {p.tp}
        return p.p2p_scatter_gather and p.tp > 1 and not p.sequence_parallel and uniform

    def p2p_bytes(self) -> int:
        ctx = self.ctx
        t = ctx.training
        tokens = t.micro_batch * (t.seq_len // ctx.par.cp)  # each CP rank sends its own tokens
        if ctx.par.sequence_parallel or self.scatter_gather:
            tokens = -(-tokens // ctx.par.tp)
        return tokens * ctx.model.hidden * DTYPE_BYTES[ctx.act_dtype]

    def peer(self, virtual_stage: int) -> int:
        """The rank of virtual stage ``virtual_stage`` in this rank's pipeline (grid layouts)."""
        ctx = self.ctx
        stage = virtual_stage % ctx.par.pp
        return cast(int, ctx.w.layout.rank_of(ctx.tp_index, ctx.replica, stage, ctx.cp_index))

    def tag(self, micro_batch: int, boundary: int, direction: int) -> int:
        return (micro_batch * self.ctx.V + boundary) * 2 + direction

    def _sizes(self, other: int, receive: bool) -> list[tuple[int, int]]:
        """(peer rank, bytes) of this rank's sends (``receive`` False) or recvs at the boundary
        with virtual stage ``other`` (activations forward and their gradients backward follow
        the same rule, from the sending stage's TP degree to the receiving one's)."""
        ctx = self.ctx
        lay = ctx.w.layout
        if not isinstance(lay, StagedLayout):
            return [(self.peer(other), self.p2p_bytes())]
        mine, theirs = lay.cell_tp(ctx.replica, ctx.stage), lay.cell_tp(ctx.replica, other)
        tp_from, tp_to = (theirs, mine) if receive else (mine, theirs)
        t = ctx.training
        tokens = t.micro_batch * t.seq_len
        width = ctx.model.hidden * DTYPE_BYTES[ctx.act_dtype]
        out = []
        sliced = ctx.par.sequence_parallel or self.scatter_gather  # rank i's 1/tp to rank i
        for src, dst, share in boundary_transfers(tp_from, tp_to, sliced):
            if (dst if receive else src) != ctx.tp_index:
                continue
            peer = lay.rank_of(src if receive else dst, ctx.replica, other)
            size = -(-(tokens * share.numerator) // share.denominator)  # ceil(tokens * share)
            out.append((int(peer), size * width))  # type: ignore[arg-type]
        return out

    # -- templates and nodes ---------------------------------------------------------------

    def transfers(self, kind: str, other: int) -> list[tuple[int, int]]:
        """(peer, template) of this rank's p2p nodes of ``kind`` (recv_f, send_f, recv_b, send_b)
        toward virtual stage ``other`` (stages only differ in TP in explicit plans, so grids cache
        one entry)."""
        key = (kind, other if self.staged else -1)
        if key not in self._templates:
            receive, direction = kind.startswith("recv"), 0 if kind.endswith("f") else 1
            label = f"pp_{'recv' if receive else 'send'}.{'fwd' if direction == 0 else 'bwd'}"
            node = COMM_RECV_NODE if receive else COMM_SEND_NODE
            phase = "fwd" if direction == 0 else "bwd"
            dtype = self.ctx.act_dtype
            self._templates[key] = [
                (peer, self.ctx.templates.add(comm_op(label, phase, NO_COLLECTIVE, size, dtype, node)))
                for peer, size in self._sizes(other, receive)
            ]
        if not self.staged:
            return [(self.peer(other), tmpl) for _, tmpl in self._templates[key]]
        return self._templates[key]

    def nodes(
        self, kind: str, other: int, mb: int, v: int, tag: int, deps: Deps | Callable[[], Deps]
    ) -> Deps:
        """The p2p nodes of ``kind`` toward ``other`` for micro-batch ``mb`` at virtual stage
        ``v``; ``deps`` may be a function, called once per node (its own call markers)."""
        return tuple(
            self.out.node(
                tmpl, micro_batch=mb, stage=v, peer=peer, tag=tag, deps=deps() if callable(deps) else deps
            )
            for peer, tmpl in self.transfers(kind, other)
        )

    def gathered(self, recvs: Deps, gather: int | None, mb: int, v: int) -> Deps:
        """What a step's compute waits for after receiving ``recvs``: the receives themselves, or
        with the scatter/gather optimisation the TP all-gather of the received pieces."""
        if gather is None:
            return recvs
        return (self.out.node(gather, micro_batch=mb, stage=v, deps=recvs),)

    def calls(self, count: int, mb: int, v: int, deps: Deps) -> Deps:
        """``count`` collective-call markers (framework.collective_overhead) after ``deps``."""
        marker = self.ctx.call_marker
        for _ in range(count if marker is not None else 0):
            assert marker is not None
            deps = (self.out.node(marker, micro_batch=mb, stage=v, deps=deps),)
        return deps

    def after_tail(self) -> Deps:
        """The compute stream's last node so far, if any."""
        return (self.out.tail,) if self.out.tail >= 0 else ()
