"""A GPU's clock-power curve, derived from NVML readings of sustained kernels, and what a
power limit below 700 W does to compute-bound ops under it.

Reads ``power_clock.json`` and ``power_dvfs.json`` (``benchmarks/gpu/power_clock.py``) of an H100
80GB HBM3 (``validation/h100_2026-11-27d/``) or an H200 SXM (``validation/h200_2026-11-27c/``),
each at its default 700 W limit. For each phase that runs a
kernel at a duty ``d`` (the kernel's share of the time), the kernel's own power above the busy
floor is ``(P - P_floor) / d`` and its dynamic energy per call ``E = that x its time``. Energy
per switching event scales with the square of the core voltage, so ``E(f) / E(f_ref)`` traces
``(V(f) / V(f_ref))^2``; the voltage is taken as linear in the clock, ``V(f) / V(f_max) =
1 - k (1 - f / f_max)``, and ``k`` is the least-squares fit over every phase below 1,800 MHz
(bf16 and fp8 products, a whole Llama 3 8B layer). The values printed are the ones
``heterosim/catalog/gpus.yaml`` (``power_curves``) holds for that GPU. Usage::

    python3 benchmarks/bench_power_limit.py [--gpu H100-SXM|H200-SXM]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from heterosim.catalog.gpus import power_curve  # noqa: E402
from heterosim.plan.compute.power_limit import clock_ratio_under_limit  # noqa: E402

DATA = {
    "H100-SXM": ROOT / "validation" / "h100_2026-11-27d",
    "H200-SXM": ROOT / "validation" / "h200_2026-11-27c",
}
F_MAX = 1980.0  # NVML max SM clock of both parts (each file's static section)
DUTY_ONE = 0.95  # a phase whose kernel fills at least this share of the time runs back to back
FIT_BELOW_MHZ = 1800.0


def phases(gpu: str = "H100-SXM") -> list[tuple[str, str, float, float, float, float]]:
    """(run, workload, MHz, dynamic energy per call in mJ, floor W, duty) of every duty phase."""
    rows = []
    for run, name in (("run 1", "power_clock.json"), ("run 2", "power_dvfs.json")):
        data = json.loads((DATA[gpu] / name).read_text())
        floor = next(p for p in data["phases"] if p["phase"] == "sleep")["energy_power_w"]
        for p in data["phases"]:
            if "kernel_ms_median" not in p or p["phase"] in ("copy", "gemm_zeros"):
                continue
            duty = p["kernel_ms_median"] / p["step_ms"]
            workload = p["phase"].split(" duty")[0]
            workload = {"gemm": "gemm_bf16", "fp8": "gemm_fp8"}.get(workload, workload)
            if workload.startswith("duty_"):
                workload = "gemm_bf16"
            energy = (p["energy_power_w"] - floor) / duty * p["kernel_ms_median"]
            rows.append((run, workload, float(p["sm_mhz"]), energy, floor, duty))
    return rows


def clocks_at_tdp(rows) -> list[float]:
    """The SM clock of the bf16 GEMM run back to back (at the default limit), one per run."""
    return [r[2] for r in rows if r[1] == "gemm_bf16" and r[5] >= DUTY_ONE]


def fit_voltage_slope(rows) -> tuple[float, list[tuple[str, str, float, float]]]:
    """k, and (run, workload, MHz, sqrt energy ratio to the same workload's fastest phase)."""
    points = []
    for run, workload in sorted({(r[0], r[1]) for r in rows}):
        mine = [r for r in rows if r[0] == run and r[1] == workload]
        ref = max(mine, key=lambda r: r[2])
        for r in mine:
            if r is ref or r[2] > FIT_BELOW_MHZ:
                continue
            points.append((run, workload, r[2], ref[2], (r[3] / ref[3]) ** 0.5))
    ks = np.linspace(0.0, 1.0, 10001)

    def residual(k: float) -> float:
        err = 0.0
        for _, _, f, fref, ratio in points:
            model = (1 - k * (1 - f / F_MAX)) / (1 - k * (1 - fref / F_MAX))
            err += (model - ratio) ** 2
        return err

    k = float(ks[int(np.argmin([residual(x) for x in ks]))])
    return k, [(p[0], p[1], p[2], p[4]) for p in points]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", choices=sorted(DATA), default="H100-SXM")
    gpu = parser.parse_args().gpu
    rows = phases(gpu)
    k, points = fit_voltage_slope(rows)
    print("| run | workload | SM MHz | sqrt(E / E at its fastest phase) | linear-voltage model |")
    print("|---|---|---:|---:|---:|")
    for run, workload, f, ratio in points:
        fref = max(r[2] for r in rows if r[0] == run and r[1] == workload)
        model = (1 - k * (1 - f / F_MAX)) / (1 - k * (1 - fref / F_MAX))
        print(f"| {run} | {workload} | {f:.0f} | {ratio:.3f} | {model:.3f} |")
    floors = [r[4] for r in rows]
    gemm_tdp = clocks_at_tdp(rows)
    print(f"\n{gpu}: voltage slope k = {k:.2f} ({len(points)} phases below {FIT_BELOW_MHZ:.0f} MHz)")
    print(
        f"busy floor = {min(floors):.0f}-{max(floors):.0f} W; bf16 GEMM clock at 700 W = {gemm_tdp} MHz"
        f" (mean {statistics.mean(gemm_tdp):.0f})"
    )
    curve = power_curve(gpu)
    assert curve is not None
    held = f"k = {curve.voltage_slope}, floor = {curve.floor_w} W"
    print(f"catalogue: {held}, clock at TDP = {curve.clock_at_tdp_mhz} MHz")
    print("\n| power limit W | SM clock MHz (compute-bound work) | compute-bound op time x |")
    print("|---:|---:|---:|")
    for limit in (700, 650, 600, 550, 500, 450, 400, 350, 300):
        ratio = clock_ratio_under_limit(curve, float(limit))
        print(f"| {limit} | {curve.clock_at_tdp_mhz * ratio:.0f} | {1 / ratio:.3f} |")


if __name__ == "__main__":
    main()
