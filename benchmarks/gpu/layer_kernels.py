"""Every kernel of one forward + backward of each standard layer, from the PyTorch profiler.

For each layer of :func:`heterosim.plan.compute.layer_profiler.standard_layers` (eager), after a
warm-up of back-to-back steps, three steps run under the profiler; for the middle one the
kernels are listed (name, start, duration, grid). From them: the number of kernels, the sum of
their durations and the span from the first start to the last end, whose difference is the time
the GPU sat idle between kernels. Usage on a GPU, from the repository root:

    python3 benchmarks/gpu/layer_kernels.py OUT.json [standard|heldout|large]
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from heterosim.plan.compute.layer_reference import ReferenceLayer, layer_shard  # noqa: E402


def kernels_of(step) -> list[dict]:
    for _ in range(20):
        step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as prof:
        for _ in range(3):
            step()
        torch.cuda.synchronize()
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        prof.export_chrome_trace(f.name)
        trace = json.load(open(f.name))
    kernels = sorted(
        (ev for ev in trace.get("traceEvents", []) if ev.get("cat") == "kernel"), key=lambda e: float(e["ts"])
    )
    third = len(kernels) // 3
    middle = kernels[third : 2 * third]
    return [
        {
            "name": ev.get("name", "")[:160],
            "ts": float(ev["ts"]),
            "dur": float(ev.get("dur", 0.0)),
            "grid": ev.get("args", {}).get("grid"),
        }
        for ev in middle
    ]


def main(out_path: str, which: str = "standard") -> None:
    sys.path.insert(0, str(ROOT / "benchmarks" / "gpu"))
    from layers_heldout import LAYER_SETS

    result: dict = {"device": torch.cuda.get_device_name(0), "layers": []}
    for spec in LAYER_SETS[which]():
        shard = layer_shard(spec.model, spec.seq, spec.micro_batch, spec.tp, spec.sp)
        layer = ReferenceLayer(torch, shard, "cuda", torch.bfloat16)
        x = layer.input("cuda", torch.bfloat16).requires_grad_(True)
        grad = torch.randn_like(layer.forward(x))
        ks = kernels_of(lambda layer=layer, x=x, grad=grad: layer.forward(x).backward(grad))
        busy = sum(k["dur"] for k in ks)
        span = ks[-1]["ts"] + ks[-1]["dur"] - ks[0]["ts"] if ks else 0.0
        row = {"label": spec.label, "kernels": len(ks), "busy_us": busy, "span_us": span, "list": ks}
        print(
            spec.label,
            len(ks),
            f"busy {busy:.0f} us span {span:.0f} us idle {span - busy:.0f} us",
            flush=True,
        )
        result["layers"].append(row)
        del layer, x, grad
        torch.cuda.empty_cache()
        json.dump(result, open(out_path, "w"), indent=1)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "standard")
