"""fp8 training op lists: the Transformer Engine casts and transposes around every fp8 GEMM.

Expected kernels and bytes follow TE 1.x as Megatron-core builds the layer (QKV and fc1 are
LayerNormLinear, out_proj and fc2 Linear): transformer_engine/pytorch/module/linear.py
(fp8_cast_transpose_fused of the input, or cast only under sequence parallelism),
layernorm_linear.py (fp8 norm output, tex.fp8_transpose of it before the wgrad) and base.py
(grad_output_preprocess: fused cast + transpose + bias grad of the output gradient).
"""

from __future__ import annotations

from dataclasses import replace

from heterosim.catalog.models import ModelConfig, MoEConfig
from heterosim.config.experiment import ParallelConfig, TrainingConfig
from heterosim.workload.ops import OpSpec, layer_backward_ops, layer_forward_ops

GPT = ModelConfig("tiny-gpt", "gpt", 64, 2, 4, 4, 256, 128, 64)
MOE = ModelConfig("tiny-moe", "llama", 64, 2, 4, 4, 96, 128, 64, MoEConfig(experts=4, top_k=2, expert_ffn=32))
B, S, H, FFN = 2, 16, 64, 256
T = B * S
FP8 = TrainingConfig(global_batch=8, micro_batch=B, seq_len=S, dtype="fp8", recompute="none")
BF16 = replace(FP8, dtype="bf16")
PAR = ParallelConfig(dp_bucket_bytes=40 << 20)
SP2 = replace(PAR, tp=2, sequence_parallel=True)


def labels(ops: list[OpSpec]) -> list[str]:
    return [op.label for op in ops]


def by_label(ops: list[OpSpec]) -> dict[str, OpSpec]:
    return {op.label: op for op in ops}


def fp8_kernels(ops: list[OpSpec]) -> dict[str, int]:
    return {op.label: op.bytes_moved for op in ops if "fp8" in op.label}


def test_forward_casts_and_fused_norm_outputs_by_hand() -> None:
    fwd = layer_forward_ops(GPT, FP8, PAR, 0)
    # out_proj and fc2 inputs: read bf16 (2), write fp8 and its transpose (1 + 1)
    assert fp8_kernels(fwd) == {"out_proj.fp8_cast": 4 * T * H, "fc2.fp8_cast": 4 * T * FFN}
    names = labels(fwd)
    assert names.index("out_proj.fp8_cast") == names.index("out_proj") - 1
    assert names.index("fc2.fp8_cast") == names.index("fc2") - 1
    # the LayerNormLinear norms write their output in fp8: one byte per element less than bf16
    bf16 = by_label(layer_forward_ops(GPT, BF16, PAR, 0))
    for norm in ("ln1", "ln2"):
        assert bf16[norm].bytes_moved - by_label(fwd)[norm].bytes_moved == T * H
    assert all(op.dtype == ("fp8" if op.op_kind == "gemm" else "bf16") for op in fwd)


def test_backward_gradient_casts_and_norm_output_transposes_by_hand() -> None:
    bwd = layer_backward_ops(GPT, FP8, PAR, 0)
    assert fp8_kernels(bwd) == {
        "fc2.grad_fp8_cast": 4 * T * H,
        "fc1.grad_fp8_cast": 4 * T * FFN,
        "fc1.fp8_transpose": 2 * T * H,
        "out_proj.grad_fp8_cast": 4 * T * H,
        "qkv_proj.grad_fp8_cast": 4 * T * 3 * H,
        "qkv_proj.fp8_transpose": 2 * T * H,
    }
    names = labels(bwd)
    for gemm in ("fc2", "fc1", "out_proj", "qkv_proj"):
        assert names.index(f"{gemm}.grad_fp8_cast") < names.index(f"{gemm}.dgrad")
    for gemm in ("fc1", "qkv_proj"):  # the stored fp8 norm output, transposed for the wgrad
        assert names.index(f"{gemm}.fp8_transpose") == names.index(f"{gemm}.wgrad") - 1


def test_sequence_parallel_defers_transposes_to_the_backward() -> None:
    t_local, h_tp, ffn_tp = T // 2, H // 2, FFN // 2
    fwd = fp8_kernels(layer_forward_ops(GPT, FP8, SP2, 0))
    # cast only (read 2, write 1) of the rank's columns of the full-token input
    assert fwd == {"out_proj.fp8_cast": 3 * T * h_tp, "fc2.fp8_cast": 3 * T * ffn_tp}
    bwd = layer_backward_ops(GPT, FP8, SP2, 0)
    kernels = fp8_kernels(bwd)
    # row-parallel output gradient: cast the local s/tp rows, all-gather, transpose all rows
    assert kernels["out_proj.grad_fp8_cast"] == 3 * t_local * H
    assert kernels["out_proj.grad_fp8_transpose"] == 2 * T * H
    assert kernels["out_proj.fp8_transpose"] == 2 * T * h_tp  # stored input, for the wgrad
    names = labels(bwd)
    gather = names.index("tp_allgather.attn.bwd")
    assert (
        names.index("out_proj.grad_fp8_cast")
        < gather
        < names.index("out_proj.grad_fp8_transpose")
        < names.index("out_proj.dgrad")
    )
    assert names.index("out_proj.fp8_transpose") == names.index("out_proj.wgrad") - 1


def test_no_fp8_kernels_without_fp8() -> None:
    for training in (BF16, replace(BF16, dtype="fp16")):
        for par in (PAR, SP2):
            ops = layer_forward_ops(GPT, training, par, 0) + layer_backward_ops(GPT, training, par, 0)
            assert fp8_kernels(ops) == {}


def test_moe_expert_linears_cast_their_inputs() -> None:
    """MoE layers: separate pre-MLP norm (bf16 output), experts and shared experts are Linears."""
    moe = replace(MOE, moe=replace(MOE.moe, shared_experts=1))
    fwd = layer_forward_ops(moe, FP8, PAR, 0)
    routed = T * 2  # top-2 copies of every token, over the rank's 4 experts
    kernels = fp8_kernels(fwd)
    assert kernels["expert_fc1.fp8_cast"] == 4 * routed * H
    assert kernels["expert_fc2.fp8_cast"] == 4 * routed * 32
    assert kernels["shared_fc1.fp8_cast"] == 4 * T * H
    bf16 = by_label(layer_forward_ops(moe, BF16, PAR, 0))
    assert by_label(fwd)["ln2"].bytes_moved == bf16["ln2"].bytes_moved
    bwd = fp8_kernels(layer_backward_ops(moe, FP8, PAR, 0))
    assert bwd["expert_fc1.grad_fp8_cast"] == 4 * routed * 2 * 32  # SwiGLU gate + up
    assert "expert_fc1.fp8_transpose" not in bwd  # transposed copy saved by the forward
