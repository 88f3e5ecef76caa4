"""Contention across many shapes: each GEMM of the standard layer set, and whole layers.

For every distinct bf16 GEMM of :func:`heterosim.plan.compute.layer_profiler.standard_layers`
it records the kernels cuBLAS launches (name, grid, block, registers, shared memory) and the
time alone and beside 16 copy blocks; for every standard layer (eager, forward + backward) the
time alone and beside 8, 16 and 32 copy blocks. Usage on a GPU, from the repository root:

    python3 benchmarks/gpu/contention_layers.py OUT.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks/gpu"))

import contention_bench as cb  # noqa: E402

from heterosim.plan.compute import layer_profiler  # noqa: E402
from heterosim.plan.compute.layer_reference import ReferenceLayer, layer_shard  # noqa: E402


def main(out_path: str) -> None:
    bg = cb.Background()
    stream = torch.cuda.Stream()
    specs = layer_profiler.standard_layers()
    result: dict = {"device": torch.cuda.get_device_name(0), "gemms": [], "layers": []}
    for spec in specs:
        shard = layer_shard(spec.model, spec.seq, spec.micro_batch, spec.tp, spec.sp)
        layer = ReferenceLayer(torch, shard, "cuda", torch.bfloat16)
        x = layer.input("cuda", torch.bfloat16).requires_grad_(True)
        grad = torch.randn_like(layer.forward(x))

        def step(layer=layer, x=x, grad=grad) -> None:
            layer.forward(x).backward(grad)

        for _ in range(3):
            step()
        torch.cuda.synchronize()
        first = cb.loop_ms(step, 3, stream)
        reps = max(3, min(20, int(60 / first)))
        row = {
            "label": spec.label,
            "reps": reps,
            "ms_alone": cb.beside(step, bg, "copy", 0, reps, first, stream),
        }
        for c in (8, 16, 32):
            row[f"ms_copy_{c}"] = cb.beside(step, bg, "copy", c, reps, row["ms_alone"], stream)
        print(row, flush=True)
        result["layers"].append(row)
        del layer, x, grad
        torch.cuda.empty_cache()
        json.dump(result, open(out_path, "w"), indent=1)
    seen = set()
    for op in layer_profiler.distinct_layer_ops(specs):
        if op.op_kind != "gemm" or op.shape[3] != 1:
            continue
        m, n, k, _ = op.shape
        if (m, n, k) in seen:
            continue
        seen.add((m, n, k))
        fn, _ = cb.gemm_case(m, n, k)
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        first = cb.loop_ms(fn, 5, stream)
        reps = max(5, min(100, int(10 / max(first, 1e-3))))
        alone = cb.beside(fn, bg, "copy", 0, reps, first, stream)
        row = {
            "m": m,
            "n": n,
            "k": k,
            "ms_alone": alone,
            "ms_copy_16": cb.beside(fn, bg, "copy", 16, reps, alone, stream),
        }
        row["kernels"] = cb.kernel_launches(fn)
        result["gemms"].append(row)
        json.dump(result, open(out_path, "w"), indent=1)
    print(f"{len(result['gemms'])} GEMM shapes", flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
