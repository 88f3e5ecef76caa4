"""Whole-layer profiling: time transformer layers forward and backward as a training step runs them.

Each :class:`LayerSpec` (a model's layer, sequence, micro-batch, TP degree, sequence
parallelism, dtype) is built by :mod:`heterosim.plan.compute.layer_reference` and timed with the
profiler's sustained method: back to back, after a warm-up long enough to reach the
power-limited clock. The forward is timed alone (autograd on, as in training) and forward plus
backward together; the backward is their difference. Results go to the ``layers`` table of an
operation database, beside the op measurements, so the gap between a layer and the sum of its
ops can be measured on the same GPU (:mod:`heterosim.plan.compute.layer_gap`).

Modes: ``eager`` (one kernel per PyTorch op) and ``compile`` (``torch.compile``; its backend
is ``inductor`` on a GPU). Everything runs on CPU with small shapes (:func:`cpu_layers`): the
plumbing is tested there, the times are CPU times.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from heterosim.catalog.models import ZOO, ModelConfig, MoEConfig
from heterosim.config.experiment import ParallelConfig, TrainingConfig
from heterosim.errors import UserError
from heterosim.plan.compute.database import LayerMeasurement
from heterosim.plan.compute.layer_reference import ReferenceLayer, layer_shard
from heterosim.plan.compute.profiler import (
    PROFILED_KINDS,
    ProfileOp,
    SustainedTiming,
    _torch_dtype,
    device_gpu_label,
    import_torch,
    open_for_device,
    record_run,
    resolve_device,
    time_sustained,
)

LAYER_MODES = ("eager", "compile")
LAYER_ARCHES = ("gpt", "llama")
LAYER_DTYPES = ("bf16", "fp16", "fp32")
LAYER_TIMING = SustainedTiming(warm_s=0.3, window_s=0.1)


@dataclass(frozen=True)
class LayerSpec:
    """One layer to time: a model's first layer on one TP rank."""

    model: ModelConfig
    seq: int
    micro_batch: int
    tp: int = 1
    sp: bool = False
    dtype: str = "bf16"

    @property
    def label(self) -> str:
        sp = "-sp" if self.sp else ""
        return f"{self.model.name}-s{self.seq}-b{self.micro_batch}-tp{self.tp}{sp}"

    def check(self) -> None:
        """UserError naming the layer when it cannot be built (unknown kind, shard not dividing,
        a dtype the reference layers do not run)."""
        if self.dtype not in LAYER_DTYPES:
            raise UserError(
                f"profile: layer {self.label}: whole layers are timed in {', '.join(LAYER_DTYPES)}"
                " (fp8 layers need Transformer Engine)"
            )
        if self.model.arch not in LAYER_ARCHES:
            raise UserError(
                f"profile: layer kind {self.model.arch!r} unknown; known: {', '.join(LAYER_ARCHES)}"
            )
        try:
            shard = layer_shard(self.model, self.seq, self.micro_batch, self.tp, self.sp)
        except ValueError as exc:
            raise UserError(f"profile: layer {self.label}: {exc}") from None
        if shard.experts and (self.micro_batch * self.seq) % shard.experts:
            raise UserError(f"profile: layer {self.label}: tokens must divide by the expert count")

    def configs(self) -> tuple[TrainingConfig, ParallelConfig]:
        """The training and parallel settings the simulator's op lists use for this layer."""
        from heterosim.plan.compute.layer_check import single_gpu_parallel

        training = TrainingConfig(
            global_batch=self.micro_batch,
            micro_batch=self.micro_batch,
            seq_len=self.seq,
            dtype=self.dtype,
            recompute="none",
        )
        return training, replace(single_gpu_parallel(), tp=self.tp, sequence_parallel=self.sp)


def _model(name: str, arch: str, hidden: int, heads: int, kv: int, ffn: int, moe: MoEConfig | None = None):
    return ModelConfig(name, arch, hidden, 1, heads, kv, ffn, 50257, 2048, moe, 0.0)


