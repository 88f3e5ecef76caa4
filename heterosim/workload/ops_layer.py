"""Op lists of one transformer layer: forward, backward (with recomputation), Megatron TP/EP comms.

Block structure (Megatron-LM, pre-norm):
  x -> norm1 -> QKV -> flash attention -> out_proj -> [bias+dropout] -> +x = y
  y -> norm2 -> fc1 -> act -> fc2 -> [bias+dropout] -> +y
gpt: LayerNorm, GELU MLP, biases (fused: QKV bias in the GEMM epilogue, fc1 bias in the GELU
kernel, out_proj/fc2 biases in the bias-dropout kernels), hidden dropout 0.1 after out_proj and
fc2. Attention dropout runs inside the flash-attention kernel (no mask is stored, no extra op).
llama: RMSNorm, SwiGLU (fc1 is gate+up fused, n = 2*ffn/tp), no biases, no dropout.

``training.attention: unfused`` replaces the flash-attention op by Megatron-LM v1-v2 core
attention (ParallelAttention before FlashAttention): per head (b*heads/tp batches) a QK^T
batched GEMM (s x s x head_dim, the 1/sqrt(d) scale in its epilogue), the fused
scale-mask-softmax kernel over the s x s scores, attention dropout (gpt; byte mask stored) and
the PV batched GEMM (s x head_dim x s); backward runs the PV GEMM's two gradients, dropout and
softmax backward (from the stored probabilities) and the QK^T GEMM's two gradients. These GEMMs
run in the activation dtype (bf16 under fp8 training) over the full square (no causal saving);
K and V are per query head (GQA groups expanded, as Megatron's unfused path does).

Tensor parallelism (Megatron, Shoeybi et al. 2019; Korthikanti et al. 2022): QKV and fc1 are
column-parallel, out_proj and fc2 row-parallel. Without sequence parallelism: forward all-reduce
after out_proj and after fc2; backward all-reduce of the input gradient after the QKV and fc1
dgrads (issued between dgrad and wgrad, as Megatron overlaps it with the wgrad). With sequence
parallelism norms/dropouts/residuals work on s/tp tokens: forward all-gather before QKV and fc1,
reduce-scatter after out_proj and fc2; backward all-gather of the output gradient before the
out_proj/fc2 dgrads, and for QKV/fc1 an all-gather of the (sharded, stored) input again for the
wgrad (Megatron's LinearWithGradAccumulationAndAsyncCommunication), then dgrad, reduce-scatter
of the input gradient, wgrad.

fp8 training (Transformer Engine 1.x modules as Megatron-core builds them: QKV and fc1 are
LayerNormLinear, out_proj and fc2 Linear, the activation is Megatron's bf16 bias-GELU/SwiGLU):
weights are cast once per iteration (``optimizer_ops``); per micro-batch the norms of QKV/fc1 write
their output in fp8 directly, out_proj and fc2 cast their 16-bit input with a fused
cast+transpose (cast only under sequence parallelism, the transpose then runs in the backward);
backward casts each output gradient with a fused cast+transpose(+bias grad), and transposes the
stored fp8 norm outputs for the QKV/fc1 wgrads (``ops_base.fp8_cast`` cites the source). MoE
experts and shared experts are Linear modules (their norm is separate, not fused).

MoE layers (Megatron-core, all-to-all token dispatcher): the router runs on all b*s tokens of the
TP group (gathered first under sequence parallelism), experts are sharded over the EP group
(experts/ep per rank) and each expert is tensor-parallel like the dense MLP. Balanced routing
(the default): each rank sends b*s*top_k token copies and receives as many, so its local experts
process b*s*top_k tokens in all, ceil(b*s*top_k / local_experts) each (a grouped GEMM with
batch = local experts). The dispatch and combine all-to-alls move b*s*top_k*h activations per
rank (none when ep == 1); the TP reduction follows the combine. With a ``RankRouting``
(uneven routing, heterosim/workload/routing.py) the four all-to-alls are all-to-all-v's with the
rank's per-peer sizes (dispatch and the combine's backward send what the rank routes, the
combine and the dispatch's backward return what it received), permute/unpermute work on the
copies the rank routes, and the local experts process the copies it receives.
APPROXIMATION: the grouped GEMM over unevenly loaded local experts is timed as a batched GEMM
of their mean load, ceil(received / local_experts) rows each (FLOPs exact when it divides).
"""

