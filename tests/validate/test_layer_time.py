"""layer_time cases: the schema's per-layer measurements, read off the simulated timeline."""

from __future__ import annotations

import copy

import pytest
import yaml

from heterosim.catalog.models import ModelConfig
from heterosim.config.experiment import TrainingConfig
from heterosim.errors import UserError
from heterosim.plan.compute import ComputeModel
from heterosim.plan.compute.layer_check import estimate_iteration, single_gpu_parallel
from heterosim.validate.cases import load_cases
from heterosim.validate.predict import predict
from heterosim.validate.stats import group_summary

ONE_GPU = {
    "name": "a100x1",
    "host_types": {"h": {"gpu": "A100-80GB-SXM", "gpus": 1, "nics": 1, "nic_speed": "200Gbps"}},
    "hosts": [{"type": "h", "count": 1}],
}
EIGHT_GPUS = {
    "name": "a100x8",
    "host_types": {
        "h": {"gpu": "A100-80GB-SXM", "gpus": 8, "fabric": "nvswitch", "nics": 8, "nic_speed": "200Gbps"}
    },
    "hosts": [{"type": "h", "count": 1}],
}


def layer_case(
    recompute: str = "none", tp: int = 1, sp: bool = False, quantity: str = "layer_total_ms"
) -> dict:
    return {
        "id": f"layer-{recompute}-tp{tp}{'-sp' if sp else ''}",
        "group": "g",
        "kind": "layer_time",
        "source": "test",
        "compare": {"quantity": quantity},
        "measured": {"layer_forward_ms": 1.0, "layer_backward_ms": 2.0, "layer_total_ms": 3.0},
        "experiment": {
            "model": {"arch": "gpt", "hidden": 1024, "layers": 4, "heads": 16, "vocab": 8192, "seq": 1024},
            "training": {
                "global_batch": 8,
                "micro_batch": 2,
                "seq_len": 1024,
                "dtype": "bf16",
                "recompute": recompute,
                "attention": "unfused",
            },
            "parallel": {"tp": tp, "pp": 1, "dp": 1, "sequence_parallel": sp},
            "cluster": ONE_GPU if tp == 1 else EIGHT_GPUS,
            "simulation": {"fidelity": "flow"},
            # the ops' sums without the host's eager dispatch (tests/plan/test_host_dispatch.py)
            "framework": {"host_dispatch": "0us"},
        },
    }


def load(tmp_path, *cases: dict):
    path = tmp_path / "cases.yaml"
    path.write_text(yaml.safe_dump({"cases": list(cases)}))
    return load_cases(path)


@pytest.mark.parametrize("recompute", ["none", "selective", "full"])
def test_single_gpu_layer_is_the_sum_of_its_ops(tmp_path, recompute):
    """On one GPU a layer's ops run back to back: the simulated forward and backward (with its
    recomputation) equal the sums of the ops' timed durations."""
    (case,) = load(tmp_path, layer_case(recompute))
    pred = predict(case)
    model = ModelConfig("m", "gpt", 1024, 4, 16, 16, 4096, 8192, 1024)
    training = TrainingConfig(8, 2, 1024, "bf16", recompute, attention="unfused")
    est = estimate_iteration(model, training, single_gpu_parallel(), "A100-80GB-SXM", ComputeModel())
    assert pred.details["layer_forward_ms"] == pytest.approx(est.layer_fwd_s * 1e3, rel=1e-3)
    assert pred.details["layer_backward_ms"] == pytest.approx(est.layer_bwd_s * 1e3, rel=1e-3)
    assert pred.value == pytest.approx(pred.details["layer_forward_ms"] + pred.details["layer_backward_ms"])


def test_recomputation_lengthens_only_the_backward(tmp_path):
    none, full = (predict(c) for c in load(tmp_path, layer_case("none"), layer_case("full")))
    assert full.details["layer_forward_ms"] == pytest.approx(none.details["layer_forward_ms"], rel=1e-6)
    extra = full.details["layer_backward_ms"] - none.details["layer_backward_ms"]
    # the backward recomputes the whole forward once
    assert extra == pytest.approx(none.details["layer_forward_ms"], rel=0.02)


