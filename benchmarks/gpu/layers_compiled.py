"""A layer set (``large``, the held-out one, by default, or ``standard``) under ``torch.compile``
(inductor fuses the elementwise kernels, as Megatron-core's fused RoPE, SwiGLU and bias-GeLU
do), timed back to back like the eager ones.
Usage on a GPU, from the repository root:

    python3 benchmarks/gpu/layers_compiled.py OUT.json [large|standard]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks" / "gpu"))

from layers_heldout import LAYER_SETS  # noqa: E402

from heterosim.plan.compute import layer_profiler as lp  # noqa: E402


def main(out_path: str, which: str = "large") -> None:
    import torch

    result: dict = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "layers": []}
    for spec in LAYER_SETS[which]():
        fwd_ns, bwd_ns = lp.time_layer(torch, spec, "cuda", "compile", 5, lp.LAYER_TIMING)
        row = {"label": spec.label, "mode": "compile", "fwd_us": fwd_ns / 1e3, "bwd_us": bwd_ns / 1e3}
        print(json.dumps(row), flush=True)
        result["layers"].append(row)
        torch._dynamo.reset()
        torch.cuda.empty_cache()
        json.dump(result, open(out_path, "w"), indent=1)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "large")
