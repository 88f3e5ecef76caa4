"""FLOPs per training iteration: Megatron's closed form and the sum over our op lists.

Narayanan et al., "Efficient Large-Scale Language Model Training on GPU Clusters Using
Megatron-LM" (SC'21), §5.1 / Appendix: a transformer layer's forward pass costs
24*B*s*h^2 (QKV 6, attention output 2, MLP with ffn = 4h 16) + 4*B*s^2*h (scores QK^T and
attention-weighted values, full s x s, no causal saving) FLOPs for B sequences of s tokens; the
logits GEMM costs 2*B*s*h*V. Backward costs twice the forward. With full activation
recomputation the layers' forward is run twice, so a layer costs 4x its forward and the logits
(not recomputed) 3x:

    with recompute (their Eq. 3):  96*B*s*l*h^2 * (1 + s/(6h) + V/(16*l*h))
    without recompute:             72*B*s*l*h^2 * (1 + s/(6h) + V/(12*l*h))

(72 = 3 * 24; the logits term 6*B*s*h*V divided by 72*B*s*l*h^2 is V/(12*l*h).) Both ignore
norms, elementwise kernels, the loss and the optimizer, and assume ffn = 4h, MHA and no GLU.
"""

from __future__ import annotations

from collections.abc import Iterable

from heterosim.catalog.models import ModelConfig
from heterosim.config.experiment import ParallelConfig, TrainingConfig
from heterosim.workload.ops import (
    OpSpec,
    embedding_backward_ops,
    embedding_forward_ops,
    head_backward_ops,
    head_forward_ops,
    layer_backward_ops,
    layer_forward_ops,
)

ATTENTION_CONVENTIONS = ("trace", "megatron")


def megatron_flops_per_iteration(
    model: ModelConfig, global_batch: int, seq_len: int, recompute: bool
) -> float:
    """Megatron's FLOPs of one iteration (all GPUs together), SC'21 §5.1."""
    b, s, n_layers, h, v = global_batch, seq_len, model.layers, model.hidden, model.vocab
    if recompute:
        return 96.0 * b * s * n_layers * h * h * (1 + s / (6 * h) + v / (16 * n_layers * h))
    return 72.0 * b * s * n_layers * h * h * (1 + s / (6 * h) + v / (12 * n_layers * h))


def _op_flops(op: OpSpec, attention: str) -> int:
    """FLOPs of one op; with attention="megatron" attention is counted Megatron's way: the full
    (non-causal) 4*b*s^2*h_rank forward, backward 2x forward (no FlashAttention score
    recomputation)."""
    if op.op_kind != "attention" or attention == "trace":
        return op.flops
    b, s, heads, head_dim = op.shape
    forward = 4 * b * s * s * heads * head_dim
    return 2 * forward if op.phase == "bwd" else forward


def ops_flops(
    ops: Iterable[OpSpec], kinds: tuple[str, ...] = ("gemm", "attention"), attention: str = "trace"
) -> int:
    """Sum of FLOPs of the ops whose kind is in ``kinds``."""
    if attention not in ATTENTION_CONVENTIONS:
        raise ValueError(f"attention convention {attention!r}; expected {ATTENTION_CONVENTIONS}")
    return sum(_op_flops(op, attention) for op in ops if op.op_kind in kinds)


def micro_batch_rank_flops(
    model: ModelConfig,
    training: TrainingConfig,
    parallel: ParallelConfig,
    layers: Iterable[int],
    has_embedding: bool,
    has_head: bool,
    kinds: tuple[str, ...] = ("gemm", "attention"),
    attention: str = "trace",
) -> int:
    """FLOPs one rank runs for one micro-batch (forward, recompute and backward) over ``layers``
    plus the embedding/head parts it holds. Layers with the same structure are built once."""
    cache: dict[bool, int] = {}
    total = 0
    for layer in layers:
        key = model.is_moe_layer(layer)
        if key not in cache:
            ops = layer_forward_ops(model, training, parallel, layer) + layer_backward_ops(
                model, training, parallel, layer
            )
            cache[key] = ops_flops(ops, kinds, attention)
        total += cache[key]
    if has_embedding:
        total += ops_flops(
            embedding_forward_ops(model, training, parallel)
            + embedding_backward_ops(model, training, parallel),
            kinds,
            attention,
        )
    if has_head:
        total += ops_flops(
            head_forward_ops(model, training, parallel) + head_backward_ops(model, training, parallel),
            kinds,
            attention,
        )
    return total


def trace_flops(
    model: ModelConfig,
    training: TrainingConfig,
    parallel: ParallelConfig,
    kinds: tuple[str, ...] = ("gemm", "attention"),
    attention: str = "trace",
) -> int:
    """FLOPs of one iteration summed over all ranks from the op lists: every micro-batch of the
    global batch runs every layer, the embedding and the head once, each on ``tp*cp`` ranks (with
    EP, each rank's experts process as many token copies as its own micro-batch routes, so the
    per-rank count holds too). The optimizer step is not included."""
    micro_batches = training.global_batch // training.micro_batch
    per_rank = micro_batch_rank_flops(
        model, training, parallel, range(model.layers), True, True, kinds, attention
    )
    return per_rank * parallel.tp * parallel.cp * micro_batches
