"""Error % and MAPE arithmetic, and which cases enter the statistics."""

from __future__ import annotations

import pytest

from heterosim.validate.stats import error_pct, group_summary, mape


def test_error_pct_sign_and_value():
    assert error_pct(110.0, 100.0) == pytest.approx(10.0)
    assert error_pct(0.75, 1.0) == pytest.approx(-25.0)
    with pytest.raises(ValueError):
        error_pct(1.0, 0.0)


def test_mape_is_mean_of_absolute_errors():
    assert mape([10.0, -30.0, 5.0]) == pytest.approx(15.0)
    assert mape([]) is None


def row(group, err, kind="throughput", flags=(), calibration=False):
    return {"group": group, "kind": kind, "error_pct": err, "separate_flags": list(flags),
            "calibration": calibration}


def test_group_summary_keeps_flagged_and_calibration_apart():
    rows = [row("a", 10.0), row("a", -20.0), row("a", 50.0, flags=["SUSPECT"]),
            row("a", 1.0, calibration=True), row("a", None),
            row("n", 4.0, kind="collective_busbw"), row("n", -2.0, kind="collective_busbw")]
    s = group_summary(rows)
    assert s["a"]["main_n"] == 2 and s["a"]["main_mape_pct"] == pytest.approx(15.0)
    assert s["a"]["main_mean_error_pct"] == pytest.approx(-5.0)
    assert s["a"]["flagged_n"] == 1 and s["a"]["flagged_mape_pct"] == pytest.approx(50.0)
    assert s["a"]["calibration_n"] == 1 and s["a"]["failed"] == 1
    assert s["end-to-end"]["main_mape_pct"] == pytest.approx(15.0)
    assert s["collective_busbw"]["main_mape_pct"] == pytest.approx(3.0)
    assert "collective_busbw" not in {k for k in s if k == "end-to-end" and s[k]["main_n"] > 2}
