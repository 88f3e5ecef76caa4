"""Per-rank memory estimate against hand-computed Korthikanti et al. (2022) activation sizes and
mixed-precision Adam model-state sizes (Megatron / ZeRO)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from heterosim.catalog.models import ModelConfig
from heterosim.config.experiment import ParallelConfig, TrainingConfig
from heterosim.workload.memory import estimate_rank_memory, layer_activation_bytes
from heterosim.workload.ops import layer_params_on_rank, optimizer_ops, rank_params

# s=16, b=2, h=64, a=4, ffn=4h: s*b*h = 2048 and 5*a*s/h = 5
GPT = ModelConfig("tiny-gpt", "gpt", 64, 4, 4, 4, 256, 128, 64)
LLAMA = ModelConfig("tiny-llama", "llama", 64, 4, 4, 2, 96, 128, 64)
SBH = 2048
TRAIN = TrainingConfig(global_batch=8, micro_batch=2, seq_len=16, dtype="bf16", recompute="none")
PAR = ParallelConfig(dp_bucket_bytes=40 << 20)


def par(**kw: object) -> ParallelConfig:
    return replace(PAR, **kw)


def act(model: ModelConfig, recompute: str, flash: bool, **kw: object) -> int:
    return layer_activation_bytes(
        model, replace(TRAIN, recompute=recompute), par(**kw), 0, flash_attention=flash
    )


@pytest.mark.parametrize(
    "recompute,tp,sp,expected",
    [
        ("none", 1, False, SBH * (34 + 5)),  # s*b*h*(34 + 5as/h)
        ("none", 2, False, SBH * (10 + 24 / 2 + 5 / 2)),  # s*b*h*(10 + 24/t + 5as/(ht))
        ("none", 2, True, SBH / 2 * (34 + 5)),  # s*b*h/t*(34 + 5as/h)
        ("selective", 1, False, SBH * 34),
        ("selective", 2, False, SBH * (10 + 24 / 2)),
        ("selective", 2, True, SBH / 2 * 34),
        ("full", 1, False, 2 * SBH),
        ("full", 2, True, 2 * SBH / 2),
    ],
)
def test_korthikanti_per_layer_activations(recompute: str, tp: int, sp: bool, expected: float) -> None:
    assert act(GPT, recompute, False, tp=tp, sequence_parallel=sp) == expected


@pytest.mark.parametrize(
    "tp,sp,expected",
    [
        (1, False, SBH * 34 + 4 * 4 * 16 * 2),  # logsumexp: 4 bytes * a * s * b
        (2, False, SBH * (10 + 12) + 4 * 2 * 16 * 2),
        (2, True, SBH // 2 * 34 + 4 * 2 * 16 * 2),
    ],
)
def test_flash_attention_keeps_logsumexp_instead_of_scores(tp: int, sp: bool, expected: int) -> None:
    assert act(GPT, "none", True, tp=tp, sequence_parallel=sp) == expected
    # selective recomputation of core attention drops the logsumexp too
    assert act(GPT, "selective", True, tp=tp, sequence_parallel=sp) == expected - 4 * (4 // tp) * 16 * 2


def test_gqa_swiglu_activations_by_hand() -> None:
    """llama block, tp=2, flash: norm inputs 2*2, QKV and fc1 inputs 2*2 (bytes per token-hidden,
    no dropout masks); Q 2 heads, K/V 1 head each of 16 -> 4*16 columns; out_proj input 2*16;
    SwiGLU input 2*48 and fc2 input 48 columns; logsumexp 4*2*16*2 bytes."""
    t, h = 32, 64
    expected = 2 * (4 * t * h) + 2 * t * (4 * 16) + 2 * t * 32 + 2 * t * (3 * 48) + 4 * 2 * 16 * 2
    assert act(LLAMA, "none", True, tp=2) == expected


def test_model_states_mixed_precision_adam() -> None:
    model, layers = GPT, range(4)
    p = rank_params(model, PAR, layers, True, True)
    est = estimate_rank_memory(model, TRAIN, PAR, layers, True, True, 1)
    assert est.params == p
    assert (est.weights_bytes, est.gradients_bytes, est.optimizer_bytes) == (2 * p, 4 * p, 12 * p)
    assert est.total_bytes == 18 * p + est.activations_bytes
    fp16 = estimate_rank_memory(model, replace(TRAIN, dtype="fp16"), PAR, layers, True, True, 1)
    assert fp16.weights_bytes + fp16.gradients_bytes + fp16.optimizer_bytes == 16 * p  # ZeRO paper
    fp32 = estimate_rank_memory(model, replace(TRAIN, dtype="fp32"), PAR, layers, True, True, 1)
    assert fp32.weights_bytes + fp32.gradients_bytes + fp32.optimizer_bytes == 16 * p


def test_gradient_buffer_takes_a_narrower_reduce_dtype() -> None:
    """bf16 gradients reduced in bf16 (Megatron-core without grad_reduce_in_fp32, NeMo's
    grad_sync_dtype) keep a 2-byte buffer; a wider reduce dtype (DeepSpeed's fp32_allreduce of
    fp16 gradients) is a per-bucket cast and leaves the 2-byte fp16 buffer."""
    model, layers = GPT, range(4)
    p = rank_params(model, PAR, layers, True, True)
    cases = (("bf16", "auto", 4), ("bf16", "bf16", 2), ("bf16", "fp32", 4), ("fp16", "fp32", 2))
    for dtype, reduce_dtype, grad_bytes in cases:
        training = replace(TRAIN, dtype=dtype, grad_reduce_dtype=reduce_dtype)
        est = estimate_rank_memory(model, training, PAR, layers, True, True, 1)
        assert est.gradients_bytes == grad_bytes * p, (dtype, reduce_dtype)
        zero_grad = by_label(optimizer_ops(model, training, PAR, p))["zero_grad"]
        assert zero_grad.bytes_moved == grad_bytes * p, (dtype, reduce_dtype)


def by_label(ops: list) -> dict:
    return {op.label: op for op in ops}


def test_zero_stages_and_distributed_optimizer() -> None:
    model, layers, dp = GPT, range(4), 4
    p = rank_params(model, PAR, layers, True, True)
    shard = -(-p // dp)

    def states(**kw: object) -> tuple[int, int, int]:
        e = estimate_rank_memory(model, TRAIN, par(dp=dp, **kw), layers, True, True, 1)
        return e.weights_bytes, e.gradients_bytes, e.optimizer_bytes

    assert states() == (2 * p, 4 * p, 12 * p)
    # Megatron's distributed optimizer: 6 + 12/d bytes per parameter
    assert states(distributed_optimizer=True) == (2 * p, 4 * p, 12 * shard)
    assert states(zero=1) == (2 * p, 4 * p, 12 * shard)
    assert states(zero=2) == (2 * p, 4 * shard, 12 * shard)
    gathered = 2 * layer_params_on_rank(model, PAR, 0) * 2  # current + 1 prefetched layer
    assert states(zero=3) == (2 * shard + gathered, 4 * shard, 12 * shard)


def test_in_flight_micro_batches_and_ends() -> None:
    layers = range(1, 3)
    per_layer = act(GPT, "none", True)
    one = estimate_rank_memory(GPT, TRAIN, PAR, layers, False, False, 1)
    four = estimate_rank_memory(GPT, TRAIN, PAR, layers, False, False, 4)
    assert one.activations_bytes == 2 * per_layer
    assert four.activations_bytes == 4 * one.activations_bytes
    head = estimate_rank_memory(GPT, TRAIN, PAR, layers, False, True, 1)
    # final norm and logits inputs (2 bytes each) + fp32 softmax over the vocabulary
    assert head.activations_bytes - one.activations_bytes == 2 * 2 * SBH + 4 * 32 * 128
    emb = estimate_rank_memory(GPT, TRAIN, PAR, layers, True, False, 1)
    assert emb.activations_bytes - one.activations_bytes == SBH  # embedding dropout mask


def test_full_recompute_keeps_inputs_plus_one_layer_working_set() -> None:
    full = estimate_rank_memory(
        GPT, replace(TRAIN, recompute="full"), par(tp=2, sequence_parallel=True), range(4), False, False, 3
    )
    working = act(GPT, "none", True, tp=2, sequence_parallel=True)
    assert full.activations_bytes == 4 * 3 * (2 * SBH // 2) + working


def test_bad_inputs() -> None:
    with pytest.raises(ValueError, match="in_flight"):
        estimate_rank_memory(GPT, TRAIN, PAR, range(2), False, False, 0)
    with pytest.raises(ValueError, match="outside"):
        estimate_rank_memory(GPT, TRAIN, PAR, range(3, 5), False, False, 1)


def test_fp8_linear_inputs_saved_in_one_byte_by_hand() -> None:
    """Transformer Engine fp8: QKV, fc1, out_proj and fc2 inputs saved as 1-byte fp8 casts; norm
    inputs, Q/K/V, SwiGLU input and flash's own 16-bit O stay 2 bytes (llama, tp=2, flash)."""
    t, h = 32, 64
    fp8 = layer_activation_bytes(LLAMA, replace(TRAIN, dtype="fp8"), par(tp=2), 0, flash_attention=True)
    expected = (2 * 2 + 2 * 1) * t * h  # norm inputs (bf16), QKV and fc1 inputs (fp8)
    expected += 2 * t * (4 * 16)  # Q, K, V
    expected += (2 + 1) * t * 32  # O kept by attention (bf16) + out_proj's fp8 copy
    expected += (2 * 2 + 1) * t * 48  # SwiGLU input (bf16, 2 x ffn), fc2 input (fp8)
    expected += 4 * 2 * 16 * 2  # logsumexp
    assert fp8 == expected
    bf16 = layer_activation_bytes(LLAMA, TRAIN, par(tp=2), 0, flash_attention=True)
    assert fp8 < bf16


def test_fp8_weight_copies_add_two_bytes_per_layer_parameter() -> None:
    layers = range(4)
    bf16 = estimate_rank_memory(GPT, TRAIN, PAR, layers, True, True, 1)
    fp8 = estimate_rank_memory(GPT, replace(TRAIN, dtype="fp8"), PAR, layers, True, True, 1)
    layer_params = sum(layer_params_on_rank(GPT, PAR, layer) for layer in layers)
    assert fp8.weights_bytes - bf16.weights_bytes == 2 * layer_params
    assert fp8.gradients_bytes == bf16.gradients_bytes and fp8.optimizer_bytes == bf16.optimizer_bytes
