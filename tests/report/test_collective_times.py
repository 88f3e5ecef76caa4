"""results.json collectives.by_type and the all-to-all rows of heterosim compare."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from heterosim.report.compare_report import metric_rows
from heterosim.report.run_report import collective_times


def test_times_per_type_from_the_instance_markers() -> None:
    colls = {
        "id": np.arange(4),
        "comm_type": np.array([6, 6, 0, 6]),
        "size_bytes": np.array([100, 300, 50, 200]),
        "start_task": np.array([0, 2, 4, 6]),
        "end_task": np.array([1, 3, 5, 7]),
    }
    start = np.array([0, -1, 10, -1, 0, -1, 20, -1, -1])
    end = np.array([-1, 1000, -1, 4000, -1, 60, -1, -1])  # instance 3 did not finish
    engine = SimpleNamespace(task_start_ns=start, task_end_ns=np.append(end, -1))
    out = collective_times(colls, engine)
    assert out["ALL_TO_ALL"]["count"] == 3 and out["ALL_TO_ALL"]["bytes"] == 600
    assert out["ALL_TO_ALL"]["mean_time_s"] == pytest.approx((1000 + 3990) / 2 * 1e-9)
    assert out["ALL_TO_ALL"]["max_time_s"] == pytest.approx(3990e-9)
    assert out["ALL_REDUCE"] == {
        "count": 1,
        "bytes": 50,
        "mean_time_s": pytest.approx(60e-9),
        "max_time_s": pytest.approx(60e-9),
    }


def test_compare_shows_all_to_all_rows_only_for_moe_runs() -> None:
    a2a = {"ALL_TO_ALL": {"mean_time_s": 1e-3, "max_time_s": 2e-3}}
    a = {"iteration_time_s": 1.0, "collectives": {"by_type": a2a}}
    b = {
        "iteration_time_s": 2.0,
        "collectives": {"by_type": {"ALL_TO_ALL": {"mean_time_s": 2e-3, "max_time_s": 3e-3}}},
    }
    rows = {r["label"]: r for r in metric_rows(a, b)}
    assert rows["all-to-all mean"]["ratio"] == pytest.approx(2.0)
    assert rows["all-to-all max"]["ratio"] == pytest.approx(1.5)
    dense = {"iteration_time_s": 1.0, "collectives": {"by_type": {"ALL_REDUCE": {"mean_time_s": 1.0}}}}
    assert not any("all-to-all" in r["label"] for r in metric_rows(dense, dense))
