"""Least-squares calibration recovers known efficiency parameters from synthetic measurements."""

import itertools

import pytest

from heterosim.catalog.gpus import gpu_spec
from heterosim.plan.compute.calibration import calibrate
from heterosim.plan.compute.database import Measurement
from heterosim.plan.compute.efficiency import attention_forward_flops, default_params
from heterosim.plan.compute.model import ComputeModel
from heterosim.plan.compute.roofline import roofline_time_ns

GPU = "A100-80GB-SXM"


def _synthetic(kind_rows, spec, truth):
    rows = []
    for kind, dtype, shape, extra, flops, moved, pass_ in kind_rows:
        t = roofline_time_ns(kind, dtype, shape, extra, flops, moved, spec, truth)
        rows.append(Measurement(spec.name, kind, dtype, pass_, shape, extra, flops, moved, t, "synthetic"))
    return rows


def test_recovers_gemm_parameters_within_2_percent():
    spec, base = gpu_spec(GPU), default_params(GPU)
    truth = base.with_values(gemm_max_by_dtype={"bf16": 0.71}, gemm_k_half=310.0, launch_overhead_ns=6500.0)
    shapes = [(m, n, k) for m, n, k in itertools.product([128, 1024, 8192], [256, 4096], [32, 256, 4096])]
    rows = _synthetic(
        [
            ("gemm", "bf16", (m, n, k, 1), (0, 0), 2 * m * n * k, 2 * (m * k + k * n + m * n), "fwd")
            for m, n, k in shapes
        ],
        spec,
        truth,
    )
    params, report = calibrate(spec, rows, base)
    assert params.gemm_max_by_dtype["bf16"] == pytest.approx(0.71, rel=0.02)
    assert params.gemm_k_half == pytest.approx(310.0, rel=0.02)
    assert params.launch_overhead_ns == pytest.approx(6500.0, rel=0.02)
    assert report.fits["gemm"].rms_rel_error < 1e-3
    assert "gemm" in report.summary()


def test_each_gemm_dtype_with_enough_rows_gets_its_own_ceiling():
    """The dominant dtype sets the shape terms; a second dtype with >= 3 rows has its ceiling
    fitted with them held, and is reported apart; a dtype with fewer rows keeps its envelope."""
    spec, base = gpu_spec("H100-SXM"), default_params("H100-SXM")
    truth = base.with_values(
        gemm_max_by_dtype={"bf16": 0.74, "fp8": 0.6}, gemm_k_half=200.0, launch_overhead_ns=4000.0
    )
    shapes = [(m, n, k) for m, n, k in itertools.product([256, 2048, 8192], [1024, 4096], [512, 4096])]

    def rows(dtype, picked):
        return [
            ("gemm", dtype, (m, n, k, 1), (0, 0), 2 * m * n * k, 2 * (m * k + k * n + m * n), "fwd")
            for m, n, k in picked
        ]

    measured = _synthetic(
        rows("bf16", shapes) + rows("fp8", shapes[::3]) + rows("fp16", shapes[:2]), spec, truth
    )
    params, report = calibrate(spec, measured, base)
    assert params.gemm_max_by_dtype["bf16"] == pytest.approx(0.74, rel=0.01)
    assert params.gemm_max_by_dtype["fp8"] == pytest.approx(0.6, rel=0.01)
    assert report.fits["gemm:fp8"].n_points == 4 and report.fits["gemm:fp8"].fixed[0] == "gemm_k_half"
    assert report.gemm_fitted("bf16") and report.gemm_fitted("fp8") and not report.gemm_fitted("fp16")
    assert params.gemm_max_by_dtype["fp16"] == base.gemm_max_by_dtype["fp16"]  # 2 rows: envelope kept
    assert "gemm:fp8" in report.summary()


def test_the_shipped_h100_profile_sets_its_fp8_ceiling():
    """146 sustained fp8 GEMMs of the shipped H100 profile fit the fp8 ceiling: below the MAMF
    burst bound (0.709) and above the single 8192^3 shape at the cap (0.619), the GEMMs' own
    spread (rms) under 10 %; an unprofiled fp8 GEMM then gets no envelope note."""
    model = ComputeModel()
    fit = model.calibration("H100-SXM").fits["gemm:fp8"]
    assert fit.n_points >= 100 and fit.rms_rel_error < 0.10
    assert 0.619 < fit.values["gemm_max_efficiency.fp8"] <= 0.709
    model.time_op("gemm", "fp8", (3000, 7000, 5000, 1), (0, 0), 2 * 3000 * 7000 * 5000, 0, "H100-SXM")
    assert not any("fp8" in note for note in model.notes())


