"""The host's dispatch time per kernel of an eager layer, apart from the GPU's time.

Each standard layer (:func:`heterosim.plan.compute.layer_profiler.standard_layers`) is rebuilt
with the same structure (architecture, heads to key/value heads ratio, experts, TP and SP) but
tiny dimensions, so that its kernels take a few microseconds each: run back to back, forward
and forward + backward, the loop then runs at the rate the host issues kernels. The script
records that time per layer pass and the number of kernels a pass launches (PyTorch profiler),
and, for the full-size layer, its kernels' busy time (so the two regimes can be compared).
Usage on a GPU, from the repository root:

    python3 benchmarks/gpu/host_dispatch.py OUT.json
"""

from __future__ import annotations

import json
import platform
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from heterosim.plan.compute import layer_profiler  # noqa: E402
from heterosim.plan.compute.layer_reference import ReferenceLayer, layer_shard  # noqa: E402

TINY_HEAD_DIM = 16
TINY_SEQ = 64


def tiny(spec: layer_profiler.LayerSpec) -> layer_profiler.LayerSpec:
    """The layer with its structure kept and its sizes cut to a few thousand elements."""
    m = spec.model
    heads = 8 * spec.tp
    kv = max(spec.tp, heads * m.kv_heads // m.heads)
    hidden = heads * TINY_HEAD_DIM
    moe = m.moe
    if moe is not None:
        moe = replace(moe, expert_ffn=2 * hidden)
    model = replace(m, hidden=hidden, heads=heads, kv_heads=kv, ffn=4 * hidden, moe=moe)
    return replace(spec, model=model, seq=TINY_SEQ * spec.tp, micro_batch=1)


def loop_us(step, seconds: float = 0.4) -> float:
    """Mean microseconds per call of ``step`` run back to back (synchronised at the ends)."""
    for _ in range(10):
        step()
    torch.cuda.synchronize()
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        step()
        n += 1
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / n * 1e6


def kernels(step) -> tuple[int, float]:
    """(kernels one call launches, their summed GPU time in us) from the PyTorch profiler."""
    step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        prof.export_chrome_trace(f.name)
        trace = json.load(open(f.name))
    ks = [ev for ev in trace.get("traceEvents", []) if ev.get("cat") == "kernel"]
    return len(ks), sum(float(ev.get("dur", 0.0)) for ev in ks)


def measure(spec: layer_profiler.LayerSpec) -> dict:
    shard = layer_shard(spec.model, spec.seq, spec.micro_batch, spec.tp, spec.sp)
    layer = ReferenceLayer(torch, shard, "cuda", torch.bfloat16)
    x = layer.input("cuda", torch.bfloat16).requires_grad_(True)
    grad = torch.randn_like(layer.forward(x))

    def fwd() -> None:
        layer.forward(x)

    def fwd_bwd() -> None:
        layer.forward(x).backward(grad)

    k_f, busy_f = kernels(fwd)
    k_fb, busy_fb = kernels(fwd_bwd)
    row = {
        "fwd_us": loop_us(fwd),
        "fwd_bwd_us": loop_us(fwd_bwd),
        "kernels_fwd": k_f,
        "kernels_fwd_bwd": k_fb,
        "busy_fwd_us": busy_f,
        "busy_fwd_bwd_us": busy_fb,
    }
    with torch.no_grad():
        row["fwd_nograd_us"] = loop_us(fwd)
    return row


def main(out_path: str) -> None:
    result: dict = {
        "device": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "cpu": platform.processor() or platform.machine(),
        "layers": [],
    }
    try:
        result["cpu_model"] = next(
            line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")
        )
    except (OSError, StopIteration):
        pass
    for spec in layer_profiler.standard_layers():
        small = tiny(spec)
        row = {"label": spec.label, "tiny": measure(small)}
        print(spec.label, json.dumps(row["tiny"]), flush=True)
        result["layers"].append(row)
        torch.cuda.empty_cache()
        json.dump(result, open(out_path, "w"), indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
