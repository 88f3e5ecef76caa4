"""Profile (sustained) the ops of the standard layer set that the shipped H100 database lacks,
e.g. after the op lists gained an op. Usage on a GPU, from the repository root:

    python3 benchmarks/gpu/missing_ops.py OUT.db
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from heterosim.plan.compute import layer_profiler, profiler  # noqa: E402
from heterosim.plan.compute.database import OpDatabase, shipped_measured_databases  # noqa: E402


def missing_ops() -> list[profiler.ProfileOp]:
    have = set()
    for path in shipped_measured_databases():
        db = OpDatabase(path)
        have |= {(m.op_kind, m.dtype, m.shape, m.shape_extra, m.bytes_moved) for m in db.measurements()}
        db.close()
    specs = layer_profiler.standard_layers()
    fp8 = [
        replace(s, dtype="fp8") for s in specs if s.label.startswith(("gpt3-175b", "llama3-8b", "llama3-70b"))
    ]
    ops = layer_profiler.distinct_layer_ops(specs + fp8)
    return [op for op in ops if (op.op_kind, op.dtype, op.shape, op.shape_extra, op.bytes_moved) not in have]


if __name__ == "__main__":
    todo = missing_ops()
    print(f"{len(todo)} ops missing", flush=True)
    if todo:
        profiler.profile(sys.argv[1], todo, device="cuda", repeats=5, method="sustained")
