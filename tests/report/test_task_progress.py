"""Per-run progress lines of compare, netbench, sweep, plan and validate: counts, elapsed, ETA."""

from __future__ import annotations

import pytest

from heterosim.report.task_progress import TaskProgress, format_duration


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize(
    "seconds, text",
    [(0.42, "0.4 s"), (12.4, "12 s"), (125, "2 min 05 s"), (3720, "1 h 02 min"), (-1, "0.0 s")],
)
def test_durations_read_as_a_person_would_say_them(seconds, text):
    assert format_duration(seconds) == text


def test_sequential_runs_eta_is_the_mean_run_times_the_runs_left():
    clock, lines = Clock(), []
    progress = TaskProgress("validate", 4, emit=lines.append, clock=clock)
    clock.now += 10
    progress.done("case-a")
    clock.now += 30
    progress.done("case-b", "ok")
    assert lines == [
        "heterosim validate: [1/4] case-a  (10 s elapsed, ETA 30 s)",
        "heterosim validate: [2/4] case-b  ok  (40 s elapsed, ETA 40 s)",  # 20 s per run, 2 left
    ]


def test_parallel_runs_finish_in_waves_of_workers():
    clock, lines = Clock(), []
    progress = TaskProgress("sweep", 8, workers=2, emit=lines.append, clock=clock)
    clock.now += 60
    progress.done("v0", run_s=60.0)
    assert progress.eta_s() == pytest.approx(60 * 4 - 60)  # four waves of two, one wave gone
    progress.done("v1", run_s=60.0)
    for i in range(6):
        progress.done(f"v{i + 2}", run_s=60.0)
    assert progress.eta_s() is None and lines[-1].endswith("(1 min 00 s elapsed)")


def test_two_sides_in_parallel_have_nothing_left_once_both_started_together():
    clock = Clock()
    progress = TaskProgress("compare", 2, workers=2, emit=None, clock=clock)
    clock.now += 80
    progress.done("A (dcqcn) ok", run_s=80.0)
    assert progress.eta_s() == 0.0  # B started with A


def test_no_emit_is_quiet(capsys):
    progress = TaskProgress("plan", 2, emit=None)
    progress.message("starting")
    progress.done("x")
    assert capsys.readouterr() == ("", "")
