"""Ctrl-C during a run stops it cleanly and writes what is known, marked partial."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # as a shell does for a background job


@pytest.mark.ns3
@pytest.mark.parametrize(
    "sent, reason, status",
    [
        (signal.SIGINT, "interrupted by the user (Ctrl-C)", 130),
        (signal.SIGTERM, "terminated by SIGTERM", 143),
    ],
)
def test_signal_writes_partial_results(tmp_path, native_lib, sent, reason, status):
    """Ctrl-C, or SIGTERM to a run whose Ctrl-C is ignored (a background job), stops the
    simulation where it is and writes what is known, marked partial with the reason; the exit
    status says it was interrupted (130 / 143, README) and nothing is extrapolated."""
    out = tmp_path / "partial"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "heterosim.cli",
            "run",
            "workloads/default.yaml",
            "--fidelity",
            "packet",
            "--out",
            str(out),
            "--no-plots",
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_ignore_sigint if sent == signal.SIGTERM else None,
    )
    deadline = time.monotonic() + 600
    assert process.stderr is not None
    for line in process.stderr:  # wait until the simulation itself is running
        if "simulated" in line or time.monotonic() > deadline:
            break
    process.send_signal(sent)
    stdout, stderr = process.communicate(timeout=300)
    assert process.returncode == status, stderr
    headline = stdout.splitlines()[0]
    assert headline.startswith("PARTIAL") and reason in headline and "no iteration time" in headline
    assert stderr.strip().splitlines()[-1].endswith(f"{reason}: partial results in {out}/")
    results = json.loads((out / "results.json").read_text())
    assert results["sim"]["partial"] is True
    assert results["sim"]["error"] == reason
    assert results["iteration_time_s"] is None  # never the partial makespan / iterations
    assert results["throughput"]["tokens_per_s"] is None
    assert results["throughput"]["tflops_per_gpu"] is None
    assert 0 < results["sim"]["simulated_s"]
    assert results["sim"]["tasks_done"] < results["sim"]["tasks"]
    assert all(t >= 0 for t in results["iterations"]["time_s"])
    assert (out / "trace.json").exists()


def _run(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "heterosim.cli", "run", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.ns3
def test_until_reports_the_slice_before_that_simulated_time(tmp_path, native_lib):
    """--until 5ms ends the run at 5 ms of simulated time; every flow that finished by then
    finished exactly as in the whole iteration, and the results say where it stopped."""
    common = ["workloads/default.yaml", "--fidelity", "flow", "--no-plots", "--quiet"]
    whole = _run([*common, "--out", str(tmp_path / "whole")])
    part = _run([*common, "--out", str(tmp_path / "part"), "--until", "5ms"])
    assert whole.returncode == 0 and part.returncode == 0, part.stderr
    assert part.stdout.startswith("PARTIAL") and "stopped at --until 5ms" in part.stdout.splitlines()[0]
    results = json.loads((tmp_path / "part" / "results.json").read_text())
    assert results["sim"]["partial"] is True and results["sim"]["until_ns"] == 5_000_000
    assert results["iteration_time_s"] is None and results["sim"]["simulated_s"] <= 5e-3
    full = json.loads((tmp_path / "whole" / "results.json").read_text())
    assert full["sim"]["partial"] is False and full["iteration_time_s"] > 5e-3

    def finished(folder: str) -> dict[int, str]:
        lines = (tmp_path / folder / "flows.csv").read_text().splitlines()[1:]
        rows = [line.split(",") for line in lines]
        return {int(r[0]): r[5] for r in rows if 0 <= float(r[5]) <= 5e-3}  # -1 ns: unfinished

    before = finished("part")
    assert len(before) > 1000
    assert before == {task: end for task, end in finished("whole").items() if task in before}
    assert set(before) == set(finished("whole"))


@pytest.mark.parametrize(
    "value, problem",
    [("5", "needs a unit"), ("0ms", "expected a simulated time > 0"), ("5 parsecs", "unknown time unit")],
)
def test_until_rejects_a_bad_time(tmp_path, value, problem):
    result = _run(["--until", value, "--quiet", "--out", str(tmp_path / "x")])
    assert result.returncode == 2
    assert f"--until {value}" in result.stderr and problem in result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "x").exists()
