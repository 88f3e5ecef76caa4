"""Elementwise work as plain (eager) PyTorch runs it: ``training.kernels: eager``.

Megatron-core with Transformer Engine fuses the elementwise work around the GEMMs (one RoPE
kernel per tensor, one SwiGLU kernel, weight gradients accumulated inside the wgrad GEMM); the
op lists of :mod:`heterosim.workload.ops_layer` follow it. A model written in plain PyTorch (a
Hugging Face ``transformers`` layer, a reference implementation, FSDP or DeepSpeed training of
one) runs every elementwise operator as its own kernel, and autograd adds each backward:

- Rotary embeddings as ``transformers``' ``apply_rotary_pos_emb`` writes them (``q * cos +
  rotate_half(q) * sin``, ``rotate_half(x) = cat(-x2, x1)``): per tensor (Q and K) five forward
  kernels (neg, cat, two multiplies, add) and nine backward ones (two multiplies, the neg, and
  for each half slice a zero fill and a copy, two adds to sum the paths).
- SwiGLU on the two halves of one gate+up projection (``silu(gate) * up``): forward a SiLU and a
  multiply; backward two multiplies, SiLU's backward and the concatenation of the two halves'
  gradients for the projection's dgrad.
- Every weight and bias gradient is added to ``.grad`` by its own kernel
  (:func:`heterosim.workload.ops_base.grad_accumulation`).
- GPT's ``dropout(x + bias)``: the bias add is a kernel of its own before the dropout.

PyTorch runs an elementwise kernel vectorized (``vectorized_elementwise_kernel``, 16-byte
loads) only when every operand is contiguous and aligned; an operand that is a strided view
(a half of the head dimension, a half of the gate+up output, a broadcast bias) takes the
generic ``elementwise_kernel<128, 4>`` with per-element index arithmetic
(aten/src/ATen/native/cuda/CUDALoops.cuh). Such ops carry ``STRIDED`` in ``shape_extra[0]`` and
the compute model times them at :data:`heterosim.plan.compute.model.STRIDED_BANDWIDTH_RATIO` of
the contiguous rate.

Kernel sequences read from one forward + backward of the reference layers on an H100
(``validation/h100_2026-11-27/layer_kernels.json``). APPROXIMATION: byte counts take every
operand at full size except broadcast cos/sin tables and biases (L2-resident); gradients are
accumulated in the activation dtype (bf16 parameters; mixed precision with fp32 parameters adds a
cast), and every micro-batch's backward accumulates (the first one of an iteration only assigns).
"""

from __future__ import annotations

from heterosim.catalog.models import ModelConfig
from heterosim.workload.ops_base import SWIGLU_FLOPS, Dims, OpSpec

STRIDED = 1  # shape_extra[0] of an elementwise op whose kernel is not vectorized (strided operands)


def _op(label: str, phase: str, d: Dims, elements: int, flops: float, moved: float, strided: bool) -> OpSpec:
    return OpSpec(
        label,
        "elementwise",
        phase,
        d.act_dtype,
        (elements, 0, 0, 0),
        shape_extra=(STRIDED if strided else 0, 0),
        flops=int(elements * flops),
        bytes_moved=int(moved),
    )


def eager_rotary(label: str, phase: str, d: Dims, model: ModelConfig) -> list[OpSpec]:
    """Rotate-half RoPE of Q and K, forward (also a recomputed forward) or backward."""
    if model.learned_positions:
        return []
    e = d.act_bytes
    ops: list[OpSpec] = []
    for name, n in (("q", d.tokens * d.q_dim), ("k", d.tokens * d.kv_dim)):
        half = n // 2
        if phase == "bwd":
            ops += [
                _op(f"{label}.{name}.mul_cos", phase, d, n, 1, 2 * n * e, True),
                _op(f"{label}.{name}.mul_sin", phase, d, n, 1, 2 * n * e, True),
                _op(f"{label}.{name}.neg", phase, d, half, 1, 2 * half * e, True),
            ]
            for part in ("x1", "x2"):  # slice backward: zeros of the full size, then the half copied in
                ops += [
                    _op(f"{label}.{name}.{part}.zeros", phase, d, n, 0, n * e, False),
                    _op(f"{label}.{name}.{part}.copy", phase, d, half, 0, 2 * half * e, True),
                ]
            ops += [_op(f"{label}.{name}.sum{i}", phase, d, n, 1, 3 * n * e, True) for i in (1, 2)]
        else:
            ops += [
                _op(f"{label}.{name}.neg", phase, d, half, 1, 2 * half * e, True),
                _op(f"{label}.{name}.cat", phase, d, n, 0, 2 * n * e, True),
                _op(f"{label}.{name}.mul_cos", phase, d, n, 1, 2 * n * e, True),
                _op(f"{label}.{name}.mul_sin", phase, d, n, 1, 2 * n * e, True),
                _op(f"{label}.{name}.add", phase, d, n, 1, 3 * n * e, True),
            ]
    return ops


def eager_swiglu(label: str, phase: str, d: Dims, tokens: int, ffn: int) -> list[OpSpec]:
    """``silu(gate) * up`` on the halves of one [tokens, 2 * ffn] projection output."""
    n, e = tokens * ffn, d.act_bytes
    if phase == "bwd":
        return [
            _op(f"{label}.mul_up", phase, d, n, 1, 3 * n * e, True),  # dy * up (a strided half)
            _op(f"{label}.mul_silu", phase, d, n, 1, 3 * n * e, False),  # dy * silu(gate)
            _op(f"{label}.silu_bwd", phase, d, n, SWIGLU_FLOPS, 3 * n * e, True),
            _op(f"{label}.cat", phase, d, 2 * n, 0, 4 * n * e, False),
        ]
    return [
        _op(f"{label}.silu", phase, d, n, SWIGLU_FLOPS - 1, 2 * n * e, True),
        _op(f"{label}.mul", phase, d, n, 1, 3 * n * e, True),
    ]


def eager_bias_add(label: str, phase: str, d: Dims, elements: int) -> list[OpSpec]:
    """``x + bias`` before GPT's dropout (a broadcast operand: not vectorized); none backward
    (the add passes its gradient through; the bias gradient is its own reduction)."""
    if phase == "bwd":
        return []
    return [_op(label, phase, d, elements, 1, 2 * elements * d.act_bytes, True)]


__all__ = ["STRIDED", "eager_bias_add", "eager_rotary", "eager_swiglu"]
