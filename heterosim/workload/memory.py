"""Per-rank memory estimate: weights, gradients, optimizer states and activations.

Model states (mixed-precision Adam, Megatron): 16-bit weights (2 bytes; fp32 training 4; fp8
training keeps bf16 weights), gradients in Megatron's fp32 ``main_grad`` for bf16/fp8 (4 bytes;
fp16: 2, as in the ZeRO paper; fp32: 4) or, when ``training.grad_reduce_dtype`` names one, in the
dtype they are reduced in (the gradient buffer has that dtype: ``grad_buffer_bytes``),
optimizer states fp32 master weights + m + v (12 bytes; fp32 training has no master copy: 8).
ZeRO-1 and Megatron's distributed optimizer shard the
optimizer states over data parallelism, ZeRO-2 also the gradients, ZeRO-3 also the weights; the
routed-expert parameters are sharded over dp/ep (their data-parallel group) instead of dp.
ZeRO-3 additionally holds the all-gathered weights of the layer being computed and of
``zero3_prefetch`` prefetched layers (``zero3_impl: deepspeed-0.3``: of the tensor being used and
one prefetched tensor, DeepSpeed 0.3's per-tensor fetch).

Activations follow Korthikanti et al., "Reducing Activation Recomputation in Large Transformer
Models" (2022), §4: per layer and micro-batch, with 16-bit activations and 1-byte dropout masks,
    no parallelism                 s*b*h*(34 + 5*a*s/h)
    tensor parallel t              s*b*h*(10 + 24/t + 5*a*s/(h*t))
    tensor + sequence parallel     s*b*h/t*(34 + 5*a*s/h)
    selective recompute            the 5*a*s/h term disappears
    full recompute                 2*s*b*h (the layer input; /t with sequence parallelism)
    torchtitan op-level SAC        the layer input, every second linear output, the attention
                                   output and logsumexp (heterosim.workload.op_sac)
The 34 are: norm inputs 4, QKV input 2, Q/K 4, V 2, out_proj input 2, attention-output dropout
mask 1, fc1 input 2, GELU input 8, fc2 input 8, MLP-output dropout mask 1; the 10 are the parts
outside the tensor-parallel region (norm inputs, QKV and fc1 inputs, two masks). Our op lists use
FlashAttention, which stores no s x s matrices: by default the 5*a*s/h term (softmax output 2,
attention-dropout mask 1, dropout output 2) is replaced by the fp32 logsumexp, 4*a*s*b bytes,
which selective recomputation (core attention re-run from Q, K, V) drops too;
``training.attention: unfused`` (or ``flash_attention=False``) gives Korthikanti's numbers.
Generalised honestly to other blocks: K and V use kv_heads (GQA), SwiGLU stores its 2*ffn input,
llama has no dropout masks, ffn is the model's own, MoE layers store router probabilities, the
dispatched tokens, the expert intermediates and the expert outputs (balanced routing, see
ops_layer). Full recomputation also holds one layer's complete activations while that layer is
recomputed and back-propagated (Korthikanti leave this working set out); op-level SAC holds the
recomputed part of one layer (its "none" activations less what it saved). Embedding (gpt: dropout
mask) and head (final-norm and logits inputs, fp32 softmax of the vocab shard kept for the loss
gradient) activations are counted when the rank holds them. Framework workspace, allocator
fragmentation and communication buffers are not modelled.

fp8 training (Transformer Engine, ``te.Linear``/``LayerNormLinear``/``LayerNormMLP`` forward):
every linear layer saves the fp8 cast of its input for the backward GEMMs instead of the 16-bit
tensor (1 byte: QKV, out_proj, fc1 and fc2 inputs), while norm inputs, Q/K/V, the activation
input and the flash-attention output O (which attention's backward reads) stay 16-bit; with
fp8 the out_proj input is therefore a second, 1-byte copy of O. Each transformer-layer weight
also has an fp8 copy and an fp8 transpose (2 bytes per parameter, TE's weight workspaces kept
across micro-batches); embedding and output layer stay 16-bit.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from heterosim.catalog.models import ModelConfig
from heterosim.config.experiment import ParallelConfig, TrainingConfig
from heterosim.workload.op_sac import selective_op_saved_bytes
from heterosim.workload.ops import (
    grad_buffer_bytes,
    layer_forward_ops,
    layer_params_on_rank,
    rank_expert_params,
    rank_params,
)
from heterosim.workload.ops_base import FP32, MASK_BYTES, dims

FP8_BYTES = 1
FP8_WEIGHT_COPIES_BYTES = 2  # fp8 cast + fp8 transpose of every transformer-layer weight


@dataclass(frozen=True)
class MemoryEstimate:
    weights_bytes: int
    gradients_bytes: int
    optimizer_bytes: int
    activations_bytes: int
    total_bytes: int
    params: int = 0  # parameters the rank holds (before any ZeRO sharding)


def weight_bytes_per_param(dtype: str) -> int:
    return 4 if dtype == "fp32" else 2


def optimizer_bytes_per_param(dtype: str) -> int:
    """fp32 master weights (mixed precision only), Adam m and v."""
    return 8 if dtype == "fp32" else 12


def _sharded(dense: int, expert: int, parallel: ParallelConfig) -> int:
    expert_dp = max(1, parallel.dp // parallel.ep)
    dense_dp = parallel.dp * parallel.cp  # the data+context-parallel group (groups.py)
    return -(-dense // dense_dp) + -(-expert // expert_dp)


def layer_activation_bytes(
    model: ModelConfig,
    training: TrainingConfig,
    parallel: ParallelConfig,
    layer: int,
    flash_attention: bool | None = None,
    recompute: str | None = None,
) -> int:
    """Activations layer ``layer`` keeps for backward, one micro-batch on one rank (see the
    module docstring). ``recompute`` overrides ``training.recompute``; ``flash_attention``
    overrides ``training.attention``."""
    recompute = training.recompute if recompute is None else recompute
    if flash_attention is None:
        flash_attention = training.attention == "flash"
    d = dims(model, training, parallel)
    e = d.act_bytes
    replicated_tokens = d.sp_tokens  # tokens of the norm/dropout/residual region on this rank
    if recompute == "full":
        return e * replicated_tokens * d.h
    if recompute == "selective_op":
        forward = layer_forward_ops(model, training, parallel, layer)
        return selective_op_saved_bytes(forward, d, model)
    masks = 2 * MASK_BYTES if model.arch == "gpt" else 0
    fp8 = training.dtype == "fp8"
    lin = FP8_BYTES if fp8 else e  # a linear layer's saved input (TE keeps its fp8 cast)
    total = (2 * e + 2 * lin + masks) * replicated_tokens * d.h  # norm inputs, QKV/fc1 inputs, masks
    t = d.tokens
    total += e * t * (d.q_dim + 2 * d.kv_dim)  # Q, K, V
    # out_proj input = the attention output O; with fp8 a 1-byte copy beside flash's 16-bit O
    total += (lin + (e if flash_attention else 0) if fp8 else e) * t * d.q_dim
    if recompute != "selective":
        if flash_attention:
            total += FP32 * d.b * d.heads * d.s  # logsumexp
        else:
            scores = d.b * d.heads * d.s * d.s
            dropout = (MASK_BYTES + e) * scores if model.arch == "gpt" else 0
            total += e * scores + dropout
    if model.is_moe_layer(layer):
        assert model.moe is not None
        moe = model.moe
        routed = t * moe.top_k
        effn = -(-moe.expert_ffn // d.tp)
        total += FP32 * t * moe.experts  # router probabilities
        total += 2 * e * routed * d.h  # dispatched tokens, expert outputs
        total += routed * effn * _mlp_bytes(model, e, lin)  # act and fc2 inputs
        if moe.shared_experts:
            sffn = -(-moe.shared_experts * moe.expert_ffn // d.tp)
            total += t * sffn * _mlp_bytes(model, e, lin)
    else:
        total += t * d.ffn * _mlp_bytes(model, e, lin)  # act input(s), fc2 input
    return total


def _mlp_bytes(model: ModelConfig, act: int, linear_input: int) -> int:
    """Bytes per token and ffn column: the activation's input(s) and fc2's saved input."""
    return (2 if model.gated_mlp else 1) * act + linear_input


def _end_activation_bytes(
    model: ModelConfig,
    training: TrainingConfig,
    parallel: ParallelConfig,
    has_embedding: bool,
    has_head: bool,
) -> int:
    d = dims(model, training, parallel)
    total = 0
    if has_embedding and model.arch == "gpt":
        total += MASK_BYTES * d.sp_tokens * d.h  # embedding dropout mask
    if has_head:
        total += 2 * d.act_bytes * d.sp_tokens * d.h  # final norm input, logits input
        total += FP32 * d.tokens * d.vocab  # softmax of the vocab shard, for the loss gradient
    return total


def _layer_kinds(model: ModelConfig, layers: list[int]) -> list[tuple[int, int]]:
    """(representative layer, count) per distinct layer structure (dense / MoE)."""
    first: dict[bool, int] = {}
    count: dict[bool, int] = {}
    for layer in layers:
        if not 0 <= layer < model.layers:
            raise ValueError(f"layer {layer} outside 0..{model.layers - 1} of {model.name}")
        key = model.is_moe_layer(layer)
        first.setdefault(key, layer)
        count[key] = count.get(key, 0) + 1
    return [(first[key], count[key]) for key in first]


def estimate_rank_memory(
    model: ModelConfig,
    training: TrainingConfig,
    parallel: ParallelConfig,
    layers: Iterable[int],
    has_embedding: bool,
    has_head: bool,
    in_flight_micro_batches: int,
    flash_attention: bool | None = None,
) -> MemoryEstimate:
    """Peak memory of one rank holding ``layers`` (any iterable of layer indices, e.g. a range or
    the union of interleaved chunks) with ``in_flight_micro_batches`` micro-batches whose
    activations are alive at once (1F1B: pp - stage; GPipe: all of them). ``flash_attention``
    None follows ``training.attention``."""
    if in_flight_micro_batches < 1:
        raise ValueError(f"in_flight_micro_batches must be >= 1, got {in_flight_micro_batches}")
    layers = list(layers)
    dtype = training.dtype
    # Layers differ only in being dense or MoE: evaluate one of each kind (this runs inside the
    # partitioner's search, so it must stay cheap).
    kinds = _layer_kinds(model, layers)
    params = rank_params(model, parallel, [], has_embedding, has_head) + sum(
        count * layer_params_on_rank(model, parallel, layer) for layer, count in kinds
    )
    expert = sum(count * rank_expert_params(model, parallel, [layer]) for layer, count in kinds)
    dense = params - expert
    sharded = _sharded(dense, expert, parallel)

    weights = weight_bytes_per_param(dtype) * (sharded if parallel.zero >= 3 else params)
    if dtype == "fp8" and kinds:
        if parallel.zero >= 3:  # fp8 copies exist for the gathered layers only
            copied = max(layer_params_on_rank(model, parallel, layer) for layer, _ in kinds) * (
                1 + parallel.zero3_prefetch
            )
        else:
            copied = sum(count * layer_params_on_rank(model, parallel, layer) for layer, count in kinds)
        weights += FP8_WEIGHT_COPIES_BYTES * copied
    if parallel.zero >= 3 and kinds and parallel.zero3_impl == "deepspeed-0.3":
        # DeepSpeed 0.3 gathers tensor by tensor: the module being computed and the one tensor
        # prefetched for the next (prefetch_next_sub_modules: at least one tensor, none while a
        # gather is in flight or live parameters exceed stage3_max_live_parameters), so at most
        # two of the largest gathered tensors are whole at once (heterosim/workload/zero3.py)
        from heterosim.workload.zero3 import layer_tensors

        largest = max(max(layer_tensors(model, parallel, layer)) for layer, _ in kinds)
        weights += weight_bytes_per_param(dtype) * 2 * largest
    elif parallel.zero >= 3 and kinds:
        biggest = max(layer_params_on_rank(model, parallel, layer) for layer, _ in kinds)
        weights += weight_bytes_per_param(dtype) * biggest * (1 + parallel.zero3_prefetch)
    grads = grad_buffer_bytes(training) * (sharded if parallel.zero >= 2 else params)
    optimizer_sharded = parallel.zero >= 1 or parallel.distributed_optimizer
    optimizer = optimizer_bytes_per_param(dtype) * (sharded if optimizer_sharded else params)

    per_micro_batch = sum(
        count * layer_activation_bytes(model, training, parallel, layer, flash_attention)
        for layer, count in kinds
    ) + _end_activation_bytes(model, training, parallel, has_embedding, has_head)
    activations = per_micro_batch * in_flight_micro_batches
    if training.recompute in ("full", "selective_op") and kinds:
        # the recomputed layer's activations while it is back-propagated
        activations += max(
            layer_activation_bytes(model, training, parallel, layer, flash_attention, "none")
            - (
                layer_activation_bytes(model, training, parallel, layer, flash_attention, "selective_op")
                if training.recompute == "selective_op"
                else 0
            )
            for layer, _ in kinds
        )
    total = weights + grads + optimizer + activations
    return MemoryEstimate(weights, grads, optimizer, activations, total, params)
