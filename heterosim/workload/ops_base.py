"""The operation record and the small builders shared by the per-layer, embedding and head op lists.

Every op describes ONE micro-batch on ONE rank. Byte counts are HBM traffic of the kernel (reads
plus writes); FLOP counts of GEMMs are exact (2*m*n*k*batch), those of elementwise kernels, norms
and the loss use the per-element constants below, which are approximate (these kernels are
memory-bound and are timed by their bytes).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from heterosim.catalog.gpus import DTYPE_BYTES
from heterosim.catalog.models import ModelConfig
from heterosim.config.experiment import ParallelConfig, TrainingConfig
from heterosim.workload.trace import (
    ALL_GATHER,
    ALL_REDUCE,
    ALL_TO_ALL,
    COMM_COLL_NODE,
    COMP_NODE,
    NO_COLLECTIVE,
    REDUCE_SCATTER,
)

# Approximate FLOPs per element of the memory-bound kernels (forward; backward noted).
LAYERNORM_FLOPS = 8  # mean, variance, normalize, scale, shift; backward 2x
RMSNORM_FLOPS = 4  # square-sum, rsqrt scale, weight; backward 2x
GELU_FLOPS = 8  # tanh approximation; backward 2x
SWIGLU_FLOPS = 5  # SiLU (exp, add, div) and the multiply, per output element; backward 2x
DROPOUT_FLOPS = 2  # random draw compare and scale
SOFTMAX_LOSS_FLOPS = 5  # max, subtract, exp, sum, divide per logit
ADAM_FLOPS = 12  # m and v updates, bias corrections, sqrt, divide, weight decay, update
FP8_CAST_FLOPS = 2  # |x| and the running max for the amax, then the scaled conversion
MASK_BYTES = 1  # dropout masks are stored as bytes
FP8 = 1
FP32 = 4

# FlashAttention-2 (Dao 2023, §3.1/§4): the backward pass runs 5 matmuls of the forward's 2
# (recomputing the scores S = QK^T instead of storing them), i.e. 2.5x the forward FLOPs.
FLASH_BACKWARD_FACTOR = 2.5
# Unfused attention (Megatron-LM v1-v2 FusedScaleMaskSoftmax): scale, mask, max, exp, sum and
# divide per score forward; backward y * (dy - sum(dy * y)) and the scale.
ATTN_SOFTMAX_FLOPS = 5
ATTN_SOFTMAX_BWD_FLOPS = 4


@dataclass(frozen=True)
class OpSpec:
    """One kernel or collective of one micro-batch on one rank (see trace.OP_KINDS for shapes).

    ``comm_bytes`` follows the nccl-tests "size" convention: the per-rank buffer size (AllReduce
    input; AllGather output/total; ReduceScatter input/total; AllToAll per-rank total).
    ``comm_group`` names the process-group role ("tp", "ep", "dp", "ep_dp"); the generator
    resolves it to a group id. ``comm_split`` (all-to-all-v): bytes this rank sends to each
    member of the group in communicator order (itself included), summing to ``comm_bytes``;
    empty for an even collective.
    """

    label: str
    op_kind: str
    phase: str
    dtype: str
    shape: tuple[int, int, int, int]
    shape_extra: tuple[int, int] = (0, 0)
    flops: int = 0
    bytes_moved: int = 0
    node_type: int = COMP_NODE
    comm_type: int = NO_COLLECTIVE
    comm_bytes: int = 0
    comm_group: str = ""
    comm_split: tuple[int, ...] = ()
    # > 0: the op runs beside the next ``overlap_next`` ops of the chain (starting with the
    # first of them) and the op after them waits for it (heterosim.workload.tp_overlap)
    overlap_next: int = 0
    # a context-parallel ring exchange (heterosim.workload.cp.RingPlacer): how many chain ops
    # run beside it before the next one waits for it (Transformer Engine: 1, the step it feeds)
    ring_beside: int = 1

    @property
    def is_comm(self) -> bool:
        return self.node_type != COMP_NODE


@dataclass(frozen=True)
class Dims:
    """Per-rank sizes of one micro-batch, derived once from the configs."""

    b: int  # micro-batch (sequences)
    s: int  # sequence length on this rank: seq_len / cp (its 2 of the 2*cp chunks)
    h: int  # hidden
    tp: int
    sp: bool  # sequence parallelism (only meaningful with tp > 1)
    tokens: int  # b*s
    sp_tokens: int  # tokens held by a rank in the norm/dropout/residual region
    heads: int  # attention heads on this rank
    kv_heads: int  # KV heads on this rank (replicated when tp > kv_heads)
    head_dim: int
    ffn: int  # dense FFN columns on this rank
    vocab: int  # vocabulary rows on this rank (vocab-parallel)
    gemm_dtype: str  # training dtype (fp8 GEMMs with bf16 everything else)
    act_dtype: str  # dtype of activations, elementwise kernels, attention and TP traffic
    gemm_in_bytes: int
    act_bytes: int
    attention: str = "flash"  # TrainingConfig.attention: "flash" or "unfused"
    kernels: str = "fused"  # TrainingConfig.kernels: "fused" or "eager" (heterosim.workload.ops_eager)
    cp: int = 1  # context-parallel degree (heterosim.workload.cp)
    cp_comm: str = "p2p"  # ParallelConfig.cp_comm
    cp_impl: str = "transformer_engine"  # ParallelConfig.cp_impl
    # ParallelConfig.tp_backward_overlap: the column-parallel backward's TP collectives run
    # beside its GEMMs (input all-gather beside the dgrad, input-gradient reduction beside the wgrad)
    tp_backward_overlap: bool = True

    @property
    def te_fp8(self) -> bool:
        """fp8 GEMMs through Transformer Engine, which casts their bf16 operands (see fp8_cast)."""
        return self.gemm_dtype == "fp8"

    @property
    def eager(self) -> bool:
        """Plain PyTorch kernels: unfused elementwise work, weight gradients added by autograd."""
        return self.kernels == "eager"

    @property
    def q_dim(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_dim


def activation_dtype(dtype: str) -> str:
    """fp8 training (Transformer Engine) runs GEMMs in fp8, everything else in bf16."""
    return "bf16" if dtype == "fp8" else dtype


def kv_heads_per_rank(model: ModelConfig, tp: int) -> int:
    """KV heads on one TP rank: kv_heads/tp, or 1 (replicated) when tp exceeds kv_heads."""
    return model.kv_heads // tp if model.kv_heads >= tp else 1


def dims(model: ModelConfig, training: TrainingConfig, parallel: ParallelConfig) -> Dims:
    tp = parallel.tp
    sp = parallel.sequence_parallel and tp > 1
    # context parallelism: every op of a rank sees its seq_len/cp tokens (Megatron-core's
    # get_batch_on_this_cp_rank); attention adds the K/V exchange (heterosim.workload.cp)
    seq = training.seq_len // parallel.cp
    tokens = training.micro_batch * seq
    act = activation_dtype(training.dtype)
    return Dims(
        b=training.micro_batch,
        s=seq,
        h=model.hidden,
        tp=tp,
        sp=sp,
        tokens=tokens,
        sp_tokens=-(-tokens // tp) if sp else tokens,
        heads=model.heads // tp,
        kv_heads=kv_heads_per_rank(model, tp),
        head_dim=model.head_dim,
        ffn=-(-model.ffn // tp),
        vocab=-(-model.vocab // tp),
        gemm_dtype=training.dtype,
        act_dtype=act,
        gemm_in_bytes=DTYPE_BYTES[training.dtype],
        act_bytes=DTYPE_BYTES[act],
        attention=training.attention,
        kernels=training.kernels,
        cp=parallel.cp,
        cp_comm=parallel.cp_comm,
        cp_impl=parallel.cp_impl,
        tp_backward_overlap=parallel.backward_overlap(),
    )


def gemm(
    label: str, phase: str, d: Dims, m: int, n: int, k: int, batch: int = 1, accumulate_fp32: bool = False
) -> OpSpec:
    """C[m,n] = A[m,k] @ B[k,n]; inputs in the GEMM dtype, output in the activation dtype, or
    read-modify-written in fp32 when ``accumulate_fp32`` (Megatron's gradient-accumulation fusion
    adds weight gradients into fp32 ``main_grad``)."""
    inputs = (m * k + k * n) * batch * d.gemm_in_bytes
    output = m * n * batch * (2 * FP32 if accumulate_fp32 else d.act_bytes)
    return OpSpec(
        label,
        "gemm",
        phase,
        d.gemm_dtype,
        (m, n, k, batch),
        flops=2 * m * n * k * batch,
        bytes_moved=inputs + output,
    )


def gemm_backward(label: str, d: Dims, m: int, n: int, k: int, batch: int = 1) -> list[OpSpec]:
    """Backward of Y[m,n] = X[m,k] W[k,n]: dgrad dX = dY W^T (m,k,n), then wgrad dW = X^T dY
    (k,n,m), same FLOPs each. Megatron accumulates dW into fp32 ``main_grad`` inside the wgrad
    GEMM; eager PyTorch writes dW and autograd adds it to ``.grad`` (:func:`grad_accumulation`)."""
    return [
        gemm(f"{label}.dgrad", "bwd", d, m, k, n, batch),
        gemm(f"{label}.wgrad", "bwd", d, k, n, m, batch, accumulate_fp32=not d.eager),
        *([grad_accumulation(f"{label}.grad_add", d, k * n * batch)] if d.eager else []),
    ]


def grad_accumulation(label: str, d: Dims, params: int) -> OpSpec:
    """Eager PyTorch: autograd's ``AccumulateGrad`` adds a parameter's new gradient to its
    ``.grad`` (``grad += new``, torch/csrc/autograd/functions/accumulate_grad.h), one add
    kernel reading both and writing one, in the parameter's dtype (taken as the activation dtype)."""
    moved = 3 * params * d.act_bytes
    shape = (params, 0, 0, 0)
    return OpSpec(label, "elementwise", "bwd", d.act_dtype, shape, flops=params, bytes_moved=moved)


