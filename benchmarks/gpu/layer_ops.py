"""The simulator's ops of the standard layer set, timed back to back (sustained): bf16 layers, and
fp8 variants of three of them (Transformer Engine's fp8 GEMMs through ``torch._scaled_mm``,
casts as memory-bound kernels). Usage on a GPU, from the repository root:

    python3 benchmarks/gpu/layer_ops.py OUT.db [SWEEP.db]
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from heterosim.plan.compute import layer_profiler, profiler  # noqa: E402


def main(out: str, sweep_out: str | None = None) -> None:
    specs = layer_profiler.standard_layers()
    fp8 = [
        replace(s, dtype="fp8") for s in specs if s.label.startswith(("gpt3-175b", "llama3-8b", "llama3-70b"))
    ]
    ops = layer_profiler.distinct_layer_ops(specs + fp8)
    print(f"{len(ops)} ops", flush=True)
    profiler.profile(out, ops, device="cuda", repeats=5, method="sustained")
    if sweep_out:
        profiler.profile(sweep_out, None, device="cuda", repeats=5, method="sustained")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None)
