"""A sweep stopped by SIGTERM (or killed) leaves no process behind, and --resume finishes it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from heterosim.cli import main

REPO = Path(__file__).resolve().parents[2]


def _session_processes(session: int) -> list[int]:
    """Process ids whose session is ``session`` (the sweep started in a session of its own)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == session and fields[0] != "Z":
            found.append(int(entry.name))
    return found


def _start(tmp_path: Path) -> tuple[subprocess.Popen, Path]:
    path = tmp_path / "sweep.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "experiment": str(REPO / "tests" / "data" / "tiny_experiment.yaml"),
                "fidelity": "flow",
                "grid": {"simulation.seed": [1, 2, 3, 4]},
            }
        )
    )
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "heterosim.cli",
            "sweep",
            str(path),
            "--workers",
            "2",
            "--out",
            str(out),
            "--no-plots",
            "--quiet",
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    deadline = time.monotonic() + 120
    while len(_session_processes(proc.pid)) < 3:  # the driver and both workers
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    return proc, path


def _gone(session: int, timeout_s: float = 15) -> list[int]:
    deadline = time.monotonic() + timeout_s
    while _session_processes(session) and time.monotonic() < deadline:
        time.sleep(0.1)
    return _session_processes(session)


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_sigterm_stops_workers_and_resume_finishes(tmp_path):
    proc, path = _start(tmp_path)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 143, stderr
    lines = [ln for ln in stderr.splitlines() if ln.startswith("heterosim sweep:")]
    assert len(lines) == 1 and "terminated by SIGTERM" in lines[0] and "--resume" in lines[0], stderr
    assert "Traceback" not in stderr, stderr
    assert _gone(proc.pid) == []  # no worker left running
    out = tmp_path / "out"
    assert (
        main(["sweep", str(path), "--out", str(out), "--resume", "--quiet", "--no-plots", "--workers", "1"])
        == 0
    )
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert sorted({r["id"] for r in records if r["status"] == "ok"}) == sorted({r["id"] for r in records})
    assert len({r["id"] for r in records}) == 4


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_killed_driver_takes_its_workers_with_it(tmp_path):
    proc, _ = _start(tmp_path)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=60)
    assert _gone(proc.pid) == []