from __future__ import annotations

from dataclasses import replace

from heterosim.catalog.models import ModelConfig
from heterosim.config.experiment import ParallelConfig, TrainingConfig
from heterosim.workload.cp import context_parallel_attention
from heterosim.workload.op_sac import selective_op_recompute
from heterosim.workload.ops_base import (
    ATTN_SOFTMAX_BWD_FLOPS,
    ATTN_SOFTMAX_FLOPS,
    DROPOUT_FLOPS,
    FLASH_BACKWARD_FACTOR,
    FP32,
    GELU_FLOPS,
    MASK_BYTES,
    SOFTMAX_LOSS_FLOPS,
    SWIGLU_FLOPS,
    Dims,
    OpSpec,
    bias_grad,
    dims,
    elementwise,
    ep_alltoall,
    fp8_cast,
    fp8_transpose,
    gemm,
    gemm_backward,
    grad_accumulation,
    norm,
    tp_collective,
)
from heterosim.workload.ops_eager import eager_bias_add, eager_rotary, eager_swiglu
from heterosim.workload.routing import RankRouting
from heterosim.workload.tp_overlap import overlap_tp_comms


def attention_core(phase: str, d: Dims, causal: bool = True) -> OpSpec:
    """Flash attention on this rank's heads. Forward FLOPs 4*b*s^2*(heads/tp)*head_dim (QK^T and
    PV), halved when causal; backward 2.5x forward (FlashAttention-2). Bytes: Q, K, V, O and the
    fp32 logsumexp forward; Q, K, V, O, dO read and dQ, dK, dV written plus logsumexp and the
    fp32 row sums D = rowsum(dO*O) backward."""
    full = 4 * d.b * d.s * d.s * d.q_dim
    fwd_flops = full // 2 if causal else full
    q = d.tokens * d.q_dim * d.act_bytes
    kv = d.tokens * d.kv_dim * d.act_bytes
    lse = d.b * d.heads * d.s * FP32
    if phase == "bwd":
        flops = int(fwd_flops * FLASH_BACKWARD_FACTOR)
        moved = 4 * q + 4 * kv + 3 * lse
    else:
        flops = fwd_flops
        moved = 2 * q + 2 * kv + lse
    return OpSpec(
        "attn_core" + (".bwd" if phase == "bwd" else ""),
        "attention",
        phase,
        d.act_dtype,
        (d.b, d.s, d.heads, d.head_dim),
        (d.kv_heads, int(causal)),
        flops=flops,
        bytes_moved=moved,
    )


def _attention_bmm(label: str, phase: str, d: Dims, m: int, n: int, k: int) -> OpSpec:
    """One batched GEMM of unfused attention: b*heads independent [m,k] @ [k,n] products in the
    activation dtype (inputs read, output written once)."""
    batch = d.b * d.heads
    return OpSpec(
        label,
        "gemm",
        phase,
        d.act_dtype,
        (m, n, k, batch),
        flops=2 * m * n * k * batch,
        bytes_moved=(m * k + k * n + m * n) * batch * d.act_bytes,
    )


def attention_scores(d: Dims) -> int:
    """Elements of the s x s score matrices of one micro-batch on one rank: b*heads/tp*s^2."""
    return d.b * d.heads * d.s * d.s


