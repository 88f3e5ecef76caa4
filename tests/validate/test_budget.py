"""Error budget of ``heterosim validate``: components against hand computations, CSV, --fail-above."""

from __future__ import annotations

import csv
import json

import pytest
import yaml

from heterosim.cli import main
from heterosim.validate.budget import CSV_COLUMNS, error_budget, measured_time_s
from heterosim.validate.predict import Prediction

DETAILS = {
    "breakdown": {"compute_s": 8.0, "exposed_comm_s": 1.5, "bubble_s": 0.5},
    "compute_provenance": {
        "measured": 0.25,
        "interpolated": 0.0,
        "roofline": 0.75,
        "scaled": 0.0,
        "none": 0.0,
    },
}


def test_budget_splits_time_and_compute_by_source():
    b = error_budget("iteration_time_s", 12.0, 10.0, 10.0, DETAILS)
    assert (b["compute_s"], b["exposed_comm_s"], b["bubble_s"]) == (8.0, 1.5, 0.5)
    assert b["compute_by_source_s"] == {
        "measured": 2.0,
        "interpolated": 0.0,
        "roofline": 6.0,
        "scaled": 0.0,
        "framework": 0.0,
    }
    assert (b["compute_pct"], b["exposed_comm_pct"], b["bubble_pct"]) == (80.0, 15.0, 5.0)
    assert b["time_meas_s"] == 12.0 and b["miss_s"] == pytest.approx(-2.0)


def test_throughput_budget_converts_the_measurement_to_a_time():
    # 120 TFLOP/s predicted at 10 s; 100 measured -> the published run took 12 s
    assert measured_time_s("tflops_per_gpu", 100.0, 120.0, 10.0) == pytest.approx(12.0)
    b = error_budget("tokens_per_s_per_gpu", 100.0, 120.0, 10.0, DETAILS)
    assert b["miss_s"] == pytest.approx(-2.0)


def test_extrapolated_budget_extrapolates_each_component_like_the_time():
    # runs at m1 = 4 (t1 = 6 s) and m2 = 8 (t2 = 10 s) extrapolated to m = 16: t = 18 s
    details = {
        **DETAILS,
        "extrapolation": {
            "m1": 4,
            "m2": 8,
            "m": 16,
            "t1_s": 6.0,
            "t2_s": 10.0,
            "breakdown1": {"compute_s": 4.0, "exposed_comm_s": 1.5, "bubble_s": 0.5},
        },
    }
    b = error_budget("iteration_time_s", 20.0, 18.0, 18.0, details)
    assert b["compute_s"] == pytest.approx(16.0)  # 4 + (8 - 4) * (16 - 4) / 4
    assert b["exposed_comm_s"] == pytest.approx(1.5) and b["bubble_s"] == pytest.approx(0.5)
    assert b["compute_s"] + b["exposed_comm_s"] + b["bubble_s"] == pytest.approx(18.0)


def test_collectives_have_no_budget():
    assert error_budget("busbw_GBps", 100.0, 90.0, 0.01, {}) is None


CASES = [
    {
        "id": "a",
        "group": "g",
        "kind": "iteration_time",
        "source": "test",
        "compare": {"quantity": "iteration_time_s"},
        "measured": {"iteration_time_s": 10.0},
        "experiment": {
            "model": {"arch": "gpt", "hidden": 256, "layers": 2, "heads": 4, "vocab": 4096, "seq": 256},
            "training": {"global_batch": 4, "micro_batch": 1, "seq_len": 256},
            "parallel": {"tp": 1, "pp": 1, "dp": 1},
            "cluster": {
                "name": "x",
                "host_types": {"h": {"gpu": "H100-SXM", "gpus": 1, "nics": 1, "nic_speed": "400Gbps"}},
                "hosts": [{"type": "h", "count": 1}],
            },
        },
    }
]


def _fake_predict(value: float):
    def predict(case, *args):
        return Prediction(value, value, "full", 0.0, DETAILS)

    return predict


@pytest.mark.parametrize("value,threshold,code", [(10.4, 5, 0), (11.0, 5, 3), (11.0, None, 0)])
def test_fail_above_exit_status(tmp_path, capsys, monkeypatch, value, threshold, code):
    import heterosim.validate.runner as validate_cmd

    path = tmp_path / "cases.yaml"
    path.write_text(yaml.safe_dump({"cases": CASES}))
    monkeypatch.setattr(validate_cmd, "predict", _fake_predict(value))
    args = ["validate", str(path), "--out", str(tmp_path / "o")]
    if threshold is not None:
        args += ["--fail-above", str(threshold)]
    assert main(args) == code
    out = capsys.readouterr().out
    assert "budget: compute" in out and "80% (measured 25%, roofline 75%) | exposed comm" in out
    assert ("above --fail-above" in out) == (code == 3)
    rows = list(csv.reader((tmp_path / "o" / "budget.csv").open()))
    assert rows[0] == list(CSV_COLUMNS) and rows[1][0] == "a"
    doc = json.loads((tmp_path / "o" / "results.json").read_text())
    assert doc["cases"][0]["budget"]["miss_s"] == pytest.approx(value - 10.0)


def test_fail_above_must_be_positive(tmp_path, capsys):
    path = tmp_path / "cases.yaml"
    path.write_text(yaml.safe_dump({"cases": CASES}))
    assert main(["validate", str(path), "--fail-above", "-1", "--out", str(tmp_path / "o")]) == 2
    assert "--fail-above" in capsys.readouterr().err
