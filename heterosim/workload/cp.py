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

Transformer Engine's passes around the ring (``p2p``; TE 1.x ``AttnFuncWithCP``, the
implementation of mid-2024 NeMo and Megatron-core, transformer_engine/pytorch/attention.py;
:func:`te_passes`), all in the activation dtype: forward, a ``torch.cat`` of K and V into the
first send buffer; before each later step a ``.contiguous()`` copy of the K/V half (steps
``i <= rank``) or of the Q half (``i > rank``) it attends; after the last step the output's
``zero_()`` and one fused correction per step (``out.add_(out_i * exp(lse_i - lse))``: reads both,
writes the output; half of it for half-Q steps). Backward: a copy of the saved K/V into the
first send buffer; per step the copies of the K/V half, or of the Q, output and output-gradient
halves; the dQ accumulation (``copy_`` or ``add_``, whole or half); once the exchange is in,
``torch.cat`` of this step's dK and dV and their accumulation into the received buffer (cuDNN
fused attention, TE's default on Hopper). The slowest CP rank's counts of each pass are
charged to every rank.

APPROXIMATION: the non-causal half-size steps are timed as causal ``s/cp`` kernels (same FLOPs,
kernel efficiency of a causal shape); TE's two alternating streams (consecutive steps may overlap
on the GPU) run here one after the other on the rank's stream; the log-sum-exp corrections
(``heads x tokens`` elements, a 1/head_dim share) are left out; TE 2.x reorganised these passes
(not modelled separately); the all-gather variant's copies are left out and its two kernels over
the local query halves against the gathered K/V prefix are charged as ``cp`` causal ``s/cp``
kernels (same FLOPs).

``parallel.cp_impl: pytorch``: PyTorch's experimental ``context_parallel``
(torch/distributed/tensor/experimental/_attention.py ``_templated_ring_attention`` and
``_templated_ring_attention_backward``, as torchtitan calls it), with its defaults
``convert_to_f32`` and ``enable_load_balance``. The same ``cp`` steps of the same FLOPs, one
SDPA call each, but with PyTorch's own copies and merges around them, eager kernels on the rank's
stream (:func:`torch_attention_ops`). K and V are taken with the query's head count: torchtitan's
Llama repeats the KV heads (``repeat_kv``) before SDPA, so that is what CP copies and moves.

