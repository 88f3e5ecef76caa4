"""The communication kernel beside compute: how long it waits for SMs, how fast it then runs.

A copy kernel of 8, 16 or 32 blocks (:mod:`contention_bench`'s, 512 threads per block as NCCL's
collective kernels) moves a fixed amount of data on a side stream in two orders:

- ``comm_first``: the copy starts on an idle GPU, then compute kernels are queued back to back
  on the other stream (the copy's blocks are resident before the compute arrives);
- ``compute_first``: compute kernels are already running back to back when the copy is launched
  (its blocks wait until SMs free up).

The PyTorch profiler's kernel timeline gives, for the copy, its launch-to-start delay and its
running time, and for the compute, each kernel's time beside the copy, against each alone.
Compute: a persistent 8192^3 bf16 GEMM (132 CTAs), a 2048x6144x12288 GEMM, causal attention
forward. Usage on a GPU, from the repository root:

    python3 benchmarks/gpu/comm_beside_compute.py OUT.json
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parent))

from contention_bench import Background, attention_case, gemm_case  # noqa: E402

PASSES = 4


def timeline(run) -> list[dict]:
    with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as prof:
        run()
        torch.cuda.synchronize()
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        prof.export_chrome_trace(f.name)
        trace = json.load(open(f.name))
    events = trace.get("traceEvents", [])
    launches = {
        ev.get("args", {}).get("correlation"): float(ev["ts"])
        for ev in events
        if ev.get("cat") == "cuda_runtime" and "LaunchKernel" in ev.get("name", "")
    }
    out = []
    for ev in events:
        if ev.get("cat") != "kernel":
            continue
        corr = ev.get("args", {}).get("correlation")
        out.append(
            {
                "name": ev.get("name", "")[:80],
                "start": float(ev["ts"]),
                "dur": float(ev.get("dur", 0.0)),
                "launch": launches.get(corr),
            }
        )
    return sorted(out, key=lambda k: k["start"])


def scenario(bg: Background, fn, blocks: int, order: str, compute_ms: float, stream) -> dict:
    copy_ms = bg.unit_ms("copy", blocks) * PASSES
    reps = int(1.5 * copy_ms / max(compute_ms, 1e-3)) + 4

    def run() -> None:
        torch.cuda.synchronize()
        if order == "comm_first":
            bg.launch("copy", blocks, PASSES)
            time.sleep(0.0005)
        with torch.cuda.stream(stream):
            for _ in range(reps):
                fn()
        if order == "compute_first":
            time.sleep(0.0005)
            bg.launch("copy", blocks, PASSES)

    run()  # warm-up
    ks = timeline(run)
    copies = [k for k in ks if "copy_kernel" in k["name"]]
    compute = [k for k in ks if "copy_kernel" not in k["name"]]
    c = copies[-1]
    c_end = c["start"] + c["dur"]
    beside = [k["dur"] for k in compute if k["start"] < c_end and k["start"] + k["dur"] > c["start"]]
    return {
        "copy_alone_us": copy_ms * 1e3,
        "copy_run_us": c["dur"],
        "copy_wait_us": c["start"] - c["launch"] if c["launch"] is not None else None,
        "compute_kernels_beside": len(beside),
        "compute_beside_us_median": sorted(beside)[len(beside) // 2] if beside else None,
    }


def compute_alone_us(fn, stream) -> float:
    ks = timeline(lambda: [fn() for _ in range(10)])
    durs = sorted(k["dur"] for k in ks)
    return durs[len(durs) // 2]


def main(out_path: str) -> None:
    bg = Background()
    stream = torch.cuda.Stream()
    cases = {
        "gemm8192": gemm_case(8192, 8192, 8192)[0],
        "gemm2048x6144x12288": gemm_case(2048, 6144, 12288)[0],
        "attn_fwd_b1s8192h32": attention_case(1, 8192, 32, 128, False)[0],
    }
    result: dict = {"device": torch.cuda.get_device_name(0), "passes": PASSES, "cases": []}
    for name, fn in cases.items():
        alone = compute_alone_us(fn, stream)
        for blocks in (8, 16, 32):
            for order in ("comm_first", "compute_first"):
                row = {"compute": name, "compute_alone_us": alone, "blocks": blocks, "order": order}
                row.update(scenario(bg, fn, blocks, order, alone / 1e3, stream))
                print(json.dumps(row), flush=True)
                result["cases"].append(row)
                json.dump(result, open(out_path, "w"), indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
