"""Per-layer training op lists: the kernels and collectives one rank runs for one micro-batch.

The public API of the op model; the implementation lives in ``ops_base`` (the OpSpec record and
builders), ``ops_layer`` (transformer layers, TP/EP communication, recomputation) and
``ops_ends`` (embedding, logits and loss, optimizer step, parameters per rank). Conventions:
shapes per ``trace.OP_KINDS``; everything is already divided by tensor parallelism; GEMM FLOPs
are 2*m*n*k*batch; backward GEMMs are a dgrad then a wgrad.
"""

from heterosim.workload.ops_base import OpSpec, grad_buffer_bytes, main_grad_bytes
from heterosim.workload.ops_ends import (
    embedding_backward_ops,
    embedding_forward_ops,
    embedding_params_on_rank,
    head_backward_ops,
    head_forward_ops,
    head_params_on_rank,
    layer_expert_params_on_rank,
    layer_linear_weights_on_rank,
    layer_params_on_rank,
    optimizer_ops,
    optimizer_shard,
    rank_expert_params,
    rank_linear_weights,
    rank_params,
)
from heterosim.workload.ops_layer import layer_backward_ops, layer_forward_ops

__all__ = [
    "OpSpec",
    "embedding_backward_ops",
    "embedding_forward_ops",
    "embedding_params_on_rank",
    "head_backward_ops",
    "head_forward_ops",
    "head_params_on_rank",
    "layer_backward_ops",
    "layer_expert_params_on_rank",
    "layer_forward_ops",
    "layer_linear_weights_on_rank",
    "layer_params_on_rank",
    "grad_buffer_bytes",
    "main_grad_bytes",
    "optimizer_ops",
    "optimizer_shard",
    "rank_expert_params",
    "rank_linear_weights",
    "rank_params",
]
