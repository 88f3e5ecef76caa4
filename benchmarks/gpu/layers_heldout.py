"""Layers the host-dispatch and op models were not derived from, timed whole on the GPU.

Ten eager layers (GPT-2 small to GPT-3 2.7B, Llama 3.2 1B and 3B with grouped-query attention)
at micro-batches where the host's dispatch and the GPU's work are of similar size, timed back to
back forward and forward + backward as ``heterosim profile --layers`` does; and each one's tiny
twin (:func:`host_dispatch.tiny`) for its host time alone. Usage on a GPU, from the repository
root:

    python3 benchmarks/gpu/layers_heldout.py OUT.json [heldout|large|standard]

``large``: ten more layers no model was derived from, at the sizes training runs use (GPT-2
medium to GPT-3 175B, dense and grouped-query, TP 1-8 with and without SP).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks" / "gpu"))

from heterosim.plan.compute import layer_profiler as lp  # noqa: E402


def heldout_layers() -> list[lp.LayerSpec]:
    gpt2_small = lp._model("gpt2-small", "gpt", 768, 12, 12, 3072)
    gpt2_medium = lp._model("gpt2-medium", "gpt", 1024, 16, 16, 4096)
    gpt2_large = lp._model("gpt2-large", "gpt", 1280, 20, 20, 5120)
    gpt3_2_7b = lp._model("gpt3-2.7b", "gpt", 2560, 32, 32, 10240)
    llama_1b = lp._model("llama3.2-1b", "llama", 2048, 32, 8, 8192)
    llama_3b = lp._model("llama3.2-3b", "llama", 3072, 24, 8, 8192)
    return [
        lp.LayerSpec(gpt2_small, 1024, 4),
        lp.LayerSpec(gpt2_small, 1024, 16),
        lp.LayerSpec(gpt2_medium, 1024, 1),
        lp.LayerSpec(gpt2_medium, 1024, 2),
        lp.LayerSpec(gpt2_medium, 1024, 4),
        lp.LayerSpec(gpt2_large, 1024, 2),
        lp.LayerSpec(gpt3_2_7b, 2048, 1),
        lp.LayerSpec(llama_1b, 2048, 1),
        lp.LayerSpec(llama_1b, 4096, 2),
        lp.LayerSpec(llama_3b, 4096, 1),
    ]


def large_heldout_layers() -> list[lp.LayerSpec]:
    """Ten layers of models no op list or rate was derived from, GPU-bound sizes."""
    gpt2_medium = lp._model("gpt2-medium", "gpt", 1024, 16, 16, 4096)
    gpt2_large = lp._model("gpt2-large", "gpt", 1280, 20, 20, 5120)
    gpt3_2_7b = lp._model("gpt3-2.7b", "gpt", 2560, 32, 32, 10240)
    gpt3_30b = lp._model("gpt3-30b", "gpt", 7168, 56, 56, 28672)
    llama2_7b = lp._model("llama2-7b", "llama", 4096, 32, 32, 11008)
    mistral_7b = lp._model("mistral-7b", "llama", 4096, 32, 8, 14336)
    llama_3b = lp._model("llama3.2-3b", "llama", 3072, 24, 8, 8192)
    return [
        lp.LayerSpec(gpt2_medium, 1024, 16),
        lp.LayerSpec(gpt2_large, 1024, 8),
        lp.LayerSpec(gpt3_2_7b, 2048, 4),
        lp.LayerSpec(gpt3_30b, 2048, 1, tp=4, sp=True),
        lp.LayerSpec(lp.ZOO["gpt3-175b"], 2048, 2, tp=8, sp=True),
        lp.LayerSpec(llama2_7b, 4096, 1),
        lp.LayerSpec(mistral_7b, 4096, 2, tp=2, sp=True),
        lp.LayerSpec(lp.ZOO["llama3-70b"], 4096, 1, tp=8),
        lp.LayerSpec(llama_3b, 8192, 1),
        lp.LayerSpec(lp.ZOO["llama3-8b"], 2048, 4, tp=4, sp=True),
    ]


LAYER_SETS = {"heldout": heldout_layers, "large": large_heldout_layers, "standard": lp.standard_layers}


def main(out_path: str, which: str = "heldout") -> None:
    """``which``: a name of :data:`LAYER_SETS`."""
    import torch

    specs = LAYER_SETS[which]()
    result: dict = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "layers": []}
    from host_dispatch import measure, tiny

    for spec in specs:
        fwd_ns, bwd_ns = lp.time_layer(torch, spec, "cuda", "eager", 5, lp.LAYER_TIMING)
        row = {
            "label": spec.label,
            "fwd_us": fwd_ns / 1e3,
            "bwd_us": bwd_ns / 1e3,
            "tiny": measure(tiny(spec)),
        }
        print(json.dumps(row), flush=True)
        result["layers"].append(row)
        torch.cuda.empty_cache()
        json.dump(result, open(out_path, "w"), indent=1)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "heldout")
