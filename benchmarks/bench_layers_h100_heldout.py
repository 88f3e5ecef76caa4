"""Whole layers no op list, rate or curve was derived from, timed on a second H100 machine.

Data: validation/h100_2026-11-27c/ (one H100 80GB HBM3 SXM, PyTorch 2.11; script
``benchmarks/gpu/session_4.sh``): ten GPU-bound layers (``large``: GPT-2 medium to GPT-3 175B,
Llama 2 7B, Mistral 7B, Llama 3.2 3B, Llama 3 8B and 70B; dense and grouped-query, TP 1-8 with and
without SP), ten small host-bound ones (``heldout``), the 15 standard layers once more (run-to-run
spread), all eager, forward + backward back to back; the ``large`` set also under
``torch.compile`` (inductor fuses the elementwise kernels, as Megatron-core's fused kernels do).
``kernels``: the op lists' kernels (``training.kernels``: ``eager`` as the reference layers run,
or ``fused`` as Megatron-core runs them).
``ops``: the compute model's sum of the layer's ops (shipped H100 profile and curves); ``+ dispatch``:
each pass as the host-issues, GPU-runs pipeline (heterosim.plan.compute.host_dispatch, rates from the
first H100 machine). Signed error %, negative: the model is too fast.
Run: ``python3 benchmarks/bench_layers_h100_heldout.py``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "benchmarks" / "gpu"))

from bench_layers_h100 import layer_sum_us  # noqa: E402
from layers_heldout import LAYER_SETS  # noqa: E402

from heterosim.plan.compute.model import ComputeModel  # noqa: E402

DATA = ROOT / "validation" / "h100_2026-11-27c"
SETS = (  # (name, file, the op lists' kernels: the eager layers' own, or fused for compiled ones)
    ("large", "layers_large.json", "eager"),
    ("large", "layers_large.json", "fused"),
    ("large, torch.compile", "layers_large_compile.json", "fused"),
    ("heldout", "layers_heldout.json", "eager"),
    ("heldout", "layers_heldout.json", "fused"),
    ("standard (third run)", "layers_standard.json", "eager"),
    ("standard (third run)", "layers_standard.json", "fused"),
    ("standard, torch.compile", "layers_standard_compile.json", "fused"),
    ("large, a third H100 (2026-11-27d)", "../h100_2026-11-27d/layers_large.json", "eager"),
    ("large, a third H100 (2026-11-27d)", "../h100_2026-11-27d/layers_large.json", "fused"),
)


def main() -> None:
    model = ComputeModel()
    specs = {s.label: s for make in LAYER_SETS.values() for s in make()}
    print("| set | kernels | layer | measured us | host alone us | ops % | + dispatch % |")
    print("|---|---|---|---:|---:|---:|---:|")
    summary = []
    for name, file, kernels in SETS:
        errors: dict[str, list[float]] = {"ops": [], "dispatch": []}
        for row in json.load(open(DATA / file))["layers"]:
            spec = specs[row["label"]]
            meas = row["fwd_us"] + row["bwd_us"]
            ops_us = layer_sum_us(model, spec, kernels=kernels)
            errors["ops"].append(100 * (ops_us / meas - 1))
            errors["dispatch"].append(100 * (layer_sum_us(model, spec, True, kernels=kernels) / meas - 1))
            host = f"{row['tiny']['fwd_bwd_us']:.0f}" if "tiny" in row else ""
            print(
                f"| {name} | {kernels} | {row['label']} | {meas:.0f} | {host} |"
                f" {errors['ops'][-1]:+.1f} | {errors['dispatch'][-1]:+.1f} |"
            )
        cells = ", ".join(
            f"{k}: MAPE {np.abs(e).mean():.1f} %, mean {np.mean(e):+.1f} %" for k, e in errors.items()
        )
        summary.append(f"{name}, {kernels} (n={len(errors['ops'])}): {cells}")
    print("\n".join(summary))


if __name__ == "__main__":
    main()
