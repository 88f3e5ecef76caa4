"""Whole layers timed on an H200 against the compute model, with and without host dispatch.

Data: validation/h200_2026-11-27/ (ten held-out layers and the 15 standard layers, eager, forward
+ backward back to back). The compute model has no H200 profile: its ops come from publication
figures and same-generation scaling. ``+ dispatch``: each layer pass lasts at least the host's
eager dispatch time (heterosim.plan.compute.host_dispatch, rates measured on the H100 machine).
Signed error %, negative: the model is too fast. Run: ``python3 benchmarks/bench_layers_h200.py``.
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
from layers_heldout import heldout_layers  # noqa: E402

from heterosim.plan.compute import layer_profiler as lp  # noqa: E402
from heterosim.plan.compute.model import ComputeModel  # noqa: E402

DATA = ROOT / "validation" / "h200_2026-11-27"
GPU = "H200-SXM"


def main() -> None:
    model = ComputeModel()
    specs = {s.label: s for s in lp.standard_layers() + heldout_layers()}
    print(
        "| set | layer | measured us | host alone us | ops % | + dispatch % |\n|---|---|---:|---:|---:|---:|"
    )
    summary = []
    for name in ("heldout", "standard"):
        rows = json.load(open(DATA / f"layers_{name}.json"))["layers"]
        errors: dict[str, list[float]] = {"ops": [], "dispatch": []}
        for row in rows:
            spec = specs[row["label"]]
            meas = row["fwd_us"] + row["bwd_us"]
            errors["ops"].append(100 * (layer_sum_us(model, spec, gpu=GPU) / meas - 1))
            errors["dispatch"].append(100 * (layer_sum_us(model, spec, dispatch=True, gpu=GPU) / meas - 1))
            print(
                f"| {name} | {row['label']} | {meas:.0f} | {row['tiny']['fwd_bwd_us']:.0f} |"
                f" {errors['ops'][-1]:+.1f} | {errors['dispatch'][-1]:+.1f} |"
            )
        for key, e in errors.items():
            arr = np.array(e)
            summary.append(f"{name} {key}: MAPE {np.abs(arr).mean():.1f} %, mean {arr.mean():+.1f} %")
    print("\n".join(summary))


if __name__ == "__main__":
    main()
