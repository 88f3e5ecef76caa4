"""Per-layer op lists: FLOPs, shapes, TP/SP/EP collectives, recomputation, embedding, head,
optimizer. Expected values are derived by hand from Megatron-LM's semantics."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import pytest

from heterosim.catalog.models import ZOO, ModelConfig, MoEConfig
from heterosim.config.experiment import ParallelConfig, TrainingConfig
from heterosim.workload.ops import (
    OpSpec,
    embedding_backward_ops,
    embedding_forward_ops,
    head_backward_ops,
    head_forward_ops,
    layer_backward_ops,
    layer_forward_ops,
    layer_linear_weights_on_rank,
    layer_params_on_rank,
    optimizer_ops,
    rank_linear_weights,
)
from heterosim.workload.trace import (
    ALL_GATHER,
    ALL_REDUCE,
    ALL_TO_ALL,
    COMM_COLL_NODE,
    DTYPES,
    OP_KINDS,
    PHASES,
    REDUCE_SCATTER,
)

GPT = ModelConfig("tiny-gpt", "gpt", 64, 2, 4, 4, 256, 128, 64)
LLAMA = ModelConfig("tiny-llama", "llama", 64, 2, 4, 2, 96, 128, 64)
MOE = ModelConfig("tiny-moe", "llama", 64, 2, 4, 4, 96, 128, 64, MoEConfig(experts=4, top_k=2, expert_ffn=32))
B, S, H = 2, 16, 64
ACT = B * S * H * 2  # one b*s*h bf16 activation: 4096 bytes
TRAIN = TrainingConfig(global_batch=8, micro_batch=B, seq_len=S, dtype="bf16", recompute="none")
PAR = ParallelConfig(dp_bucket_bytes=40 << 20)


def par(**kw: object) -> ParallelConfig:
    return replace(PAR, **kw)


def train(**kw: object) -> TrainingConfig:
    return replace(TRAIN, **kw)


def comms(ops: list[OpSpec]) -> list[tuple[str, int, int, str]]:
    return [(op.label, op.comm_type, op.comm_bytes, op.comm_group) for op in ops if op.is_comm]


def by_label(ops: list[OpSpec]) -> dict[str, OpSpec]:
    return {op.label: op for op in ops}


def all_ops(model: ModelConfig, training: TrainingConfig, parallel: ParallelConfig) -> list[OpSpec]:
    ops = embedding_forward_ops(model, training, parallel)
    for layer in range(model.layers):
        ops += layer_forward_ops(model, training, parallel, layer)
    ops += head_forward_ops(model, training, parallel) + head_backward_ops(model, training, parallel)
    for layer in reversed(range(model.layers)):
        ops += layer_backward_ops(model, training, parallel, layer)
    return ops + embedding_backward_ops(model, training, parallel)


@pytest.mark.parametrize("model", [GPT, LLAMA, MOE])
@pytest.mark.parametrize("tp,sp,ep", [(1, False, 1), (2, False, 1), (2, True, 1), (2, True, 2)])
@pytest.mark.parametrize("recompute", ["none", "selective", "selective_op", "full"])
def test_ops_follow_trace_conventions(model: ModelConfig, tp: int, sp: bool, ep: int, recompute: str) -> None:
    if ep > 1 and model.moe is None:
        pytest.skip("EP needs MoE")
    for op in all_ops(model, train(recompute=recompute), par(tp=tp, sequence_parallel=sp, ep=ep, dp=2)):
        assert op.op_kind in OP_KINDS and op.phase in PHASES and op.dtype in DTYPES
        assert op.flops >= 0 and op.bytes_moved >= 0
        if op.is_comm:
            assert op.op_kind == "comm" and op.node_type == COMM_COLL_NODE
            assert op.comm_bytes > 0 and op.comm_group in ("tp", "ep")
        else:
            assert op.comm_bytes == 0 and op.comm_group == "" and op.bytes_moved > 0
        if op.op_kind == "gemm":
            m, n, k, batch = op.shape
            assert op.flops == 2 * m * n * k * batch


def test_forward_gemm_shapes_and_flops_gpt_tp2() -> None:
    ops = by_label(layer_forward_ops(GPT, TRAIN, par(tp=2), 0))
    t = B * S
    assert ops["qkv_proj"].shape == (t, 3 * H // 2, H, 1)
    assert ops["out_proj"].shape == (t, H, H // 2, 1)
    assert ops["fc1"].shape == (t, 256 // 2, H, 1)
    assert ops["fc2"].shape == (t, H, 256 // 2, 1)
    assert ops["fc1"].flops == 2 * t * 128 * H
    # per layer the TP group runs 24*b*s*h^2 GEMM FLOPs (ffn = 4h)
    gemms = sum(op.flops for op in ops.values() if op.op_kind == "gemm")
    assert 2 * gemms == 24 * t * H * H


def test_gqa_and_swiglu_shapes() -> None:
    ops = by_label(layer_forward_ops(LLAMA, TRAIN, par(tp=2), 0))
    t, d = B * S, 16
    # 2 query heads and 1 KV head per rank
    assert ops["qkv_proj"].shape == (t, (2 + 2 * 1) * d, H, 1)
    assert ops["attn_core"].shape == (B, S, 2, d)
    assert ops["attn_core"].shape_extra == (1, 1)
    assert ops["fc1"].shape == (t, 2 * 96 // 2, H, 1)  # gate + up fused
    assert ops["act"].shape == (t * 48, 0, 0, 0)
    assert ops["fc2"].shape == (t, H, 48, 1)
    assert "ln1" in ops and ops["ln1"].op_kind == "norm"
    assert not any(label.startswith("dropout") for label in ops)  # llama: no dropout


def test_flash_attention_flops_and_bytes() -> None:
    fwd = by_label(layer_forward_ops(GPT, TRAIN, PAR, 0))["attn_core"]
    bwd = by_label(layer_backward_ops(GPT, TRAIN, PAR, 0))["attn_core.bwd"]
    full = 4 * B * S * S * H
    assert fwd.flops == full // 2  # causal
    assert bwd.flops == 5 * full // 4  # FlashAttention-2: backward 2.5x forward
    q = B * S * H * 2
    lse = B * 4 * S * 4
    assert fwd.bytes_moved == 4 * q + lse  # Q, K, V, O (MHA: K and V are as big as Q)
    assert bwd.bytes_moved == 8 * q + 3 * lse  # Q, K, V, O, dO, dQ, dK, dV


def test_backward_gemms_are_dgrad_then_wgrad_with_forward_flops() -> None:
    fwd = [op for op in layer_forward_ops(LLAMA, TRAIN, par(tp=2), 0) if op.op_kind == "gemm"]
    bwd = layer_backward_ops(LLAMA, TRAIN, par(tp=2), 0)
    labels = [op.label for op in bwd]
    for op in fwd:
        i, j = labels.index(f"{op.label}.dgrad"), labels.index(f"{op.label}.wgrad")
        assert i < j
        assert bwd[i].flops == bwd[j].flops == op.flops
    assert all(op.phase == "bwd" for op in bwd)


def test_tp_collectives_without_sequence_parallel() -> None:
    """Megatron TP: all-reduce after out_proj and fc2 forward; after the QKV and fc1 dgrads
    backward; each of b*s*h*2 bytes = 2*16*64*2."""
    fwd = layer_forward_ops(GPT, TRAIN, par(tp=2), 0)
    bwd = layer_backward_ops(GPT, TRAIN, par(tp=2), 0)
    assert ACT == 4096
    assert comms(fwd) == [
        ("tp_allreduce.attn", ALL_REDUCE, ACT, "tp"),
        ("tp_allreduce.mlp", ALL_REDUCE, ACT, "tp"),
    ]
    assert comms(bwd) == [
        ("tp_allreduce.mlp.bwd", ALL_REDUCE, ACT, "tp"),
        ("tp_allreduce.attn.bwd", ALL_REDUCE, ACT, "tp"),
    ]
    f = [op.label for op in fwd]
    assert f.index("tp_allreduce.attn") == f.index("out_proj") + 1
    assert f.index("tp_allreduce.mlp") == f.index("fc2") + 1
    b = [op.label for op in bwd]
    assert b.index("qkv_proj.dgrad") + 1 == b.index("tp_allreduce.attn.bwd") == b.index("qkv_proj.wgrad") - 1
    assert b.index("fc1.dgrad") + 1 == b.index("tp_allreduce.mlp.bwd")


def test_tp_collectives_with_sequence_parallel() -> None:
    """SP forward: all-gather before QKV and fc1, reduce-scatter after out_proj and fc2 (each
    b*s*h*2 bytes total). Backward: all-gather of the output gradient before the out_proj/fc2
    dgrads, all-gather of the stored input before the QKV/fc1 dgrads (for the wgrads, as
    Megatron does), reduce-scatter of the input gradient after those dgrads."""
    fwd = layer_forward_ops(GPT, TRAIN, par(tp=2, sequence_parallel=True), 0)
    bwd = layer_backward_ops(GPT, TRAIN, par(tp=2, sequence_parallel=True), 0)
    assert comms(fwd) == [
        ("tp_allgather.attn", ALL_GATHER, ACT, "tp"),
        ("tp_reducescatter.attn", REDUCE_SCATTER, ACT, "tp"),
        ("tp_allgather.mlp", ALL_GATHER, ACT, "tp"),
        ("tp_reducescatter.mlp", REDUCE_SCATTER, ACT, "tp"),
    ]
    assert comms(bwd) == [
        ("tp_allgather.mlp.bwd", ALL_GATHER, ACT, "tp"),
        ("tp_allgather.mlp_input.bwd", ALL_GATHER, ACT, "tp"),
        ("tp_reducescatter.mlp.bwd", REDUCE_SCATTER, ACT, "tp"),
        ("tp_allgather.attn.bwd", ALL_GATHER, ACT, "tp"),
        ("tp_allgather.attn_input.bwd", ALL_GATHER, ACT, "tp"),
        ("tp_reducescatter.attn.bwd", REDUCE_SCATTER, ACT, "tp"),
    ]
    b = [op.label for op in bwd]
    assert b.index("tp_allgather.mlp.bwd") < b.index("fc2.dgrad")
    assert (
        b.index("tp_allgather.mlp_input.bwd")
        < b.index("fc1.dgrad")
        < b.index("tp_reducescatter.mlp.bwd")
        < b.index("fc1.wgrad")
    )
    ops = by_label(fwd)
    # norms, dropouts and residuals work on s/tp tokens
    assert ops["ln1"].shape == (B * S // 2, H, 0, 0)
    assert ops["residual1"].shape == (B * S * H // 2, 0, 0, 0)
    assert ops["dropout2"].shape == (B * S * H // 2, 0, 0, 0)
    assert ops["qkv_proj"].shape[0] == B * S


def test_no_tp_collectives_with_tp1() -> None:
    assert comms(all_ops(GPT, TRAIN, PAR)) == []
    assert comms(all_ops(MOE, TRAIN, PAR)) == []


def test_ep_all_to_all_counts_and_bytes() -> None:
    """EP=2: dispatch and combine all-to-alls forward and their mirrors backward, each
    b*s*top_k*h*2 bytes per rank; the experts see b*s*top_k tokens over 2 local experts."""
    p = par(dp=2, ep=2)
    fwd = layer_forward_ops(MOE, TRAIN, p, 0)
    bwd = layer_backward_ops(MOE, TRAIN, p, 0)
    size = B * S * 2 * H * 2
    assert comms(fwd) == [
        ("ep_alltoall.dispatch", ALL_TO_ALL, size, "ep"),
        ("ep_alltoall.combine", ALL_TO_ALL, size, "ep"),
    ]
    assert comms(bwd) == [
        ("ep_alltoall.combine.bwd", ALL_TO_ALL, size, "ep"),
        ("ep_alltoall.dispatch.bwd", ALL_TO_ALL, size, "ep"),
    ]
    f = [op.label for op in fwd]
    assert (
        f.index("ep_alltoall.dispatch")
        < f.index("expert_fc1")
        < f.index("expert_fc2")
        < f.index("ep_alltoall.combine")
    )
    ops = by_label(fwd)
    assert ops["expert_fc1"].shape == (B * S * 2 // 2, 2 * 32, H, 2)
    assert ops["expert_fc2"].shape == (B * S * 2 // 2, H, 32, 2)
    assert ops["router"].shape == (B * S, 4, H, 1)
    # expert FLOPs equal top_k dense MLPs of width expert_ffn on every token
    expert = ops["expert_fc1"].flops + ops["expert_fc2"].flops
    assert expert == 2 * (2 * B * S * H * 3 * 32)


def test_moe_with_tp_keeps_tp_reduction_after_combine() -> None:
    p = par(tp=2, dp=2, ep=2, sequence_parallel=True)
    labels = [c[0] for c in comms(layer_forward_ops(MOE, TRAIN, p, 0))]
    assert labels == [
        "tp_allgather.attn",
        "tp_reducescatter.attn",
        "tp_allgather.mlp",
        "ep_alltoall.dispatch",
        "ep_alltoall.combine",
        "tp_reducescatter.mlp",
    ]
    counts = Counter(c[1] for c in comms(layer_backward_ops(MOE, TRAIN, p, 0)))
    assert counts == {ALL_TO_ALL: 2, ALL_GATHER: 3, REDUCE_SCATTER: 2}


def test_dense_layers_of_a_sparse_model_have_no_all_to_all() -> None:
    model = replace(MOE, moe=replace(MOE.moe, every=2))
    p = par(dp=2, ep=2)
    assert comms(layer_forward_ops(model, TRAIN, p, 0)) == []
    assert len(comms(layer_forward_ops(model, TRAIN, p, 1))) == 2


def _flops(ops: list[OpSpec]) -> int:
    return sum(op.flops for op in ops)


@pytest.mark.parametrize("model", [GPT, LLAMA, MOE])
def test_full_recompute_adds_one_forward(model: ModelConfig) -> None:
    p = par(tp=2, sequence_parallel=True, dp=2, ep=2 if model.moe else 1)
    fwd = layer_forward_ops(model, TRAIN, p, 0)
    plain = layer_backward_ops(model, TRAIN, p, 0)
    full = layer_backward_ops(model, train(recompute="full"), p, 0)
    assert _flops(full) == _flops(plain) + _flops(fwd)
    rerun = [op for op in full if op.phase == "recompute"]
    assert full[: len(rerun)] == rerun  # the forward is re-run first
    assert [replace(op, phase="fwd") for op in rerun] == fwd  # TP/EP collectives included
    assert full[len(rerun) :] == plain


def test_selective_recompute_reruns_core_attention_only() -> None:
    plain = layer_backward_ops(GPT, TRAIN, par(tp=2), 0)
    sel = layer_backward_ops(GPT, train(recompute="selective"), par(tp=2), 0)
    rerun = [op for op in sel if op.phase == "recompute"]
    fwd_attn = by_label(layer_forward_ops(GPT, TRAIN, par(tp=2), 0))["attn_core"]
    assert rerun == [replace(fwd_attn, phase="recompute")]
    labels = [op.label for op in sel]
    assert labels.index("attn_core") + 1 == labels.index("attn_core.bwd")
    assert _flops(sel) == _flops(plain) + fwd_attn.flops


def test_embedding_ops() -> None:
    t = B * S
    gpt = embedding_forward_ops(GPT, TRAIN, par(tp=2))
    assert [op.label for op in gpt] == [
        "embedding",
        "tp_allreduce.embedding",
        "pos_embedding",
        "embedding_dropout",
    ]
    assert comms(gpt) == [("tp_allreduce.embedding", ALL_REDUCE, ACT, "tp")]
    sp = embedding_forward_ops(GPT, TRAIN, par(tp=2, sequence_parallel=True))
    assert comms(sp) == [("tp_reducescatter.embedding", REDUCE_SCATTER, ACT, "tp")]
    assert comms(embedding_backward_ops(GPT, TRAIN, par(tp=2, sequence_parallel=True))) == [
        ("tp_allgather.embedding.bwd", ALL_GATHER, ACT, "tp")
    ]
    assert comms(embedding_backward_ops(GPT, TRAIN, par(tp=2))) == []
    llama = embedding_forward_ops(LLAMA, TRAIN, PAR)
    assert [op.label for op in llama] == ["embedding"]
    assert llama[0].shape == (t, H, 0, 0)


def test_head_ops_vocab_parallel_cross_entropy() -> None:
    """Logits over vocab/tp columns; vocab-parallel cross-entropy all-reduces the max (b*s fp32)
    and then the predicted logits with the sums of exponentials (2*b*s fp32). Megatron's
    kernels over the n = b*s*vocab/tp logits: cast to fp32 (2+4 bytes each), max (4), in-place
    subtract (8), exp (8), row sum (4), in-place divide (8); backward in-place multiply (8) and
    the cast back (4+2)."""
    t = B * S
    n = t * 128 // 2
    fwd = head_forward_ops(GPT, TRAIN, par(tp=2))
    ops = by_label(fwd)
    assert ops["logits"].shape == (t, 128 // 2, H, 1)
    assert ops["cross_entropy"].shape == (t, 64, 0, 0)
    assert comms(fwd) == [
        ("tp_allreduce.ce_max", ALL_REDUCE, 4 * t, "tp"),
        ("tp_allreduce.ce_sum", ALL_REDUCE, 8 * t, "tp"),
    ]
    assert [op.label for op in fwd if op.op_kind == "softmax_loss" or op.is_comm] == [
        "ce_to_fp32",
        "ce_max",
        "tp_allreduce.ce_max",
        "ce_sub_max",
        "ce_exp",
        "cross_entropy",
        "tp_allreduce.ce_sum",
        "ce_softmax",
    ]
    rows = 3 * 4 * t  # the b*s fp32 row max, row sum and the divide's read of it
    assert sum(op.bytes_moved for op in fwd if op.op_kind == "softmax_loss") == 38 * n + rows
    assert comms(head_forward_ops(GPT, TRAIN, PAR)) == []
    bwd = head_backward_ops(GPT, TRAIN, par(tp=2))
    assert comms(bwd) == [("tp_allreduce.head.bwd", ALL_REDUCE, ACT, "tp")]
    labels = [op.label for op in bwd]
    assert labels == [
        "cross_entropy.bwd",
        "ce_to_fp32.bwd",
        "logits.dgrad",
        "tp_allreduce.head.bwd",
        "logits.wgrad",
        "final_norm.bwd",
    ]
    assert sum(op.bytes_moved for op in bwd if op.op_kind == "softmax_loss") == 14 * n
    # fp32 training has no casts
    fp32 = head_forward_ops(GPT, train(dtype="fp32"), PAR)
    assert "ce_to_fp32" not in [op.label for op in fp32]
    sp = head_forward_ops(GPT, TRAIN, par(tp=2, sequence_parallel=True))
    assert comms(sp)[0] == ("tp_allgather.head", ALL_GATHER, ACT, "tp")


def test_optimizer_ops_shard_and_bytes() -> None:
    n = 1_000_000
    plain = by_label(optimizer_ops(GPT, TRAIN, PAR, n))
    # bf16: fp32 main grad 4 + (master, m, v) read+write 24; then the master -> bf16 copy 4 + 2
    assert plain["adam"].shape == (n, 0, 0, 0) and plain["adam"].bytes_moved == 28 * n
    assert plain["param_copy"].bytes_moved == 6 * n
    assert plain["grad_norm"].bytes_moved == 4 * n
    assert "grad_to_fp32" not in plain and "unscale_grads" not in plain
    assert all(op.phase == "opt" for op in plain.values())
    for p in (par(dp=4, zero=1), par(dp=4, zero=3), par(dp=4, distributed_optimizer=True)):
        assert by_label(optimizer_ops(GPT, TRAIN, p, n))["adam"].shape[0] == n // 4
    assert by_label(optimizer_ops(GPT, TRAIN, par(dp=4), n))["adam"].shape[0] == n
    # routed experts shard over dp/ep = 2
    moe = by_label(optimizer_ops(MOE, TRAIN, par(dp=4, ep=2, zero=1), n, 600_000))
    assert moe["adam"].shape[0] == 400_000 // 4 + 600_000 // 2
    fp32 = by_label(optimizer_ops(GPT, train(dtype="fp32"), PAR, n))
    assert fp32["adam"].bytes_moved == 28 * n
    assert not {"param_copy", "grad_to_fp32", "unscale_grads"} & set(fp32)


def test_fp16_optimizer_step_makes_megatrons_passes() -> None:
    """fp16 with dynamic loss scaling: 16-bit grads copied to fp32 (2 + 4), unscaled and checked
    in place (4 + 4), norm (4), Adam (28), master copied back (4 + 2), grad buffer zeroed (2):
    54 bytes per parameter against 42 for bf16, whose main gradient is already fp32."""
    n = 1_000_000
    fp16 = by_label(optimizer_ops(GPT, train(dtype="fp16"), PAR, n))
    assert [op.label for op in optimizer_ops(GPT, train(dtype="fp16"), PAR, n)] == [
        "grad_to_fp32",
        "unscale_grads",
        "grad_norm",
        "adam",
        "param_copy",
        "zero_grad",
    ]
    assert fp16["grad_to_fp32"].bytes_moved == 6 * n and fp16["unscale_grads"].bytes_moved == 8 * n
    assert sum(op.bytes_moved for op in fp16.values()) == 54 * n
    bf16 = optimizer_ops(GPT, TRAIN, PAR, n)
    assert sum(op.bytes_moved for op in bf16) == 42 * n


def test_optimizer_ops_zero_the_gradient_buffer_and_cast_fp8_weights() -> None:
    """Megatron zeroes every gradient of the rank once per iteration (main-gradient dtype);
    under fp8, Transformer Engine casts the Linear weights (read 2, write fp8 + transpose)."""
    n, linear = 1_000_000, 800_000
    for dtype, grad_bytes in (("bf16", 4), ("fp16", 2), ("fp32", 4), ("fp8", 4)):
        ops = by_label(
            optimizer_ops(
                GPT, train(dtype=dtype), par(dp=4, distributed_optimizer=True), n, linear_weights=linear
            )
        )
        assert ops["zero_grad"].shape[0] == n and ops["zero_grad"].bytes_moved == grad_bytes * n
        assert ("fp8_weight_cast" in ops) == (dtype == "fp8")
    cast = by_label(optimizer_ops(GPT, train(dtype="fp8"), PAR, n, linear_weights=linear))
    assert cast["fp8_weight_cast"].bytes_moved == 4 * linear
    assert "zero_grad" not in by_label(optimizer_ops(GPT, TRAIN, par(dp=4, zero=2), n))


def test_linear_weights_are_layer_params_without_norms_biases_router() -> None:
    h, ffn = 64, 256
    for p in (PAR, par(tp=2)):
        linear = layer_linear_weights_on_rank(GPT, p, 0)
        assert linear == (4 * h * h + 2 * h * ffn) // p.tp
        biases = (3 * h + ffn) // p.tp + 2 * h  # QKV and fc1 split; out_proj, fc2 replicated
        assert layer_params_on_rank(GPT, p, 0) - linear == biases + 2 * 2 * h  # + 2 LayerNorms
    assert layer_params_on_rank(LLAMA, PAR, 0) - layer_linear_weights_on_rank(LLAMA, PAR, 0) == 2 * h
    # MoE: the router (h x experts) is not a TE Linear
    assert layer_params_on_rank(MOE, PAR, 0) - layer_linear_weights_on_rank(MOE, PAR, 0) == 2 * h + h * 4
    assert rank_linear_weights(GPT, PAR, range(2)) == 2 * layer_linear_weights_on_rank(GPT, PAR, 0)


def test_fp8_gemms_rest_bf16() -> None:
    ops = layer_forward_ops(ZOO["llama3-8b"], train(dtype="fp8", seq_len=128), PAR, 0)
    for op in ops:
        assert op.dtype == ("fp8" if op.op_kind == "gemm" else "bf16")


def test_fp8_logits_gemm_stays_bf16() -> None:
    """Megatron's output layer is its own ColumnParallelLinear, not a Transformer Engine module:
    its GEMMs run in bf16 (2-byte inputs) under fp8 training."""
    fp8 = train(dtype="fp8")
    fwd = by_label(head_forward_ops(GPT, fp8, PAR))
    bwd = by_label(head_backward_ops(GPT, fp8, PAR))
    for op in (fwd["logits"], bwd["logits.dgrad"], bwd["logits.wgrad"]):
        assert op.dtype == "bf16"
    assert fwd["logits"].bytes_moved == by_label(head_forward_ops(GPT, TRAIN, PAR))["logits"].bytes_moved


def test_bad_layer_index() -> None:
    with pytest.raises(ValueError, match="outside"):
        layer_forward_ops(GPT, TRAIN, PAR, 2)
    with pytest.raises(ValueError, match="outside"):
        layer_backward_ops(GPT, TRAIN, PAR, -1)