def elementwise(
    label: str, phase: str, d: Dims, elements: int, flops_per_element: float, bytes_moved: int
) -> OpSpec:
    return OpSpec(
        label,
        "elementwise",
        phase,
        d.act_dtype,
        (elements, 0, 0, 0),
        flops=int(elements * flops_per_element),
        bytes_moved=bytes_moved,
    )


def norm(
    label: str, phase: str, d: Dims, model: ModelConfig, rows: int, out_bytes: int | None = None
) -> OpSpec:
    """LayerNorm (gpt) or RMSNorm (llama) over ``rows`` x hidden. Forward reads x and the weights,
    writes y (``out_bytes`` per element, default the activation dtype; 1 when Transformer Engine's
    LayerNormLinear writes the fp8 GEMM input directly) and the fp32 statistics; backward (2x the
    forward's element work) reads dy, x, statistics and weights and writes dx and the weight
    gradients in :func:`norm_backward_passes` passes over dy and x."""
    h = d.h
    per = LAYERNORM_FLOPS if model.arch == "gpt" else RMSNORM_FLOPS
    stats = (2 if model.arch == "gpt" else 1) * rows * FP32
    params = model.norm_params() * d.act_bytes
    if phase == "bwd":
        reads = 2 * norm_backward_passes(d) * rows * h * d.act_bytes  # dy and x, per pass
        moved = reads + rows * h * d.act_bytes + stats + params + model.norm_params() * FP32
        flops = 2 * per * rows * h
    else:
        out = d.act_bytes if out_bytes is None else out_bytes
        moved = rows * h * (d.act_bytes + out) + stats + params
        flops = per * rows * h
    return OpSpec(label, "norm", phase, d.act_dtype, (rows, h, 0, 0), flops=flops, bytes_moved=moved)


