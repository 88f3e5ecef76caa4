"""A user's whole-layer measurement scales that layer's ops in a run (plan/compute/layer_gap.py)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from heterosim.config.experiment import load_experiment
from heterosim.plan.compute.database import LayerMeasurement, OpDatabase
from heterosim.plan.compute.layer_gap import layer_op_lists, layer_scale
from heterosim.plan.compute.model import ComputeModel
from heterosim.plan.execution_plan import COMPUTE
from heterosim.simulate.experiment import prepare_run
from heterosim.workload.trace import PHASES

TINY = "tests/data/tiny_experiment.yaml"


def _sums(model: ComputeModel, exp, kernels: str) -> tuple[float, float]:
    """The modelled forward and backward of the experiment's layer with ``kernels`` op lists."""
    training = replace(exp.training, kernels=kernels)
    return tuple(  # type: ignore[return-value]
        float(
            sum(
                model.time_op(o.op_kind, o.dtype, o.shape, o.shape_extra, o.flops, o.bytes_moved, "H100-SXM")[
                    0
                ]
                for o in ops
            )
        )
        for ops in layer_op_lists(exp.model, training, exp.parallel)
    )


def _layer_db(
    tmp_path, fwd_ns: float, bwd_ns: float, gpu: str = "H100-SXM", tp: int = 4, mode: str = "eager"
):
    exp = load_experiment(TINY)
    m, t = exp.model, exp.training
    path = tmp_path / "layers.db"
    db = OpDatabase(path, create=True)
    row = LayerMeasurement(
        gpu,
        m.arch,
        m.hidden,
        m.heads,
        m.kv_heads,
        m.ffn,
        0,
        0,
        t.seq_len,
        t.micro_batch,
        tp,
        False,
        t.dtype,
        mode,
        fwd_ns,
        bwd_ns,
        "tiny",
    )
    db.add_layers([row], db.add_run(method="sustained"))
    db.close()
    return path


def test_factors_are_measured_over_modelled_and_the_gap_is_reported(tmp_path):
    exp = load_experiment(TINY)
    plain = layer_scale(ComputeModel(), [], "H100-SXM", exp.model, exp.training, exp.parallel)
    assert plain is None
    probe = ComputeModel([_layer_db(tmp_path, 1.0, 1.0)])
    unit = layer_scale(probe, probe.layer_measurements, "H100-SXM", exp.model, exp.training, exp.parallel)
    fwd_model, bwd_model = 1.0 / unit.fwd_factor, 1.0 / unit.bwd_factor  # the modelled sums
    (tmp_path / "layers.db").unlink()
    model = ComputeModel([_layer_db(tmp_path, 2 * fwd_model, 1.5 * bwd_model)])
    scale = layer_scale(model, model.layer_measurements, "H100-SXM", exp.model, exp.training, exp.parallel)
    assert scale.fwd_factor == pytest.approx(2.0) and scale.bwd_factor == pytest.approx(1.5)
    # the eager measurement sets the factor against the eager op lists; the run (fused) gets it
    assert (fwd_model, bwd_model) == pytest.approx(_sums(model, exp, "eager"))
    run_fwd, run_bwd = _sums(model, exp, "fused")
    assert scale.fwd_gap_ns == pytest.approx(run_fwd, rel=1e-6)
    assert scale.bwd_gap_ns == pytest.approx(0.5 * run_bwd, rel=1e-6)
    # another shard (tp 2) or GPU does not match
    other = exp.parallel.__class__(**{**exp.parallel.__dict__, "tp": 2})
    assert layer_scale(model, model.layer_measurements, "H100-SXM", exp.model, exp.training, other) is None
    assert (
        layer_scale(model, model.layer_measurements, "A100-80GB-SXM", exp.model, exp.training, exp.parallel)
        is None
    )


def test_a_run_scales_the_layer_ops_of_the_matching_gpu_only(tmp_path):
    exp = load_experiment(TINY, ["framework.host_dispatch=0us"])  # only the measured layer scales
    base = prepare_run(exp, with_topology=False)
    probe = ComputeModel([_layer_db(tmp_path, 1.0, 1.0)])
    unit = layer_scale(probe, probe.layer_measurements, "H100-SXM", exp.model, exp.training, exp.parallel)
    (tmp_path / "layers.db").unlink()
    path = _layer_db(tmp_path, 2.0 / unit.fwd_factor, 2.0 / unit.bwd_factor)
    scaled = prepare_run(exp, databases=[str(path)], with_topology=False)
    assert [entry["gpu"] for entry in scaled.compute_layers] == ["H100-SXM"]
    assert scaled.compute_layers[0]["forward_factor"] == pytest.approx(2.0)
    plan0, plan1 = base.tables.plan, scaled.tables.plan
    comp = plan0.kind == COMPUTE
    gpu_type = np.array(exp.cluster.gpu_type)[plan0.gpu[comp]]
    ratio = plan1.duration_ns[comp] / plan0.duration_ns[comp]
    assert np.allclose(ratio[gpu_type != "H100-SXM"], 1.0)
    h100 = ratio[gpu_type == "H100-SXM"]
    assert np.isclose(h100, 2.0, rtol=0.02).sum() > 0.5 * h100.size  # the layer ops; ends stay
    # a rank's layer forward adds up to the measurement (ops scaled in proportion)
    trace = scaled.traces[0]
    t = trace.templates
    fwd = PHASES.index("fwd")
    labels = {
        "ln1",
        "qkv_proj",
        "attn_core",
        "out_proj",
        "dropout1",
        "residual1",
        "ln2",
        "fc1",
        "act",
        "fc2",
        "dropout2",
        "residual2",
    }
    rows = [
        i
        for i in range(len(t))
        if t.phase[i] == fwd
        and t.label_names[int(t.label[i])] in labels
        and t.op_kind_names[int(t.op_kind[i])] != "comm"
    ]
    fused_fwd, _ = _sums(ComputeModel(), exp, "fused")
    assert sum(int(t.duration_ns[i]) for i in rows) == pytest.approx(2.0 * fused_fwd, rel=0.01)


def test_an_eager_measurement_is_not_charged_to_a_fused_run_and_a_compiled_one_is_taken_as_is(tmp_path):
    """Eager PyTorch adds kernels a fused run does not have: the measured layer over the eager op
    lists is the factor; a compiled (fused) measurement is set against the fused lists."""
    exp = load_experiment(TINY)
    eager_fwd, eager_bwd = _sums(ComputeModel(), exp, "eager")
    fused_fwd, fused_bwd = _sums(ComputeModel(), exp, "fused")
    assert eager_bwd > fused_bwd  # gradient accumulation and the bias add are eager-only kernels
    model = ComputeModel([_layer_db(tmp_path, 1.2 * eager_fwd, 1.2 * eager_bwd)])
    scale = layer_scale(model, model.layer_measurements, "H100-SXM", exp.model, exp.training, exp.parallel)
    assert scale.fwd_factor == pytest.approx(1.2) and scale.bwd_factor == pytest.approx(1.2)
    (tmp_path / "layers.db").unlink()
    model = ComputeModel([_layer_db(tmp_path, 1.2 * fused_fwd, 1.2 * fused_bwd, mode="compile")])
    scale = layer_scale(model, model.layer_measurements, "H100-SXM", exp.model, exp.training, exp.parallel)
    assert scale.mode == "compile"
    assert scale.fwd_factor == pytest.approx(1.2) and scale.bwd_factor == pytest.approx(1.2)
