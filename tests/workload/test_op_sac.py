"""training.recompute: selective_op (torchtitan's op-level selective activation checkpointing):
the recomputed ops, their FLOPs against a hand count for Llama 3 8B, their order, and memory."""

from __future__ import annotations

from dataclasses import replace

import pytest

from heterosim.catalog.models import ModelConfig
from heterosim.config.experiment import ParallelConfig, TrainingConfig
from heterosim.workload.memory import estimate_rank_memory, layer_activation_bytes
from heterosim.workload.op_sac import torchtitan_mms
from heterosim.workload.ops import layer_backward_ops, layer_forward_ops
from heterosim.workload.ops_base import dims
from heterosim.workload.trace import ALL_GATHER, REDUCE_SCATTER

# Llama 3.1 8B (torchtitan llama3_configs: dim 4096, 32 layers, 32 heads, 8 KV heads, ffn 14336)
H, KV, FFN = 4096, 1024, 14336
LLAMA8B = ModelConfig("llama3.1-8b", "llama", H, 32, 32, 8, FFN, 128256, 8192)
GPT = ModelConfig("tiny-gpt", "gpt", 64, 2, 4, 4, 256, 128, 64)
TRAIN = TrainingConfig(global_batch=16, micro_batch=2, seq_len=8192, dtype="bf16", recompute="selective_op")
PAR = ParallelConfig(dp=8)


def _recomputed(ops: list) -> list:
    return [op for op in ops if op.phase == "recompute"]


def test_torchtitan_mm_order_makes_wk_wo_w3_the_recomputed_mms() -> None:
    d = dims(LLAMA8B, TRAIN, PAR)
    forward = [op for op in layer_forward_ops(LLAMA8B, TRAIN, PAR, 0) if op.op_kind == "gemm"]
    names = [name or op.label for op in forward for name, _ in torchtitan_mms(op, d, LLAMA8B)]
    assert names == ["wq", "wk", "wv", "out_proj", "w1", "w3", "fc2"]  # wq wk wv wo w1 w3 w2
    rerun = [
        op.label for op in _recomputed(layer_backward_ops(LLAMA8B, TRAIN, PAR, 0)) if op.op_kind == "gemm"
    ]
    assert rerun == ["qkv_proj.wk", "out_proj", "fc1.w3"]  # the 2nd, 4th and 6th


def test_llama3_8b_recomputes_wk_wo_w3_share_of_the_gemm_flops() -> None:
    t = 2 * 8192
    forward = layer_forward_ops(LLAMA8B, TRAIN, PAR, 0)
    rerun = _recomputed(layer_backward_ops(LLAMA8B, TRAIN, PAR, 0))
    gemm_fwd = sum(op.flops for op in forward if op.op_kind == "gemm")
    gemm_rerun = sum(op.flops for op in rerun if op.op_kind == "gemm")
    # by hand: 2*t*h*(cols) with wk: 1024, wo: 4096, w3: 14336 of wq+wk+wv+wo+w1+w3+w2 columns
    assert gemm_rerun == 2 * t * H * (KV + H + FFN)
    assert gemm_fwd == 2 * t * H * (H + 2 * KV + H + 3 * FFN)
    assert gemm_rerun / gemm_fwd == pytest.approx(19456 / 53248)  # 36.5 %
    assert not any(op.op_kind == "attention" for op in rerun)  # SDPA is saved


def test_recompute_runs_first_in_forward_order_then_the_plain_backward() -> None:
    plain = layer_backward_ops(LLAMA8B, replace(TRAIN, recompute="none"), PAR, 0)
    ops = layer_backward_ops(LLAMA8B, TRAIN, PAR, 0)
    rerun = _recomputed(ops)
    assert ops[: len(rerun)] == rerun and ops[len(rerun) :] == plain
    # the unsaved ops before the last GEMM (w2), in forward order; the block tail is not re-run
    assert [op.label for op in rerun] == [
        "ln1",
        "qkv_proj.wk",
        "rope",
        "out_proj",
        "residual1",
        "ln2",
        "fc1.w3",
        "act",
    ]
    fwd = {op.label: op for op in layer_forward_ops(LLAMA8B, TRAIN, PAR, 0)}
    for op in rerun:  # the non-GEMM ones are the forward's ops
        if op.op_kind != "gemm":
            assert replace(op, phase="fwd") == fwd[op.label]


def test_sequence_parallel_all_gathers_rerun_reduce_scatters_saved() -> None:
    par = ParallelConfig(dp=8, tp=2, sequence_parallel=True)
    rerun = _recomputed(layer_backward_ops(LLAMA8B, TRAIN, par, 0))
    kinds = [op.comm_type for op in rerun if op.is_comm]
    assert kinds == [ALL_GATHER, ALL_GATHER] and REDUCE_SCATTER not in kinds
    # APPROXIMATION (module docstring): wo is re-run although its reduce-scatter output is saved
    assert "out_proj" in [op.label for op in rerun]


def test_eager_kernels_rerun_every_unsaved_kernel() -> None:
    eager = replace(TRAIN, kernels="eager")
    rerun = [op.label for op in _recomputed(layer_backward_ops(LLAMA8B, eager, PAR, 0))]
    assert rerun[:2] == ["ln1", "qkv_proj.wk"] and rerun[-3:] == ["fc1.w3", "act.silu", "act.mul"]
    assert any(label.startswith("rope.") for label in rerun)


def test_gpt_counts_its_four_gemms() -> None:
    train = replace(TRAIN, micro_batch=1, seq_len=64, global_batch=8)
    rerun = _recomputed(layer_backward_ops(GPT, train, PAR, 0))
    assert [op.label for op in rerun if op.op_kind == "gemm"] == ["out_proj"]  # qkv, out, fc1, fc2


def test_saved_activations_by_hand_and_between_selective_and_full() -> None:
    e, t = 2, 2 * 8192
    got = layer_activation_bytes(LLAMA8B, TRAIN, PAR, 0)
    # block input h, wq h, wv kv, w1 ffn, w2 h, SDPA output h (+ fp32 logsumexp b*heads*s)
    assert got == e * t * (H + H + KV + FFN + H + H) + 4 * 2 * 32 * 8192
    for par in (PAR, ParallelConfig(dp=8, tp=2, sequence_parallel=True)):
        full = layer_activation_bytes(LLAMA8B, TRAIN, par, 0, recompute="full")
        sel = layer_activation_bytes(LLAMA8B, TRAIN, par, 0, recompute="selective")
        assert full < layer_activation_bytes(LLAMA8B, TRAIN, par, 0) < sel


def test_rank_memory_adds_one_layers_recomputed_part() -> None:
    layers = list(range(32))
    full_train = replace(TRAIN, recompute="full")
    op = estimate_rank_memory(LLAMA8B, TRAIN, PAR, layers, True, True, 1).activations_bytes
    full = estimate_rank_memory(LLAMA8B, full_train, PAR, layers, True, True, 1).activations_bytes
    none = layer_activation_bytes(LLAMA8B, TRAIN, PAR, 0, recompute="none")
    saved = layer_activation_bytes(LLAMA8B, TRAIN, PAR, 0)
    inputs = layer_activation_bytes(LLAMA8B, full_train, PAR, 0)
    # both hold the same embedding/head activations; full adds one whole layer, op SAC the
    # part of one layer it did not save
    assert op - 32 * saved - (none - saved) == full - 32 * inputs - none
