"""Whole-layer measurements in a run: the gap between a measured layer and the sum of its ops.

A layer timed as a whole (``heterosim profile --layers``, the ``layers`` table of a user's
operation database) is slower than the sum of its ops timed one by one: the kernels the op
lists leave out, the host's dispatch, the idle time between kernels. Where a run's layer matches
a measured one (same GPU, dimensions, sequence, micro-batch, TP degree, sequence parallelism
and dtype; eager mode preferred), the layer's forward ops and its backward ops are each scaled
by measured time / sum of their modelled times.

The measurement is set against the op lists of the kernels it ran: an eager layer (the
reference layers ``heterosim profile --layers`` times) against ``training.kernels: eager``, a
compiled one against the fused lists. The ratio measured / modelled of those lists is the part
of the layer the op model misses (clocks, gaps, the host); the run's own layer (fused for a
Megatron run) is scaled by that ratio, so an eager measurement calibrates a fused run without
charging it the eager kernels (heterosim.workload.ops_eager).

The rule that distributes the gap: in proportion to each op's own modelled time, separately for
the forward (recomputed forward ops too) and the backward, so the layer's ops add up to the
measurement (converted to the run's kernels) and their order and dependencies are kept. Which
layers were matched, their factors and the gap are reported (results.json
``compute_layers``). Only databases a user passes are read for layers: the whole layers shipped
in validation/ are a reference PyTorch implementation's, not the training framework's.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from heterosim.catalog.models import ModelConfig
from heterosim.config.experiment import ParallelConfig, TrainingConfig
from heterosim.plan.compute.database import LayerMeasurement
from heterosim.workload import ops as workload_ops
from heterosim.workload.ops import OpSpec
from heterosim.workload.trace import PHASES, OpTemplates

# the op lists a whole-layer measurement ran, by its mode: eager PyTorch, or torch.compile's
# fused elementwise kernels (training.kernels)
MEASURED_KERNELS = {"eager": "eager", "compile": "fused"}


@dataclass(frozen=True)
class LayerScale:
    """How a run's layer ops on one GPU are scaled to a measured layer."""

    gpu: str
    label: str
    mode: str
    fwd_factor: float
    bwd_factor: float
    fwd_gap_ns: float  # measured - modelled, forward
    bwd_gap_ns: float
    fwd_keys: frozenset  # (label, shape, bytes) of the layer's forward ops
    bwd_keys: frozenset

    def as_json(self) -> dict[str, object]:
        return {
            "gpu": self.gpu,
            "layer": self.label,
            "mode": self.mode,
            "forward_factor": self.fwd_factor,
            "backward_factor": self.bwd_factor,
            "forward_gap_us": self.fwd_gap_ns / 1e3,
            "backward_gap_us": self.bwd_gap_ns / 1e3,
            "rule": "each op of the layer scaled in proportion to its modelled time, "
            "forward and backward apart",
        }

    @classmethod
    def of(
        cls,
        gpu: str,
        label: str,
        mode: str,
        forward: tuple[float, float],
        backward: tuple[float, float],
        fwd_ops: list[OpSpec],
        bwd_ops: list[OpSpec],
    ) -> LayerScale:
        """The scale taking the layer's forward and backward ops from their modelled total to a
        target: ``forward`` and ``backward`` are (modelled ns, target ns)."""
        (f, f_target), (b, b_target) = forward, backward
        return cls(
            gpu=gpu,
            label=label,
            mode=mode,
            fwd_factor=f_target / f,
            bwd_factor=b_target / b,
            fwd_gap_ns=f_target - f,
            bwd_gap_ns=b_target - b,
            fwd_keys=frozenset(_key(op) for op in fwd_ops),
            bwd_keys=frozenset(_key(op) for op in bwd_ops),
        )


