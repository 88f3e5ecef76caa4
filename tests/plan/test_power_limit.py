"""Compute-bound ops under a board power limit: the clock-power curve, its data, its errors."""

from __future__ import annotations

import importlib.util
import statistics
from dataclasses import replace
from pathlib import Path

import pytest

from heterosim.catalog.gpus import gpu_spec, power_curve
from heterosim.config.cluster import parse_cluster
from heterosim.errors import UserError
from heterosim.plan.compute.model import ComputeModel
from heterosim.plan.compute.power_limit import clock_ratio_under_limit, compute_slowdown, dynamic_power_ratio

ROOT = Path(__file__).resolve().parents[2]
H100 = power_curve("H100-SXM")


def test_the_clock_under_a_limit_meets_the_limit() -> None:
    assert H100 is not None
    assert clock_ratio_under_limit(H100, 700.0) == 1.0
    ratios = [clock_ratio_under_limit(H100, w) for w in (650.0, 500.0, 300.0)]
    assert ratios == sorted(ratios, reverse=True) and all(0 < r < 1 for r in ratios)
    for limit, ratio in zip((650.0, 500.0, 300.0), ratios):
        mhz = ratio * H100.clock_at_tdp_mhz
        power = H100.floor_w + (H100.tdp_w - H100.floor_w) * dynamic_power_ratio(H100, mhz)
        assert power == pytest.approx(limit, rel=1e-9)


@pytest.mark.parametrize("gpu, runs_at_tdp", [("H100-SXM", 2), ("H200-SXM", 2)])
def test_the_curve_is_the_fit_of_the_shipped_measurements(gpu: str, runs_at_tdp: int) -> None:
    """The catalogue's constants are what benchmarks/bench_power_limit.py derives from the NVML
    readings in validation/h100_2026-11-27d/ and h200_2026-11-27c/ (nothing else feeds them)."""
    curve = power_curve(gpu)
    assert curve is not None
    spec = importlib.util.spec_from_file_location(
        "bench_power_limit", ROOT / "benchmarks" / "bench_power_limit.py"
    )
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    rows = bench.phases(gpu)
    k, points = bench.fit_voltage_slope(rows)
    assert len(points) >= 8 and curve.voltage_slope == pytest.approx(k, abs=0.005)
    floors = sorted({r[4] for r in rows})
    assert floors[0] - 0.5 <= curve.floor_w <= floors[-1] + 0.5
    at_tdp = bench.clocks_at_tdp(rows)
    assert len(at_tdp) == runs_at_tdp
    assert curve.clock_at_tdp_mhz == pytest.approx(statistics.mean(at_tdp), abs=1)


def test_the_h200_sustains_a_higher_clock_at_the_same_limit() -> None:
    """Measured: at 700 W the H200's back-to-back bf16 GEMM holds 1494 MHz, the H100's 1364; so
    the same lower limit costs the H200 less of its (already measured-at-the-cap) speed."""
    h200 = power_curve("H200-SXM")
    assert H100 is not None and h200 is not None
    assert h200.clock_at_tdp_mhz > H100.clock_at_tdp_mhz
    h100_mhz = H100.clock_at_tdp_mhz * clock_ratio_under_limit(H100, 500.0)
    h200_mhz = h200.clock_at_tdp_mhz * clock_ratio_under_limit(h200, 500.0)
    assert h200_mhz > h100_mhz
    capped = replace(gpu_spec("H200-SXM"), power_limit_w=500.0)
    assert compute_slowdown(capped) == pytest.approx(1 / clock_ratio_under_limit(h200, 500.0))
    assert 1.2 < compute_slowdown(capped) < 1.4


def test_compute_bound_ops_slow_and_memory_bound_ones_do_not() -> None:
    capped = replace(gpu_spec("H100-SXM"), power_limit_w=500.0)
    slowdown = compute_slowdown(capped)
    assert 1.2 < slowdown < 1.45
    plain = ComputeModel(include_shipped=False)
    limited = ComputeModel(include_shipped=False, gpus={"H100-SXM": capped})
    s = 8192
    gemm = ("gemm", "bf16", (s, s, s, 1), (0, 0), 2 * s**3, 3 * 2 * s * s)
    norm = ("norm", "bf16", (8192, 4096, 0, 0), (0, 0), 5 * 8192 * 4096, 3 * 2 * 8192 * 4096)
    base, _ = plain.time_op(*gemm, "H100-SXM")
    assert limited.time_op(*gemm, "H100-SXM")[0] == pytest.approx(base * slowdown, abs=1)
    assert limited.time_op(*norm, "H100-SXM") == plain.time_op(*norm, "H100-SXM")
    assert compute_slowdown(gpu_spec("H100-SXM")) == 1.0
    assert not any("power limit" in line for line in plain.notes())
    (note,) = [line for line in limited.notes() if "power limit" in line]
    assert note.startswith("H100-SXM: power limit 500 W: compute-bound ops run x1.33 as long")


H100_ENTRY = {
    "tflops": {"bf16": 989, "fp8": 1979},
    "memory_gb": 96,
    "memory_tbps": 2.4,
    "nvlink_gbps_per_dir": 450,
    "pcie_gen": 5,
}


def _cluster(name: str, entry: dict) -> dict:
    return {
        "name": "c",
        "gpus": {name: entry},
        "host_types": {"h": {"gpu": name, "gpus": 8, "nics": 8, "nic_speed": "400Gbps"}},
        "hosts": [{"type": "h", "count": 1}],
    }


def test_a_cluster_gpu_takes_a_power_limit_and_says_so() -> None:
    cluster = parse_cluster(_cluster("H100-SXM", {**H100_ENTRY, "power_limit_w": 500}), "c.yaml")
    assert cluster.host(0).spec.power_limit_w == 500.0
    assert any("power_limit_w" in note for note in cluster.notes)


@pytest.mark.parametrize(
    "name, limit, problem",
    [
        ("A100-80GB-SXM", 300, "no measured clock-power curve for GPU A100-80GB-SXM"),
        ("MyGPU", 300, "no measured clock-power curve for GPU MyGPU"),
        ("H100-SXM", 150, ">= 200"),
        ("H100-SXM", 800, "<= 700"),
        ("H100-SXM", "low", "expected a number"),
    ],
)
def test_bad_power_limits_are_one_line_errors(name: str, limit: object, problem: str) -> None:
    with pytest.raises(UserError) as info:
        parse_cluster(_cluster(name, {**H100_ENTRY, "power_limit_w": limit}), "c.yaml")
    message = str(info.value)
    assert message.startswith(f"c.yaml: gpus.{name}.power_limit_w: ") and problem in message
    assert "\n" not in message
