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


def _write_sweep(tmp_path: Path, seeds: int) -> Path:
    path = tmp_path / "sweep.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "experiment": str(REPO / "tests" / "data" / "tiny_experiment.yaml"),
                "fidelity": "flow",
                "grid": {"simulation.seed": list(range(1, seeds + 1))},
            }
        )
    )
    return path


def _popen(args: list[str]) -> subprocess.Popen:
    """The CLI in a session of its own (so every process it starts can be found), this checkout first."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    return subprocess.Popen(
        [sys.executable, "-m", "heterosim.cli", *args],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _start(tmp_path: Path) -> tuple[subprocess.Popen, Path]:
    path = _write_sweep(tmp_path, 4)
    out = tmp_path / "out"
    proc = _popen(["sweep", str(path), "--workers", "2", "--out", str(out), "--no-plots", "--quiet"])
    deadline = time.monotonic() + 120
    while len(_session_processes(proc.pid)) < 3:  # the driver and both workers
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    return proc, path


def _ignores_sigint(pid: int) -> bool | None:
    """Whether process ``pid`` ignores SIGINT (None: it has gone)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    ignored = int(next(ln for ln in status.splitlines() if ln.startswith("SigIgn:")).split()[1], 16)
    return bool(ignored & (1 << (signal.SIGINT - 1)))


def _gone(session: int, timeout_s: float = 15) -> list[int]:
    deadline = time.monotonic() + timeout_s
    while _session_processes(session) and time.monotonic() < deadline:
        time.sleep(0.1)
    return _session_processes(session)


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_sigterm_stops_workers_and_resume_finishes(tmp_path):
    proc, path = _start(tmp_path)
    # once the workers have started (a spawned child still reading its start-up data from the
    # driver is the documented limitation of heterosim/sweep/local.py)
    deadline = time.monotonic() + 120
    while not all(
        _ignores_sigint(pid) is not False for pid in _session_processes(proc.pid) if pid != proc.pid
    ):
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
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
def test_ctrl_c_to_the_process_group_stops_the_sweep(tmp_path):
    """Ctrl-C in a terminal sends SIGINT to every process of the foreground group, workers
    included: the driver stops them and exits 130 with one line; --resume can continue."""
    proc, _ = _start(tmp_path)
    deadline = time.monotonic() + 120
    # once the workers run (their initializer ignores SIGINT); while they import heterosim, the
    # interrupt also reaches them and each prints Python's KeyboardInterrupt traceback
    while not all(
        _ignores_sigint(pid) is not False for pid in _session_processes(proc.pid) if pid != proc.pid
    ):
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    lines = [ln for ln in stderr.splitlines() if ln.startswith("heterosim sweep:")]
    assert len(lines) == 1 and "interrupted by the user (Ctrl-C)" in lines[0] and "--resume" in lines[0]
    assert "Traceback" not in stderr, stderr
    assert _gone(proc.pid) == []
    _assert_only_complete_variants(tmp_path / "out")


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_killed_driver_takes_its_workers_with_it(tmp_path):
    proc, _ = _start(tmp_path)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=60)
    assert _gone(proc.pid) == []


def _records(out: Path) -> list[dict]:
    store = out / "results.jsonl"
    return [json.loads(line) for line in store.read_text().splitlines()] if store.is_file() else []


def _assert_only_complete_variants(out: Path) -> None:
    """Every variant folder holds complete results of a recorded run; no temporary file is left."""
    recorded = {r["id"] for r in _records(out) if r["status"] == "ok"}
    folders = {p.name for p in (out / "runs").iterdir()} if (out / "runs").exists() else set()
    assert folders == recorded
    for folder in folders:
        assert [p.name for p in (out / "runs" / folder).iterdir()] == ["results.json"]
        json.loads((out / "runs" / folder / "results.json").read_text())
    assert not [p for p in out.rglob(".*") if p.name != ".heterosim-output.json"]


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_sigterm_stops_a_ray_sweep_and_resume_finishes(tmp_path):
    pytest.importorskip("ray")
    path = _write_sweep(tmp_path, 12)
    out = tmp_path / "out"
    args = ["sweep", str(path), "--executor", "ray", "--out", str(out), "--no-plots", "--quiet"]
    proc = _popen(args)
    deadline = time.monotonic() + 180
    while not _records(out):  # stop it mid-sweep: some variants finished, others running
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=120)
    # ray.init replaces the SIGTERM handler (exit 15, or 134 from its native crash handler)
    assert proc.returncode == 143, stderr
    lines = [ln for ln in stderr.splitlines() if ln.startswith("heterosim sweep:")]
    assert len(lines) == 1 and "terminated by SIGTERM" in lines[0] and "--resume" in lines[0], stderr
    assert "Traceback" not in stderr and "SIGTERM received" not in stderr, stderr
    assert _gone(proc.pid, timeout_s=30) == []  # Ray's workers, raylet and GCS are all gone
    _assert_only_complete_variants(out)
    finished = {r["id"] for r in _records(out)}
    assert 1 <= len(finished) < 12

    resumed = _popen([*args, "--resume"])
    stdout, stderr = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, stderr
    assert f"ran {12 - len(finished)} now, {len(finished)} already done" in stdout, stdout
    assert _gone(resumed.pid, timeout_s=30) == []
    records = _records(out)
    assert len({r["id"] for r in records}) == 12 and {r["status"] for r in records} == {"ok"}
    assert len(records) == 12  # nothing ran twice
    _assert_only_complete_variants(out)


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_sigterm_stops_a_plan_search_and_resume_finishes(tmp_path):
    """heterosim plan runs its candidates through the sweep executors: SIGTERM stops the workers,
    exits 143 with one line, and --resume runs only what was not recorded."""
    out = tmp_path / "plan"
    experiment = str(REPO / "tests" / "data" / "tiny_experiment.yaml")
    args = ["plan", experiment, "--out", str(out), "--max-candidates", "6", "--workers", "2", "--quiet"]
    proc = _popen(args)
    deadline = time.monotonic() + 120
    while len(_session_processes(proc.pid)) < 3:  # the driver and both workers
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 143, stderr  # not killed by the signal (-15) mid-write
    assert [ln for ln in stderr.splitlines() if ln.startswith("heterosim plan:")] == [
        "heterosim plan: terminated"
    ]
    assert _gone(proc.pid) == []
    recorded = {r["id"] for r in _records(out)}
    resumed = _popen([*args, "--resume"])
    _, stderr = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, stderr
    ids = [r["id"] for r in _records(out)]
    assert len(ids) == len(set(ids)) == 6 and recorded <= set(ids)  # nothing ran twice
