"""torchtitan cases: torchtitan's TPS/GPU convention, the FSDP2 / TP / CP mapping, and that every
setting HeteroSim cannot express is named in the case (assumed or not_modelled)."""

from __future__ import annotations

from pathlib import Path

import pytest

from heterosim.catalog.gpus import gpu_spec
from heterosim.validate.cases import Case, load_cases
from heterosim.validate.predict import case_experiment, convert

SHIPPED = Path(__file__).resolve().parents[2] / "validation" / "cases.yaml"


def _titan() -> list[Case]:
    return [c for c in load_cases(SHIPPED) if c.group == "torchtitan"]


def test_every_reachable_row_is_a_case_outside_ci() -> None:
    cases = _titan()
    # 2412 Tables 1-4 (3 + 4 + 3 + 2), the async-TP tables (6 + 6), docs/performance.md 405B (3),
    # Trainy H200 (2); Tables 5-6 (PP with FSDP) are excluded in the header
    assert len(cases) == 29
    assert not any(c.ci or c.calibration for c in cases)
    assert "torchtitan-2412 Tables 5-6" in SHIPPED.read_text().split("cases:")[0]


def test_torchtitan_tps_is_global_tokens_per_gpu_second() -> None:
    # torchtitan logs tokens of the local batch / (step time x tp x cp); with global batch = local
    # batch x FSDP degree that is global_batch x seq / (T x GPUs), the convention validate uses
    for case in _titan():
        exp = case_experiment(case)
        p = exp.parallel
        assert p.dp * p.tp * p.cp == exp.cluster.world_size, case.id
        local = exp.training.global_batch // p.dp
        t = case.measured_all["iteration_time_s"]
        tps_torchtitan = local * exp.training.seq_len / (t * p.tp * p.cp)
        assert tps_torchtitan == pytest.approx(case.measured, rel=2e-3), case.id
        assert convert(case, exp, t, {}) == pytest.approx(case.measured, rel=2e-3), case.id


def test_fsdp2_maps_to_zero3_with_fp32_reduction() -> None:
    for case in _titan():
        exp = case_experiment(case)
        assert (exp.parallel.zero, exp.parallel.zero3_impl, exp.parallel.pp) == (3, "overlap", 1), case.id
        assert exp.training.grad_reduce_dtype == "fp32", case.id
        assert exp.parallel.sequence_parallel == (exp.parallel.tp > 1), case.id
        assert exp.training.micro_batch == exp.training.global_batch // exp.parallel.dp, case.id


def test_unexpressible_settings_are_named() -> None:
    for case in _titan():
        exp = case_experiment(case)
        what = " ".join(e["what"] for e in case.not_modelled)
        compiled = exp.training.kernels == "fused"
        assert case.assumed["training.kernels"]["why"], case.id
        if not compiled:
            assert "RoPE" in what, case.id
        if exp.training.recompute == "selective_op":  # torchtitan's op SAC, with its policy source
            why = case.assumed["training.recompute"]["why"]
            assert "_save_list" in why and "9dec370" in why and "op-level" not in what, case.id
        assert exp.training.recompute in ("selective_op", "full"), case.id
        if "fp8rw" in case.id:
            assert "APPROX" in case.flags and "rowwise" in what, case.id
        else:
            assert "APPROX" not in case.flags, case.id
        if "h200" not in case.id:
            assert "500 W" in what and exp.cluster.host_types["h"].gpu == "H100-SXM", case.id
            # the source's H100, not the catalogue's: HBM2e at 2.4 TB/s, 96 GB (95 GB in 2408)
            spec = exp.cluster.gpu_spec("H100-SXM")
            assert spec.memory_bytes_per_s == 2.4e12, case.id
            assert spec.memory_bytes == (95e9 if case.id.startswith("torchtitan-2408") else 96e9), case.id
            assert spec.peak_tflops == gpu_spec("H100-SXM").peak_tflops, case.id
        else:
            assert exp.cluster.gpu_spec(exp.cluster.host_types["h"].gpu) == gpu_spec("H200-SXM"), case.id
        if exp.parallel.cp > 1:  # PyTorch's CP, and what of it stays approximate
            assert (exp.parallel.cp_comm, exp.parallel.cp_impl) == ("all_gather", "pytorch"), case.id
            assert "slowest rank" in what and "torch.compile captures the CP path" in what, case.id


def test_the_grand_teton_h100s_run_at_their_stated_500_w_limit() -> None:
    """'We used the default 500W power limit' (the 2412 file's hardware section): every H100 case
    says so, citing it; the H200 cases state no limit."""
    for case in _titan():
        spec = case_experiment(case).cluster.host(0).spec
        if spec.name == "H100-SXM":
            assert spec.power_limit_w == 500.0, case.id
            assert "default 500W power limit" in spec.sources["power_limit_w"], case.id
        else:
            assert spec.power_limit_w is None, case.id
