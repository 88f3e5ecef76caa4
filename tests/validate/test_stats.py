"""Error % and MAPE arithmetic, and which cases enter the statistics."""

from __future__ import annotations

import pytest

from heterosim.validate.stats import average_ranks, error_pct, group_summary, mape, spearman


def test_error_pct_sign_and_value():
    assert error_pct(110.0, 100.0) == pytest.approx(10.0)
    assert error_pct(0.75, 1.0) == pytest.approx(-25.0)
    with pytest.raises(ValueError):
        error_pct(1.0, 0.0)


def test_mape_is_mean_of_absolute_errors():
    assert mape([10.0, -30.0, 5.0]) == pytest.approx(15.0)
    assert mape([]) is None


def row(group, err, kind="throughput", flags=(), calibration=False):
    return {
        "group": group,
        "kind": kind,
        "error_pct": err,
        "separate_flags": list(flags),
        "calibration": calibration,
    }


def test_group_summary_keeps_flagged_and_calibration_apart():
    rows = [
        row("a", 10.0),
        row("a", -20.0),
        row("a", 50.0, flags=["SUSPECT"]),
        row("a", 1.0, calibration=True),
        row("a", None),
        row("n", 4.0, kind="collective_busbw"),
        row("n", -2.0, kind="collective_busbw"),
    ]
    s = group_summary(rows)
    assert s["a"]["main_n"] == 2 and s["a"]["main_mape_pct"] == pytest.approx(15.0)
    assert s["a"]["main_mean_error_pct"] == pytest.approx(-5.0)
    assert s["a"]["flagged_n"] == 1 and s["a"]["flagged_mape_pct"] == pytest.approx(50.0)
    assert s["a"]["calibration_n"] == 1 and s["a"]["failed"] == 1
    assert s["end-to-end"]["main_mape_pct"] == pytest.approx(15.0)
    assert s["collective_busbw"]["main_mape_pct"] == pytest.approx(3.0)
    assert "collective_busbw" not in {k for k in s if k == "end-to-end" and s[k]["main_n"] > 2}


def test_spearman_ranks_with_ties_against_hand_values():
    assert spearman([1.0, 2.0, 3.0, 4.0], [10.0, 20.0, 30.0, 40.0]) == pytest.approx(1.0)
    assert spearman([1.0, 2.0, 3.0, 4.0], [4.0, 3.0, 2.0, 1.0]) == pytest.approx(-1.0)
    # ranks x: 1,2,3,4,5; y: 2,1,4,3,5 -> d^2 sum 4 -> 1 - 6*4/(5*24) = 0.8
    assert spearman([1, 2, 3, 4, 5], [2, 1, 4, 3, 5]) == pytest.approx(0.8)
    # ties share the mean rank: y ranks 1.5,1.5,3,4 -> Pearson of (1,2,3,4) with them
    assert average_ranks([5.0, 5.0, 7.0, 9.0]) == [1.5, 1.5, 3.0, 4.0]
    assert spearman([1, 2, 3, 4], [5, 5, 7, 9]) == pytest.approx(0.9486832980505138)
    assert spearman([1, 2], [2, 1]) is None and spearman([1, 2, 3], [1, 1, 1]) is None
    with pytest.raises(ValueError):
        spearman([1, 2, 3], [1, 2])


def test_group_summary_reports_spearman_of_main_cases():
    rows = [
        {**row("g", -10.0), "predicted": 0.9, "measured": 1.0},
        {**row("g", 5.0), "predicted": 2.1, "measured": 2.0},
        {**row("g", 0.0), "predicted": 3.0, "measured": 3.0},
        {**row("g", 60.0, flags=["SUSPECT"]), "predicted": 0.1, "measured": 9.0},
    ]
    s = group_summary(rows)
    assert s["g"]["main_spearman"] == pytest.approx(1.0)  # the flagged row stays out
    rows[2]["predicted"] = 0.5  # now ranked first instead of last
    assert group_summary(rows)["g"]["main_spearman"] == pytest.approx(-0.5)


def test_summary_lines_print_spearman_per_group():
    from heterosim.validate.report import summary_lines

    rows = [
        {**row("g", -10.0), "predicted": 0.9, "measured": 1.0},
        {**row("g", 5.0), "predicted": 2.1, "measured": 2.0},
        {**row("g", 0.0), "predicted": 3.0, "measured": 3.0},
    ]
    lines = summary_lines(group_summary(rows))
    assert "Spearman" in lines[0]
    g = next(line for line in lines if line.split()[0] == "g")
    assert g.split()[:5] == ["g", "3", "5", "-1.667", "1"]


def test_speed_error_has_one_sign_convention_for_times_and_throughputs():
    from heterosim.validate.stats import speed_error_pct

    # a time predicted 20 % short is a simulator 25 % too fast; a throughput 25 % high likewise
    assert speed_error_pct("iteration_time_s", 0.8, 1.0) == pytest.approx(25.0)
    assert speed_error_pct("layer_total_ms", 8.0, 10.0) == pytest.approx(25.0)
    assert speed_error_pct("tokens_per_s_per_gpu", 125.0, 100.0) == pytest.approx(25.0)
    rows = [
        {**row("g", -20.0), "quantity": "iteration_time_s", "predicted": 0.8, "measured": 1.0},
        {**row("g", 25.0), "quantity": "tflops_per_gpu", "predicted": 125.0, "measured": 100.0},
    ]
    summary = group_summary(rows)["g"]
    assert summary["main_mean_error_pct"] == pytest.approx(2.5)  # signs of different meaning
    assert summary["main_mean_speed_error_pct"] == pytest.approx(25.0)
