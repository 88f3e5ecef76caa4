"""A results folder never costs a user a file that HeteroSim did not write."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from heterosim.cli import main
from heterosim.report.staging import MANIFEST, staged_output

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "tests" / "data" / "tiny_experiment.yaml"


def _experiment_in(folder: Path) -> Path:
    """A copy of the tiny experiment whose cluster path still resolves from ``folder``."""
    text = TINY.read_text().replace("../../topologies/", f"{REPO / 'topologies'}/")
    path = folder / "experiment.yaml"
    path.write_text(text)
    return path


def test_out_dot_refuses_and_deletes_nothing(tmp_path, monkeypatch, capsys):
    experiment = _experiment_in(tmp_path)
    (tmp_path / "thesis.tex").write_text("\\chapter{Results}\n")
    monkeypatch.chdir(tmp_path)
    code = main(["workload", str(experiment), "--out", ".", "--summary-only"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1 and "not a HeteroSim output" in err[0] and "--out ." in err[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["experiment.yaml", "thesis.tex"]
    assert (tmp_path / "thesis.tex").read_text() == "\\chapter{Results}\n"


def _sweep_in(folder: Path, experiment: Path) -> Path:
    path = folder / "sweep.yaml"
    path.write_text(f"experiment: {experiment}\ngrid: {{simulation.seed: [1, 2]}}\n")
    return path


# every command that writes a results folder, with inputs that would run
COMMANDS = {
    "run": lambda f, e: ["run", str(e), "--no-plots", "--quiet"],
    "workload": lambda f, e: ["workload", str(e), "--summary-only"],
    "collective": lambda f, e: ["collective", "--cluster", str(REPO / "topologies/two_host_h100.yaml")],
    "netbench": lambda f, e: ["netbench", str(REPO / "workloads/netbench/incast_4to1.yaml")],
    "sweep": lambda f, e: ["sweep", str(_sweep_in(f, e)), "--quiet", "--no-plots"],
    "compare": lambda f, e: ["compare", str(e), str(e), "--no-plots"],
    "plan": lambda f, e: ["plan", str(e), "--quiet"],
    "validate": lambda f, e: [
        "validate",
        str(REPO / "validation/cases.yaml"),
        "--only",
        "megatron-sc21-t1-1p7b",
    ],
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("out", [".", "results"])
def test_out_with_a_users_files_loses_nothing_in_any_command(tmp_path, monkeypatch, capsys, command, out):
    """``--out .`` (the folder holding the input) and ``--out`` an existing folder holding a
    user's file are refused before any work, by every command; every file stays as it was."""
    experiment = _experiment_in(tmp_path)
    (tmp_path / "thesis.tex").write_text("\\chapter{Results}\n")
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "notes.txt").write_text("mine")
    argv = COMMANDS[command](tmp_path, experiment)
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    monkeypatch.chdir(tmp_path)
    code = main([*argv, "--out", out])
    err = [line for line in capsys.readouterr().err.strip().splitlines() if "error:" in line]
    assert code == 2 and len(err) == 1 and "not a HeteroSim output" in err[0], err
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before


def test_existing_folder_with_a_users_file_is_refused_before_simulating(tmp_path, capsys):
    experiment = _experiment_in(tmp_path)
    out = tmp_path / "results"
    out.mkdir()
    (out / "thesis.tex").write_text("mine")
    code = main(["run", str(experiment), "--out", str(out), "--no-plots", "--quiet"])
    assert code == 2
    assert "not a HeteroSim output" in capsys.readouterr().err
    assert [p.name for p in out.iterdir()] == ["thesis.tex"]


def test_rewriting_an_output_keeps_files_added_beside_it(tmp_path):
    experiment = _experiment_in(tmp_path)
    out = tmp_path / "traces"
    assert main(["workload", str(experiment), "--out", str(out), "--summary-only"]) == 0
    listed = json.loads((out / MANIFEST).read_text())["files"]
    assert sorted(listed) == ["comm_group.json", "workload.json"]
    (out / "notes.txt").write_text("keep me")
    (out / "stale.et").write_text("x")  # not ours: kept even though it looks like a trace
    assert main(["workload", str(experiment), "--out", str(out), "--summary-only"]) == 0
    names = sorted(p.name for p in out.iterdir())
    assert names == sorted([MANIFEST, "comm_group.json", "notes.txt", "stale.et", "workload.json"])
    assert (out / "notes.txt").read_text() == "keep me"


