"""Compute slowed by communication kernels on the same GPU: the per-op model and whole runs."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from heterosim.catalog.gpus import gpu_spec
from heterosim.cli import main
from heterosim.config.experiment import load_experiment
from heterosim.plan.compute import contention
from heterosim.plan.compute.efficiency import default_params, gemm_tile_count
from heterosim.plan.execution_plan import COMPUTE, FLOW
from heterosim.simulate.experiment import prepare_run, run_experiment

TINY = "tests/data/tiny_experiment.yaml"
GPU = "H100-SXM"


def _slowdown(kind: str, shape: tuple, blocks: int) -> float:
    spec = gpu_spec(GPU)
    return contention.slowdown(kind, shape, spec, default_params(GPU, spec), blocks)


def test_no_blocks_no_slowdown_and_more_blocks_never_faster():
    for kind, shape in (
        ("gemm", (2048, 6144, 12288, 1)),
        ("norm", (16384, 4096, 0, 0)),
        ("attention", (2, 4096, 16, 128)),
    ):
        factors = [_slowdown(kind, shape, b) for b in (0, 4, 8, 16, 32, 64)]
        assert factors[0] == 1.0
        assert all(a <= b for a, b in zip(factors, factors[1:])), (kind, factors)


def test_gemm_of_few_waves_loses_a_wave_and_one_of_many_waves_its_sm_share():
    sms = default_params(GPU, gpu_spec(GPU)).sm_count
    few = _slowdown("gemm", (2048, 6144, 12288, 1), 8)  # 384 tiles of 256x128: 2.9 waves
    many = _slowdown("gemm", (16384, 16384, 4096, 1), 32)
    assert few == pytest.approx(1 + contention.WAVE_TAIL_A * (384 / sms) ** -contention.WAVE_TAIL_P)
    assert 1.2 < few < 1.6  # overlap.json: 1.40-1.44
    assert many == pytest.approx(1 / (1 - 32 / sms))  # the SM share dominates at many waves


def test_small_gemm_that_fits_beside_the_blocks_is_not_slowed_by_waves():
    params = default_params(GPU, gpu_spec(GPU))
    tiles = gemm_tile_count(256, 1024, 1, params)
    assert tiles <= 132 - 16  # every CTA runs beside 16 blocks
    assert _slowdown("gemm", (256, 1024, 4096, 1), 16) == pytest.approx(1 / (1 - 16 / 132))
    # beside more blocks than leave room for its tiles, it loses its wave
    wave = 1 + contention.WAVE_TAIL_A * (tiles / 132) ** -contention.WAVE_TAIL_P
    assert _slowdown("gemm", (256, 1024, 4096, 1), 132 - tiles + 1) == pytest.approx(wave)


def test_memory_bound_ops_lose_a_share_of_the_bandwidth_the_blocks_take():
    spec = gpu_spec(GPU)
    f = _slowdown("norm", (16384, 4096, 0, 0), 32)
    share = contention.COUPLING * contention.BLOCK_GBPS * 1e9 / spec.memory_bytes_per_s
    assert f == pytest.approx(1 / (1 - 32 * share))
    assert 1.05 < f < 1.2  # measured 1.135 beside 32 copy blocks


def test_plan_terms_go_to_compute_tasks_and_flows_hold_their_collectives_channels():
    prepared = prepare_run(load_experiment(TINY))
    plan = prepared.tables.plan
    comp = plan.kind == COMPUTE
    assert np.all(plan.contention_share[~comp] == 0) and np.all(plan.contention_wave[~comp] == 0)
    assert np.count_nonzero(plan.contention_share[comp]) > 0.5 * comp.sum()
    blocks = contention.flow_blocks(plan)
    flows = np.flatnonzero(plan.kind == FLOW)
    in_coll = flows[plan.collective[flows] >= 0]
    channels = plan.collectives["channels"][plan.collective[in_coll]]
    assert np.array_equal(blocks[in_coll], np.maximum(channels, 1))
    assert np.all(blocks[flows[plan.collective[flows] < 0]] == contention.P2P_BLOCKS)
    assert np.all(blocks[plan.kind != FLOW] == 0)


def test_contention_slows_the_run_and_accounts_its_time():
    exp = load_experiment(TINY)
    on = run_experiment(exp)
    off = run_experiment(replace(exp, simulation=replace(exp.simulation, compute_contention=False)))
    assert off.engine.contention == {}
    acc = on.engine.contention
    assert acc["extra_ns"].sum() > 0
    assert acc["slowed_extra_ns"].sum() == acc["extra_ns"].sum()  # per task adds up per GPU
    assert acc["slowed_task"].size == acc["tasks_slowed"].sum()  # only the slowed tasks are kept
    assert np.all(np.diff(acc["slowed_task"]) > 0) and np.all(acc["slowed_extra_ns"] > 0)
    assert on.engine.makespan_ns >= off.engine.makespan_ns
    # the slowed tasks took exactly their extra time beyond the run without contention's nominal
    slowed = acc["slowed_task"]
    took = on.engine.task_end_ns[slowed] - on.engine.task_start_ns[slowed]
    assert np.all(took - acc["slowed_extra_ns"] == on.tables.plan.duration_ns[slowed])
    assert np.all(on.tables.plan.kind[slowed] == COMPUTE)


def test_results_and_trace_report_contention(tmp_path):
    out = tmp_path / "run"
    assert main(["run", TINY, "--out", str(out), "--quiet"]) == 0
    import json

    results = json.loads((out / "results.json").read_text())
    assert results["contention"]["enabled"] and results["contention"]["lost_s_mean"] > 0
    assert all("contention_s" in r for r in results["ranks"])
    events = json.loads((out / "trace.json").read_text())
    events = events["traceEvents"] if isinstance(events, dict) else events
    assert any("contention_us" in e.get("args", {}) for e in events)


def test_contention_setting_must_be_a_boolean(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    text = (
        open(TINY)
        .read()
        .replace(
            "simulation: {fidelity: flow, seed: 1}", "simulation: {fidelity: flow, compute_contention: maybe}"
        )
    )
    bad.write_text(text.replace("../../topologies", str(__import__("pathlib").Path("topologies").resolve())))
    assert main(["run", str(bad), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "compute_contention" in err[0] and str(bad) in err[0]
