"""Compute beside communication kernels: the contention model against H100 microbenchmarks.

Data (all measured on H100 80GB HBM3 SXM, see validation/h100_2026-11-27/ and
validation/h100_2026-11-26/):

- calibration: the shipped ``overlap.json`` (4 GEMMs, 40 back-to-back calls beside 8, 16 and 32
  copy blocks);
- held out: whole layers forward + backward beside 8, 16 and 32 copy blocks
  (``contention_layers.json`` "layers"), predicted from the profiled ops of each layer (the
  shipped H100 database) with the per-op factor; the attention and LayerNorm rows of
  ``contention.json``; and this session's isolated GEMM loops (``contention_layers.json``
  "gemms" beside 16 blocks, ``contention.json`` GEMMs beside 4-32), which read slower than the
  same shapes inside whole layers.

``--fit`` grid-searches the two wave constants on the calibration set (what set
``heterosim/plan/compute/contention.py``'s WAVE_TAIL_A and WAVE_TAIL_P); without it the shipped
constants are evaluated. ``--persistent`` also prints a reading of the isolated loops that the
shipped model does not use: cuBLAS's persistent kernels (the nvjet kernel names in
``contention_layers.json``: grid = the SMs, tile from the name) whose CTAs left without an SM run
their first tile only after the running CTAs have drained the tile counter (:func:`persistent`).
Run: ``python3 benchmarks/bench_contention.py [--fit] [--persistent]``.
"""

from __future__ import annotations

import argparse
import json
import math
import re
from pathlib import Path

import numpy as np

from heterosim.catalog.gpus import gpu_spec
from heterosim.plan.compute import contention as model
from heterosim.plan.compute.efficiency import default_params

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "validation" / "h100_2026-11-27"
SHARED = ROOT / "validation" / "h100_2026-11-26" / "overlap.json"
GPU = "H100-SXM"


def gemm_points() -> tuple[list[tuple], list[tuple]]:
    """(calibration, held-out) GEMM points: (m, n, k, blocks, measured slowdown, label)."""
    calib = []
    layers = json.loads((DATA / "contention_layers.json").read_text())
    for g in layers["gemms"]:
        calib.append((g["m"], g["n"], g["k"], 16, g["ms_copy_16"] / g["ms_alone"], "layer GEMM"))
    cases = json.loads((DATA / "contention.json").read_text())
    for c in cases["cases"]:
        if c["kind"] == "gemm":
            for b in (4, 8, 16, 32):
                calib.append((*c["shape"], b, c[f"ms_copy_{b}"] / c["ms_alone"], c["label"]))
    held = []
    if SHARED.is_file():
        for g in json.loads(SHARED.read_text())["gemm"]:
            for b in (8, 16, 32):
                held.append(
                    (g["m"], g["n"], g["k"], b, g[f"ms_with_{b}_blocks"] / g["ms_with_0_blocks"], g["label"])
                )
    return calib, held


def predicted(m: int, n: int, k: int, blocks: int) -> float:
    spec = gpu_spec(GPU)
    return model.slowdown("gemm", (m, n, k, 1), spec, default_params(GPU, spec), blocks)


def errors(points: list[tuple]) -> np.ndarray:
    return np.array([predicted(m, n, k, b) - s for m, n, k, b, s, _ in points])


def fit(points: list[tuple]) -> tuple[float, float, float]:
    best = (np.inf, 0.0, 0.0)
    for a in np.arange(0.3, 2.01, 0.02):
        for p in np.arange(0.2, 1.51, 0.02):
            model.WAVE_TAIL_A, model.WAVE_TAIL_P = float(a), float(p)
            e = float(np.mean(np.abs(errors(points))))
            if e < best[0]:
                best = (e, float(a), float(p))
    return best


def other_kernels() -> list[tuple[str, int, float, float]]:
    """Attention and LayerNorm rows of contention.json: (label, blocks, measured, predicted)."""
    spec = gpu_spec(GPU)
    params = default_params(GPU, spec)
    out = []
    for c in json.loads((DATA / "contention.json").read_text())["cases"]:
        if c["kind"] == "gemm":
            continue
        kind = "attention" if c["kind"].startswith("attention") else "norm"
        shape = tuple(c["shape"]) + (0,) * (4 - len(c["shape"]))
        for b in (4, 8, 16, 32):
            out.append(
                (
                    f"{c['kind']} {c['label']}",
                    b,
                    c[f"ms_copy_{b}"] / c["ms_alone"],
                    model.slowdown(kind, shape, spec, params, b),
                )
            )
    return out


