"""A several-jobs run stopped early (``--until`` before a job starts, Ctrl-C, SIGTERM) writes its
partial results and says which jobs had not finished, as a one-job run does."""

from __future__ import annotations

import copy
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from heterosim.cli import main

REPO = Path(__file__).resolve().parents[2]
JOB = {
    "model": {
        "arch": "gpt",
        "hidden": 256,
        "layers": 2,
        "heads": 4,
        "ffn": 1024,
        "vocab": 4096,
        "seq": 256,
        "name": "gpt-micro",
    },
    "training": {"global_batch": 4, "micro_batch": 1, "seq_len": 256},
    "parallel": {"tp": 4, "pp": 1, "dp": 2},
}
JOBS = {
    "name": "two",
    "cluster": str(REPO / "topologies" / "mixed_16gpu.yaml"),
    "jobs": [
        {"name": "a", "gpus": "0-7", "experiment": JOB},
        {"name": "b", "gpus": "8-15", "start": "1ms", "experiment": JOB},
    ],
    "simulation": {"fidelity": "flow"},
}


def test_until_before_the_second_job_starts(tmp_path, capsys):
    path = tmp_path / "jobs.yaml"
    path.write_text(yaml.safe_dump(JOBS))
    out = tmp_path / "out"
    code = main(["run", str(path), "--out", str(out), "--no-plots", "--until", "0.2ms"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "Traceback" not in captured.err
    results = json.loads((out / "results.json").read_text())
    assert results["sim"]["partial"] is True
    assert results["iteration_time_s"] is None  # no job finished: nothing to rank
    a, b = results["jobs"]
    assert a["iteration_time_s"] is None and a["end_s"] is not None
    assert b["iteration_time_s"] is None and b["end_s"] is None  # never started
    assert "job b" in captured.out and "not started when the run stopped" in captured.out


def _bigger_jobs(tmp_path: Path) -> Path:
    data = copy.deepcopy(JOBS)
    for job in data["jobs"]:
        job["experiment"]["model"].update(hidden=1024, layers=8)
        job["experiment"]["training"]["global_batch"] = 16
    data["simulation"] = {"fidelity": "packet"}
    path = tmp_path / "jobs.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.ns3
@pytest.mark.parametrize("sent, status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signal_during_a_two_job_packet_run(tmp_path, native_lib, sent, status):
    out = tmp_path / "out"
    process = subprocess.Popen(
        [sys.executable, "-m", "heterosim.cli", "run", str(_bigger_jobs(tmp_path)), "--out", str(out)]
        + ["--no-plots"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 600
    assert process.stderr is not None
    for line in process.stderr:  # wait until the simulation itself is running
        if "simulated" in line or time.monotonic() > deadline:
            break
    process.send_signal(sent)
    stdout, stderr = process.communicate(timeout=300)
    assert process.returncode == status, stderr
    assert "Traceback" not in stderr
    assert stderr.strip().splitlines()[-1].endswith(f"partial results in {out}/")
    results = json.loads((out / "results.json").read_text())
    assert results["sim"]["partial"] is True
    assert "PARTIAL" in stdout