def unfused_attention_ops(phase: str, d: Dims, model: ModelConfig) -> list[OpSpec]:
    """Megatron-LM v1-v2 core attention (see the module docstring), forward (phase "fwd" or
    "recompute") or backward ("bwd"). Bytes: softmax reads and writes the scores (2 per element
    forward, 3 backward: dy, y, dx); dropout reads and writes them plus the 1-byte mask."""
    s, hd, e = d.s, d.head_dim, d.act_bytes
    n = attention_scores(d)
    gpt = model.arch == "gpt"
    if phase != "bwd":
        ops = [
            _attention_bmm("attn_scores", phase, d, s, s, hd),
            elementwise("attn_softmax", phase, d, n, ATTN_SOFTMAX_FLOPS, 2 * n * e),
        ]
        if gpt:
            ops.append(_dropout("attn_dropout", phase, d, n))
        return ops + [_attention_bmm("attn_context", phase, d, s, hd, s)]
    # context = P @ V: dP = dctx @ V^T (s, s, hd), dV = P^T @ dctx (s, hd, s)
    ops = [
        _attention_bmm("attn_context.dgrad", phase, d, s, s, hd),
        _attention_bmm("attn_context.wgrad", phase, d, s, hd, s),
    ]
    if gpt:
        ops.append(_dropout("attn_dropout.bwd", phase, d, n))
    ops.append(elementwise("attn_softmax.bwd", phase, d, n, ATTN_SOFTMAX_BWD_FLOPS, 3 * n * e))
    # scores = Q @ K^T: dQ = dS @ K (s, hd, s), dK = dS^T @ Q (s, hd, s)
    return ops + [
        _attention_bmm("attn_scores.dgrad", phase, d, s, hd, s),
        _attention_bmm("attn_scores.wgrad", phase, d, s, hd, s),
    ]


def core_attention(phase: str, d: Dims, model: ModelConfig) -> list[OpSpec]:
    """Core attention as configured: one flash-attention op, or the unfused kernels; with
    context parallelism the CP steps and their K/V exchange (heterosim.workload.cp)."""
    if d.attention == "unfused":
        return unfused_attention_ops(phase, d, model)
    op = attention_core("bwd" if phase == "bwd" else "fwd", d)
    if d.cp > 1:
        return context_parallel_attention(phase, d, op)
    return [op if op.phase == phase else _with_phase(op, phase)]


def _rotary(label: str, phase: str, d: Dims, model: ModelConfig) -> list[OpSpec]:
    """Rotary position embedding of Q and K (llama): Megatron-core's ``apply_rotary_pos_emb``
    (fused: Transformer Engine's ``fused_apply_rotary_pos_emb``, one kernel per tensor) reads and
    writes each once, forward and (the same rotation transposed) backward; 3 FLOPs per element
    (two multiplies, one add). None for learned positions (gpt)."""
    if model.learned_positions:
        return []
    if d.eager:
        return eager_rotary(label, phase, d, model)
    n = d.tokens * (d.q_dim + d.kv_dim)
    return [elementwise(label, phase, d, n, 3, 2 * n * d.act_bytes)]


def _dropout(label: str, phase: str, d: Dims, n: int) -> OpSpec:
    # fwd: read x, write y and the byte mask; bwd: read dy and mask, write dx
    return elementwise(label, phase, d, n, DROPOUT_FLOPS, 2 * n * d.act_bytes + n * MASK_BYTES)


def _add(label: str, phase: str, d: Dims, n: int) -> OpSpec:
    return elementwise(label, phase, d, n, 1, 3 * n * d.act_bytes)


def _activation_ops(
    label: str, phase: str, d: Dims, model: ModelConfig, tokens: int, ffn: int
) -> list[OpSpec]:
    """The MLP activation: one fused kernel, or SwiGLU's eager kernels (heterosim.workload.ops_eager)."""
    if d.eager and model.gated_mlp:
        return eager_swiglu(label, phase, d, tokens, ffn)
    return [_activation(label, phase, d, model, tokens, ffn)]


def _activation(label: str, phase: str, d: Dims, model: ModelConfig, tokens: int, ffn: int) -> OpSpec:
    """GELU over tokens x ffn, or SwiGLU: SiLU(gate)*up from 2*ffn inputs to ffn outputs."""
    n = tokens * ffn
    if model.gated_mlp:
        per, io = SWIGLU_FLOPS, 3 * n  # fwd: read gate+up, write out
    else:
        per, io = GELU_FLOPS, 2 * n  # fwd: read x, write y
    if phase == "bwd":  # read dy and the inputs, write d(inputs)
        per, io = 2 * per, (5 * n if model.gated_mlp else 3 * n)
    return elementwise(label, phase, d, n, per, io * d.act_bytes)


