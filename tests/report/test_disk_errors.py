"""A full disk or a read-only file system: one line naming the path, exit 2, nothing half-written
left, earlier results and the user's files untouched.

The real cases mount a small tmpfs (full disk) or a read-only bind mount in a mount namespace of
their own (``unshare -rm``) and are skipped where that is not permitted; the unit cases inject
ENOSPC and EROFS into the writers.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from heterosim.errors import UserError
from heterosim.report import staging
from heterosim.report.staging import MANIFEST, STAGE_PREFIX, staged_output, write_file_atomically

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "tests" / "data" / "tiny_experiment.yaml"
CLI = f"env PYTHONPATH={REPO} {sys.executable} -m heterosim.cli"


def _namespaces() -> bool:
    if shutil.which("unshare") is None:
        return False
    try:
        probe = subprocess.run(
            ["unshare", "-rm", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt 2>/dev/null || exit 1"],
            capture_output=True,
            timeout=20,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0


needs_namespaces = pytest.mark.skipif(
    not _namespaces(), reason="needs unshare -rm (user and mount namespaces) to mount a tmpfs"
)


def _in_namespace(script: str, tmp_path: Path) -> None:
    """Run ``script`` (sh) in a user and mount namespace of its own, from the repository."""
    done = subprocess.run(
        ["unshare", "-rm", "sh", "-c", script], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr


def _error_lines(path: Path) -> list[str]:
    text = path.read_text()
    assert "Traceback" not in text, text
    return [line for line in text.splitlines() if "error:" in line]


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@needs_namespaces
def test_run_on_a_full_disk_leaves_nothing_and_keeps_the_users_file(tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    # the tiny run's outputs (--no-plots) are about 25 MB: 4 MB cannot take them
    _in_namespace(
        f"""
        mount -t tmpfs -o size=4m tmpfs {disk} || exit 1
        echo mine > {disk}/notes.txt
        {CLI} run {TINY} --out {disk}/out --no-plots --quiet > /dev/null 2> {tmp_path}/err
        echo $? > {tmp_path}/rc
        ls -A {disk} > {tmp_path}/list
        cat {disk}/notes.txt > {tmp_path}/notes
        """,
        tmp_path,
    )
    assert (tmp_path / "rc").read_text().strip() == "2"
    err = _error_lines(tmp_path / "err")
    assert len(err) == 1 and f"--out {disk}/out" in err[0], err
    assert "no space left on the device" in err[0], err
    assert (tmp_path / "list").read_text().split() == ["notes.txt"]  # no output, no staging folder
    assert (tmp_path / "notes").read_text() == "mine\n"


@needs_namespaces
def test_a_full_disk_keeps_the_previous_output(tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    _in_namespace(
        f"""
        mount -t tmpfs -o size=3m tmpfs {disk} || exit 1
        {CLI} workload {TINY} --out {disk}/out > /dev/null 2>&1 || exit 1
        echo mine > {disk}/out/thesis.tex
        cp -a {disk}/out {tmp_path}/before
        dd if=/dev/zero of={disk}/fill bs=64k 2> /dev/null
        truncate -s -256K {disk}/fill
        {CLI} workload {TINY} --out {disk}/out --set simulation.seed=2 > /dev/null 2> {tmp_path}/err
        echo $? > {tmp_path}/rc
        cp -a {disk}/out {tmp_path}/after
        ls -A {disk} > {tmp_path}/list
        """,
        tmp_path,
    )
    assert (tmp_path / "rc").read_text().strip() == "2"
    err = _error_lines(tmp_path / "err")
    assert len(err) == 1 and f"{disk}/out" in err[0] and "no space left" in err[0].lower(), err
    before = _tree(tmp_path / "before")
    assert "workload.json" in before and "thesis.tex" in before
    assert _tree(tmp_path / "after") == before  # every earlier file, byte for byte
    assert sorted((tmp_path / "list").read_text().split()) == ["fill", "out"]


@needs_namespaces
def test_read_only_file_system_is_refused_before_simulating(tmp_path):
    shelf = tmp_path / "shelf"
    shelf.mkdir()
    out = shelf / "out"
    with staged_output(out) as stage:  # an earlier output, and a user's file beside it
        (stage / "results.json").write_text('{"version": 1}')
    (shelf / "notes.txt").write_text("mine")
    before = _tree(shelf)
    commands = {
        "run": f"run {TINY} --no-plots --quiet --out {out}",
        "workload": f"workload {TINY} --summary-only --out {shelf}/new",
        "collective": f"collective --cluster {REPO}/topologies/two_host_h100.yaml --size 1MiB --out {out}",
    }
    script = f"mount --bind {shelf} {shelf} && mount -o remount,bind,ro {shelf} || exit 1\n" + "".join(
        f"{CLI} {args} > /dev/null 2> {tmp_path}/{name}.err; echo $? > {tmp_path}/{name}.rc\n"
        for name, args in commands.items()
    )
    _in_namespace(script, tmp_path)
    for name in commands:
        assert (tmp_path / f"{name}.rc").read_text().strip() == "2", name
        err = _error_lines(tmp_path / f"{name}.err")
        assert len(err) == 1 and "Read-only file system" in err[0] and str(shelf) in err[0], err
    assert _tree(shelf) == before


class _FailingWrites:
    """A file object whose writes fail with ``code`` (after the file was created)."""

    def __init__(self, handle, code: int) -> None:
        self.handle, self.code = handle, code

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.handle.close()

    def write(self, data) -> int:
        raise OSError(self.code, os.strerror(self.code))


@pytest.mark.parametrize(
    "code, reason", [(errno.ENOSPC, "no space left on the device"), (errno.EROFS, "Read-only")]
)
def test_atomic_writer_failing_keeps_the_old_file_and_leaves_no_temporary(
    tmp_path, monkeypatch, code, reason
):
    real_fdopen = os.fdopen
    monkeypatch.setattr(staging.os, "fdopen", lambda fd, mode: _FailingWrites(real_fdopen(fd, mode), code))
    old = tmp_path / "summary.csv"
    old.write_text("previous complete file\n")
    with pytest.raises(UserError) as raised:
        write_file_atomically(old, "new content\n")
    message = str(raised.value)
    assert "\n" not in message and str(old) in message and reason in message
    assert old.read_text() == "previous complete file\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["summary.csv"]
    # a file in folders created for it (a sweep variant's runs/<id>/): the folders go too
    with pytest.raises(UserError, match=reason):
        write_file_atomically(tmp_path / "runs" / "abc" / "results.json", "{}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["summary.csv"]


def test_atomic_writer_on_a_read_only_folder_names_the_path(tmp_path, monkeypatch):
    def read_only(*args, **kwargs):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))

    monkeypatch.setattr(staging.tempfile, "mkstemp", read_only)
    with pytest.raises(UserError) as raised:
        write_file_atomically(tmp_path / "x.csv", "1\n")
    assert str(raised.value) == f"--out {tmp_path / 'x.csv'}: cannot write: Read-only file system"
    assert list(tmp_path.iterdir()) == []


def _disk_full_at(calls: dict[str, int], real):
    """``real``, counted in ``calls``; the ``calls["fail_at"]``-th call fails with ENOSPC."""

    def wrapper(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == calls["fail_at"]:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(*args, **kwargs)

    return wrapper


def test_disk_full_at_any_step_of_installing_keeps_previous_results_or_none(tmp_path, monkeypatch):
    """ENOSPC raised at each file operation of replacing an output: one-line UserError, the
    previous complete results or no results.json, the user's file kept, no staging folder."""

    def write(out: Path, version: str) -> None:
        with staged_output(out) as stage:
            (stage / "flows.csv").write_text(version * 100)
            (stage / "results.json").write_text(json.dumps({"version": version}))

    real_replace, real_unlink, real_write = os.replace, Path.unlink, Path.write_text
    step = 1
    while True:
        out = tmp_path / f"full{step}"
        write(out, "v1")
        (out / "notes.txt").write_text("mine")
        calls = {"n": 0, "fail_at": step}
        monkeypatch.setattr(staging.os, "replace", _disk_full_at(calls, real_replace))
        monkeypatch.setattr(Path, "unlink", _disk_full_at(calls, real_unlink))
        monkeypatch.setattr(Path, "write_text", _disk_full_at(calls, real_write))
        try:
            write(out, "v2")
        except UserError as exc:
            assert "\n" not in str(exc) and "no space left on the device" in str(exc) and str(out) in str(exc)
        else:
            assert calls["n"] < step  # every operation ran without failing: the end
            break
        finally:
            monkeypatch.undo()
        results = out / "results.json"
        if results.exists():
            version = json.loads(results.read_text())["version"]
            assert (out / "flows.csv").read_text() == version * 100
        assert (out / "notes.txt").read_text() == "mine"
        assert not [p for p in (*out.iterdir(), *tmp_path.iterdir()) if p.name.startswith(STAGE_PREFIX)]
        assert MANIFEST in {p.name for p in out.iterdir()}  # still a HeteroSim output: can be rewritten
        write(out, "v3")
        assert json.loads(results.read_text())["version"] == "v3"
        step += 1
    assert step > 4