def test_replace_removes_only_files_of_the_previous_output(tmp_path):
    out = tmp_path / "o"
    with staged_output(out) as stage:
        (stage / "a.csv").write_text("1")
        (stage / "sub").mkdir()
        (stage / "sub" / "b.csv").write_text("2")
    (out / "sub" / "user.txt").write_text("u")
    with staged_output(out) as stage:
        (stage / "c.csv").write_text("3")
    assert not (out / "a.csv").exists() and not (out / "sub" / "b.csv").exists()
    assert (out / "sub" / "user.txt").read_text() == "u" and (out / "c.csv").read_text() == "3"
    assert json.loads((out / MANIFEST).read_text())["files"] == ["c.csv"]
    assert not [p for p in out.iterdir() if p.name.startswith(".heterosim-stage-")]


def test_failure_while_writing_keeps_the_previous_results(tmp_path):
    out = tmp_path / "o"
    with staged_output(out) as stage:
        (stage / "results.json").write_text("{}")
    with pytest.raises(RuntimeError), staged_output(out) as stage:
        (stage / "results.json").write_text('{"half": ')
        raise RuntimeError("killed")
    assert (out / "results.json").read_text() == "{}"
    shutil.rmtree(out)


KILL_DURING_WRITE = r"""
import os, signal, sys
from pathlib import Path
from heterosim.report import staging

out, version, kill_at = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
calls = {"n": 0}
real_replace, real_unlink = os.replace, Path.unlink

def counted(real):
    def wrapper(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        return real(*args, **kwargs)
    return wrapper

os.replace = counted(real_replace)
Path.unlink = counted(real_unlink)
with staging.staged_output(out) as stage:
    (stage / "flows.csv").write_text(version * 1000)
    (stage / "sub").mkdir()
    (stage / "sub" / "plot.png").write_text(version)
    (stage / "results.json").write_text('{"version": "%s"}' % version)
print(calls["n"])
"""


def _write(out: Path, version: str, kill_at: int = 0) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", KILL_DURING_WRITE, str(out), version, str(kill_at)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_sigkill_while_writing_leaves_the_previous_results_or_none(tmp_path):
    """A run killed with SIGKILL at any point of moving its results into place leaves either the
    previous complete results or no results.json at all; the next run removes the staging folder
    the killed one left and never touches a file it did not write."""
    probe = tmp_path / "probe"
    assert _write(probe, "v1").returncode == 0
    steps = int(_write(probe, "v2").stdout.strip())  # file operations of replacing an output
    assert steps >= 4
    for kill_at in range(1, steps + 1):
        out = tmp_path / f"kill{kill_at}"
        assert _write(out, "v1").returncode == 0
        (out / "notes.txt").write_text("mine")
        killed = _write(out, "v2", kill_at)
        assert killed.returncode == -signal.SIGKILL, killed.stderr
        results = out / "results.json"
        if results.exists():  # complete: every file of the same version
            version = json.loads(results.read_text())["version"]
            assert version == "v1"
            assert (out / "flows.csv").read_text() == version * 1000
            assert (out / "sub" / "plot.png").read_text() == version
        assert (out / "notes.txt").read_text() == "mine"
        assert _write(out, "v3").returncode == 0  # the next run completes and cleans up
        assert json.loads(results.read_text())["version"] == "v3"
        assert (out / "flows.csv").read_text() == "v3" * 1000
        assert not [p for p in out.iterdir() if p.name.startswith(".heterosim-stage-")]
        assert (out / "notes.txt").read_text() == "mine"


@pytest.mark.parametrize(
    "where, fragment",
    [
        ("/proc/heterosim-out", "cannot write there"),
        ("notes.txt/sub", "is a file, not a folder"),
        ("x" * 300, "too long"),
        ("/dev/full/x", "is a file, not a folder"),
    ],
)
def test_unwritable_out_is_one_line_before_simulating(tmp_path, monkeypatch, capsys, where, fragment):
    experiment = _experiment_in(tmp_path)
    (tmp_path / "notes.txt").write_text("mine")
    monkeypatch.chdir(tmp_path)
    for command in (
        ["run", str(experiment), "--no-plots", "--quiet"],
        ["workload", str(experiment), "--summary-only"],
        ["collective", "--cluster", str(REPO / "topologies" / "two_host_h100.yaml"), "--size", "1MiB"],
    ):
        code = main([*command, "--out", where])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and len(err) == 1 and fragment in err[0], err
    assert (tmp_path / "notes.txt").read_text() == "mine"
