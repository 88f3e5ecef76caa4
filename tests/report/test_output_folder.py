"""A results folder never costs a user a file that HeteroSim did not write."""

from __future__ import annotations

import json
import shutil
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
