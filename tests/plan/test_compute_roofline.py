"""Roofline bounds and the shape of the efficiency curves."""

import itertools

import pytest

from heterosim.catalog.gpus import gpu_spec
from heterosim.plan.compute.efficiency import (
    attention_efficiency,
    default_params,
    gemm_efficiency,
    gemm_quantization,
)
from heterosim.plan.compute.roofline import roofline_time_ns

GPUS = ["V100-SXM2-32GB", "A100-80GB-SXM", "H100-SXM", "H20", "L40S", "B200", "MI300X"]


@pytest.mark.parametrize("gpu", GPUS)
def test_gemm_time_at_least_flops_over_peak(gpu):
    spec, params = gpu_spec(gpu), default_params(gpu)
    for m, n, k in itertools.product([1, 64, 1000, 4096, 16384], [128, 3000, 12288], [64, 4096]):
        flops = 2 * m * n * k
        moved = 2 * (m * k + k * n + m * n)
        t = roofline_time_ns("gemm", "fp16", (m, n, k, 1), (0, 0), flops, moved, spec, params)
        assert t * 1e-9 >= flops / spec.peak_flops("fp16")
        assert t * 1e-9 >= moved / spec.memory_bytes_per_s


@pytest.mark.parametrize("gpu", GPUS)
@pytest.mark.parametrize("kind", ["norm", "elementwise", "softmax_loss", "embedding", "optimizer"])
def test_memory_bound_time_at_least_bytes_over_bandwidth(gpu, kind):
    spec, params = gpu_spec(gpu), default_params(gpu)
    for moved in [1, 10**4, 10**6, 10**8, 10**10]:
        t = roofline_time_ns(
            kind,
            "bf16" if spec.peak_tflops.get("bf16") else "fp16",
            (moved // 4, 0, 0, 0),
            (0, 0),
            moved // 2,
            moved,
            spec,
            params,
        )
        assert t * 1e-9 >= moved / spec.memory_bytes_per_s
        assert t >= params.launch_overhead_ns  # the documented fixed cost per op


def test_efficiencies_never_exceed_one_and_respect_envelope():
    for gpu in GPUS:
        p = default_params(gpu)
        for m, n, k, b in itertools.product([7, 128, 4096, 50000], [128, 4096], [16, 8192], [1, 8]):
            e = gemm_efficiency(p, "bf16", m, n, k, b)
            assert 0 < e <= p.gemm_ceiling("bf16") <= 1
        for s, d, c, bwd in itertools.product([128, 2048, 65536], [64, 128, 256], [0, 1], [0, 1]):
            assert 0 < attention_efficiency(p, s, d, bool(c), bool(bwd)) <= 1
    # The MAMF best-shape envelope (case mamf-bf16-h100-sxm: 0.803) caps H100 bf16 GEMMs.
    assert default_params("H100-SXM").gemm_ceiling("bf16") == pytest.approx(0.803)


def test_v100_gemm_follows_the_published_cublas_measurement():
    """NVIDIA forum t/79781: cuBLAS fp16 8192^3 on a V100 PCIe, ~101 TFLOP/s (90 % of 112 TF).

    The model's own 8192^3 GEMM must land within 5 % below that measurement and never above it;
    the SXM2 parts take the same fraction of their 125 TF peak (a transfer, stated in the data)."""
    n = 8192
    for gpu, measured_tflops in (("V100-PCIe-16GB", 101.0), ("V100-SXM2-32GB", 0.902 * 125)):
        spec, params = gpu_spec(gpu), default_params(gpu)
        assert params.gemm_ceiling("fp16") == pytest.approx(0.902)
        flops = 2 * n**3
        t = roofline_time_ns("gemm", "fp16", (n, n, n, 1), (0, 0), flops, 6 * n * n, spec, params)
        tflops = flops / t / 1e3
        assert 0.95 * measured_tflops <= tflops <= measured_tflops


def test_a100_gemm_follows_the_published_sustained_measurements():
    """Two published 8192^3 GEMMs on random data, back to back, on an A100 SXM4: 257 TFLOP/s
    (thonking.ai, cuBLAS via PyTorch) and 230 TFLOP/s (mli/transformers-benchmarks, fp16). Their
    mean fraction of the 312 TF peak is the ceiling of both 16-bit types, below the MAMF burst
    envelope (0.869), which stays the bound of fits; the model's own 8192^3 lands within 5 %
    below the measurements' mean and never above it. The 300 W PCIe card is bounded by the same
    figure, not by its higher burst row."""
    n, measured_tflops = 8192, (257.0 + 230.0) / 2
    for gpu in ("A100-80GB-SXM", "A100-40GB-SXM"):
        spec, params = gpu_spec(gpu), default_params(gpu)
        for dtype in ("bf16", "fp16"):
            assert params.gemm_ceiling(dtype) == pytest.approx(measured_tflops / 312, abs=1e-3)
            assert params.gemm_bound(dtype) == pytest.approx(0.869)
            assert "sustained" in params.sources[f"gemm_max_efficiency.{dtype}"]
        flops = 2 * n**3
        t = roofline_time_ns("gemm", "bf16", (n, n, n, 1), (0, 0), flops, 6 * n * n, spec, params)
        assert 0.95 * measured_tflops <= flops / t / 1e3 <= measured_tflops
    pcie = default_params("A100-80GB-PCIe")
    assert pcie.gemm_ceiling("bf16") == pytest.approx(measured_tflops / 312, abs=1e-3)
    assert pcie.gemm_ceiling("bf16") < pcie.gemm_bound("bf16")


def test_sustained_rows_never_lift_a_ceiling_above_the_burst_envelope():
    for gpu in GPUS + ["A100-80GB-PCIe", "V100-PCIe-16GB", "T4-16GB-PCIe"]:
        p = default_params(gpu)
        for dtype, ceiling in p.gemm_max_by_dtype.items():
            assert ceiling <= p.gemm_bound(dtype) + 1e-12


def test_wave_quantization_one_tile_over_a_full_wave_costs_a_second_wave():
    p = default_params("H100-SXM")
    tiles = [(128, 128, 1.0)]
    full = gemm_quantization(128 * 132, 128, 1, p.sm_count, tiles)
    over = gemm_quantization(128 * 133, 128, 1, p.sm_count, tiles)
    assert full == pytest.approx(1.0)
    assert over == pytest.approx(133 / 264)


def test_tile_quantization_penalises_ragged_shapes():
    p = default_params("A100-80GB-SXM")
    even = gemm_efficiency(p, "bf16", 8192, 8192, 4096, 1)
    ragged = gemm_efficiency(p, "bf16", 8192 + 1, 8192 + 1, 4096, 1)
    assert ragged < even


def test_attention_efficiency_grows_with_sequence_and_head_dim():
    p = default_params("A100-80GB-SXM")
    seqs = [attention_efficiency(p, s, 128, True, False) for s in (256, 1024, 4096, 16384)]
    assert seqs == sorted(seqs)
    assert attention_efficiency(p, 2048, 64, False, False) < attention_efficiency(p, 2048, 128, False, False)
    assert attention_efficiency(p, 2048, 128, True, False) < attention_efficiency(p, 2048, 128, False, False)