def _tp_reduce(where: str, phase: str, d: Dims) -> list[OpSpec]:
    """Reduction of a row-parallel output (fwd) or a column-parallel input gradient (bwd)."""
    if d.tp == 1:
        return []
    return [tp_collective("reducescatter" if d.sp else "allreduce", where, phase, d)]


def _sp_gather(where: str, phase: str, d: Dims) -> list[OpSpec]:
    return [tp_collective("allgather", where, phase, d)] if d.sp else []


def _block_tail_fwd(idx: str, model: ModelConfig, d: Dims) -> list[OpSpec]:
    n = d.sp_tokens * d.h
    ops = eager_bias_add(f"bias{idx}", "fwd", d, n) if d.eager and model.has_bias else []
    ops += [_dropout(f"dropout{idx}", "fwd", d, n)] if model.arch == "gpt" else []
    return ops + [_add(f"residual{idx}", "fwd", d, n)]


def _fused_norm(label: str, d: Dims, model: ModelConfig) -> OpSpec:
    """The norm of a LayerNormLinear: with fp8 it writes the GEMM's fp8 input directly."""
    return norm(label, "fwd", d, model, d.sp_tokens, out_bytes=1 if d.te_fp8 else None)


def _input_cast(label: str, d: Dims, rows: int, cols: int, sp: bool) -> list[OpSpec]:
    """fp8 cast of a Linear's 16-bit input [rows, cols]: with the transposed copy for the wgrad,
    or (sequence-parallel inputs) without it."""
    return [fp8_cast(f"{label}.fp8_cast", "fwd", d, rows, cols, not sp)] if d.te_fp8 else []


def _wgrad_transpose(label: str, d: Dims, rows: int, cols: int, needed: bool) -> list[OpSpec]:
    """fp8 transpose of a stored fp8 GEMM input right before its wgrad (LayerNormLinear norm
    outputs, Linear inputs under sequence parallelism)."""
    return [fp8_transpose(f"{label}.fp8_transpose", "bwd", d, rows, cols)] if d.te_fp8 and needed else []


def _grad_cast(label: str, d: Dims, rows: int, cols: int) -> list[OpSpec]:
    """fp8 cast+transpose (+bias gradient) of an output gradient [rows, cols]."""
    return [fp8_cast(f"{label}.grad_fp8_cast", "bwd", d, rows, cols, True)] if d.te_fp8 else []


def _row_parallel_grad_cast(label: str, d: Dims, cols: int) -> tuple[list[OpSpec], list[OpSpec]]:
    """Output-gradient cast of a row-parallel Linear, as (before, after) the SP all-gather of
    that gradient: without SP one fused cast+transpose before; with SP the rank's s/tp rows are
    cast before the gather and the gathered fp8 gradient is transposed after it."""
    if not d.te_fp8:
        return [], []
    if not d.sp:
        return _grad_cast(label, d, d.tokens, cols), []
    return (
        [fp8_cast(f"{label}.grad_fp8_cast", "bwd", d, d.sp_tokens, cols, False)],
        [fp8_transpose(f"{label}.grad_fp8_transpose", "bwd", d, d.tokens, cols)],
    )


def _attention_block_fwd(model: ModelConfig, d: Dims) -> list[OpSpec]:
    ops = [_fused_norm("ln1", d, model)]
    ops += _sp_gather("attn", "fwd", d)
    ops.append(gemm("qkv_proj", "fwd", d, d.tokens, d.q_dim + 2 * d.kv_dim, d.h))
    ops += _rotary("rope", "fwd", d, model)
    ops += core_attention("fwd", d, model)
    ops += _input_cast("out_proj", d, d.tokens, d.q_dim, d.sp)
    ops.append(gemm("out_proj", "fwd", d, d.tokens, d.h, d.q_dim))
    ops += _tp_reduce("attn", "fwd", d)
    return ops + _block_tail_fwd("1", model, d)


def _mlp_width(model: ModelConfig, ffn: int) -> int:
    return 2 * ffn if model.gated_mlp else ffn