def matching_layer(
    layers: list[LayerMeasurement],
    gpu: str,
    model: ModelConfig,
    training: TrainingConfig,
    parallel: ParallelConfig,
) -> LayerMeasurement | None:
    """The measured layer of ``model`` on ``gpu`` in this run's shard, eager before compile."""
    moe = model.moe if model.is_moe_layer(0) else None
    if model.moe is not None and any(
        model.is_moe_layer(i) != model.is_moe_layer(0) for i in range(model.layers)
    ):
        return None  # dense and MoE layers mixed: one measurement cannot stand for both
    want = (
        gpu,
        model.arch,
        model.hidden,
        model.heads,
        model.kv_heads,
        moe.expert_ffn if moe else model.ffn,
        moe.experts if moe else 0,
        moe.top_k if moe else 0,
        training.seq_len,
        training.micro_batch,
        parallel.tp,
        bool(parallel.sequence_parallel),
        training.dtype,
    )
    found = [
        m
        for m in layers
        if (m.gpu, m.arch, m.hidden, m.heads, m.kv_heads, m.ffn, m.experts, m.top_k, m.seq, m.micro_batch)
        + (m.tp, bool(m.sp), m.dtype)
        == want
    ]
    found.sort(key=lambda m: m.mode != "eager")
    return found[0] if found else None


def _key(op: OpSpec) -> tuple:
    return (op.label, tuple(int(x) for x in op.shape), int(op.bytes_moved))


def layer_op_lists(
    model: ModelConfig, training: TrainingConfig, parallel: ParallelConfig
) -> tuple[list[OpSpec], list[OpSpec]]:
    """A layer's forward and backward compute ops as one layer pass runs them (activations kept:
    a recomputed forward reuses the forward's ops)."""
    plain = replace(training, recompute="none")
    fwd = [op for op in workload_ops.layer_forward_ops(model, plain, parallel, 0) if not op.is_comm]
    bwd = [op for op in workload_ops.layer_backward_ops(model, plain, parallel, 0) if not op.is_comm]
    return fwd, bwd


def layer_scale(
    compute: object,
    layers: list[LayerMeasurement],
    gpu: str,
    model: ModelConfig,
    training: TrainingConfig,
    parallel: ParallelConfig,
) -> LayerScale | None:
    """The factors for this run's layer on ``gpu`` (None without a matching measurement)."""
    meas = matching_layer(layers, gpu, model, training, parallel)
    if meas is None:
        return None
    fwd, bwd = layer_op_lists(model, training, parallel)  # the measured layer keeps its activations
    measured_kernels = replace(training, kernels=MEASURED_KERNELS.get(meas.mode, "fused"))
    ref_fwd, ref_bwd = layer_op_lists(model, measured_kernels, parallel)

    def total(ops: list[OpSpec]) -> float:
        return float(
            sum(
                compute.time_op(o.op_kind, o.dtype, o.shape, o.shape_extra, o.flops, o.bytes_moved, gpu)[0]  # type: ignore[attr-defined]
                for o in ops
            )
        )

    f, b, f_ref, b_ref = total(fwd), total(bwd), total(ref_fwd), total(ref_bwd)
    if min(f, b, f_ref, b_ref) <= 0:
        return None
    forward = (f, meas.fwd_ns * f / f_ref)
    backward = (b, meas.bwd_ns * b / b_ref)
    return LayerScale.of(gpu, meas.label, meas.mode, forward, backward, fwd, bwd)


def scale_templates(durations: np.ndarray, templates: OpTemplates, scale: LayerScale) -> np.ndarray:
    """``durations`` (ns per template row) with the layer's ops scaled (forward and recomputed
    forward rows by the forward factor, backward rows by the backward factor)."""
    out = np.asarray(durations, dtype=np.float64).copy()
    fwd_phases = {PHASES.index(p) for p in ("fwd", "recompute") if p in PHASES}
    bwd_phase = PHASES.index("bwd")
    for i in range(len(templates)):
        label = templates.label_names[int(templates.label[i])]
        key = (label, tuple(int(x) for x in templates.shape[i]), int(templates.bytes_moved[i]))
        phase = int(templates.phase[i])
        if phase in fwd_phases and key in scale.fwd_keys:
            out[i] *= scale.fwd_factor
        elif phase == bwd_phase and key in scale.bwd_keys:
            out[i] *= scale.bwd_factor
    return np.maximum(np.rint(out), 1).astype(np.int64)
