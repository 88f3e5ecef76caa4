"""Where a layer's modelled time sits against the kernels it ran, per kind of op.

Each reference layer's kernels from one profiled forward + backward on an H100
(``validation/h100_2026-11-27/layer_kernels.json``, the standard layers;
``validation/h100_2026-11-27c/layer_kernels_large.json``, the held-out ones) are grouped by kind
(GEMM: ``nvjet``/CUTLASS kernels; attention: cuDNN's fused attention kernels; norm: LayerNorm and
RMSNorm kernels; other: every elementwise, copy and reduction kernel) and set against the
compute model's ops of that kind in the eager op lists (``training.kernels: eager``, the kernels
the reference runs). Signed error % per kind, negative: the model is faster than the kernels.
Run: ``python3 benchmarks/bench_layer_kernels.py``.
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks" / "gpu"))

from layers_heldout import LAYER_SETS  # noqa: E402

from heterosim.plan.compute.layer_gap import layer_op_lists  # noqa: E402
from heterosim.plan.compute.model import ComputeModel  # noqa: E402

KINDS = ("gemm", "attention", "norm", "other")
TRACES = (
    ("standard", ROOT / "validation" / "h100_2026-11-27" / "layer_kernels.json"),
    ("held out", ROOT / "validation" / "h100_2026-11-27c" / "layer_kernels_large.json"),
)


def kernel_kind(name: str) -> str:
    if name.startswith("nvjet") or "gemm" in name.lower() or "cutlass" in name:
        return "gemm"
    if "sdpa" in name or "cudnn" in name or "flash" in name:
        return "attention"
    if "layer_norm" in name or "GammaBeta" in name or "rms_norm" in name.lower():
        return "norm"
    return "other"


def modelled_us(model: ComputeModel, spec) -> dict[str, float]:
    training, parallel = spec.configs()
    out = dict.fromkeys(KINDS, 0.0)
    for ops in layer_op_lists(spec.model, replace(training, kernels="eager"), parallel):
        for o in ops:
            kind = o.op_kind if o.op_kind in KINDS else "other"
            out[kind] += (
                model.time_op(o.op_kind, o.dtype, o.shape, o.shape_extra, o.flops, o.bytes_moved, "H100-SXM")[
                    0
                ]
                / 1e3
            )
    return out


def main() -> None:
    model = ComputeModel()
    specs = {s.label: s for make in LAYER_SETS.values() for s in make()}
    print("| set | layer | " + " | ".join(f"{k} %" for k in KINDS) + " |")
    print("|---|---|" + "---:|" * len(KINDS))
    for name, path in TRACES:
        errors: dict[str, list[float]] = {k: [] for k in KINDS}
        for layer in json.load(open(path))["layers"]:
            measured = dict.fromkeys(KINDS, 0.0)
            for k in layer["list"]:
                measured[kernel_kind(k["name"])] += k["dur"]
            mine = modelled_us(model, specs[layer["label"]])
            cells = []
            for kind in KINDS:
                err = 100 * (mine[kind] / measured[kind] - 1) if measured[kind] > 0 else float("nan")
                errors[kind].append(err)
                cells.append(f"{err:+.1f}")
            print(f"| {name} | {layer['label']} | " + " | ".join(cells) + " |")
        means = ", ".join(f"{k} {np.nanmean(v):+.1f} %" for k, v in errors.items())
        print(f"{name}: mean per kind: {means}")


if __name__ == "__main__":
    main()