- Forward: ``key.contiguous()`` and ``value.contiguous()`` (the transposed SDPA operands are
  copied), and before every step but the last ``torch.cat`` of K and V into one buffer.
  ``cp_comm: all_gather`` (PyTorch's default rotate method, ``_AllGatherRotater``): one
  all-gather of that buffer over the CP group, issued at step 0 and waited at step 1, so it runs
  beside step 0; ``cp_comm: p2p`` (``_AllToAllRotater``): the buffer goes to CP rank +1 before
  every step but the last and is waited at the next step. Each step's output and log-sum-exp are
  cast to fp32 (``_SDPAMerger.step``) and merged into the running output,
  ``out - sigmoid(lse_b - lse) * (out - out_b)`` (three passes over fp32 outputs: 32 B per
  element with the cast's 6 B); the result is cast back at the end.
- Backward: fp32 zeros for dQ, dK and dV; the K/V copies and cats and the rotation as forward
  (the all-gather again); after every step dK and dV are added into fp32 accumulators that then
  travel, concatenated in fp32, to CP rank +1 (``dkv_rotater``, always all-to-all), issued
  before the step's dQ add, each waited after the next step's SDPA backward and the last at the
  end, after dQ is cast back and before dK/dV are.

The byte counts are the slowest CP rank's (the last: every later step attends all its queries,
so its merges and adds cover the whole output; earlier ranks merge half the output on some
steps). APPROXIMATION: every rank is charged them (the per-layer all-gather, or the dK/dV
rotation, makes every rank wait for the slowest); the merge's log-sum-exp arithmetic
(``heads x tokens`` elements, a 1/head_dim share of the output's) is left out; each pass is one
op, where PyTorch launches several kernels (a merge about nine); the passes are the eager
kernels of the source: whether torch.compile captures the CP path of a compiled block (the
torchtitan CP runs compile) is not established, and compiled, the merge would fuse into about
one pass (10 B per output element instead of 38) and the collectives would be waited at once.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from heterosim.workload.builder import PREVIOUS_TAIL, UnitProgram
from heterosim.workload.ops_base import Dims, OpSpec, collective, elementwise
from heterosim.workload.trace import ALL_GATHER, COMM_RECV_NODE, COMM_SEND_NODE, NO_COLLECTIVE, REDUCE_SCATTER

# Tags of the ring's sends and receives: a base above the pipeline's tags (which start at 0 and
# grow with micro-batch and virtual stage) plus the exchange's index inside its schedule step.
CP_TAG_BASE = 1 << 24
RING = "cp_ring"
TORCH_RING = "cp_rotate"  # PyTorch's all-to-all rotations (parallel.cp_impl: pytorch)
FP32 = 4
# PyTorch's fp32 merge of one step's output into the running one, bytes per output element:
# out - out_b (read 2, write 1), sigmoid(lse_b - lse) * that (read 1, write 1; the lse factor is
# per row), out - that (read 2, write 1): eight 4-byte passes
MERGE_BYTES = 8 * FP32


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


@dataclass(frozen=True)
class TePasses:
    """Bytes of Transformer Engine's copies and merges around one layer's ring attention for the
    slowest CP rank of each pass (module docstring): forward the K/V ``cat`` before the ring, a
    copy before each step, the output's zeroing and per-step corrections after the last step;
    backward the copy of the saved K/V, and per step a copy, the dQ accumulation and the dK/dV
    ``cat`` and accumulation."""

    fwd_start: int
    fwd_copy: tuple[int, ...]
    fwd_end: int
    bwd_start: int
    bwd_copy: tuple[int, ...]
    bwd_dq: tuple[int, ...]
    bwd_dkv: tuple[int, ...]


def te_passes(d: Dims) -> TePasses:
    """Transformer Engine 1.x's eager passes (``AttnFuncWithCP``), counted for every CP rank and
    taken from the slowest one of each pass."""
    q = d.tokens * d.q_dim  # elements of the rank's Q (and of its output and dQ)
    kv = d.tokens * d.kv_dim  # elements of its K (or V)
    forward = [_te_forward(d.cp, r, q, kv, d.act_bytes) for r in range(d.cp)]
    backward = [_te_backward(d.cp, r, q, kv, d.act_bytes) for r in range(d.cp)]
    start, copy, end = max(forward, key=lambda f: f[0] + sum(f[1]) + f[2])
    bstart, bcopy, dq, dkv = max(backward, key=lambda b: b[0] + sum(b[1]) + sum(b[2]) + sum(b[3]))
    return TePasses(start, copy, end, bstart, bcopy, dq, dkv)


def _te_forward(cp: int, r: int, q: int, kv: int, a: int) -> tuple[int, tuple[int, ...], int]:
    """CP rank ``r``'s forward bytes: the K/V cat, each step's copy (the K/V half it attends for
    ``1 <= i <= r``, the Q half after), the output's ``zero_`` and per-step ``add_`` corrections."""
    copy = (0, *(2 * kv * a if i <= r else q * a for i in range(1, cp)))
    end = q * a + sum(3 * q * a if i <= r else 3 * q * a // 2 for i in range(cp))
    return 4 * kv * a, copy, end


def _te_backward(
    cp: int, r: int, q: int, kv: int, a: int
) -> tuple[int, tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """CP rank ``r``'s backward bytes: the saved K/V copy, then per step the input copies (K/V
    half, or the Q, output and output-gradient halves), the dQ accumulation and the dK/dV cat and
    accumulation, by the branches of ``AttnFuncWithCP.backward``."""
    first = cp - r - 1  # the first step that attends half the K/V (not half the Q)
    copy, dq, dkv = [], [], []
    for i in range(cp):
        half_kv = first <= i < cp - 1
        copy.append(0 if i == cp - 1 else 2 * kv * a if half_kv else 3 * q * a)
        if i > first:
            dq.append(3 * q * a)  # dq.add_
        elif i == first:
            dq.append(2 * q * a if r == cp - 1 else 5 * q * a // 2)  # copy_, or half copy + half add
        else:
            dq.append(3 * q * a // 2 if i > 0 else q * a)  # half add, half copy
        cat = 2 * kv * a if half_kv else 4 * kv * a  # torch.cat((dk_, dv_))
        if i == cp - 1:
            add = 5 * kv * a if r == 0 else 6 * kv * a  # half add + half copy, or add_
        elif half_kv:
            add = 2 * kv * a if (i == 0 and r == cp - 1) else 3 * kv * a  # half copy_ / add_
        else:
            add = 6 * kv * a if i > 0 else 4 * kv * a  # add_, or copy_
        dkv.append(cat + add)
    return 4 * kv * a, tuple(copy), tuple(dq), tuple(dkv)


def ring_attention_ops(phase: str, d: Dims, step: OpSpec) -> list[OpSpec]:
    """Ring attention (``cp_comm: p2p``) in issue order, with Transformer Engine's passes: per
    step the exchange for the next step (a send and a recv of the "cp" group), the copy of the
    step's K/V or Q half, the attention ``step`` op on the chunk held, and in the backward the dQ
    accumulation and, once the exchange is in, the dK/dV accumulation; the forward's output
    corrections after the last step (module docstring)."""
    backward = phase == "bwd"
    sizes = ring_step_bytes(d, backward)
    te = te_passes(d)
    copies = te.bwd_copy if backward else te.fwd_copy
    start = te.bwd_start if backward else te.fwd_start
    ops: list[OpSpec] = [_pass("cp_kv_copy" if backward else "cp_kv_cat", phase, d, start)]
    for i in range(d.cp):
        if i < len(sizes):
            what = "kv" if not backward or i == 0 else ("dkv" if i == d.cp - 1 else "kv_dkv")
            # beside the step's copy and attention (and, backward, its dQ accumulation)
            beside = (copies[i] > 0) + 1 + backward
            for end, kind in (("send", COMM_SEND_NODE), ("recv", COMM_RECV_NODE)):
                ops.append(
                    replace(_p2p(f"{RING}.{what}.{end}", phase, d, sizes[i], kind), ring_beside=beside)
                )
        if copies[i]:
            ops.append(_pass("cp_step_copy", phase, d, copies[i]))
        ops.append(step)
        if backward:
            ops.append(_pass("cp_dq_accumulate", phase, d, te.bwd_dq[i]))
            ops.append(_pass("cp_dkv_accumulate", phase, d, te.bwd_dkv[i]))
    if not backward:
        ops.append(_pass("cp_out_correction", phase, d, te.fwd_end))
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


def _rotation(label: str, phase: str, d: Dims, size: int, beside: int) -> list[OpSpec]:
    """One of PyTorch's all-to-all rotations (``permute_tensor`` to CP rank +1) as a ring
    exchange that runs beside the next ``beside`` chain ops (module docstring)."""
    return [
        replace(_p2p(f"{TORCH_RING}.{label}.{end}", phase, d, size, kind), ring_beside=beside)
        for end, kind in (("send", COMM_SEND_NODE), ("recv", COMM_RECV_NODE))
    ]


def _pass(label: str, phase: str, d: Dims, bytes_moved: int, elements: int | None = None) -> OpSpec:
    """One eager elementwise pass of CP attention (a copy, a cast, a merge, an add) moving
    ``bytes_moved``; ``elements`` defaults to a read and a write of activation-dtype elements."""
    count = bytes_moved // (2 * d.act_bytes) if elements is None else elements
    return elementwise(label, phase, d, count, 1, bytes_moved)


def torch_step_bytes(d: Dims, backward: bool, step: int) -> tuple[int, int]:
    """Bytes the slowest CP rank's eager passes move after attention step ``step`` (module
    docstring), as (before the rotation, after it). Forward: the fp32 cast and, from step 1, the
    merge; nothing after. Backward: the dK/dV accumulation (at step 0 an add into the fp32 zeros,
    which keep K's transposed strides, so their ``cat`` for the rotation first copies each
    (``flatten``); from step 1 a half-chunk add and a ``cat`` per tensor) and their fp32 ``cat``
    for the rotation; after it the dQ accumulation."""
    q, a = query_elements(d), d.act_bytes
    if not backward:
        return q * (a + FP32) + (q * MERGE_BYTES if step else 0), 0
    add = q * (FP32 + a + FP32)  # fp32 += bf16: read both, write fp32
    fp32_copy = 2 * q * FP32  # read and write one fp32 tensor of q elements
    dkv = 2 * (add + fp32_copy) if step == 0 else 2 * (add // 2 + fp32_copy)
    return dkv + 2 * fp32_copy, add  # + cat(dK, dV) in fp32; then dQ +=


def query_elements(d: Dims) -> int:
    """Elements of the rank's query (and of K or V repeated to the query's heads)."""
    return d.tokens * d.heads * d.head_dim


def torch_attention_ops(phase: str, d: Dims, step: OpSpec) -> list[OpSpec]:
    """PyTorch's context-parallel attention (``parallel.cp_impl: pytorch``) in issue order:
    copies, K/V rotation, ``cp`` steps each followed by its fp32 merge or accumulation (and in
    the backward the dK/dV rotation, issued before the dQ add), the final casts (module
    docstring)."""
    backward = phase == "bwd"
    q, a, cp = query_elements(d), d.act_bytes, d.cp
    kv = 2 * q * a  # cat(K, V) of one rank
    kv_beside = 3 if backward else 2  # K/V waited at the next step: beside the step's chain ops
    ops: list[OpSpec] = []
    if backward:
        ops.append(_pass("cp_grad_zeros", phase, d, 3 * q * FP32, 3 * q))
    ops.append(_pass("cp_kv_contiguous", phase, d, 2 * kv, 2 * q))
    for i in range(cp):
        if i < cp - 1:
            ops.append(_pass("cp_kv_cat", phase, d, 2 * kv, 2 * q))
            if d.cp_comm == "p2p":
                ops += _rotation("kv", phase, d, kv, beside=kv_beside)
            elif i == 0:  # one all-gather, waited at step 1
                gather = collective("cp_allgather.kv", phase, ALL_GATHER, kv * cp, "cp", d.act_dtype)
                ops.append(replace(gather, overlap_next=kv_beside))
        ops.append(step)
        merged, after = torch_step_bytes(d, backward, i)
        merge = "cp_dkv_accumulate" if backward else ("cp_merge" if i else "cp_out_to_fp32")
        ops.append(_pass(merge, phase, d, merged, q))
        if backward:  # waited after the dQ add and the next step's SDPA backward, or at the end
            beside = 2 + (i + 1 < cp - 1) if i < cp - 1 else 2
            ops += _rotation("dkv", phase, d, 2 * q * FP32, beside)
            ops.append(_pass("cp_dq_accumulate", phase, d, after, q))
    ops.append(_pass("cp_cast_back", phase, d, q * (FP32 + a), q))
    if backward:  # dK/dV cast back once the last rotation has come home
        ops.append(_pass("cp_dkv_cast_back", phase, d, 2 * q * (FP32 + a), 2 * q))
    return ops


def context_parallel_attention(phase: str, d: Dims, step: OpSpec) -> list[OpSpec]:
    """Core attention of one layer under context parallelism; ``step`` is one causal attention
    op over the rank's ``s/cp`` tokens in ``phase``."""
    step = step if step.phase == phase else replace(step, phase=phase)
    if d.cp_impl == "pytorch":
        return torch_attention_ops(phase, d, step)
    if d.cp_comm == "all_gather":
        return all_gather_attention_ops(phase, d, step)
    return ring_attention_ops(phase, d, step)


def is_ring_op(op: OpSpec) -> bool:
    """A send or recv of the CP ring (placed by :class:`RingPlacer`, not chained)."""
    return op.comm_group == "cp" and op.node_type in (COMM_SEND_NODE, COMM_RECV_NODE)


@dataclass
class RingPlacer:
    """Places the ring's sends and recvs of one schedule step into its unit program.

    An exchange (the sends and recvs placed between two chain ops) runs beside the next
    ``ring_beside`` chain ops of its ops, and the chain op after them waits for it (Transformer
    Engine: 1, the step it feeds, so step ``i+1`` waits for exchange ``i``).
    Transformer Engine (``pytorch_order`` False): an exchange's send and recv start together once
    the previous exchange has ended (TE waits on both requests before posting the next), or,
    when that one has already been waited for, after the chain so far (K/V ready; in the
    backward the dK/dV accumulation whose sum the exchange carries); forward and recompute sends
    go to CP rank +1, backward ones to rank -1. PyTorch (``pytorch_order``): every exchange waits for the
    chain so far (the ``cat`` that made its buffer) and for the exchange before it (one stream
    of collectives), and every send goes to CP rank +1 (``permute_tensor``).
    """

    prev_rank: int
    next_rank: int
    pytorch_order: bool = False
    _beside: list[list[int]] = field(default_factory=list)  # [node, chain ops still beside it]
    _current: list[int] = field(default_factory=list)  # the exchange being placed
    _previous: list[int] = field(default_factory=list)  # the exchange before it
    _chained: bool = True  # a chain op came since the last placement
    _count: dict[int, int] = field(default_factory=dict)  # per node type: exchanges so far

    def place(self, unit: UnitProgram, template: int, op: OpSpec, layer: int) -> None:
        if self._chained:
            self._previous, self._current, self._chained = self._current, [], False
        tail = unit.tail if unit.tail >= 0 else PREVIOUS_TAIL
        outstanding = {node for node, _ in self._beside}
        before = [node for node in self._previous if node in outstanding]
        deps = [tail, *before] if self.pytorch_order else (before or [tail])
        sending = op.node_type == COMM_SEND_NODE
        forward_dir = op.phase != "bwd" or self.pytorch_order
        peer = self.next_rank if sending == forward_dir else self.prev_rank
        n = self._count.get(op.node_type, 0)
        self._count[op.node_type] = n + 1
        node = unit.add(template, layer, deps, peer=peer, tag=CP_TAG_BASE + n)
        self._current.append(node)
        self._beside.append([node, op.ring_beside])

    def before_chain(self) -> list[int]:
        """Dependencies of the next chain op: the exchanges whose ops beside them have run."""
        self._chained = True
        waits = [node for node, left in self._beside if left == 0]
        self._beside = [[node, left - 1] for node, left in self._beside if left > 0]
        return waits
