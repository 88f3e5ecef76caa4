"""Context parallelism: causal attention over a sequence split across the CP group.

Megatron-core (``context_parallel_size``, Transformer Engine attention) cuts every sequence into
``2*cp`` equal chunks and gives CP rank ``i`` chunks ``i`` and ``2*cp-1-i``
(``get_batch_on_this_cp_rank``), so each rank holds ``seq_len/cp`` tokens and an equal share of
the causal work. Every op outside core attention works on those tokens alone; attention needs the
keys and values of the other ranks. Two ways, ``parallel.cp_comm``:

``p2p`` (Transformer Engine ``AttnFuncWithCPAndKVP2P``, transformer_engine/pytorch/attention.py,
later attention/dot_product_attention/context_parallel.py): ``cp`` attention steps; K/V chunks
travel around the ring. Forward: before step ``i < cp-1`` each rank sends the K/V chunk it holds
(its own at step 0, the one it received at step ``i-1`` after) to CP rank ``+1`` and receives one
from rank ``-1`` (``flash_attn_p2p_communicate``, send and recv posted together), while it
computes attention on the chunk it holds; step ``i+1`` waits for the exchange of step ``i``
(``req.wait()``). ``cp-1`` exchanges. Backward: ``cp`` exchanges in the opposite direction (to
rank ``-1``, from rank ``+1``); the buffer holds K/V and the dK/dV accumulated so far, and TE
sends K/V alone at step 0 (``send_tensor[0]``), dK/dV alone at the last step
(``send_tensor[1]``) and both in between, so the dK/dV of a step's chunk leaves after that
step's attention backward and the own dK/dV arrives home with the last exchange. dK/dV travel in
the K/V dtype (the p2p buffers are ``torch.empty((2, *kv.shape), dtype=kv.dtype)``).

``all_gather`` (TE ``AttnFuncWithCPAndKVAllGather``; the variant Llama 3 trained with, Dubey et
al. 2024, arXiv:2407.21783 §3.3.2: "we all-gather the K and V tensors, and then compute attention
output for the local Q tensor chunk"): forward all-gathers K and V over the CP group
(``gather_along_first_dim``, one call each) before attention; backward gathers them again
(``_attn_cp_kv_allgather_bwd_gather``: only the local K/V are saved) and reduce-scatters dK and
dV after the attention backward (``reduce_scatter_along_first_dim``, one call each). These are
blocking collectives of the "cp" group on the rank's stream.

Work per step: with the load-balanced split, step 0 is causal attention of the local
``s/cp`` queries on the local ``s/cp`` keys, and every later step attends either all local
queries to half a remote chunk pair or half the queries to a whole pair, i.e. ``s/cp x s/(2cp)``
non-causal: each of the ``cp`` steps has the FLOPs of causal attention over ``s/cp`` tokens, in
all ``1/cp`` of the causal attention over ``s`` (the load balance the split exists for). Every
step is one causal flash-attention op on ``s/cp`` tokens (``attention_core`` on the rank's dims).

APPROXIMATION: the non-causal half-size steps are timed as causal ``s/cp`` kernels (same FLOPs,
kernel efficiency of a causal shape); TE's two alternating streams (consecutive steps may overlap
on the GPU) run here one after the other on the rank's stream; the softmax/output corrections
between steps (``flash_attn_fwd_out_correction``) and the dQ/dK/dV accumulation adds are small
elementwise kernels left out; the all-gather variant's two kernels over the local query halves
against the gathered K/V prefix are charged as ``cp`` causal ``s/cp`` kernels (same FLOPs).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from heterosim.workload.builder import PREVIOUS_TAIL, UnitProgram
from heterosim.workload.ops_base import Dims, OpSpec, collective
from heterosim.workload.trace import ALL_GATHER, COMM_RECV_NODE, COMM_SEND_NODE, NO_COLLECTIVE, REDUCE_SCATTER

# Tags of the ring's sends and receives: a base above the pipeline's tags (which start at 0 and
# grow with micro-batch and virtual stage) plus the exchange's index inside its schedule step.
CP_TAG_BASE = 1 << 24
RING = "cp_ring"


def kv_chunk_bytes(d: Dims) -> int:
    """Bytes of the K and V a rank holds: its ``s/cp`` tokens x the KV heads of its TP shard."""
    return 2 * d.tokens * d.kv_dim * d.act_bytes


def _p2p(label: str, phase: str, d: Dims, size: int, node_type: int) -> OpSpec:
    return OpSpec(
        label,
        "comm",
        phase,
        d.act_dtype,
        (0, 0, 0, 0),
        node_type=node_type,
        comm_type=NO_COLLECTIVE,
        comm_bytes=int(size),
        comm_group="cp",
    )


def ring_step_bytes(d: Dims, backward: bool) -> list[int]:
    """Bytes each rank sends (and receives) at every exchange of one ring attention: forward
    ``cp-1`` K/V chunks; backward ``cp`` exchanges, K/V at the first, dK/dV at the last, both
    in between (module docstring)."""
    kv = kv_chunk_bytes(d)
    if not backward:
        return [kv] * (d.cp - 1)
    return [kv if i == 0 else kv if i == d.cp - 1 else 2 * kv for i in range(d.cp)]


def ring_attention_ops(phase: str, d: Dims, step: OpSpec) -> list[OpSpec]:
    """Ring attention (``cp_comm: p2p``) in issue order: per step the exchange for the next step
    (a send and a recv of the "cp" group), then the attention ``step`` op on the chunk held."""
    backward = phase == "bwd"
    sizes = ring_step_bytes(d, backward)
    ops: list[OpSpec] = []
    for i in range(d.cp):
        if i < len(sizes):
            what = "kv" if not backward or i == 0 else ("dkv" if i == d.cp - 1 else "kv_dkv")
            ops.append(_p2p(f"{RING}.{what}.send", phase, d, sizes[i], COMM_SEND_NODE))
            ops.append(_p2p(f"{RING}.{what}.recv", phase, d, sizes[i], COMM_RECV_NODE))
        ops.append(step)
    return ops


def all_gather_attention_ops(phase: str, d: Dims, step: OpSpec) -> list[OpSpec]:
    """K/V all-gather attention (``cp_comm: all_gather``) in issue order (module docstring)."""
    half = kv_chunk_bytes(d) // 2  # K or V alone
    gathers = [
        collective(f"cp_allgather.{x}", phase, ALL_GATHER, half * d.cp, "cp", d.act_dtype) for x in "kv"
    ]
    ops = gathers + [step] * d.cp
    if phase == "bwd":
        ops += [
            collective(f"cp_reducescatter.d{x}", phase, REDUCE_SCATTER, half * d.cp, "cp", d.act_dtype)
            for x in "kv"
        ]
    return ops


def context_parallel_attention(phase: str, d: Dims, step: OpSpec) -> list[OpSpec]:
    """Core attention of one layer under context parallelism; ``step`` is one causal attention
    op over the rank's ``s/cp`` tokens in ``phase``."""
    step = step if step.phase == phase else replace(step, phase=phase)
    if d.cp_comm == "all_gather":
        return all_gather_attention_ops(phase, d, step)
    return ring_attention_ops(phase, d, step)


