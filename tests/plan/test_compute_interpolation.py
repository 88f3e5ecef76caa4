"""Exact lookups and monotone interpolation between measured shapes."""

import numpy as np
import pytest

from heterosim.plan.compute.database import Measurement, OpDatabase
from heterosim.plan.compute.interpolation import MonotoneCurve, monotone_fit
from heterosim.plan.compute.model import ComputeModel


def _norm_rows(gpu, sizes, times):
    return [
        Measurement(
            gpu, "norm", "bf16", "fwd", (r, 4096, 0, 0), (0, 0), 8 * r * 4096, 4 * r * 4096, t, "test"
        )
        for r, t in zip(sizes, times)
    ]


@pytest.fixture
def norm_db(tmp_path):
    db = OpDatabase(tmp_path / "p.db", create=True)
    sizes = [1024, 4096, 16384, 65536]
    times = [9_000.0, 25_000.0, 81_000.0, 300_000.0]
    db.add(_norm_rows("H100-SXM", sizes, times))
    db.close()
    return tmp_path / "p.db", sizes, times


def _time_norm(model, rows):
    return model.time_op(
        "norm", "bf16", (rows, 4096, 0, 0), (0, 0), 8 * rows * 4096, 4 * rows * 4096, "H100-SXM"
    )


def test_measured_points_reproduced_exactly(norm_db):
    path, sizes, times = norm_db
    model = ComputeModel([path], profiled=False)
    for rows, t in zip(sizes, times):
        assert _time_norm(model, rows) == (int(t), "measured")


def test_interpolation_is_monotone_and_between_neighbours(norm_db):
    path, sizes, times = norm_db
    model = ComputeModel([path], profiled=False)
    grid = np.unique(np.geomspace(sizes[0], sizes[-1], 200).astype(int))
    values = []
    for rows in grid:
        t, prov = _time_norm(model, int(rows))
        assert prov in ("measured", "interpolated")
        values.append(t)
    assert all(b >= a for a, b in zip(values, values[1:]))
    t_mid, _ = _time_norm(model, 2048)
    assert times[0] < t_mid < times[1]
    # Log-log linear between (1024, 9000) and (4096, 25000), evaluated at 2048:
    assert t_mid == pytest.approx(np.sqrt(9_000 * 25_000), rel=1e-6)


def test_no_extrapolation_beyond_measured_range(norm_db):
    path, sizes, _ = norm_db
    model = ComputeModel([path], profiled=False)
    assert _time_norm(model, sizes[0] // 2)[1] == "roofline"
    assert _time_norm(model, sizes[-1] * 2)[1] == "roofline"


def test_monotone_fit_pools_violators_and_leaves_monotone_data_alone():
    y = np.array([1.0, 2.0, 3.0])
    assert np.array_equal(monotone_fit(y, np.ones(3)), y)
    fitted = monotone_fit(np.array([1.0, 3.0, 2.0, 4.0]), np.ones(4))
    assert np.allclose(fitted, [1.0, 2.5, 2.5, 4.0])
    curve = MonotoneCurve([1, 2, 3, 4], [1.0, 3.0, 2.0, 4.0])
    xs = np.linspace(1, 4, 50)
    vals = [curve(x) for x in xs]
    assert all(b >= a - 1e-12 for a, b in zip(vals, vals[1:]))
    assert curve(0.5) is None and curve(5) is None


def test_user_database_layer_wins_over_lower_layer(tmp_path):
    upper, lower = tmp_path / "u.db", tmp_path / "l.db"
    for path, t in ((upper, 11_111.0), (lower, 99_999.0)):
        db = OpDatabase(path, create=True)
        db.add(_norm_rows("H100-SXM", [1024], [t]))
        db.close()
    model = ComputeModel([upper, lower], profiled=False)
    assert _time_norm(model, 1024) == (11_111, "measured")


def test_shipped_fa2_forward_rows_are_measurements():
    # fa3-h100-fwd-fp16-causal-hd128-flash-attention-2: seq 2048, batch 8, 16 heads, 298 TFLOP/s;
    # the cuDNN series of the same figure (H100's default kernel): 484 TFLOP/s.
    flops = 4 * 8 * 2048**2 * 16 * 128 // 2
    for model, tflops in (
        (ComputeModel(attention_impl="flash-attention-2", profiled=False), 298),
        (ComputeModel(profiled=False), 484),
    ):
        t, prov = model.time_op("attention", "bf16", (8, 2048, 16, 128), (16, 1), flops, 0, "H100")
        assert prov == "measured"
        assert t == pytest.approx(flops / (tflops * 1e12) * 1e9, rel=1e-6)


def test_attention_interpolates_at_the_ops_sequence_length():
    """Tables hold 16k tokens; an op with fewer tokens at a measured sequence length runs at that
    length's throughput (time per batch*head pair), not at the throughput of the shorter
    sequence whose table row has the same total FLOPs."""
    model = ComputeModel(profiled=False)
    # fa3-h100-fwd-fp16-causal-hd128-cudnn: 518 TFLOP/s at seq 4096 (batch 4), 410 at 1024
    flops = 4 * 1 * 4096**2 * 16 * 128 // 2  # batch 1: the FLOPs of the seq-1024 table row
    t, prov = model.time_op("attention", "bf16", (1, 4096, 16, 128), (16, 1), flops, 0, "H100")
    assert prov == "interpolated"
    assert flops / t * 1e-3 == pytest.approx(518, rel=1e-6)
    # between measured lengths: monotone in the sequence length at fixed batch*heads
    times = [
        model.time_op("attention", "bf16", (1, s, 16, 128), (16, 1), 4 * s * s * 16 * 128 // 2, 0, "H100")[0]
        for s in range(1024, 8193, 256)
    ]
    assert all(b > a for a, b in zip(times, times[1:]))
