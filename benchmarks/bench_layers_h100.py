"""Whole transformer layers timed on an H100 against the compute model's sum of their ops.

Data: validation/h100_2026-11-27/ (one H100 80GB HBM3 SXM, PyTorch 2.11): 15 reference layers
(``heterosim.plan.compute.layer_profiler.standard_layers``, eager, forward + backward back to
back, two sessions: ``layers.db`` and ``layers_repeat.db``, their mean is the measurement) and
the same layers' ops timed back to back in CUDA graphs (``layer_ops_graphs.db``, shipped as
``heterosim/plan/compute/data/measured/h100-sxm-sustained-2026-11-27.db``).

Columns, each the compute model's per-layer sum of forward + backward op times against the
measured layer (signed error %, negative: the model is too fast):

- ``publications``: the compute model without the shipped profile (the model before it);
- ``shipped``: the default model (the profile's own ops: measured);
- ``leave-one-out``: the profile without every op that only this layer has, so the layer's
  own ops are timed by the H100 curves the other layers' ops calibrate (the honest figure for
  a layer shape the profile does not hold);
- ``+ dispatch``: each pass as the host-issues, GPU-runs pipeline (heterosim.plan.compute.host_dispatch);
- ``eager``: the op lists as plain PyTorch runs them (``training.kernels: eager``,
  heterosim.workload.ops_eager), like the reference layers: separate RoPE and SwiGLU kernels,
  gradients accumulated by autograd.

Run: ``python3 benchmarks/bench_layers_h100.py``.
"""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from dataclasses import replace
from pathlib import Path

import numpy as np

from heterosim.config.experiment import HostDispatch
from heterosim.plan.compute import layer_profiler as lp
from heterosim.plan.compute.database import OpDatabase
from heterosim.plan.compute.host_dispatch import pipelined_pass_ns
from heterosim.plan.compute.layer_gap import layer_op_lists
from heterosim.plan.compute.model import ComputeModel

COLUMNS = (
    "publications",
    "shipped",
    "leave-one-out",
    "shipped + dispatch",
    "leave-one-out + dispatch",
    "eager",
    "eager + dispatch",
)
DATA = Path(__file__).resolve().parents[1] / "validation" / "h100_2026-11-27"
GPU = "H100-SXM"


def layer_sum_us(
    model: ComputeModel, spec: lp.LayerSpec, dispatch: bool = False, gpu: str = GPU, kernels: str = "fused"
) -> float:
    """The model's forward + backward time of the layer in us; with ``dispatch``, each pass runs
    as the host-issues, GPU-runs pipeline of heterosim.plan.compute.host_dispatch."""
    training, parallel = spec.configs()
    training = replace(training, kernels=kernels)
    host = HostDispatch()
    total = 0.0
    passes = layer_op_lists(spec.model, training, parallel)
    for ops, per_op in zip(passes, host.per_op_ns(spec.model.arch, kernels)):
        gpu_ns = np.array(
            [
                model.time_op(o.op_kind, o.dtype, o.shape, o.shape_extra, o.flops, o.bytes_moved, gpu)[0]
                for o in ops
            ]
        )
        if dispatch and per_op * len(ops) > gpu_ns.sum():  # host-bound: the launch queue
            one_pass = np.zeros(len(ops), int)
            total += float(pipelined_pass_ns(one_pass, gpu_ns, np.array([float(per_op)]))[1][0])
        else:
            total += float(gpu_ns.sum())
    return total / 1e3


def measured_us() -> dict[str, float]:
    runs = []
    for name in ("layers.db", "layers_repeat.db"):
        db = OpDatabase(DATA / name)
        runs.append({m.label: (m.fwd_ns + m.bwd_ns) / 1e3 for m in db.layers() if m.mode == "eager"})
        db.close()
    return {label: (runs[0][label] + runs[1][label]) / 2 for label in runs[0]}


def leave_one_out_model(spec: lp.LayerSpec, specs: list[lp.LayerSpec]) -> tuple[ComputeModel, int]:
    """The profile without the ops only ``spec`` has, as a user database (shipped one off)."""
    keep = {
        (o.op_kind, o.dtype, o.shape, o.shape_extra, o.bytes_moved)
        for other in specs
        if other.label != spec.label
        for o in lp.layer_ops(other)
    }
    tmp = Path(tempfile.mkdtemp()) / "loo.db"
    shutil.copy(DATA / "layer_ops_graphs.db", tmp)
    conn = sqlite3.connect(tmp)
    rows = conn.execute("SELECT id, op_kind, dtype, s0, s1, s2, s3, e0, e1, bytes_moved FROM measurements")
    drop = [(r[0],) for r in rows if (r[1], r[2], tuple(r[3:7]), tuple(r[7:9]), r[9]) not in keep]
    conn.executemany("DELETE FROM measurements WHERE id = ?", drop)
    conn.commit()
    conn.close()
    return ComputeModel([tmp], profiled=False), len(drop)


def main() -> None:
    specs = lp.standard_layers()
    measured = measured_us()
    before, shipped = ComputeModel(profiled=False), ComputeModel()
    errors: dict[str, list[float]] = {k: [] for k in COLUMNS}
    print("| layer | measured us | " + " | ".join(f"{k} %" for k in COLUMNS) + " |")
    print("|---|---:|" + "---:|" * len(COLUMNS))
    for spec in specs:
        meas = measured[spec.label]
        loo, _ = leave_one_out_model(spec, specs)
        row = {
            "publications": layer_sum_us(before, spec),
            "shipped": layer_sum_us(shipped, spec),
            "leave-one-out": layer_sum_us(loo, spec),
            "shipped + dispatch": layer_sum_us(shipped, spec, dispatch=True),
            "leave-one-out + dispatch": layer_sum_us(loo, spec, dispatch=True),
            "eager": layer_sum_us(shipped, spec, kernels="eager"),
            "eager + dispatch": layer_sum_us(shipped, spec, dispatch=True, kernels="eager"),
        }
        for key, value in row.items():
            errors[key].append(100 * (value / meas - 1))
        cells = " | ".join(f"{errors[k][-1]:+.1f}" for k in row)
        print(f"| {spec.label} | {meas:.0f} | {cells} |")
    for key, e in errors.items():
        arr = np.array(e)
        dense = np.array([x for x, s in zip(e, specs) if not s.model.moe])
        print(
            f"{key}: MAPE {np.abs(arr).mean():.1f} %, mean {arr.mean():+.1f} %"
            f" (dense only: MAPE {np.abs(dense).mean():.1f} %, mean {dense.mean():+.1f} %)"
        )


if __name__ == "__main__":
    main()