def is_ring_op(op: OpSpec) -> bool:
    """A send or recv of the CP ring (placed by :class:`RingPlacer`, not chained)."""
    return op.comm_group == "cp" and op.node_type in (COMM_SEND_NODE, COMM_RECV_NODE)


@dataclass
class RingPlacer:
    """Places the ring's sends and recvs of one schedule step into its unit program.

    An exchange's send and recv start together once the previous exchange has ended (TE waits on
    both requests before posting the next), the first one after the chain so far (K/V ready); a
    send that carries dK/dV also waits for the chain (the attention backward of the previous
    step). The chain op after an exchange's own step, the next step's attention, waits for it.
    Forward and recompute sends go to CP rank +1, backward ones to rank -1.
    """

    prev_rank: int
    next_rank: int
    _pending: list[int] = field(default_factory=list)  # exchange the next chain op waits for
    _posted: list[int] = field(default_factory=list)  # exchange running beside the current step
    _count: dict[int, int] = field(default_factory=dict)  # per node type: exchanges so far

    def place(self, unit: UnitProgram, template: int, op: OpSpec, layer: int) -> None:
        tail = unit.tail if unit.tail >= 0 else PREVIOUS_TAIL
        deps = list(self._pending) if self._pending else [tail]
        if "dkv" in op.label and self._pending:
            deps.append(tail)
        sending = op.node_type == COMM_SEND_NODE
        forward_dir = op.phase != "bwd"
        peer = self.next_rank if sending == forward_dir else self.prev_rank
        n = self._count.get(op.node_type, 0)
        self._count[op.node_type] = n + 1
        self._posted.append(unit.add(template, layer, deps, peer=peer, tag=CP_TAG_BASE + n))

    def before_chain(self) -> list[int]:
        """Dependencies of the next chain op (the exchange before the step it computes)."""
        waits, self._pending, self._posted = self._pending, self._posted, []
        return waits