def _dense_mlp_fwd(
    model: ModelConfig, d: Dims, prefix: str, ffn: int, norm_fused: bool = True
) -> list[OpSpec]:
    """fc1, activation, fc2; ``norm_fused``: fc1 is a LayerNormLinear (dense MLP), else a Linear
    (shared experts) whose input is cast here. Under SP only the dense fc2 input is local to a
    rank's TP shard of columns; expert-side Linears are not sequence-parallel."""
    sp = d.sp and norm_fused
    ops = [] if norm_fused else _input_cast(f"{prefix}fc1", d, d.tokens, d.h, False)
    return ops + [
        gemm(f"{prefix}fc1", "fwd", d, d.tokens, _mlp_width(model, ffn), d.h),
        *_activation_ops(f"{prefix}act", "fwd", d, model, d.tokens, ffn),
        *_input_cast(f"{prefix}fc2", d, d.tokens, ffn, sp),
        gemm(f"{prefix}fc2", "fwd", d, d.tokens, d.h, ffn),
    ]


def _local_experts(model: ModelConfig, parallel: ParallelConfig) -> int:
    assert model.moe is not None
    return model.moe.experts // parallel.ep


def _expert_tokens(model: ModelConfig, parallel: ParallelConfig, d: Dims) -> int:
    """Tokens per local expert under balanced routing: ceil(b*s*top_k / local experts)."""
    assert model.moe is not None
    return -(-d.tokens * model.moe.top_k // _local_experts(model, parallel))


def _moe_sizes(
    model: ModelConfig, parallel: ParallelConfig, d: Dims, routing: RankRouting | None
) -> tuple[int, int, int, int]:
    """(copies the rank routes, local experts, rows per local expert, expert ffn per TP rank)."""
    assert model.moe is not None
    local = _local_experts(model, parallel)
    effn = -(-model.moe.expert_ffn // d.tp)
    if routing is None:
        return d.tokens * model.moe.top_k, local, _expert_tokens(model, parallel, d), effn
    return routing.routed, local, -(-routing.received // local), effn


def _dispatch(
    where: str, phase: str, d: Dims, routed: int, routing: RankRouting | None, outbound: bool
) -> OpSpec:
    """An EP all-to-all; with uneven routing the rank's sends (``outbound``: what it routes,
    else what it received and returns)."""
    if routing is None:
        return ep_alltoall(where, phase, d, routed * d.h * d.act_bytes)
    return ep_alltoall(where, phase, d, 0, routing.send if outbound else routing.recv)


def _moe_mlp_fwd(
    model: ModelConfig, parallel: ParallelConfig, d: Dims, routing: RankRouting | None
) -> list[OpSpec]:
    assert model.moe is not None
    moe = model.moe
    routed, local, per_expert, effn = _moe_sizes(model, parallel, d, routing)
    e = d.act_bytes
    ops = [
        gemm("router", "fwd", d, d.tokens, moe.experts, d.h),
        elementwise(
            "topk",
            "fwd",
            d,
            d.tokens * moe.experts,
            SOFTMAX_LOSS_FLOPS,
            d.tokens * moe.experts * (e + FP32) + routed * 8,
        ),
        elementwise("permute", "fwd", d, routed * d.h, 0, (d.tokens + routed) * d.h * e),
    ]
    if parallel.ep > 1:
        ops.append(_dispatch("dispatch", "fwd", d, routed, routing, True))
    ops += [
        *_input_cast("expert_fc1", d, per_expert * local, d.h, False),
        gemm("expert_fc1", "fwd", d, per_expert, _mlp_width(model, effn), d.h, local),
        *_activation_ops("expert_act", "fwd", d, model, per_expert * local, effn),
        *_input_cast("expert_fc2", d, per_expert * local, effn, False),
        gemm("expert_fc2", "fwd", d, per_expert, d.h, effn, local),
    ]
    if parallel.ep > 1:
        ops.append(_dispatch("combine", "fwd", d, routed, routing, False))
    ops.append(
        elementwise("unpermute", "fwd", d, routed * d.h, 2, (routed + d.tokens) * d.h * e + routed * FP32)
    )
    if moe.shared_experts:
        shared_ffn = -(-moe.shared_experts * moe.expert_ffn // d.tp)
        ops += _dense_mlp_fwd(model, d, "shared_", shared_ffn, norm_fused=False)
        ops.append(_add("shared_add", "fwd", d, d.tokens * d.h))
    return ops


def _mlp_block_fwd(
    model: ModelConfig, parallel: ParallelConfig, d: Dims, layer: int, routing: RankRouting | None
) -> list[OpSpec]:
    moe = model.is_moe_layer(layer)
    ops = [norm("ln2", "fwd", d, model, d.sp_tokens) if moe else _fused_norm("ln2", d, model)]
    ops += _sp_gather("mlp", "fwd", d)
    if moe:
        ops += _moe_mlp_fwd(model, parallel, d, routing)
    else:
        ops += _dense_mlp_fwd(model, d, "", d.ffn)
    ops += _tp_reduce("mlp", "fwd", d)
    return ops + _block_tail_fwd("2", model, d)


def _check_layer(model: ModelConfig, layer: int) -> None:
    if not 0 <= layer < model.layers:
        raise ValueError(f"layer {layer} outside 0..{model.layers - 1} of {model.name}")


def layer_forward_ops(
    model: ModelConfig,
    training: TrainingConfig,
    parallel: ParallelConfig,
    layer: int,
    routing: RankRouting | None = None,
) -> list[OpSpec]:
    """Forward kernels and TP/EP collectives of transformer layer ``layer``, in issue order
    (``routing``: the rank's uneven routing of an MoE layer; None: balanced)."""
    _check_layer(model, layer)
    d = dims(model, training, parallel)
    ops = _attention_block_fwd(model, d) + _mlp_block_fwd(model, parallel, d, layer, routing)
    return (
        overlap_tp_comms(ops, parallel.tp_comm_overlap_method, parallel.tp)
        if parallel.tp_comm_overlap
        else ops
    )


# ---------------------------------------------------------------------------------------------
# Backward


def _block_tail_bwd(idx: str, model: ModelConfig, d: Dims) -> list[OpSpec]:
    n = d.sp_tokens * d.h
    return [_dropout(f"dropout{idx}.bwd", "bwd", d, n)] if model.arch == "gpt" else []


def _column_parallel_bwd(
    label: str, where: str, d: Dims, m: int, n: int, k: int, bias: bool = False
) -> list[OpSpec]:
    """Backward of a column-parallel LayerNormLinear: [fp8: cast the output gradient], [SP:
    all-gather the stored input], dgrad, TP reduction of the input gradient, [fp8: transpose the
    stored fp8 norm output], wgrad, [the bias gradient].

    With ``d.tp_backward_overlap`` the collectives are asynchronous, as Megatron-LM (since
    2021-08-30, commit cf7efd4 "allreduce overlap with wgrad gemm": ``all_reduce(grad_input,
    async_op=True)`` before the wgrad, ``handle.wait()`` after it; with sequence parallelism the
    input ``_all_gather_base`` beside the dgrad and ``_reduce_scatter_base`` beside the wgrad,
    megatron/mpu/layers.py, 2022-03) and Transformer Engine's LayerNormLinear backward ("Overlap
    input AG with dgrad", "Overlap dgrad-RS/AR with wgrad") issue them: the gather runs beside
    the dgrad, the reduction beside the wgrad work, and the op after them waits for both."""
    dgrad, *wgrad = gemm_backward(label, d, m, n, k)  # wgrad [and eager: its accumulation]
    gather = _sp_gather(f"{where}_input.bwd", "bwd", d)
    reduce = _tp_reduce(f"{where}.bwd", "bwd", d)
    after = _wgrad_transpose(label, d, m, k, True) + wgrad + _bias_grads(label, d, m, n, bias)
    if d.tp_backward_overlap:
        gather = [replace(op, overlap_next=1) for op in gather]
        reduce = [replace(op, overlap_next=len(after)) for op in reduce]
    return _grad_cast(label, d, m, n) + gather + [dgrad] + reduce + after


def _bias_grads(label: str, d: Dims, rows: int, cols: int, bias: bool) -> list[OpSpec]:
    """The bias gradient of a linear layer with a bias (gpt), after its wgrad; fp8 GEMMs of
    Transformer Engine fold it into the output-gradient cast (``_grad_cast``)."""
    if not bias or d.te_fp8:
        return []
    accumulate = [grad_accumulation(f"{label}.bias_grad_add", d, cols)] if d.eager else []
    return [bias_grad(f"{label}.bias_grad", d, rows, cols), *accumulate]


def _linear_bwd(
    label: str,
    d: Dims,
    m: int,
    n: int,
    k: int,
    batch: int = 1,
    grad_cast: bool = True,
    sp_input: bool = False,
) -> list[OpSpec]:
    """Backward of a Linear without TP communication: [fp8: output-gradient cast unless the
    caller did it], dgrad, [fp8 + SP: transpose of the stored input], wgrad."""
    dgrad, *wgrad = gemm_backward(label, d, m, n, k, batch)  # wgrad [and eager: its accumulation]
    cast = _grad_cast(label, d, m * batch, n) if grad_cast else []
    return cast + [dgrad] + _wgrad_transpose(label, d, m * batch, k, sp_input) + wgrad


def _dense_mlp_bwd(model: ModelConfig, d: Dims, prefix: str, ffn: int, tp_comms: bool) -> list[OpSpec]:
    """Dense MLP (``tp_comms``: fc1 a LayerNormLinear, fc2's gradient cast by the caller around
    the SP gather) or shared experts (plain Linears)."""
    ops = _linear_bwd(
        f"{prefix}fc2", d, d.tokens, d.h, ffn, grad_cast=not tp_comms, sp_input=d.sp and tp_comms
    )
    if tp_comms:  # the row-parallel fc2's bias is added after the reduction (bias-dropout-add)
        ops += _bias_grads(f"{prefix}fc2", d, d.sp_tokens, d.h, model.has_bias)
    ops += _activation_ops(f"{prefix}act.bwd", "bwd", d, model, d.tokens, ffn)
    if tp_comms:
        width = _mlp_width(model, ffn)
        ops += _column_parallel_bwd(f"{prefix}fc1", "mlp", d, d.tokens, width, d.h, model.has_bias)
    else:
        ops += _linear_bwd(f"{prefix}fc1", d, d.tokens, _mlp_width(model, ffn), d.h)
    return ops


def _moe_mlp_bwd(
    model: ModelConfig, parallel: ParallelConfig, d: Dims, routing: RankRouting | None
) -> list[OpSpec]:
    assert model.moe is not None
    moe = model.moe
    routed, local, per_expert, effn = _moe_sizes(model, parallel, d, routing)
    e = d.act_bytes
    ops: list[OpSpec] = []
    if moe.shared_experts:
        shared_ffn = -(-moe.shared_experts * moe.expert_ffn // d.tp)
        ops += _dense_mlp_bwd(model, d, "shared_", shared_ffn, tp_comms=False)
    ops.append(
        elementwise(
            "unpermute.bwd", "bwd", d, routed * d.h, 2, (d.tokens + 2 * routed) * d.h * e + routed * FP32
        )
    )
    if parallel.ep > 1:
        ops.append(_dispatch("combine.bwd", "bwd", d, routed, routing, True))
    ops += _linear_bwd("expert_fc2", d, per_expert, d.h, effn, local)
    ops += _activation_ops("expert_act.bwd", "bwd", d, model, per_expert * local, effn)
    ops += _linear_bwd("expert_fc1", d, per_expert, _mlp_width(model, effn), d.h, local)
    if parallel.ep > 1:
        ops.append(_dispatch("dispatch.bwd", "bwd", d, routed, routing, False))
    ops += [
        elementwise("permute.bwd", "bwd", d, routed * d.h, 1, (routed + d.tokens) * d.h * e),
        elementwise(
            "topk.bwd",
            "bwd",
            d,
            d.tokens * moe.experts,
            SOFTMAX_LOSS_FLOPS,
            d.tokens * moe.experts * (2 * FP32 + e),
        ),
    ]
    ops += gemm_backward("router", d, d.tokens, moe.experts, d.h)
    # The tokens were gathered (SP) or replicated over TP and the experts are TP-split: reduce the
    # input gradient over TP (reduce-scatter with SP, the backward of the gather).
    ops += _tp_reduce("mlp.bwd", "bwd", d)
    return ops


def _mlp_block_bwd(
    model: ModelConfig, parallel: ParallelConfig, d: Dims, layer: int, routing: RankRouting | None
) -> list[OpSpec]:
    moe = model.is_moe_layer(layer)
    before, after = ([], []) if moe else _row_parallel_grad_cast("fc2", d, d.h)
    ops = _block_tail_bwd("2", model, d) + before
    ops += _sp_gather("mlp.bwd", "bwd", d)  # backward of the forward reduce-scatter
    ops += after
    if moe:
        ops += _moe_mlp_bwd(model, parallel, d, routing)
    else:
        ops += _dense_mlp_bwd(model, d, "", d.ffn, tp_comms=True)
    ops.append(norm("ln2.bwd", "bwd", d, model, d.sp_tokens))
    ops += _norm_grad_accumulation("ln2", d, model)
    # gradient accumulation where the residual stream forks (dx = dy + d(norm path))
    ops.append(_add("residual2.bwd", "bwd", d, d.sp_tokens * d.h))
    return ops


def _attention_block_bwd(model: ModelConfig, d: Dims, recompute_core: bool) -> list[OpSpec]:
    before, after = _row_parallel_grad_cast("out_proj", d, d.h)
    ops = _block_tail_bwd("1", model, d) + before
    ops += _sp_gather("attn.bwd", "bwd", d)
    ops += after
    ops += _linear_bwd("out_proj", d, d.tokens, d.h, d.q_dim, grad_cast=False, sp_input=d.sp)
    ops += _bias_grads("out_proj", d, d.sp_tokens, d.h, model.has_bias)
    if recompute_core:
        ops += core_attention("recompute", d, model)
    ops += core_attention("bwd", d, model)
    ops += _rotary("rope.bwd", "bwd", d, model)
    qkv = d.q_dim + 2 * d.kv_dim
    ops += _column_parallel_bwd("qkv_proj", "attn", d, d.tokens, qkv, d.h, model.has_bias)
    ops.append(norm("ln1.bwd", "bwd", d, model, d.sp_tokens))
    ops += _norm_grad_accumulation("ln1", d, model)
    ops.append(_add("residual1.bwd", "bwd", d, d.sp_tokens * d.h))
    return ops


def _norm_grad_accumulation(label: str, d: Dims, model: ModelConfig) -> list[OpSpec]:
    """Eager: autograd adds the norm's weight (and LayerNorm's bias) gradients, one kernel each."""
    if not d.eager:
        return []
    tensors = 2 if model.arch == "gpt" else 1
    return [grad_accumulation(f"{label}.grad_add{i}", d, d.h) for i in range(tensors)]


def _with_phase(op: OpSpec, phase: str) -> OpSpec:
    return replace(op, phase=phase)


def layer_backward_ops(
    model: ModelConfig,
    training: TrainingConfig,
    parallel: ParallelConfig,
    layer: int,
    routing: RankRouting | None = None,
) -> list[OpSpec]:
    """Backward of layer ``layer`` in issue order, each GEMM as dgrad then wgrad.

    recompute=full (Megatron "full" granularity): the whole forward, TP collectives included, is
    re-run first with phase "recompute" (only the layer input was kept). recompute=selective
    (Korthikanti et al. 2022): core attention is re-run right before its backward.
    recompute=selective_op (torchtitan's op-level selective AC, heterosim.workload.op_sac): the
    unsaved forward ops (every second linear GEMM, norms, RoPE, activation, SP all-gathers) are
    re-run first with phase "recompute".
    """
    _check_layer(model, layer)
    d = dims(model, training, parallel)
    ops: list[OpSpec] = []
    if training.recompute == "full":
        forward = layer_forward_ops(model, training, parallel, layer, routing)
        ops += [_with_phase(op, "recompute") for op in forward]
    elif training.recompute == "selective_op":
        forward = _attention_block_fwd(model, d) + _mlp_block_fwd(model, parallel, d, layer, routing)
        ops += selective_op_recompute(forward, d, model)
    ops += _mlp_block_bwd(model, parallel, d, layer, routing)
    ops += _attention_block_bwd(model, d, training.recompute == "selective")
    return (
        overlap_tp_comms(ops, parallel.tp_comm_overlap_method, parallel.tp)
        if parallel.tp_comm_overlap
        else ops
    )
