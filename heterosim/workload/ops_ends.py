"""Op lists outside the transformer layers: embedding, logits + loss, optimizer step; and the
parameter counts a rank holds.

Embedding (Megatron VocabParallelEmbedding): each TP rank holds vocab/tp rows, looks up the ids
that fall in its shard and writes zeros for the others, then the partial results are summed over
TP (all-reduce of b*s*h, or reduce-scatter with sequence parallelism). gpt adds learned positions
(replicated over TP) and applies embedding dropout on the (sequence-sharded) result.

Head: final norm, logits GEMM (column-parallel over the vocabulary, the input all-gathered first
under sequence parallelism; Megatron's own ``tensor_parallel.ColumnParallelLinear``, not a
Transformer Engine module, so it runs in the activation dtype under fp8 training),
vocab-parallel cross-entropy (Megatron ``_VocabParallelCrossEntropy``, the same passes in
Megatron-LM 2020 ``mpu/cross_entropy.py`` and Megatron-core ``tensor_parallel/cross_entropy.py``):
the 16-bit logits are first converted to fp32 (``logits.float()``, Megatron's default without
``fp16_lm_cross_entropy``), then one kernel each for the row max, an all-reduce (MAX) of b*s fp32
values, the in-place subtraction of the max, the in-place exp, the row sums, one all-reduce (SUM)
of the predicted logits and sums of exponentials (2*b*s fp32 values) and the in-place division
that leaves the softmax for the backward; backward multiplies the stored softmax (minus the
one-hot) by the loss gradient in place and converts it back to the logits' dtype. Each pass
reads (and the in-place ones write) the b*s*vocab/tp fp32 logits.

With tied embeddings (gpt) the last pipeline stage holds its own copy of the word embedding for
the logits; synchronising that copy with the first stage is a per-iteration all-reduce the
generator adds.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from heterosim.catalog.models import ModelConfig
from heterosim.config.experiment import ParallelConfig, TrainingConfig
from heterosim.workload.ops_base import (
    ADAM_FLOPS,
    DROPOUT_FLOPS,
    FP8_CAST_FLOPS,
    FP32,
    MASK_BYTES,
    SOFTMAX_LOSS_FLOPS,
    Dims,
    OpSpec,
    dims,
    elementwise,
    gemm,
    gemm_backward,
    grad_buffer_bytes,
    kv_heads_per_rank,
    norm,
    tp_collective,
)

TOKEN_ID_BYTES = 8  # int64 token ids


def embedding_forward_ops(
    model: ModelConfig, training: TrainingConfig, parallel: ParallelConfig
) -> list[OpSpec]:
    d = dims(model, training, parallel)
    t, h, e = d.tokens, d.h, d.act_bytes
    ops = [
        OpSpec(
            "embedding",
            "embedding",
            "fwd",
            d.act_dtype,
            (t, h, 0, 0),
            bytes_moved=t * TOKEN_ID_BYTES + -(-t * h // d.tp) * e + t * h * e,
        )
    ]
    if d.tp > 1:
        ops.append(tp_collective("reducescatter" if d.sp else "allreduce", "embedding", "fwd", d))
    n = d.sp_tokens * h
    if model.learned_positions:
        ops.append(elementwise("pos_embedding", "fwd", d, n, 1, 3 * n * e))
    if model.arch == "gpt":
        ops.append(elementwise("embedding_dropout", "fwd", d, n, DROPOUT_FLOPS, 2 * n * e + n * MASK_BYTES))
    return ops


def embedding_backward_ops(
    model: ModelConfig, training: TrainingConfig, parallel: ParallelConfig
) -> list[OpSpec]:
    """Dropout and position-table gradients, the TP all-gather that undoes the forward
    reduce-scatter (sequence parallelism only; the forward all-reduce's backward is the identity),
    then the scatter-add of the word-embedding gradient: PyTorch builds a dense gradient of the
    rank's vocab shard that Megatron then adds into the fp32 main gradient."""
    d = dims(model, training, parallel)
    t, h, e = d.tokens, d.h, d.act_bytes
    n = d.sp_tokens * h
    ops: list[OpSpec] = []
    if model.arch == "gpt":
        ops.append(
            elementwise("embedding_dropout.bwd", "bwd", d, n, DROPOUT_FLOPS, 2 * n * e + n * MASK_BYTES)
        )
    if model.learned_positions:
        positions = -(-d.sp_tokens // d.b) * h
        ops.append(elementwise("pos_embedding.wgrad", "bwd", d, n, 1, n * e + 2 * positions * FP32))
    if d.sp:
        ops.append(tp_collective("allgather", "embedding.bwd", "bwd", d))
    shard = d.vocab * h
    ops.append(
        OpSpec(
            "embedding.wgrad",
            "embedding",
            "bwd",
            d.act_dtype,
            (t, h, 0, 0),
            bytes_moved=t * TOKEN_ID_BYTES + t * h * e + shard * (e + 2 * FP32),
        )
    )
    return ops


def _logits_pass(
    label: str, phase: str, d: Dims, flops_per_logit: int, fp32_passes: int, extra_bytes: int = 0
) -> OpSpec:
    """One kernel over the b*s x vocab/tp logits: ``fp32_passes`` fp32 reads or writes each."""
    t, v = d.tokens, d.vocab
    return OpSpec(
        label,
        "softmax_loss",
        phase,
        d.act_dtype,
        (t, v, 0, 0),
        flops=flops_per_logit * t * v,
        bytes_moved=fp32_passes * FP32 * t * v + extra_bytes,
    )


def _cross_entropy_fwd(d: Dims, tp: int) -> list[OpSpec]:
    t, v, e = d.tokens, d.vocab, d.act_bytes
    ops: list[OpSpec] = []
    if e != FP32:  # logits.float(): read 16-bit, write fp32
        ops.append(_logits_pass("ce_to_fp32", "fwd", d, 0, 1, t * v * e))
    ops.append(_logits_pass("ce_max", "fwd", d, 1, 1, t * FP32))
    if tp > 1:
        ops.append(tp_collective("allreduce", "ce_max", "fwd", d, t * FP32, "fp32"))
    ops += [
        _logits_pass("ce_sub_max", "fwd", d, 1, 2),
        _logits_pass("ce_exp", "fwd", d, 1, 2),
        _logits_pass("cross_entropy", "fwd", d, 1, 1, t * FP32),
    ]  # row sums of exp
    if tp > 1:
        ops.append(tp_collective("allreduce", "ce_sum", "fwd", d, 2 * t * FP32, "fp32"))
    ops.append(_logits_pass("ce_softmax", "fwd", d, SOFTMAX_LOSS_FLOPS - 4, 2, t * FP32))
    return ops


def head_forward_ops(model: ModelConfig, training: TrainingConfig, parallel: ParallelConfig) -> list[OpSpec]:
    d = dims(model, training, parallel)
    ops = [norm("final_norm", "fwd", d, model, d.sp_tokens)]
    if d.sp:
        ops.append(tp_collective("allgather", "head", "fwd", d))
    ops.append(gemm("logits", "fwd", _logits_dims(d), d.tokens, d.vocab, d.h))
    return ops + _cross_entropy_fwd(d, d.tp)


def _logits_dims(d: Dims) -> Dims:
    """The logits GEMM runs in the activation dtype (not a Transformer Engine fp8 module)."""
    return replace(d, gemm_dtype=d.act_dtype, gemm_in_bytes=d.act_bytes)


def head_backward_ops(model: ModelConfig, training: TrainingConfig, parallel: ParallelConfig) -> list[OpSpec]:
    """Loss gradient (softmax minus one-hot from the stored fp32 exponentials), logits dgrad and
    wgrad with the column-parallel TP communication (see ops_layer; Megatron's output layer is a
    ColumnParallelLinear, asynchronous like the layers' with ``tp_backward_overlap``), final
    norm backward."""
    d = dims(model, training, parallel)
    t, v, e = d.tokens, d.vocab, d.act_bytes
    ops = [_logits_pass("cross_entropy.bwd", "bwd", d, 1, 2)]  # softmax * dloss, in place
    if e != FP32:  # backward of logits.float(): read fp32, write 16-bit
        ops.append(_logits_pass("ce_to_fp32.bwd", "bwd", d, 0, 1, t * v * e))
    dgrad, *wgrad = gemm_backward("logits", _logits_dims(d), t, d.vocab, d.h)
    beside = d.tp_backward_overlap  # asynchronous, as in the layers' QKV/fc1 (ops_layer)
    if d.sp:
        ops.append(replace(tp_collective("allgather", "head_input.bwd", "bwd", d), overlap_next=int(beside)))
    ops.append(dgrad)
    if d.tp > 1:
        reduce = tp_collective("reducescatter" if d.sp else "allreduce", "head.bwd", "bwd", d)
        ops.append(replace(reduce, overlap_next=len(wgrad) if beside else 0))
    ops += wgrad  # [and eager: its accumulation]
    ops.append(norm("final_norm.bwd", "bwd", d, model, d.sp_tokens))
    return ops


# ---------------------------------------------------------------------------------------------
# Parameters per rank


def _mlp_params_on_rank(model: ModelConfig, ffn: int, tp: int) -> int:
    """One (dense or expert) MLP split over TP: column-parallel fc1 (+bias), row-parallel fc2
    (its bias replicated)."""
    ffn_r = -(-ffn // tp)
    h = model.hidden
    if model.gated_mlp:
        return 3 * h * ffn_r
    return 2 * h * ffn_r + (ffn_r + h if model.has_bias else 0)


def layer_expert_params_on_rank(model: ModelConfig, parallel: ParallelConfig, layer: int) -> int:
    """Routed-expert parameters of ``layer`` on one rank (experts/ep experts, each split by TP);
    they are replicated over the ``ep_dp`` group instead of ``dp``. 0 for dense layers."""
    if not model.is_moe_layer(layer):
        return 0
    assert model.moe is not None
    local = model.moe.experts // parallel.ep
    return local * _mlp_params_on_rank(model, model.moe.expert_ffn, parallel.tp)


def layer_params_on_rank(model: ModelConfig, parallel: ParallelConfig, layer: int) -> int:
    """Parameters one TP rank holds for ``layer``: QKV/out_proj split by TP (KV heads replicated
    when tp > kv_heads), out_proj bias and norms replicated, MLP split by TP; for MoE layers the
    router (replicated), shared experts (TP-split) and experts/ep routed experts (TP-split)."""
    if not 0 <= layer < model.layers:
        raise ValueError(f"layer {layer} outside 0..{model.layers - 1} of {model.name}")
    tp, h = parallel.tp, model.hidden
    q = model.hidden // tp
    kv = kv_heads_per_rank(model, tp) * model.head_dim
    attention = h * q + 2 * h * kv + q * h
    if model.has_bias:
        attention += q + 2 * kv + h
    norms = 2 * model.norm_params()
    if not model.is_moe_layer(layer):
        return attention + norms + _mlp_params_on_rank(model, model.ffn, tp)
    assert model.moe is not None
    moe = model.moe
    shared = _mlp_params_on_rank(model, moe.shared_experts * moe.expert_ffn, tp) if moe.shared_experts else 0
    return attention + norms + h * moe.experts + shared + layer_expert_params_on_rank(model, parallel, layer)


def layer_linear_weights_on_rank(model: ModelConfig, parallel: ParallelConfig, layer: int) -> int:
    """Weights of ``layer`` on one rank that run through Transformer Engine Linear modules (QKV,
    out_proj, MLP / shared- and routed-expert fc1 and fc2), i.e. :func:`layer_params_on_rank`
    without norms, biases and the router: the tensors cast to fp8 under fp8 training."""
    tp, h = parallel.tp, model.hidden
    q = model.hidden // tp
    kv = kv_heads_per_rank(model, tp) * model.head_dim
    attention = h * q + 2 * h * kv + q * h

    def mlp(ffn: int) -> int:
        ffn_r = -(-ffn // tp)
        return (3 if model.gated_mlp else 2) * h * ffn_r

    if not model.is_moe_layer(layer):
        return attention + mlp(model.ffn)
    assert model.moe is not None
    moe = model.moe
    shared = mlp(moe.shared_experts * moe.expert_ffn) if moe.shared_experts else 0
    return attention + shared + moe.experts // parallel.ep * mlp(moe.expert_ffn)


def rank_linear_weights(model: ModelConfig, parallel: ParallelConfig, layers: Iterable[int]) -> int:
    """:func:`layer_linear_weights_on_rank` summed over ``layers``."""
    return sum(layer_linear_weights_on_rank(model, parallel, layer) for layer in layers)


def embedding_params_on_rank(model: ModelConfig, parallel: ParallelConfig) -> int:
    """The word-embedding vocab shard plus the (replicated) learned position table."""
    vocab_r = -(-model.vocab // parallel.tp)
    positions = model.max_seq * model.hidden if model.learned_positions else 0
    return vocab_r * model.hidden + positions


def head_params_on_rank(model: ModelConfig, parallel: ParallelConfig, has_embedding: bool) -> int:
    """Final norm plus the output projection's vocab shard; with tied embeddings the shard is the
    embedding itself when the same rank holds it, else a copy (Megatron's last pipeline stage)."""
    vocab_r = -(-model.vocab // parallel.tp)
    output = 0 if (model.tied_embeddings and has_embedding) else vocab_r * model.hidden
    return model.norm_params() + output


def rank_params(
    model: ModelConfig, parallel: ParallelConfig, layers: Iterable[int], has_embedding: bool, has_head: bool
) -> int:
    """All parameters one rank holds (its layers, embedding and head pieces)."""
    total = sum(layer_params_on_rank(model, parallel, layer) for layer in layers)
    if has_embedding:
        total += embedding_params_on_rank(model, parallel)
    if has_head:
        total += head_params_on_rank(model, parallel, has_embedding)
    return total


def rank_expert_params(model: ModelConfig, parallel: ParallelConfig, layers: Iterable[int]) -> int:
    """The routed-expert part of :func:`rank_params` (data-parallel over ``ep_dp``)."""
    return sum(layer_expert_params_on_rank(model, parallel, layer) for layer in layers)


# ---------------------------------------------------------------------------------------------
# Optimizer


def optimizer_shard(parallel: ParallelConfig, params_on_rank: int, expert_params_on_rank: int = 0) -> int:
    """Parameters whose optimizer step this rank runs: all of them, or with ZeRO >= 1 / the
    distributed optimizer 1/(dp*cp) of the dense ones and 1/(dp/ep) of the routed-expert ones."""
    if parallel.zero == 0 and not parallel.distributed_optimizer:
        return params_on_rank
    dense = params_on_rank - expert_params_on_rank
    expert_dp = max(1, parallel.dp // parallel.ep)
    dense_dp = parallel.dp * parallel.cp  # Megatron shards over data + context parallelism
    return -(-dense // dense_dp) + -(-expert_params_on_rank // expert_dp)


def _opt_pass(
    label: str,
    elements: int,
    bytes_per_element: int,
    flops: int = 0,
    kind: str = "elementwise",
    dtype: str = "fp32",
) -> OpSpec:
    """One memory-bound pass of the optimizer step over ``elements`` values."""
    return OpSpec(
        label,
        kind,
        "opt",
        dtype,
        (elements, 0, 0, 0),
        flops=flops * elements,
        bytes_moved=bytes_per_element * elements,
    )


def optimizer_ops(
    model: ModelConfig,
    training: TrainingConfig,
    parallel: ParallelConfig,
    params_on_rank: int,
    expert_params_on_rank: int = 0,
    linear_weights: int = 0,
) -> list[OpSpec]:
    """Once-per-iteration kernels of a rank, all memory-bound, over this rank's optimizer shard,
    in the order of Megatron-LM's mixed-precision step (megatron/optimizer/optimizer.py, 2021-2023;
    megatron/core/optimizer since, the same passes; DeepSpeed's ZeRO-1/2 step times the same
    phases, e.g. DeepSpeed issue #4132's log: overflow_check, unscale_and_clip, basic_step,
    update_fp16):

    - ``grad_to_fp32`` (fp16 only): ``_copy_model_grads_to_main_grads`` sets each fp32 master
      weight's gradient to ``model_param.main_grad.float()``; fp16 keeps 16-bit gradients, so
      this is a copy (read 2, write 4 bytes). With bf16/fp8 the main gradient is already fp32 and
      ``.float()`` returns it without a copy.
    - ``unscale_grads`` (fp16 only, dynamic loss scaling): ``_unscale_main_grads_and_check_for_nan``
      runs ``torch._amp_foreach_non_finite_check_and_unscale_`` over the fp32 gradients (read and
      write 4 bytes).
    - ``grad_norm``: the global-norm pass of gradient clipping (Megatron clips at 1.0 by default;
      the scaling pass only runs when the norm exceeds the limit, not modelled).
    - ``adam``: read the fp32 gradient, read and write the fp32 master weight, m and v; FLOPs are an
      approximate constant per parameter.
    - ``param_copy`` (mixed precision): ``_copy_main_params_to_model_params``, a separate
      multi-tensor copy of the fp32 master weights into the 16-bit model weights (read 4, write 2).
      fp32 training has no master copy, so neither this pass nor the gradient copies.
    - ``zero_grad``: Megatron's DistributedDataParallel zeroes the rank's whole gradient buffer
      (every parameter it holds, main-gradient dtype) at the start of each iteration
      (``zero_grad_buffer``, megatron/core/distributed/distributed_data_parallel.py; the 2020
      FP16 optimizer's ``zero_grad`` likewise). Only without DeepSpeed ZeRO (zero = 0), whose
      partitioned gradients are not modelled here.
    - ``fp8_weight_cast`` (fp8 training): Transformer Engine casts each of the rank's
      ``linear_weights`` (:func:`rank_linear_weights`) to fp8 with its transposed copy once per
      iteration: Megatron-core passes ``is_first_microbatch`` so later micro-batches reuse the
      cached fp8 weights (TE ``Linear.forward``: "allows caching of the FP8 versions of the
      weights"); read 2 bytes, write 1 + 1. It belongs to the next iteration's first forward.

    The global norm's tiny all-reduce and the ZeRO parameter all-gather are left to the
    generator."""
    del model  # the step depends on the shard size only
    n = optimizer_shard(parallel, params_on_rank, expert_params_on_rank)
    g = grad_buffer_bytes(training)
    read = g  # bytes per gradient element the norm and Adam read
    ops = []
    if training.dtype == "fp16":
        read = FP32
        ops += [_opt_pass("grad_to_fp32", n, g + FP32), _opt_pass("unscale_grads", n, 2 * FP32, flops=1)]
    ops += [
        _opt_pass("grad_norm", n, read, flops=2),
        _opt_pass("adam", n, read + 6 * FP32, flops=ADAM_FLOPS, kind="optimizer"),
    ]
    if training.dtype != "fp32":
        ops.append(_opt_pass("param_copy", n, FP32 + 2))
    if parallel.zero == 0:
        ops.append(_opt_pass("zero_grad", params_on_rank, g))
    if training.dtype == "fp8" and linear_weights > 0:
        ops.append(_opt_pass("fp8_weight_cast", linear_weights, 4, flops=FP8_CAST_FLOPS, dtype="bf16"))
    return ops