def test_recovers_attention_parameters_within_2_percent():
    spec, base = gpu_spec(GPU), default_params(GPU)
    truth = base.with_values(
        attention_fwd_efficiency=0.62,
        attention_bwd_ratio=0.8,
        attention_seq_half=410.0,
        attention_head_dim_half=24.0,
    )
    specs = []
    for s, d, causal, pass_ in itertools.product([256, 1024, 4096, 16384], [64, 128], [0, 1], ["fwd", "bwd"]):
        b, h = max(16384 // s, 1), 2048 // d
        fwd = attention_forward_flops(b, s, h, d, bool(causal))
        flops = fwd * (2.5 if pass_ == "bwd" else 1.0)
        specs.append(("attention", "fp16", (b, s, h, d), (h, causal), int(flops), 8 * b * s * h * d, pass_))
    params, report = calibrate(spec, _synthetic(specs, spec, truth), base)
    for name, value in (
        ("attention_fwd_efficiency", 0.62),
        ("attention_bwd_ratio", 0.8),
        ("attention_seq_half", 410.0),
        ("attention_head_dim_half", 24.0),
    ):
        assert getattr(params, name) == pytest.approx(value, rel=0.02), name
    assert report.fits["attention"].r2_log > 0.999


def test_recovers_memory_parameters_within_2_percent():
    spec, base = gpu_spec(GPU), default_params(GPU)
    truth = base.with_values(memory_efficiency=0.91, launch_overhead_ns=2500.0)
    rows = _synthetic(
        [
            ("elementwise", "bf16", (n, 0, 0, 0), (0, 0), n, 4 * n, "fwd")
            for n in (2**12, 2**16, 2**20, 2**24, 2**27)
        ],
        spec,
        truth,
    )
    params, _ = calibrate(spec, rows, base)
    assert params.memory_efficiency == pytest.approx(0.91, rel=0.02)
    assert params.launch_overhead_ns == pytest.approx(2500.0, rel=0.02)


def _square_bf16_gemms(spec, truth):
    """Synthetic measurements of square bf16 GEMMs (2k-16k) timed by the ``truth`` parameters."""
    return _synthetic(
        [
            ("gemm", "bf16", (s, s, s, 1), (0, 0), 2 * s**3, 6 * s * s, "fwd")
            for s in (2048, 4096, 8192, 16384)
        ],
        spec,
        truth,
    )


def test_gemm_fit_never_exceeds_the_published_envelope():
    # Synthetic data claiming 95 % of peak: the fit is clipped at the MAMF envelope (0.869).
    spec, base = gpu_spec(GPU), default_params(GPU)
    truth = base.with_values(gemm_max_by_dtype={"bf16": 0.95})
    rows = _square_bf16_gemms(spec, truth)
    params, _ = calibrate(spec, rows, base)
    assert params.gemm_ceiling("bf16") <= 0.869 + 1e-9


def test_shipped_flashattention_tables_calibrate_a100_and_h100():
    model = ComputeModel(attention_impl="flash-attention-2", profiled=False)
    for gpu, max_rms in (("A100-80GB-SXM", 0.06), ("H100-SXM", 0.10)):
        fit = model.calibration(gpu).fits["attention"]
        print(model.calibration(gpu).summary())
        assert fit.rms_rel_error < max_rms
        assert any("fa2-" in c for c in fit.citations)
        assert not any("cudnn" in c for c in fit.citations)


def test_shipped_cudnn_tables_calibrate_h100_by_default():
    """H100 runs cuDNN fused attention by default (Transformer Engine's choice on Hopper): its
    curve is fitted to the cuDNN forward and backward series only. The 4-parameter curve cannot
    follow cuDNN's head-dim 128 forward peak (up to 29 % slower than measured there), hence the
    looser bound than FlashAttention-2's."""
    model = ComputeModel(profiled=False)
    report = model.calibration("H100-SXM")
    print(report.summary())
    fit = report.fits["attention"]
    assert fit.rms_rel_error < 0.12 and fit.n_points == 48
    assert all("cudnn" in c for c in fit.citations)
    assert "attention_bwd_ratio" in fit.values  # single-pass fwd and bwd series both present
    a100 = model.calibration("A100-80GB-SXM").fits["attention"]
    assert all("flash-attention-2" in c for c in a100.citations)


def test_gemm_fit_may_exceed_the_sustained_ceiling_up_to_the_burst_envelope():
    # The A100's default ceiling is its sustained GEMM rate (0.78 of peak); a profile of a card that
    # sustains 0.85 must be fitted to 0.85, not clipped at the default: only MAMF bounds a fit.
    spec, base = gpu_spec("A100-80GB-SXM"), default_params("A100-80GB-SXM")
    assert base.gemm_ceiling("bf16") < 0.85 < base.gemm_bound("bf16") == pytest.approx(0.869)
    truth = base.with_values(gemm_max_by_dtype={"bf16": 0.85})
    rows = _square_bf16_gemms(spec, truth)
    params, _ = calibrate(spec, rows, base)
    assert params.gemm_ceiling("bf16") == pytest.approx(0.85, rel=0.02)