def whole_layers() -> list[tuple[str, int, float, float]]:
    """Whole layers (eager, fwd + bwd) beside copy blocks: (label, blocks, measured, predicted),
    the prediction weighting each op's factor by its profiled time."""
    from heterosim.plan.compute import layer_profiler as lp
    from heterosim.plan.compute.model import ComputeModel
    from heterosim.workload import ops as wo

    spec = gpu_spec(GPU)
    params = default_params(GPU, spec)
    compute = ComputeModel()
    specs = {s.label: s for s in lp.standard_layers()}
    out = []
    for row in json.loads((DATA / "contention_layers.json").read_text())["layers"]:
        s = specs[row["label"]]
        training, parallel = s.configs()
        ops = [
            op
            for op in wo.layer_forward_ops(s.model, training, parallel, 0)
            + wo.layer_backward_ops(s.model, training, parallel, 0)
            if not op.is_comm
        ]
        times = [
            compute.time_op(o.op_kind, o.dtype, o.shape, o.shape_extra, o.flops, o.bytes_moved, GPU)[0]
            for o in ops
        ]
        for b in (8, 16, 32):
            slowed = sum(t * model.slowdown(o.op_kind, o.shape, spec, params, b) for o, t in zip(ops, times))
            out.append((row["label"], b, row[f"ms_copy_{b}"] / row["ms_alone"], slowed / sum(times)))
    return out


def persistent(tiles: int, grid: int, blocks: int, sms: int = 132) -> float:
    """Slowdown of a persistent GEMM of ``tiles`` output tiles on ``grid`` CTAs beside
    ``blocks`` SM-holding blocks, if the CTAs that find no SM start only after the running ones
    have taken every other tile, then run their own first tile: ceil((tiles - waiting) /
    running) + 1 tile times against ceil(tiles / grid) alone. Tiles are taken as equally long
    (a wave reading, not a timing model)."""
    running = min(grid, sms - blocks)
    waiting = grid - running
    rounds = math.ceil((tiles - waiting) / running) + (1 if waiting else 0)
    return rounds / math.ceil(tiles / grid)


def persistent_reading() -> None:
    """The isolated loops beside 16 copy blocks against :func:`persistent`, by waves."""
    rows = []
    for g in json.loads((DATA / "contention_layers.json").read_text())["gemms"]:
        found = re.search(r"_(\d+)x(\d+)_\d+x\d+_\d+x\d+_", g["kernels"][0]["name"])
        if not found:
            continue
        tiles = math.ceil(g["m"] / int(found.group(1))) * math.ceil(g["n"] / int(found.group(2)))
        grid = int(np.prod(g["kernels"][0]["grid"]))
        rows.append((tiles / 132, g["ms_copy_16"] / g["ms_alone"], persistent(tiles, grid, 16)))
    print(f"persistent-kernel reading of the isolated loops beside 16 blocks (n={len(rows)}):")
    for low, high in ((0, 1.5), (1.5, 2.5), (2.5, 3.5), (3.5, 4.5), (4.5, 6.5), (6.5, 10), (10, 100)):
        sel = [(m, p) for w, m, p in rows if low <= w < high]
        if sel:
            measured, model_s = np.array(sel).T
            print(
                f"  waves {low:4.1f}-{high:5.1f}: n={len(sel):3d} measured {measured.min():.2f}-"
                f"{measured.max():.2f} reading {model_s.min():.2f}-{model_s.max():.2f} "
                f"(mean error {100 * np.mean(model_s - measured):+.1f} points)"
            )


def report(name: str, e: np.ndarray) -> None:
    mae, mean, worst = 100 * np.mean(np.abs(e)), 100 * np.mean(e), 100 * np.max(np.abs(e))
    print(f"{name}: n={e.size} MAE {mae:.1f} points, mean {mean:+.1f}, max |e| {worst:.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fit", action="store_true", help="grid-search WAVE_TAIL_A and WAVE_TAIL_P first")
    parser.add_argument("--persistent", action="store_true", help="also the persistent-kernel reading")
    args = parser.parse_args()
    loops, held = gemm_points()
    if args.fit:
        mae, a, p = fit(held)
        print(f"fit on {len(held)} overlap.json points: A={a:.2f} P={p:.2f} (MAE {100 * mae:.1f} points)")
        model.WAVE_TAIL_A, model.WAVE_TAIL_P = a, p
    print(f"constants: A={model.WAVE_TAIL_A} P={model.WAVE_TAIL_P}")
    report("held out: isolated GEMM loops (H100, this session)", errors(loops))
    if held:
        e = errors(held)
        report("calibration: overlap.json GEMMs (H100, earlier session)", e)
        for (m, n, k, b, s, label), err in zip(held, e):
            shape = f"{m}x{n}x{k}"
            model_s = s + err
            print(f"  {label:18s} {shape:16s} blocks {b:2d}: measured {s:.3f} model {model_s:.3f}")
    rows = other_kernels()
    report("held out: attention and LayerNorm beside copy blocks", np.array([p - s for _, _, s, p in rows]))
    for label, b, s, p in rows:
        print(f"  {label:36s} blocks {b:2d}: measured {s:.3f} model {p:.3f}")
    rows = whole_layers()
    report("held out: whole layers beside copy blocks", np.array([p - s for _, _, s, p in rows]))
    for label, b, s, p in rows:
        print(f"  {label:30s} blocks {b:2d}: measured {s:.3f} model {p:.3f} ({100 * (p - s):+.0f})")
    if args.persistent:
        persistent_reading()


if __name__ == "__main__":
    main()
