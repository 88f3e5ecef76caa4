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
``--mechanisms`` evaluates wave mechanisms built from the GPU's layout instead of the fitted wave
term (:func:`mechanism`, not shipped; benchmarks/HISTORY.md "Cluster slots and tile rounds") on
every set, and prints how far the same GEMMs measured in two sessions differ.
Run: ``python3 benchmarks/bench_contention.py [--fit] [--persistent] [--mechanisms]``.
"""

from __future__ import annotations

import argparse
import json
import math
import re
from collections.abc import Callable
from pathlib import Path

import numpy as np

from heterosim.catalog.gpus import gpu_spec
from heterosim.plan.compute import contention as model
from heterosim.plan.compute.efficiency import default_params, gemm_tile_count
from heterosim.workload.ops_base import OpSpec

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


GemmFactor = Callable[[int, int, int, int], float]  # (m, n, k, blocks) -> slowdown


def errors(points: list[tuple], factor: GemmFactor = predicted) -> np.ndarray:
    return np.array([factor(m, n, k, b) - s for m, n, k, b, s, _ in points])


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


def kernel_mix(label: str) -> dict[str, float]:
    """Shares of a standard layer's busy GPU time in GEMM, fused-attention and other kernels
    (``layer_kernels.json``, one profiled forward + backward)."""
    layer = next(
        x for x in json.loads((DATA / "layer_kernels.json").read_text())["layers"] if x["label"] == label
    )
    gemm = sum(k["dur"] for k in layer["list"] if "nvjet" in k["name"] or "gemm" in k["name"].lower())
    attention = sum(k["dur"] for k in layer["list"] if "sdpa" in k["name"] or "flash" in k["name"])
    busy = layer["busy_us"]
    return {"gemm": gemm / busy, "attention": attention / busy, "other": 1.0 - (gemm + attention) / busy}


def whole_layers(
    gemm: GemmFactor | None = None, measured_mix: bool = False
) -> list[tuple[str, int, float, float]]:
    """Whole layers (eager, fwd + bwd) beside copy blocks: (label, blocks, measured, predicted),
    the prediction weighting each op's factor by its profiled time (``gemm(m, n, k, blocks)``
    replaces the shipped factor of unbatched GEMMs when given; ``measured_mix`` weights the
    GEMM, attention and other ops' mean factors by the layer's measured :func:`kernel_mix`)."""
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
        times = np.array(
            [
                compute.time_op(o.op_kind, o.dtype, o.shape, o.shape_extra, o.flops, o.bytes_moved, GPU)[0]
                for o in ops
            ]
        )
        kinds = np.array([o.op_kind if o.op_kind in ("gemm", "attention") else "other" for o in ops])
        mix = kernel_mix(row["label"]) if measured_mix else {}

        def factor(o: OpSpec, b: int) -> float:
            m, n, k, batch = (int(x) for x in o.shape[:4]) if o.op_kind == "gemm" else (0, 0, 0, 0)
            if gemm is not None and o.op_kind == "gemm" and batch <= 1:
                return gemm(m, n, k, b)
            return model.slowdown(o.op_kind, o.shape, spec, params, b)

        for b in (8, 16, 32):
            slowed = times * np.array([factor(o, b) for o in ops])
            if mix:
                pred = sum(
                    share
                    * (slowed[kinds == c].sum() / times[kinds == c].sum() if (kinds == c).any() else 1.0)
                    for c, share in mix.items()
                )
            else:
                pred = slowed.sum() / times.sum()
            out.append((row["label"], b, row[f"ms_copy_{b}"] / row["ms_alone"], float(pred)))
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


# H100 SXM5: 8 GPCs, 66 TPCs of 2 SMs (NVIDIA, "NVIDIA Hopper Architecture In-Depth", 2022); the
# TPCs per GPC are uneven and not published (NVIDIA/cutlass issue #1921), but every GPC holds whole
# TPCs, so an even number of SMs, which is all that clusters of 2 CTAs depend on.
H100_GPCS = 8
CLUSTER = 2  # every recorded nvjet_sm90 kernel but two runs clusters of 2 CTAs (``_1x2_``, ``_2x1_``)
LOST_RULES = ("per block", "cluster pairs")
ROUND_RULES = ("drain", "late start")


def lost_sms(blocks: int, rule: str, sms: int = 132, gpcs: int = H100_GPCS) -> int:
    """SMs a persistent GEMM cannot use beside ``blocks`` single-CTA blocks: the blocks' own
    SMs ("per block"), or ("cluster pairs") with the blocks spread round-robin over the GPCs
    (an assumption: where the CTA scheduler puts them is not documented) and one more SM lost
    in every GPC left with an odd number of free SMs, since a cluster's CTAs run on SMs of one
    GPC (CUDA C++ Programming Guide, "Thread Block Clusters")."""
    if rule == "per block":
        return min(blocks, sms)
    per_gpc = [blocks // gpcs + (1 if g < blocks % gpcs else 0) for g in range(gpcs)]
    return min(sum(b + b % CLUSTER for b in per_gpc), sms)


def mechanism(tiles: int, grid: int, blocks: int, lost_rule: str, round_rule: str, sms: int = 132) -> float:
    """Slowdown of a persistent GEMM of ``tiles`` equal tiles on ``grid`` CTAs beside ``blocks``
    blocks, in tile rounds: ``running`` = SMs left, ``waiting`` = the CTAs beyond them; "drain"
    takes ceil(tiles / running) rounds (the CTAs take tiles from a shared counter, waiting CTAs
    find none left), "late start" ceil((tiles - waiting) / running) + 1 (each CTA's first tile
    is its own: the waiting CTAs run theirs after the others drained the counter,
    :func:`persistent`). Never below the SM share 1 / (1 - blocks / SMs)."""
    share = 1.0 / (1.0 - min(blocks / sms, 0.9))
    running = max(sms - lost_sms(blocks, lost_rule, sms), 1)
    waiting = max(min(grid, tiles) - running, 0)
    if blocks <= 0 or waiting == 0:
        return share if blocks > 0 else 1.0
    if round_rule == "drain":
        rounds = math.ceil(tiles / running)
    else:
        rounds = math.ceil((tiles - waiting) / running) + 1
    return max(rounds / math.ceil(tiles / min(grid, tiles)), share)


def recorded_tiles() -> dict[tuple[int, int, int], tuple[int, int]]:
    """(tiles, grid) of the nvjet kernel recorded for each GEMM shape of this session."""
    out = {}
    rows = json.loads((DATA / "contention_layers.json").read_text())["gemms"]
    rows += [c for c in json.loads((DATA / "contention.json").read_text())["cases"] if c["kind"] == "gemm"]
    for r in rows:
        m, n, k = (r["m"], r["n"], r["k"]) if "m" in r else r["shape"]
        kern = r["kernels"][0]
        found = re.search(r"_(\d+)x(\d+)_\d+x\d+_\d+x\d+_", kern["name"])
        if found:
            tiles = math.ceil(m / int(found.group(1))) * math.ceil(n / int(found.group(2)))
            out[(m, n, k)] = (tiles, int(np.prod(kern["grid"])))
    return out


def mechanisms_reading() -> None:
    """Every lost-SM and round rule on every set, against the shipped wave term; then the same
    four GEMMs as measured in two sessions (what a 5-point target can resolve)."""
    spec = gpu_spec(GPU)
    params = default_params(GPU, spec)
    known = recorded_tiles()
    loops, held = gemm_points()

    def factor_of(lost_rule: str, round_rule: str) -> GemmFactor:
        def factor(m: int, n: int, k: int, blocks: int) -> float:
            tiles, grid = known.get((m, n, k), (gemm_tile_count(m, n, 1, params), params.sm_count))
            return mechanism(tiles, grid, blocks, lost_rule, round_rule)

        return factor

    print(
        "wave mechanisms from the GPU's layout (tiles and grid of the recorded kernel, else the roofline's):"
    )
    print(
        f"  {'rule':28s} overlap.json n={len(held)}     loops n={len(loops)}        "
        "layers n=45 (op times; kernel mix)"
    )
    candidates: list[tuple[str, GemmFactor | None]] = [("shipped wave term", None)]
    candidates += [(f"{lr} / {rr}", factor_of(lr, rr)) for lr in LOST_RULES for rr in ROUND_RULES]
    for name, fn in candidates:
        e_held = errors(held, fn or predicted)
        e_loops = errors(loops, fn or predicted)
        e_layers = np.array([p - s for _, _, s, p in whole_layers(fn)])
        e_mix = np.array([p - s for _, _, s, p in whole_layers(fn, measured_mix=True)])
        print(
            f"  {name:28s} MAE {100 * np.mean(np.abs(e_held)):4.1f} worst {100 * np.max(np.abs(e_held)):4.1f}"
            f"  MAE {100 * np.mean(np.abs(e_loops)):4.1f} mean {100 * np.mean(e_loops):+5.1f}"
            f"  MAE {100 * np.mean(np.abs(e_layers)):4.1f} mean {100 * np.mean(e_layers):+5.1f};"
            f" {100 * np.mean(np.abs(e_mix)):4.1f} {100 * np.mean(e_mix):+5.1f}"
        )
        if fn is not None:
            rows = [
                f"{label.replace('gpt175b-tp8-', '')[:6]}/{b}: {s:.2f} {s + e:.2f}"
                for (*_, b, s, label), e in zip(held, e_held)
            ]
            print("      overlap.json measured / rule: " + ", ".join(rows))
    cases = json.loads((DATA / "contention.json").read_text())["cases"]
    again = {(c["shape"][0], c["shape"][1], c["shape"][2]): c for c in cases if c["kind"] == "gemm"}
    diffs = []
    for m, n, k, b, s, _ in held:
        c = again[(m, n, k)]
        diffs.append(abs(s - c[f"ms_copy_{b}"] / c["ms_alone"]))
    print(
        f"the same {len(held)} GEMM points measured again (contention.json, next day, 512-thread blocks): "
        f"mean |difference| {100 * np.mean(diffs):.1f} points, max {100 * np.max(diffs):.1f}"
    )
    print(
        "extra tile rounds beside 4 / 8 / 16 / 32 copy blocks (contention.json; a round: time alone / "
        "ceil(tiles / grid)):"
    )
    for (m, n, k), c in again.items():
        tiles, grid = known[(m, n, k)]
        per_round = c["ms_alone"] / math.ceil(tiles / grid)
        extra = " ".join(f"{(c[f'ms_copy_{b}'] - c['ms_alone']) / per_round:+5.2f}" for b in (4, 8, 16, 32))
        spin = " ".join(f"{c[f'ms_spin_{b}'] / c['ms_alone']:.3f}" for b in (8, 16, 32))
        print(
            f"  {c['label']:18s} {tiles:5d} tiles {tiles / params.sm_count:5.2f} waves: {extra}"
            f"   (slowdown beside 8/16/32 spin blocks {spin})"
        )


def report(name: str, e: np.ndarray) -> None:
    mae, mean, worst = 100 * np.mean(np.abs(e)), 100 * np.mean(e), 100 * np.max(np.abs(e))
    print(f"{name}: n={e.size} MAE {mae:.1f} points, mean {mean:+.1f}, max |e| {worst:.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fit", action="store_true", help="grid-search WAVE_TAIL_A and WAVE_TAIL_P first")
    parser.add_argument("--persistent", action="store_true", help="also the persistent-kernel reading")
    parser.add_argument(
        "--mechanisms", action="store_true", help="also the cluster-slot and tile-round rules"
    )
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
    if args.mechanisms:
        mechanisms_reading()


if __name__ == "__main__":
    main()