def test_tensor_parallel_layer_includes_its_collectives(tmp_path):
    """With TP the layer's all-reduces are inside its time: the same layer over PCIe instead of
    NVSwitch computes the same ops and takes longer, by the slower collectives alone."""
    nvswitch = layer_case("none", tp=8)
    pcie = copy.deepcopy(nvswitch)
    pcie["id"] = "pcie"
    pcie["experiment"]["cluster"]["host_types"]["h"]["fabric"] = "pcie"
    fast, slow = (predict(c) for c in load(tmp_path, nvswitch, pcie))
    assert slow.details["layer_forward_ms"] > 1.2 * fast.details["layer_forward_ms"]
    assert slow.details["layer_backward_ms"] > 1.2 * fast.details["layer_backward_ms"]


def test_quantity_picks_the_published_number(tmp_path):
    fwd, bwd = (
        predict(c)
        for c in load(
            tmp_path,
            layer_case(quantity="layer_forward_ms"),
            {**layer_case(quantity="layer_backward_ms"), "id": "b"},
        )
    )
    assert fwd.value == fwd.details["layer_forward_ms"]
    assert bwd.value == bwd.details["layer_backward_ms"]


def test_layer_time_cases_form_their_own_summary_group():
    rows = [
        {"group": "g", "kind": "layer_time", "error_pct": 2.0, "predicted": 1.0, "measured": 1.0},
        {"group": "g", "kind": "iteration_time", "error_pct": -4.0, "predicted": 1.0, "measured": 1.0},
    ]
    summary = group_summary(rows)
    assert summary["layer_time"]["main_n"] == 1 and summary["layer_time"]["main_mape_pct"] == 2.0
    assert summary["end-to-end"]["main_n"] == 1 and summary["end-to-end"]["main_mean_error_pct"] == -4.0


@pytest.mark.parametrize(
    "kind, quantity",
    [("layer_time", "iteration_time_s"), ("iteration_time", "layer_total_ms"), ("layer_time", "busbw_GBps")],
)
def test_kind_and_quantity_must_agree(tmp_path, kind, quantity):
    case = layer_case()
    case["kind"], case["compare"] = kind, {"quantity": quantity}
    case["measured"] = {quantity: 1.0}
    with pytest.raises(UserError, match="does not go with kind"):
        load(tmp_path, case)


def test_one_layer_on_the_first_rank_is_refused(tmp_path):
    case = copy.deepcopy(layer_case())
    case["experiment"]["model"]["layers"] = 1
    (loaded,) = load(tmp_path, case)
    with pytest.raises(ValueError, match="at least two consecutive transformer layers"):
        predict(loaded)


def test_interleaved_pipeline_measures_a_pair_within_one_chunk(tmp_path):
    """With pp 2 and two chunks per stage, rank 0 holds layers 0 and 2 only (one per chunk) at
    4 layers, which is refused; at 8 layers it holds 0-1 and 4-5 and measures a pair of them."""
    case = layer_case("none", tp=1)
    case["experiment"]["cluster"] = {
        **ONE_GPU,
        "host_types": {"h": {**ONE_GPU["host_types"]["h"], "gpus": 2}},
    }
    case["experiment"]["parallel"] = {"tp": 1, "pp": 2, "dp": 1, "vpp": 2, "schedule": "interleaved"}
    (short,) = load(tmp_path, case)
    with pytest.raises(ValueError, match="consecutive"):
        predict(short)
    case["experiment"]["model"]["layers"] = 8
    (loaded,) = load(tmp_path, case)
    pred = predict(loaded)
    assert pred.details["layers_measured"] in ([0, 1], [4, 5])
    assert pred.details["layer_forward_ms"] > 0 and pred.details["layer_backward_ms"] > 0