def standard_layers() -> list[LayerSpec]:
    """GPT-2 medium to GPT-3 175B, dense and grouped-query, with and without TP / SP, and one
    MoE layer: the layer shapes of the zoo and of the validation cases, bf16."""
    gpt2_medium = _model("gpt2-medium", "gpt", 1024, 16, 16, 4096)
    gpt2_xl = _model("gpt2-xl", "gpt", 1600, 25, 25, 6400)
    gpt3_1_3b = _model("gpt3-1.3b", "gpt", 2048, 16, 16, 8192)
    return [
        LayerSpec(gpt2_medium, 1024, 8),
        LayerSpec(gpt2_xl, 1024, 4),
        LayerSpec(gpt3_1_3b, 2048, 4),
        LayerSpec(ZOO["gpt3-6.7b"], 2048, 2),
        LayerSpec(ZOO["gpt3-13b"], 2048, 1),
        LayerSpec(ZOO["gpt3-13b"], 2048, 4, tp=2, sp=True),
        LayerSpec(ZOO["gpt3-175b"], 2048, 1, tp=8, sp=True),
        LayerSpec(ZOO["gpt3-175b"], 2048, 1, tp=8),
        LayerSpec(ZOO["gpt3-175b"], 2048, 1, tp=4, sp=True),
        LayerSpec(ZOO["llama3-8b"], 8192, 1),
        LayerSpec(ZOO["llama3-8b"], 4096, 2, tp=2, sp=True),
        LayerSpec(ZOO["llama2-70b"], 4096, 1, tp=8, sp=True),
        LayerSpec(ZOO["llama3-70b"], 8192, 1, tp=4, sp=True),
        LayerSpec(ZOO["llama3-405b"], 8192, 1, tp=8, sp=True),
        LayerSpec(ZOO["mixtral-8x7b"], 4096, 1, tp=1),
    ]


def cpu_layers() -> list[LayerSpec]:
    """Small layers of every kind for a CPU run (plumbing only)."""
    return [
        LayerSpec(_model("tiny-gpt", "gpt", 64, 4, 4, 256), 32, 2, dtype="fp32"),
        LayerSpec(_model("tiny-gpt", "gpt", 64, 4, 4, 256), 32, 2, tp=2, sp=True, dtype="fp32"),
        LayerSpec(_model("tiny-llama", "llama", 64, 4, 2, 192), 32, 2, dtype="fp32"),
        LayerSpec(_model("tiny-llama", "llama", 64, 4, 2, 192), 32, 2, tp=2, sp=True, dtype="fp32"),
        LayerSpec(
            _model(
                "tiny-moe", "llama", 64, 4, 2, 128, MoEConfig(experts=4, top_k=2, expert_ffn=128, every=1)
            ),
            32,
            2,
            dtype="fp32",
        ),
    ]


def check_modes(modes: Sequence[str]) -> None:
    """UserError unless ``modes`` is a non-empty list of :data:`LAYER_MODES`."""
    if not modes or any(m not in LAYER_MODES for m in modes):
        raise UserError(f"profile: --layer-modes must be among {', '.join(LAYER_MODES)}, got {list(modes)}")


def layer_specs(value: str) -> list[LayerSpec] | None:
    """``standard`` -> None (the device's standard set); otherwise an experiment file, whose
    model, sequence, micro-batch, TP degree, sequence parallelism and dtype give one layer."""
    if value == "standard":
        return None
    from heterosim.config.experiment import load_experiment

    exp = load_experiment(value)
    spec = LayerSpec(
        exp.model,
        exp.training.seq_len,
        exp.training.micro_batch,
        exp.parallel.tp,
        exp.parallel.sequence_parallel,
        exp.training.dtype,
    )
    spec.check()
    return [spec]


def device_layers(device: str, specs: Sequence[LayerSpec] | None) -> list[LayerSpec]:
    """``specs``, or the standard set for ``device`` (GPU shapes on cuda, small ones on CPU)."""
    if specs is not None:
        return list(specs)
    return standard_layers() if device == "cuda" else cpu_layers()


def distinct_layer_ops(specs: Sequence[LayerSpec]) -> list[ProfileOp]:
    """The ops of all ``specs``, each distinct op once (what ``--layers`` profiles beside them)."""
    seen: dict[tuple, ProfileOp] = {}
    for spec in specs:
        for op in layer_ops(spec):
            seen.setdefault(
                (op.op_kind, op.dtype, op.shape, op.shape_extra, op.flops, op.bytes_moved, op.pass_), op
            )
    return list(seen.values())