def norm_backward_passes(d: Dims) -> int:
    """Passes a norm's backward makes over dy and x: 2 where the input gradient and the weight
    gradients are separate kernels, each reading both (PyTorch's native LayerNorm:
    ``layer_norm_grad_input_kernel`` then ``GammaBetaBackwardCUDAKernel`` in
    aten/src/ATen/native/cuda/layer_norm_kernel.cu, measured on an H100 as 90 + 49 us for
    2048 x 12288 bf16, validation/h100_2026-11-27/layer_kernels.json; Apex's FusedLayerNorm:
    ``cuComputeGradInput`` and ``cuComputePartGradGammaBeta``); 1 on Transformer Engine's fp8
    path, whose norm backward kernels compute dx and the partial weight gradients in one pass."""
    return 1 if d.te_fp8 else 2


def bias_grad(label: str, d: Dims, rows: int, cols: int) -> OpSpec:
    """Gradient of a linear layer's bias: the output gradient (``rows`` x ``cols``) summed over its
    rows, one reduction kernel reading it once (Megatron-LM's
    ``LinearWithGradAccumulationAndAsyncCommunication.backward``: ``grad_output.sum(dim=0)``;
    the bias of a bias-GELU or bias-dropout-add gets the same sum from autograd)."""
    n = rows * cols
    return OpSpec(
        label, "elementwise", "bwd", d.act_dtype, (n, 0, 0, 0), flops=n, bytes_moved=n * d.act_bytes
    )


