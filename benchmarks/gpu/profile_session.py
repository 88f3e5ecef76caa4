"""One GPU session's measurements, in order of value, each step written as soon as it is done.

1. ``contention.json``: compute beside communication-like kernels (``contention_bench.py``).
2. ``layers.db``: the ops of the standard layer set timed back to back (sustained), then the
   whole layers forward and backward in eager mode (``heterosim profile --layers standard``).
3. ``burst.db``: the same ops timed one call at a time (the burst method), for comparison.
4. ``std.db``: the standard op sweep, sustained.
5. whole layers under ``torch.compile`` for a few shapes, while time remains (into ``layers.db``).

Usage on a GPU machine from the repository root: ``python3 benchmarks/gpu/profile_session.py OUT``
(stops starting new steps after ``--budget-s`` seconds).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--budget-s", type=float, default=300.0)
    parser.add_argument("--device", default="cuda", help="cpu: a plumbing check with small shapes")
    parser.add_argument("--skip-contention", action="store_true", help="leave out step 1")
    args = parser.parse_args()
    out = Path(args.out)
    t0 = time.time()

    def left() -> float:
        return args.budget_s - (time.time() - t0)

    def step(name: str) -> None:
        print(f"== {name} at {time.time() - t0:.0f} s", flush=True)

    dev = args.device
    if dev == "cuda":
        query = "--query-gpu=name,memory.total,driver_version,clocks.max.sm,power.limit"
        smi = subprocess.run(
            ["nvidia-smi", query, "--format=csv"], capture_output=True, text=True, check=False
        )
        (out / "smi.txt").write_text(smi.stdout + smi.stderr)
        print(smi.stdout, flush=True)
        if not args.skip_contention:
            step("contention")
            bench = ROOT / "benchmarks/gpu/contention_bench.py"
            subprocess.run([sys.executable, str(bench), str(out / "contention.json")], check=False)

    from heterosim.plan.compute import layer_profiler, profiler

    specs = layer_profiler.device_layers(dev, None)
    ops = layer_profiler.distinct_layer_ops(specs)
    step(f"layer ops sustained ({len(ops)} ops)")
    profiler.profile(out / "layers.db", ops, device=dev, repeats=5, method="sustained")
    step("layers eager")
    layer_profiler.profile_layers(out / "layers.db", specs, modes=("eager",), device=dev, repeats=5)
    if left() > 60:
        step("layer ops burst")
        profiler.profile(out / "burst.db", ops, device=dev, repeats=20, warmup=5, method="burst")
    if left() > 60:
        step("standard sweep sustained")
        profiler.profile(out / "std.db", None, device=dev, repeats=5, method="sustained")
    for spec in [specs[i] for i in (0, 3, 9, 6, 2, 11) if i < len(specs)]:
        if left() < 45:
            break
        step(f"compile {spec.label}")
        try:
            layer_profiler.profile_layers(
                out / "layers.db", [spec], modes=("compile",), device=dev, repeats=5
            )
        except Exception as exc:  # a compiler failure must not lose the other measurements
            print(f"compile {spec.label} failed: {exc!r}", flush=True)
    step("done")


if __name__ == "__main__":
    main()