def layer_ops(spec: LayerSpec) -> list[ProfileOp]:
    """The simulator's compute ops of this layer (forward, then backward), as the op profiler
    times them: the list whose sum the layer measurement is compared with."""
    from heterosim.workload import ops as workload_ops

    training, parallel = spec.configs()
    ops = workload_ops.layer_forward_ops(spec.model, training, parallel, 0)
    ops += workload_ops.layer_backward_ops(spec.model, training, parallel, 0)
    return [
        ProfileOp(
            op.op_kind,
            op.dtype,
            op.shape,
            op.shape_extra,
            op.flops,
            op.bytes_moved,
            "bwd" if op.phase == "bwd" else "fwd",
        )
        for op in ops
        if not op.is_comm and op.op_kind in PROFILED_KINDS
    ]


def time_layer(
    torch: Any, spec: LayerSpec, device: str, mode: str, repeats: int, timing: SustainedTiming
) -> tuple[float, float]:
    """(forward ns, backward ns) of one layer, back to back (module docstring)."""
    dtype = _torch_dtype(torch, spec.dtype)
    shard = layer_shard(spec.model, spec.seq, spec.micro_batch, spec.tp, spec.sp)
    layer = ReferenceLayer(torch, shard, device, dtype)
    x = layer.input(device, dtype).requires_grad_(True)
    forward: Callable[[Any], Any] = layer.forward
    if mode == "compile":
        forward = torch.compile(layer.forward, backend="inductor" if device == "cuda" else "aot_eager")
    grad = torch.randn_like(forward(x))

    def fwd() -> None:
        forward(x)

    def fwd_bwd() -> None:
        forward(x).backward(grad)

    # a Python loop, not a CUDA graph: an eager layer's time includes its host's dispatch
    fwd_ns = time_sustained(torch, [fwd], device, repeats, timing, graphs=False)
    both_ns = time_sustained(torch, [fwd_bwd], device, repeats, timing, graphs=False)
    return fwd_ns, max(both_ns - fwd_ns, 0.0)


def profile_layers(
    out: str | Path,
    specs: Sequence[LayerSpec] | None = None,
    *,
    modes: Sequence[str] = ("eager",),
    device: str = "auto",
    repeats: int = 5,
    gpu: str | None = None,
    timing: SustainedTiming = LAYER_TIMING,
    log: Callable[[str], None] = print,
) -> int:
    """Time ``specs`` (default: :func:`standard_layers` on a GPU, :func:`cpu_layers` on CPU) in
    each of ``modes`` and append them to the database at ``out``; returns the rows written."""
    torch = import_torch()
    device = resolve_device(torch, device)
    check_modes(modes)
    specs = device_layers(device, specs)
    for spec in specs:
        spec.check()
    label, raw_name = device_gpu_label(torch, device, gpu)
    db = open_for_device(out, label)
    note = "whole layers" + ("; CPU timings are not GPU timings" if device == "cpu" else "")
    run_id = record_run(db, torch, device, raw_name, label, repeats, note, "sustained")
    rows = []
    for spec in specs:
        dtype = "fp32" if device == "cpu" else spec.dtype
        spec = replace(spec, dtype=dtype)
        for mode in modes:
            fwd_ns, bwd_ns = time_layer(torch, spec, device, mode, repeats, timing)
            times = f"forward {fwd_ns / 1e3:.1f} us, backward {bwd_ns / 1e3:.1f} us"
            log(f"profile: layer {spec.label} {mode}: {times}")
            rows.append(_measurement(label, spec, mode, fwd_ns, bwd_ns))
            if device == "cuda":
                torch.cuda.empty_cache()
    written = db.add_layers(rows, run_id)
    db.close()
    log(f"profile: wrote {written} layer measurements for {label} ({raw_name}, {device}) to {out}")
    return written


def _measurement(gpu: str, spec: LayerSpec, mode: str, fwd_ns: float, bwd_ns: float) -> LayerMeasurement:
    m = spec.model
    moe = m.moe if m.is_moe_layer(0) else None
    return LayerMeasurement(
        gpu=gpu,
        arch=m.arch,
        hidden=m.hidden,
        heads=m.heads,
        kv_heads=m.kv_heads,
        ffn=moe.expert_ffn if moe else m.ffn,
        experts=moe.experts if moe else 0,
        top_k=moe.top_k if moe else 0,
        seq=spec.seq,
        micro_batch=spec.micro_batch,
        tp=spec.tp,
        sp=spec.sp,
        dtype=spec.dtype,
        mode=mode,
        fwd_ns=fwd_ns,
        bwd_ns=bwd_ns,
        label=spec.label,
    )
