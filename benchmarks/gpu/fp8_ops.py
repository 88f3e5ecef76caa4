"""fp8 GEMMs timed as Transformer Engine runs them: forward with fast accumulation, gradients
with split accumulation (:mod:`heterosim.plan.compute.profiler`), sustained.

The op list: the fp8 GEMMs of the H100 fp8 experiments of ``validation/cases.yaml`` (written out
to ``benchmarks/gpu/fp8_experiments/``) and of the fp8 standard layers. Each forward GEMM is
also timed with split accumulation, the same way, so the two can be compared shape by shape.
Usage on a GPU, from the repository root:

    python3 benchmarks/gpu/fp8_ops.py OUT.db OUT.json
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from heterosim.plan.compute import layer_profiler, profiler  # noqa: E402


def fp8_gemms() -> list[profiler.ProfileOp]:
    ops: set[profiler.ProfileOp] = set()
    for path in sorted((ROOT / "benchmarks" / "gpu" / "fp8_experiments").glob("*.yaml")):
        ops |= set(profiler.experiment_ops(path))
    specs = layer_profiler.standard_layers()
    fp8 = [
        replace(s, dtype="fp8") for s in specs if s.label.startswith(("gpt3-175b", "llama3-8b", "llama3-70b"))
    ]
    ops |= set(layer_profiler.distinct_layer_ops(fp8))
    keep = [op for op in ops if op.dtype == "fp8" and op.op_kind == "gemm"]
    return sorted(keep, key=lambda op: (op.pass_, op.shape))


def main(db: str, out_json: str) -> None:
    ops = fp8_gemms()
    print(f"{len(ops)} fp8 GEMMs", flush=True)
    profiler.profile(db, ops, device="cuda", repeats=5, method="sustained")
    timing = profiler.SustainedTiming()
    rows = []
    for op in ops:
        if op.pass_ != "fwd":
            continue
        m, n, k, batch = op.shape
        pair = {}
        for fast in (True, False):
            run = profiler.fp8_gemm_runner(torch, m, n, k, batch, "cuda", fast_accum=fast)
            if run is None:
                break
            pair["fast" if fast else "split"] = profiler.time_sustained(torch, [run], "cuda", 5, timing)
        if len(pair) == 2:
            rows.append({"m": m, "n": n, "k": k, "fast_ns": pair["fast"], "split_ns": pair["split"]})
            print(m, n, k, f"fast {pair['fast']:.0f} ns split {pair['split']:.0f} ns", flush=True)
        json.dump({"device": torch.cuda.get_device_name(0), "forward": rows}, open(out_json, "w"), indent=1)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
