"""Predictions: FLOP convention against published pairs, unit conversion, and two ways agree."""

from __future__ import annotations

import pytest

from heterosim.validate.cases import Case
from heterosim.validate.predict import (
    bus_factor,
    case_experiment,
    convert,
    iteration_time_s,
    predict,
    reduced_points,
    sc21_eq3_flops,
)

CLUSTER4 = {
    "name": "h100x4",
    "host_types": {"h": {"gpu": "H100-SXM", "gpus": 4, "nics": 4, "nic_speed": "400Gbps"}},
    "hosts": [{"type": "h", "count": 1}],
}


def e2e_case(quantity="iteration_time_s", convention=None, global_batch=32, pp=2, vpp=1):
    experiment = {
        "model": {"arch": "gpt", "hidden": 512, "layers": 4, "heads": 8, "vocab": 8192, "seq": 512},
        "training": {"global_batch": global_batch, "micro_batch": 1, "seq_len": 512},
        "parallel": {"tp": 1, "pp": pp, "dp": 4 // pp, "vpp": vpp, "partition": "uniform"},
        "cluster": CLUSTER4,
        "simulation": {"fidelity": "flow"},
    }
    return Case(
        id="t",
        group="g",
        kind="throughput",
        source="test",
        quantity=quantity,
        measured=1.0,
        flop_convention=convention,
        flags=(),
        ci=False,
        calibration=False,
        assumed={},
        experiment=experiment,
        origin="test",
    )


@pytest.mark.parametrize(
    "layers, hidden, gb, gpus, seconds, tflops",
    [
        (24, 2304, 512, 32, 3.528, 137),  # megatron-sc21-t1-1p7b
        (96, 12288, 1536, 384, 76.78, 153),  # megatron-sc21-t2-ptdp-175b-384
        (128, 25600, 3072, 3072, 102.63, 163),  # megatron-sc21-t1-1008p0b
    ],
)
def test_sc21_eq3_reproduces_published_tflops(layers, hidden, gb, gpus, seconds, tflops):
    flops = sc21_eq3_flops(gb, 2048, layers, hidden, 51200)
    assert flops / (gpus * seconds) / 1e12 == pytest.approx(tflops, rel=0.005)


def test_convert_to_published_units():
    exp = case_experiment(e2e_case())
    t = 2.0
    tokens = convert(e2e_case("tokens_per_s_per_gpu"), exp, t, {})
    assert tokens * 4 * t == pytest.approx(32 * 512)
    tflops = convert(e2e_case("tflops_per_gpu", "sc21-eq3-hardware"), exp, t, {})
    assert tflops == pytest.approx(sc21_eq3_flops(32, 512, 4, 512, 8192) / (4 * t) / 1e12)
    assert convert(e2e_case(), exp, t, {}) == t


def test_bus_factors_follow_nccl_tests():
    assert bus_factor("allreduce", 8) == pytest.approx(1.75)
    assert bus_factor("allgather", 8) == pytest.approx(0.875)
    assert bus_factor("broadcast", 8) == 1.0


def test_reduced_points_only_for_long_iterations():
    assert reduced_points(case_experiment(e2e_case(global_batch=8))) is None  # 4 <= 4*pp... full
    assert reduced_points(case_experiment(e2e_case(global_batch=64))) == (4, 8)


@pytest.mark.ns3
@pytest.mark.parametrize("pp, vpp", [(2, 1), (2, 2), (1, 1)])
def test_extrapolated_iteration_equals_full_run(native_lib, pp, vpp):
    """Two short runs extrapolated linearly agree with the full iteration within 1 %."""
    exp = case_experiment(e2e_case(global_batch=48, pp=pp, vpp=vpp))
    assert reduced_points(exp) is not None
    t_ext, method, _ = iteration_time_s(exp, extrapolate=True)
    t_full, full, _ = iteration_time_s(exp, extrapolate=False)
    assert method.startswith("extrapolated") and full == "full"
    assert t_ext == pytest.approx(t_full, rel=0.01)


@pytest.mark.ns3
def test_collective_busbw_agrees_with_collective_command(native_lib):
    from heterosim.config.cluster import parse_cluster
    from heterosim.simulate import CollectiveSpec, engine_config, simulate_collective

    cluster = {**CLUSTER4, "hosts": [{"type": "h", "count": 2}]}
    case = Case(
        id="c",
        group="nccl-tests",
        kind="collective_busbw",
        source="test",
        quantity="busbw_GBps",
        measured=100.0,
        flop_convention=None,
        flags=(),
        ci=False,
        calibration=False,
        assumed={},
        cluster=cluster,
        origin="test",
        collective={"op": "allreduce", "size": 64 << 20, "ranks": 8, "algorithm": "ring"},
    )
    pred = predict(case, "flow")  # as `heterosim validate`, whose --fidelity default is flow
    row = simulate_collective(
        parse_cluster(cluster, "t"),
        CollectiveSpec("allreduce", tuple(range(8)), algorithm="ring"),
        64 << 20,
        engine_config("flow"),
    )
    assert pred.value == pytest.approx(row.busbw_GBps, rel=1e-9)
    assert pred.details["algorithm"] == "ring"
    # multi-node ring busbw cannot exceed NICs per host x NIC rate (4 x 50 GB/s), docs/network_models.md §5.1
    assert 0 < pred.value <= 4 * 50.0 + 1e-9


def test_published_runs_warn_on_memory_instead_of_failing():
    """A measured run fitted in memory: the case runs and reports an over-capacity estimate."""
    case = e2e_case()
    assert case_experiment(case).simulation.memory_check == "warn"
    strict = {**case.experiment, "simulation": {"fidelity": "flow", "memory_check": "error"}}
    case_strict = Case(**{**case.__dict__, "experiment": strict})
    assert case_experiment(case_strict).simulation.memory_check == "error"
    assert case_experiment(case, granularity="connection").simulation.collective_granularity == "connection"
    assert case_experiment(case).simulation.intra_host == "packet"
    assert case_experiment(case, "packet", intra_host="flow").simulation.intra_host == "flow"
