"""Unfused (Megatron-LM v1-v2) core attention in the op lists: shapes, FLOPs, bytes, memory and
the Megatron FLOP formula. Expected values are derived by hand from Megatron's ParallelAttention
(baddbmm QK^T, FusedScaleMaskSoftmax, dropout, bmm PV)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from heterosim.catalog.models import ZOO, ModelConfig
from heterosim.config.experiment import ParallelConfig, TrainingConfig, parse_experiment
from heterosim.errors import UserError
from heterosim.workload.flops import megatron_flops_per_iteration, ops_flops, trace_flops
from heterosim.workload.memory import estimate_rank_memory, layer_activation_bytes
from heterosim.workload.ops import OpSpec, layer_backward_ops, layer_forward_ops

GPT = ModelConfig("tiny-gpt", "gpt", 64, 2, 4, 4, 256, 128, 64)  # hidden 64, 4 heads of 16
LLAMA = ModelConfig("tiny-llama", "llama", 64, 2, 4, 2, 96, 128, 64)
B, S, H, HEADS, HD = 2, 16, 64, 4, 16
TRAIN = TrainingConfig(
    global_batch=8, micro_batch=B, seq_len=S, dtype="fp16", recompute="none", attention="unfused"
)
PAR = ParallelConfig(dp_bucket_bytes=40 << 20)

FWD_LABELS = ["attn_scores", "attn_softmax", "attn_dropout", "attn_context"]
BWD_LABELS = [
    "attn_context.dgrad",
    "attn_context.wgrad",
    "attn_dropout.bwd",
    "attn_softmax.bwd",
    "attn_scores.dgrad",
    "attn_scores.wgrad",
]


def attention_ops(ops: list[OpSpec]) -> list[OpSpec]:
    return [op for op in ops if op.label.startswith("attn_")]


def by_label(ops: list[OpSpec]) -> dict[str, OpSpec]:
    return {op.label: op for op in ops}


@pytest.mark.parametrize("tp", [1, 2, 4])
def test_forward_kernels_shapes_flops_and_bytes(tp: int) -> None:
    """QK^T: b*heads/tp batches of (s x s x head_dim); PV: (s x head_dim x s); the two GEMMs are
    4*b*s^2*h/tp FLOPs; softmax reads and writes b*heads/tp*s^2 fp16 scores; dropout adds the
    1-byte mask."""
    par = replace(PAR, tp=tp)
    ops = layer_forward_ops(GPT, TRAIN, par, 0)
    assert not [op for op in ops if op.op_kind == "attention"]
    attn = attention_ops(ops)
    assert [op.label for op in attn] == FWD_LABELS
    ops_ = by_label(attn)
    batch = B * HEADS // tp
    n = batch * S * S
    assert ops_["attn_scores"].shape == (S, S, HD, batch)
    assert ops_["attn_context"].shape == (S, HD, S, batch)
    assert ops_["attn_scores"].op_kind == ops_["attn_context"].op_kind == "gemm"
    gemm_flops = ops_["attn_scores"].flops + ops_["attn_context"].flops
    assert gemm_flops == 4 * B * S * S * H // tp
    assert ops_["attn_softmax"].shape == (n, 0, 0, 0)
    assert ops_["attn_softmax"].bytes_moved == 2 * n * 2  # read scores, write probabilities
    assert ops_["attn_dropout"].bytes_moved == 2 * n * 2 + n
    # QK^T reads Q and K (s x hd each per batch) and writes the s x s scores
    assert ops_["attn_scores"].bytes_moved == (2 * S * HD + S * S) * batch * 2
    # the scores sit between the QKV projection and out_proj, in Megatron's order
    labels = [op.label for op in ops]
    assert labels.index("qkv_proj") < labels.index("attn_scores")
    assert labels.index("attn_context") < labels.index("out_proj")


@pytest.mark.parametrize("tp", [1, 2])
def test_backward_mirrors_forward(tp: int) -> None:
    """Four batched GEMMs of the forward GEMMs' size (2x forward FLOPs, Megatron's backward
    count), softmax backward reads dy and the stored probabilities and writes dx."""
    par = replace(PAR, tp=tp)
    attn = attention_ops(layer_backward_ops(GPT, TRAIN, par, 0))
    assert [op.label for op in attn] == BWD_LABELS
    ops_ = by_label(attn)
    batch = B * HEADS // tp
    n = batch * S * S
    gemms = [op for op in attn if op.op_kind == "gemm"]
    assert len(gemms) == 4 and all(op.phase == "bwd" for op in attn)
    assert sum(op.flops for op in gemms) == 2 * 4 * B * S * S * H // tp
    assert ops_["attn_context.dgrad"].shape == (S, S, HD, batch)  # dP = dO V^T
    for label in ("attn_context.wgrad", "attn_scores.dgrad", "attn_scores.wgrad"):
        assert ops_[label].shape == (S, HD, S, batch)
    assert ops_["attn_softmax.bwd"].bytes_moved == 3 * n * 2
    assert ops_["attn_dropout.bwd"].bytes_moved == 2 * n * 2 + n


def test_llama_has_no_attention_dropout() -> None:
    fwd = [op.label for op in attention_ops(layer_forward_ops(LLAMA, TRAIN, PAR, 0))]
    bwd = [op.label for op in attention_ops(layer_backward_ops(LLAMA, TRAIN, PAR, 0))]
    assert fwd == [x for x in FWD_LABELS if "dropout" not in x]
    assert bwd == [x for x in BWD_LABELS if "dropout" not in x]


def test_recompute_reruns_the_unfused_forward() -> None:
    """selective: core attention (QK^T, softmax, dropout, PV) re-run before its backward; full:
    the whole forward re-run, attention kernels included, all with phase recompute."""
    for recompute in ("selective", "full"):
        ops = layer_backward_ops(GPT, replace(TRAIN, recompute=recompute), PAR, 0)
        re = [op.label for op in attention_ops(ops) if op.phase == "recompute"]
        assert re == FWD_LABELS
    none = layer_backward_ops(GPT, TRAIN, PAR, 0)
    assert not [op for op in none if op.phase == "recompute"]


def test_flash_default_keeps_one_fused_op() -> None:
    flash = replace(TRAIN, attention="flash")
    ops = layer_forward_ops(GPT, flash, PAR, 0)
    assert [op.label for op in ops if op.op_kind == "attention"] == ["attn_core"]
    assert (
        TrainingConfig(global_batch=1, micro_batch=1, seq_len=1, dtype="bf16", recompute="none").attention
        == "flash"
    )


def test_fp8_training_runs_attention_gemms_in_bf16() -> None:
    attn = attention_ops(layer_forward_ops(GPT, replace(TRAIN, dtype="fp8"), PAR, 0))
    assert {op.dtype for op in attn} == {"bf16"}


@pytest.mark.parametrize("recompute", ["none", "full"])
@pytest.mark.parametrize("tp,sp", [(8, True), (8, False), (1, False)])
def test_gpt3_175b_unfused_matches_megatron_formula_exactly(recompute: str, tp: int, sp: bool) -> None:
    """Unfused attention computes exactly what Megatron's formula counts (full s x s square,
    backward 2x forward): the trace's own count and the megatron counting mode agree with
    96/72*B*s*l*h^2*(...) to the FLOP."""
    model = ZOO["gpt3-175b"]
    training = TrainingConfig(
        global_batch=1536, micro_batch=1, seq_len=2048, dtype="bf16", recompute=recompute, attention="unfused"
    )
    par = replace(PAR, tp=tp, pp=8, dp=24, sequence_parallel=sp)
    theirs = megatron_flops_per_iteration(model, 1536, 2048, recompute == "full")
    assert trace_flops(model, training, par) == pytest.approx(theirs, rel=1e-9)
    assert trace_flops(model, training, par, attention="megatron") == pytest.approx(theirs, rel=1e-9)
    flash = replace(training, attention="flash")
    assert trace_flops(model, flash, par, attention="megatron") == pytest.approx(theirs, rel=1e-9)


def test_softmax_and_dropout_bytes_scale_with_s_squared() -> None:
    """Doubling s quadruples the score traffic (the s^2 term flash attention removes)."""

    def softmax_bytes(s: int) -> int:
        ops = layer_forward_ops(GPT, replace(TRAIN, seq_len=s), PAR, 0)
        return sum(op.bytes_moved for op in ops if op.label in ("attn_softmax", "attn_dropout"))

    assert softmax_bytes(32) == 4 * softmax_bytes(16)
    assert ops_flops(layer_forward_ops(GPT, replace(TRAIN, seq_len=32), PAR, 0), kinds=("gemm",)) > 0


@pytest.mark.parametrize("tp,sp", [(1, False), (2, False), (2, True)])
def test_memory_follows_training_attention(tp: int, sp: bool) -> None:
    """Unfused stores Korthikanti's 5*a*s/h term (fp16 softmax output 2, dropout mask 1, dropout
    output 2 bytes per score) per layer; flash stores the fp32 logsumexp instead."""
    par = replace(PAR, tp=tp, sequence_parallel=sp)
    unfused = layer_activation_bytes(GPT, TRAIN, par, 0)
    assert unfused == layer_activation_bytes(GPT, TRAIN, par, 0, flash_attention=False)
    flash = layer_activation_bytes(GPT, replace(TRAIN, attention="flash"), par, 0)
    scores = B * (HEADS // tp) * S * S
    lse = 4 * B * (HEADS // tp) * S
    assert unfused - flash == 5 * scores - lse
    sbh = S * B * H
    if tp == 1:  # Korthikanti: s*b*h*(34 + 5*a*s/h)
        assert unfused == sbh * 34 + 5 * B * HEADS * S * S
    total_unfused = estimate_rank_memory(GPT, TRAIN, par, range(2), True, True, 1)
    total_flash = estimate_rank_memory(GPT, replace(TRAIN, attention="flash"), par, range(2), True, True, 1)
    assert total_unfused.activations_bytes - total_flash.activations_bytes == 2 * (5 * scores - lse)


def _experiment(attention: object) -> dict:
    return {
        "model": "gpt3-6.7b",
        "training": {"global_batch": 16, "attention": attention},
        "parallel": {"dp": 16},
        "cluster": "topologies/two_host_h100.yaml",
    }


def test_experiment_key_parses_and_rejects_bad_values() -> None:
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    exp = parse_experiment(_experiment("unfused"), "exp.yaml", base_dir=root)
    assert exp.training.attention == "unfused"
    exp = parse_experiment(_experiment("FLASH"), "exp.yaml", base_dir=root)
    assert exp.training.attention == "flash"
    with pytest.raises(
        UserError,
        match=r"exp.yaml: training.attention: expected one of flash, "
        r"unfused, got 'fused'",
    ):
        parse_experiment(_experiment("fused"), "exp.yaml", base_dir=root)
