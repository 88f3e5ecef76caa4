"""Compute-bound ops under a board power limit below the GPU's default.

A training step keeps the GPU at its power limit: the firmware lowers the SM clock until the
board's power meets the limit (NVML's "SW power cap" clock-event reason, read on an H100 in
``validation/h100_2026-11-27d/`` and an H200 in ``validation/h200_2026-11-27c/``). The shipped
rates were measured at the default limit (``tdp_w``), at the clock compute-bound work sustains
there (``clock_at_tdp_mhz``). Under a lower limit the clock ``f`` solves

    P_floor + (P_tdp - P_floor) * (V(f) / V(f_tdp))^2 * (f / f_tdp) = limit

where ``P_floor`` is the board's power busy with almost no switching, the dynamic power of
compute-bound work is its energy per operation (proportional to the square of the core voltage)
times its rate (proportional to the clock), and ``V(f) / V(f_max) = 1 - k (1 - f / f_max)``
(the voltage slope ``k`` fitted to NVML readings of GEMMs and a layer at several duties,
``benchmarks/bench_power_limit.py``). Compute-bound ops then take ``f_tdp / f`` times as long;
memory-bound ones keep their time (the memory clock held at 2619 MHz (H100) and 3201 MHz (H200)
in every phase measured).

APPROXIMATION: the clock is the one at which compute-bound work alone draws the limit; a step's
memory-bound phases draw less, and the firmware averages over them, so a step with a large
memory-bound share runs its compute-bound ops at a somewhat higher clock (whole layers at the
700 W cap: 1,454-1,529 MHz on the H100 and 1,584-1,589 on the H200, against 1,364 and 1,494 for
back-to-back GEMMs). The voltage line is measured from 1238 (H100) and 1358 MHz (H200) to
1980 MHz and extrapolated below; the floor is held at its 1980 MHz value (lower at lower clocks,
which would make the clock under a limit higher); and a part sold with a lower default limit
(an HBM2e H100) is taken to follow the 700 W part's curve, its memory's lower power not counted.
"""

from __future__ import annotations

from heterosim.catalog.gpus import GpuSpec, PowerCurve, power_curve
from heterosim.errors import UserError

_BISECTION_STEPS = 60


def _voltage(curve: PowerCurve, mhz: float) -> float:
    """Core voltage relative to the voltage at the maximum clock."""
    return 1.0 - curve.voltage_slope * (1.0 - mhz / curve.max_clock_mhz)


def dynamic_power_ratio(curve: PowerCurve, mhz: float) -> float:
    """Dynamic power of compute-bound work at ``mhz`` relative to its power at the default limit."""
    f0 = curve.clock_at_tdp_mhz
    return (_voltage(curve, mhz) / _voltage(curve, f0)) ** 2 * (mhz / f0)


def clock_ratio_under_limit(curve: PowerCurve, limit_w: float) -> float:
    """SM clock under ``limit_w`` relative to the clock at the default limit (1 at or above it)."""
    if limit_w >= curve.tdp_w:
        return 1.0
    target = (limit_w - curve.floor_w) / (curve.tdp_w - curve.floor_w)
    if target <= 0.0:
        raise UserError(
            f"power_limit_w: {limit_w:g} W is at or below the {curve.name}'s busy floor"
            f" of {curve.floor_w:g} W"
        )
    low, high = 0.0, curve.clock_at_tdp_mhz
    for _ in range(_BISECTION_STEPS):  # the ratio rises monotonically with the clock
        mid = 0.5 * (low + high)
        if dynamic_power_ratio(curve, mid) < target:
            low = mid
        else:
            high = mid
    return 0.5 * (low + high) / curve.clock_at_tdp_mhz


def compute_slowdown(spec: GpuSpec) -> float:
    """Factor on the time of compute-bound ops of ``spec`` under its ``power_limit_w`` (1 if none)."""
    if spec.power_limit_w is None:
        return 1.0
    curve = power_curve(spec.name)
    if curve is None:  # the cluster file's check names the key; this guards other callers
        raise UserError(f"power_limit_w: no measured clock-power curve for GPU {spec.name}")
    return 1.0 / clock_ratio_under_limit(curve, spec.power_limit_w)
