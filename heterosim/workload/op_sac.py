"""torchtitan's op-level selective activation checkpointing (``training.recompute: selective_op``).

torchtitan wraps every transformer block in a non-reentrant checkpoint whose policy
(``_custom_policy`` with ``_save_list`` in torchtitan/parallelisms/parallelize_llama.py at commit
9dec370, 2024-12-26; the same rule in torchtitan/models/llama3/parallelize_llama.py at e7c0cae
and 820504e, June 2025, with ``abs`` dropped from the list) saves the outputs of ``aten.mm``,
SDPA (flash / efficient), ``_c10d_functional.reduce_scatter_tensor`` and ``abs``/``max``
(float8 amax), EXCEPT every second ``aten.mm`` of the block (counted in forward order: the 2nd,
4th, ...), and recomputes everything else. torchtitan's Llama issues its mms in the order wq,
wk, wv, wo, w1, w3, w2 (torchtitan/models/llama/model.py: ``self.wq(x), self.wk(x),
self.wv(x)``, ``self.wo``, ``self.w2(F.silu(self.w1(x)) * self.w3(x))``), so wk, wo and w3 are
recomputed.

The recompute list is derived from the layer's forward op list (``layer_forward_ops``):
- the forward GEMMs are numbered in order, a GEMM HeteroSim fuses standing for the mms torchtitan
  runs separately (Llama's ``qkv_proj`` = wq, wk, wv by their columns q_dim, kv_dim, kv_dim; gpt
  keeps Megatron's one fused QKV linear; a gated
  ``fc1`` = w1, w3, half the columns each); the even-numbered ones are re-run (phase "recompute",
  each as the GEMM of its own columns), the odd ones are saved;
- core attention (SDPA) and reduce-scatters are saved; every other op before the layer's last
  GEMM (norms, all-gathers of sequence parallelism, RoPE, residual adds, the activation, fp8
  casts) is re-run, in forward order. The ops from the last GEMM on only produce the block's
  output, which its backward never reads: PyTorch's checkpoint stops recomputing once every
  saved tensor the backward unpacks is back (``torch.utils.checkpoint`` early stop).

float8 (torchao ``Float8Linear``), ASSUMED: the linear calls ``torch.mm`` on float8 tensor subclasses; the
checkpoint's dispatch mode sees ``aten.mm`` before the subclass lowers it to ``_scaled_mm``, so
float8 GEMMs are counted and saved like bf16 ones (``_scaled_mm`` is not in the save list).

APPROXIMATION: the recompute is issued at the start of the layer's backward (where the first
saved tensor is unpacked), as one list; under torch.compile the partitioner may drop a
recomputed op whose output only feeds a saved one (wo under TP with sequence parallelism, whose
reduce-scatter output is saved): such ops are re-run here, as eager PyTorch does. A TP
all-reduce (TP without sequence parallelism, which torchtitan does not run) is re-run, as
the save list lacks it. Expert GEMMs of MoE layers count as one mm each. ZeRO-3 with
``zero3_impl: deepspeed-0.3`` fetches no weights for this recompute, and a whole-layer measurement
(``--db`` layers) does not scale the split GEMMs it re-runs.
"""

from __future__ import annotations

from dataclasses import replace

from heterosim.catalog.models import ModelConfig
from heterosim.workload.ops_base import FP32, Dims, OpSpec, gemm
from heterosim.workload.trace import REDUCE_SCATTER

RECOMPUTE_PHASE = "recompute"


def torchtitan_mms(op: OpSpec, d: Dims, model: ModelConfig) -> list[tuple[str, int]]:
    """The torchtitan mms (name, output columns) a forward GEMM stands for, in forward order."""
    n = op.shape[1]
    if op.label == "qkv_proj" and model.arch == "llama":
        return [("wq", d.q_dim), ("wk", d.kv_dim), ("wv", d.kv_dim)]
    if op.label.endswith("fc1") and model.gated_mlp:
        return [("w1", n // 2), ("w3", n // 2)]
    return [("", n)]


def _is_mm(op: OpSpec) -> bool:
    """A linear layer's GEMM (``aten.mm``); unfused attention's batched GEMMs (``aten.bmm``,
    labels ``attn_*``) are neither counted nor saved."""
    return op.op_kind == "gemm" and not op.label.startswith("attn_")


def _saved(op: OpSpec) -> bool:
    """Saved non-GEMM ops: core attention (SDPA) and reduce-scatter collectives."""
    return op.op_kind == "attention" or (op.is_comm and op.comm_type == REDUCE_SCATTER)


def _gemm_parts(op: OpSpec, d: Dims, model: ModelConfig, count: int) -> tuple[list[OpSpec], int]:
    """The even-numbered mms of forward GEMM ``op`` as recompute GEMMs, and the new mm count."""
    m, _, k, batch = op.shape
    out: list[OpSpec] = []
    for name, cols in torchtitan_mms(op, d, model):
        count += 1
        if count % 2 == 0:
            label = f"{op.label}.{name}" if name else op.label
            out.append(gemm(label, RECOMPUTE_PHASE, d, m, cols, k, batch))
    return out, count


def selective_op_recompute(forward: list[OpSpec], d: Dims, model: ModelConfig) -> list[OpSpec]:
    """The ops torchtitan's op-level SAC re-runs for one layer, in forward order (see the
    module docstring), from the layer's forward op list ``forward`` (before TP-overlap placement)."""
    gemms = [i for i, op in enumerate(forward) if _is_mm(op)]
    if not gemms:
        return []
    out: list[OpSpec] = []
    count = 0
    for op in forward[: gemms[-1]]:
        if _is_mm(op):
            parts, count = _gemm_parts(op, d, model, count)
            out += parts
        elif not _saved(op):
            out.append(replace(op, phase=RECOMPUTE_PHASE, overlap_next=0))
    return out


def selective_op_saved_bytes(forward: list[OpSpec], d: Dims, model: ModelConfig) -> int:
    """Activation bytes one layer keeps under op-level SAC, one micro-batch on one rank:

        e*s_r*h                       the block input (the checkpoint's input)
      + e*m*cols  per odd-numbered mm (wq, wv, w1, w2 for Llama: their outputs)
      + e*b*s*q_dim + 4*b*heads*s     per SDPA: its output O and fp32 logsumexp
      + e*s_r*h   per reduce-scatter  (its output; TP with sequence parallelism)

    with e the activation bytes, s_r the tokens of the rank's residual region (b*s, /tp with
    sequence parallelism). The float8 amax scalars are left out. Every saved mm output is
    counted, also one the backward never reads (w2: torchtitan marks it MUST_SAVE)."""
    e = d.act_bytes
    total = e * d.sp_tokens * d.h
    count = 0
    for op in forward:
        if _is_mm(op):
            m, _, _, batch = op.shape
            for _, cols in torchtitan_mms(op, d, model):
                count += 1
                total += e * m * cols * batch if count % 2 else 0
        elif op.op_kind == "attention" and op.phase == "fwd":
            b, s, heads, head_dim = op.shape
            total += e * b * s * heads * head_dim + FP32 * b * heads * s
        elif op.is_comm and op.comm_type == REDUCE_SCATTER:
            total += op.comm_bytes // d.tp
    return total
