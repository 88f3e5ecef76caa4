"""Profiler end to end on CPU: the database it writes is used by the lookup (skips without torch)."""

import pytest

from heterosim.cli import main
from heterosim.plan.compute.database import OpDatabase
from heterosim.plan.compute.model import ComputeModel
from heterosim.plan.compute.profiler import CPU_NOTE, gemm_op, norm_op, profile

torch = pytest.importorskip("torch")


def test_cpu_profile_feeds_the_lookup(tmp_path, capsys):
    out = tmp_path / "cpu.db"
    ops = [gemm_op(s, s, s, "fp32") for s in (32, 64, 128)] + [norm_op(r, 128, "fp32") for r in (64, 256)]
    written = profile(out, ops, device="cpu", repeats=3, warmup=1)
    assert written == 5
    assert CPU_NOTE in capsys.readouterr().out
    db = OpDatabase(out)
    (run,) = db.runs()
    assert run["device"] == "cpu" and run["note"] == CPU_NOTE and run["torch"] == torch.__version__
    rows = {m.shape: m.time_ns for m in db.measurements()}
    db.close()
    model = ComputeModel([out])
    t, prov = model.time_op("gemm", "fp32", (64, 64, 64, 1), (0, 0), 2 * 64**3, 3 * 4 * 64**2, "cpu")
    assert (t, prov) == (max(int(round(rows[(64, 64, 64, 1)])), 1), "measured")
    t, prov = model.time_op("gemm", "fp32", (90, 90, 90, 1), (0, 0), 2 * 90**3, 3 * 4 * 90**2, "cpu")
    assert prov == "interpolated"
    with pytest.raises(Exception, match="known only from its database"):
        model.time_op("gemm", "fp32", (4096, 4096, 4096, 1), (0, 0), 2 * 4096**3, 1, "cpu")


def test_profile_command_standard_sweep_on_cpu(tmp_path, capsys):
    out = tmp_path / "sweep.db"
    assert main(["profile", "--out", str(out), "--device", "cpu", "--repeats", "2", "--warmup", "1"]) == 0
    assert "CPU timings are not GPU timings" in capsys.readouterr().out
    db = OpDatabase(out)
    kinds = {m.op_kind for m in db.measurements()}
    db.close()
    assert kinds == {"gemm", "attention", "norm", "elementwise"}


def test_cuda_request_without_gpu_is_a_user_error(tmp_path, capsys):
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    assert main(["profile", "--out", str(tmp_path / "x.db"), "--device", "cuda"]) == 2
    assert "no CUDA device" in capsys.readouterr().err


def test_fp8_gemms_are_profiled_with_scaled_mm(tmp_path, capsys):
    """fp8 GEMMs run through torch._scaled_mm (on CPU where this PyTorch has it: plumbing only);
    shapes it cannot run are skipped with a message, not timed as something else."""
    from heterosim.plan.compute.profiler import fp8_gemm_runner

    if fp8_gemm_runner(torch, 32, 32, 32, 1, "cpu") is None:
        pytest.skip("this PyTorch has no CPU fp8 _scaled_mm")
    out = tmp_path / "fp8.db"
    ops = [gemm_op(s, s, s, "fp8") for s in (32, 64, 128)] + [
        gemm_op(24, 24, 24, "fp8"),
        gemm_op(32, 32, 32, "fp8", batch=2),
    ]
    assert profile(out, ops, device="cpu", repeats=2, warmup=1) == 3
    assert capsys.readouterr().out.count("profile: skipping fp8 gemm") == 2
    db = OpDatabase(out)
    assert {(m.dtype, m.shape) for m in db.measurements()} == {("fp8", (s, s, s, 1)) for s in (32, 64, 128)}
    db.close()
    t, prov = ComputeModel([out]).time_op("gemm", "fp8", (64, 64, 64, 1), (0, 0), 2 * 64**3, 3 * 64**2, "cpu")
    assert prov == "measured" and t > 0
