"""Cross-GPU scaling by spec ratios, and the documented roofline-vs-scaling policy."""

import pytest

from heterosim.catalog.gpus import gpu_spec
from heterosim.plan.compute.database import Measurement, OpDatabase
from heterosim.plan.compute.model import ComputeModel

A100, H100 = "A100-80GB-SXM", "H100-SXM"
GEMM = ("gemm", "bf16", (8192, 8192, 8192, 1), (0, 0), 2 * 8192**3, 3 * 2 * 8192**2)
ELEMENTWISE = ("elementwise", "bf16", (2**28, 0, 0, 0), (0, 0), 2**28, 2 * 2 * 2**28)
NORM = ("norm", "bf16", (65536, 4096, 0, 0), (0, 0), 8 * 65536 * 4096, 4 * 65536 * 4096)


def _db(tmp_path, gpu, ops_times):
    path = tmp_path / f"{gpu}.db"
    db = OpDatabase(path, create=True)
    db.add([Measurement(gpu, k, d, "fwd", s, e, f, b, t, "test") for (k, d, s, e, f, b), t in ops_times])
    db.close()
    return path


def test_a100_to_h100_memory_bound_by_bandwidth_and_gemm_by_flops(tmp_path):
    t_gemm, t_elem = 4_200_000.0, 700_000.0
    model = ComputeModel([_db(tmp_path, A100, [(GEMM, t_gemm), (ELEMENTWISE, t_elem)])], profiled=False)
    a, h = gpu_spec(A100), gpu_spec(H100)
    t, prov = model.time_op(*ELEMENTWISE, H100)
    assert prov == "scaled"
    assert t == pytest.approx(t_elem * a.memory_bytes_per_s / h.memory_bytes_per_s, abs=1)
    t, prov = model.time_op(*GEMM, H100)
    assert prov == "scaled"
    assert t == pytest.approx(t_gemm * 312 / 989, abs=1)
    # The source GPU itself still reports its measurement.
    assert model.time_op(*GEMM, A100) == (int(t_gemm), "measured")


def test_scaling_uses_the_nearest_measured_gpu(tmp_path):
    # Both V100 and H100 measured the op; H200 (same FLOP/s as H100) must scale from H100.
    path = _db(tmp_path, "H100-SXM", [(GEMM, 1_000_000.0)])
    path2 = _db(tmp_path, "V100-SXM2-32GB", [(GEMM, 9_000_000.0)])
    model = ComputeModel([path, path2], profiled=False)
    t, prov = model.time_op(*GEMM, "H200-SXM")
    assert (t, prov) == (1_000_000, "scaled")


def test_policy_calibrated_roofline_beats_scaling(tmp_path):
    # H100 has its own memory-bound measurements (so a calibrated memory curve); the norm was
    # measured on A100 only. Policy: calibrated roofline on the target first.
    own = [
        (("elementwise", "bf16", (n, 0, 0, 0), (0, 0), n, 4 * n), 4000 + 4 * n / 3.0e3)
        for n in (2**20, 2**22, 2**24, 2**26)
    ]
    model = ComputeModel([_db(tmp_path, H100, own), _db(tmp_path, A100, [(NORM, 500_000.0)])], profiled=False)
    assert "memory" in model.calibration(H100).fits
    assert model.time_op(*NORM, H100)[1] == "roofline"
    # Without H100 data of its own the same op is scaled from A100.
    model2 = ComputeModel([_db(tmp_path, A100, [(NORM, 500_000.0)])], profiled=False)
    assert model2.time_op(*NORM, H100)[1] == "scaled"


def test_no_measurement_anywhere_falls_back_to_roofline():
    model = ComputeModel(profiled=False)
    assert model.time_op(*GEMM, "L40S")[1] == "roofline"
