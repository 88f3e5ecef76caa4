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


@pytest.mark.ns3
def test_sigint_writes_partial_results(tmp_path, native_lib):
    out = tmp_path / "partial"
    process = subprocess.Popen(
        [sys.executable, "-m", "heterosim.cli", "run", "workloads/default.yaml", "--fidelity", "packet",
         "--out", str(out), "--no-plots"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    deadline = time.monotonic() + 600
    assert process.stderr is not None
    for line in process.stderr:  # wait until the simulation itself is running
        if "simulated" in line or time.monotonic() > deadline:
            break
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=300)
    assert process.returncode == 0, stderr
    assert "PARTIAL" in stdout and "interrupted" in stdout
    results = json.loads((out / "results.json").read_text())
    assert results["sim"]["partial"] is True
    assert "interrupted" in results["sim"]["error"]
    assert 0 < results["iteration_time_s"]
    assert (out / "trace.json").exists()
