"""A user's whole-layer measurement scales that layer's ops in a run (plan/compute/layer_gap.py)."""

from __future__ import annotations

import numpy as np
import pytest

from heterosim.config.experiment import load_experiment
from heterosim.plan.compute.database import LayerMeasurement, OpDatabase
from heterosim.plan.compute.layer_gap import layer_scale
from heterosim.plan.compute.model import ComputeModel
from heterosim.plan.execution_plan import COMPUTE
from heterosim.simulate.experiment import prepare_run
from heterosim.workload.trace import PHASES

TINY = "tests/data/tiny_experiment.yaml"


def _layer_db(tmp_path, fwd_ns: float, bwd_ns: float, gpu: str = "H100-SXM", tp: int = 4):
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
        "eager",
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
    assert scale.fwd_gap_ns == pytest.approx(fwd_model) and scale.bwd_gap_ns == pytest.approx(0.5 * bwd_model)
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
    assert sum(int(t.duration_ns[i]) for i in rows) == pytest.approx(2.0 / unit.fwd_factor, rel=0.01)
