"""Compute time of one GPU running whole transformer layers (TP = PP = 1), for validation.

Builds the op lists of :mod:`heterosim.workload.ops` for one micro-batch (layer forward,
backward with recomputation as configured, embedding, head and loss) plus the optimizer step,
times them with a :class:`~heterosim.plan.compute.model.ComputeModel`, and adds them up the way a
single GPU runs them back to back. Communication is left out: the published cases it is compared
with run on one GPU or overlap their data-parallel gradient reduction with the backward pass.

``attention="unfused"`` (or ``training.attention: unfused``) replaces the fused flash-attention
kernel by what Megatron-LM did before FlashAttention (2020): a batched QK^T GEMM, a fused
scale-mask-softmax kernel, attention dropout and a batched PV GEMM, each backward as its own
kernels (the op lists of :func:`heterosim.workload.ops_layer.unfused_attention_ops`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from heterosim.catalog.models import ModelConfig
from heterosim.config.experiment import ParallelConfig, TrainingConfig
from heterosim.plan.compute.model import PROVENANCES, ComputeModel, provenance_shares
from heterosim.workload import ops as workload_ops
from heterosim.workload.ops import OpSpec


def single_gpu_parallel(dp: int = 1, distributed_optimizer: bool = False) -> ParallelConfig:
    return ParallelConfig(
        dp=dp, partition="uniform", distributed_optimizer=distributed_optimizer, zero3_prefetch=0
    )


@dataclass
class IterationEstimate:
    """Per-micro-batch and per-iteration compute time of one GPU, with provenance shares."""

    gpu: str
    micro_batches: int
    layer_fwd_s: float
    layer_bwd_s: float  # backward including any recomputation
    ends_s: float  # embedding, head and loss, forward and backward, per micro-batch
    optimizer_s: float
    layers: int
    shares: dict[str, float] = field(default_factory=dict)

    @property
    def layer_fwd_bwd_s(self) -> float:
        return self.layer_fwd_s + self.layer_bwd_s

    @property
    def iteration_s(self) -> float:
        per_micro = self.layers * self.layer_fwd_bwd_s + self.ends_s
        return self.micro_batches * per_micro + self.optimizer_s


def estimate_iteration(
    model: ModelConfig,
    training: TrainingConfig,
    parallel: ParallelConfig,
    gpu: str,
    compute: ComputeModel,
    *,
    attention: str | None = None,
) -> IterationEstimate:
    """Back-to-back compute time of a TP = PP = 1 rank (all layers, one DP replica);
    ``attention`` (flash | unfused) overrides ``training.attention``."""
    if parallel.tp != 1 or parallel.pp != 1:
        raise ValueError("estimate_iteration covers tp = pp = 1 only")
    if attention is not None:
        training = replace(training, attention=attention)

    def expand(ops: list[OpSpec]) -> list[OpSpec]:
        return [op for op in ops if not op.is_comm]

    groups = {
        "fwd": expand(workload_ops.layer_forward_ops(model, training, parallel, 0)),
        "bwd": expand(workload_ops.layer_backward_ops(model, training, parallel, 0)),
        "ends": expand(
            workload_ops.embedding_forward_ops(model, training, parallel)
            + workload_ops.head_forward_ops(model, training, parallel)
            + workload_ops.head_backward_ops(model, training, parallel)
            + workload_ops.embedding_backward_ops(model, training, parallel)
        ),
    }
    params = workload_ops.rank_params(model, parallel, range(model.layers), True, True)
    linear = workload_ops.rank_linear_weights(model, parallel, range(model.layers))
    groups["opt"] = expand(
        workload_ops.optimizer_ops(model, training, parallel, params, linear_weights=linear)
    )
    micro = training.global_batch // (training.micro_batch * parallel.dp)
    weights = {"fwd": micro * model.layers, "bwd": micro * model.layers, "ends": micro, "opt": 1}
    times: dict[str, float] = {}
    durations, provenance, counts = [], [], []
    for name, ops in groups.items():
        total = 0
        for op in ops:
            t, prov = compute.time_op(
                op.op_kind, op.dtype, op.shape, op.shape_extra, op.flops, op.bytes_moved, gpu
            )
            total += t
            durations.append(t)
            provenance.append(PROVENANCES.index(prov))
            counts.append(weights[name])
        times[name] = total * 1e-9
    shares = provenance_shares(np.array(durations), np.array(provenance), np.array(counts))
    return IterationEstimate(
        gpu=gpu,
        micro_batches=micro,
        layer_fwd_s=times["fwd"],
        layer_bwd_s=times["bwd"],
        ends_s=times["ends"],
        optimizer_s=times["opt"],
        layers=model.layers,
        shares=shares,
    )