def fp8_cast(label: str, phase: str, d: Dims, rows: int, cols: int, transpose: bool) -> OpSpec:
    """Transformer Engine's cast of a 16-bit [rows, cols] GEMM operand to fp8 (its amax is
    reduced in the same kernel): reads 2 B and writes 1 B per element, plus the 1-byte transposed
    copy the other GEMM of the pair needs when ``transpose`` (``fp8_cast_transpose_fused``, and
    ``fp8_cast_transpose_bgrad_fused`` for gradients, whose bias gradient is a by-product).
    Source: transformer_engine/pytorch/module/linear.py (``_Linear.forward``: "FP8 input for
    forward, FP8 input transpose for backward wgrad") and module/base.py
    (``grad_output_preprocess``: "cast, transpose, bgrad fused"), TE 1.x."""
    n = rows * cols
    return elementwise(label, phase, d, n, FP8_CAST_FLOPS, n * (d.act_bytes + (2 if transpose else 1) * FP8))


def fp8_transpose(label: str, phase: str, d: Dims, rows: int, cols: int) -> OpSpec:
    """Transformer Engine's ``fp8_transpose`` of a stored fp8 [rows, cols] tensor for a wgrad
    GEMM (e.g. the LayerNormLinear's fp8 norm output, or any input under sequence parallelism):
    reads and writes 1 B per element."""
    n = rows * cols
    return elementwise(label, phase, d, n, 0, 2 * n * FP8)


_TP_KINDS = {"allreduce": ALL_REDUCE, "allgather": ALL_GATHER, "reducescatter": REDUCE_SCATTER}


def comm_op(
    label: str, phase: str, comm_type: int, size: int, dtype: str, node_type: int, role: str = ""
) -> OpSpec:
    """A communication op of ``size`` bytes (a collective over the ``role`` group, or a p2p)."""
    return OpSpec(
        label,
        "comm",
        phase,
        dtype,
        (0, 0, 0, 0),
        node_type=node_type,
        comm_type=comm_type,
        comm_bytes=int(size),
        comm_group=role,
    )


def collective(label: str, phase: str, comm_type: int, size_bytes: int, group: str, dtype: str) -> OpSpec:
    """A collective of ``size_bytes`` over the ``group`` communicator."""
    return comm_op(label, phase, comm_type, size_bytes, dtype, COMM_COLL_NODE, group)


def tp_collective(
    kind: str, where: str, phase: str, d: Dims, size_bytes: int | None = None, dtype: str | None = None
) -> OpSpec:
    """A TP collective labelled ``tp_<kind>.<where>``; default size: the full b*s*h activation."""
    size = d.tokens * d.h * d.act_bytes if size_bytes is None else size_bytes
    return collective(f"tp_{kind}.{where}", phase, _TP_KINDS[kind], size, "tp", dtype or d.act_dtype)


def ep_alltoall(
    where: str, phase: str, d: Dims, size_bytes: int, split_tokens: tuple[int, ...] = ()
) -> OpSpec:
    """The EP all-to-all of ``size_bytes`` per rank, or (``split_tokens``: token copies to each
    EP peer) an all-to-all-v of ``h`` activations per token copy."""
    op = collective(f"ep_alltoall.{where}", phase, ALL_TO_ALL, size_bytes, "ep", d.act_dtype)
    if not split_tokens:
        return op
    split = tuple(t * d.h * d.act_bytes for t in split_tokens)
    return replace(op, comm_bytes=sum(split), comm_split=split)


def main_grad_bytes(dtype: str) -> int:
    """Bytes per gradient element kept for the optimizer: Megatron accumulates and all-reduces
    gradients in fp32 ``main_grad`` for bf16 (and fp8, whose weights are bf16) training; fp16
    keeps 16-bit gradients (the ZeRO paper's 2+2+12 bytes); fp32 training keeps fp32 gradients."""
    return 2 if dtype == "fp16" else 4


def grad_buffer_bytes(training: TrainingConfig) -> int:
    """Bytes per element of the gradient buffer. A reduce dtype (``training.grad_reduce_dtype``)
    narrower than the main gradient is the buffer's own dtype: Megatron-core's gradient buffer
    is fp32 only with ``grad_reduce_in_fp32`` and the parameter dtype otherwise, and NeMo's
    distributed Adam keeps its buffer in ``grad_sync_dtype``. A wider one is a cast per bucket
    for the reduction (DeepSpeed's ``fp32_allreduce``), so the buffer keeps
    :func:`main_grad_bytes`."""
    main = main_grad_bytes(training.dtype)
    if training.grad_reduce_dtype == "auto":
        return main
    return min(main, DTYPE_BYTES[training.grad_reduce_dtype])
