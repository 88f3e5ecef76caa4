"""Write a results folder atomically, and never delete a file HeteroSim did not write.

Everything goes to a temporary folder first and is moved into place only when complete, so an
error (or Ctrl-C) while writing leaves the previous results untouched and no half-written files.

A results folder whose results.json exists is complete: results.json is moved in last and
removed first when an output is replaced, so a process killed while writing (even by SIGKILL)
leaves the previous complete results or none; the staging folders such a process leaves behind
are removed by the next command that writes beside them.

Every results folder carries a manifest (``.heterosim-output.json``) listing the files that
HeteroSim wrote there. Replacing a previous output removes exactly those files; anything else in
the folder (a user's notes, a thesis) stays. A folder that holds files but no manifest is not a
HeteroSim output and is refused before anything is written.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from heterosim.errors import UserError

MANIFEST = ".heterosim-output.json"
STAGE_PREFIX = ".heterosim-stage-"
COMPLETE_MARKER = "results.json"  # what other tools read as "this output is complete"


def _manifest_files(out: Path) -> list[str] | None:
    """Relative paths listed in ``out``'s manifest, or None when it has none (or it is unreadable)."""
    try:
        data = json.loads((out / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
        return None
    return [f for f in files if f and not Path(f).is_absolute() and ".." not in Path(f).parts]


def _foreign_entries(out: Path) -> list[str]:
    """Entries of ``out`` that were not written by HeteroSim (no manifest: every entry)."""
    entries = [p.name for p in out.iterdir() if not p.name.startswith(STAGE_PREFIX)]
    if MANIFEST in entries:
        return []
    return sorted(entries)


def _stage_owner(name: str) -> int | None:
    """The process id in a staging folder's name (``.heterosim-stage-<pid>-<random>``)."""
    rest = name[len(STAGE_PREFIX) :]
    pid, _, _ = rest.partition("-")
    return int(pid) if pid.isdigit() else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # exists, owned by someone else
    return True


def remove_stale_stages(folder: Path) -> None:
    """Remove staging folders in ``folder`` left by a HeteroSim process that no longer runs
    (killed with SIGKILL while writing); those of running processes are left alone."""
    try:
        entries = list(folder.iterdir())
    except OSError:
        return
    for entry in entries:
        if not entry.name.startswith(STAGE_PREFIX) or not entry.is_dir() or entry.is_symlink():
            continue
        owner = _stage_owner(entry.name)
        if owner is not None and owner != os.getpid() and not _alive(owner):
            shutil.rmtree(entry, ignore_errors=True)


def _probe_writable(folder: Path) -> None:
    """Create and remove a staging folder in ``folder``: the one test that holds on a read-only
    file system, under /proc, or for root (where os.access says yes to everything)."""
    probe = Path(tempfile.mkdtemp(prefix=f"{STAGE_PREFIX}{os.getpid()}-", dir=folder))
    probe.rmdir()


def check_output_folder(out: Path | str, option: str = "--out") -> Path:
    """Fail (exit 2) before any work when ``out`` cannot take results; return it resolved.

    ``out`` may be missing (it is created), an empty folder, or an earlier HeteroSim output. A
    file, a folder holding other files, a path under a file, a name too long for the file
    system, or a place that cannot be written to (read-only, /proc) is refused.
    """
    text = str(out)
    if not text or "\0" in text:
        raise UserError(f"{option} {text!r}: expected a folder name")
    path = Path(out).expanduser()
    try:
        resolved = path.resolve()
        if resolved.exists():
            if not resolved.is_dir():
                raise UserError(f"{option} {out}: exists and is not a folder")
            foreign = _foreign_entries(resolved)
            if foreign:
                shown = ", ".join(foreign[:3]) + (", ..." if len(foreign) > 3 else "")
                raise UserError(
                    f"{option} {out}: folder is not empty and is not a HeteroSim output "
                    f"(holds {shown}); give a new or empty folder"
                )
            _probe_writable(resolved)
            return resolved
        parent = resolved.parent
        while not parent.exists():
            parent = parent.parent
        if not parent.is_dir():
            raise UserError(f"{option} {out}: {parent} is a file, not a folder")
        for part in resolved.relative_to(parent).parts:
            if len(part.encode()) > 255:
                raise UserError(f"{option} {out}: a folder name is too long (over 255 bytes)")
        _probe_writable(parent)
    except OSError as exc:
        raise UserError(f"{option} {out}: cannot write there: {exc.strerror or exc}") from None
    return resolved


def _remove_listed(out: Path, files: list[str]) -> None:
    """Remove the files HeteroSim wrote earlier, then the folders that became empty."""
    folders: set[Path] = set()
    for name in files:
        target = out / name
        if target.is_file() or target.is_symlink():
            target.unlink()
        for parent in target.parents:
            if parent == out or out not in parent.parents:
                break
            folders.add(parent)
    for folder in sorted(folders, key=lambda p: len(p.parts), reverse=True):
        try:
            folder.rmdir()
        except OSError:
            pass  # holds something HeteroSim did not write: kept


def _write_manifest(out: Path, files: list[str]) -> None:
    tmp = out / f"{MANIFEST}.tmp"
    tmp.write_text(json.dumps({"files": sorted(files)}, indent=1) + "\n")
    os.replace(tmp, out / MANIFEST)


def mark_output_folder(out: Path) -> None:
    """Give a folder that a command fills in place (a sweep) a manifest, so it counts as a
    HeteroSim output and a later command may write beside what it holds."""
    if not (out / MANIFEST).exists():
        _write_manifest(out, [])


def _install(stage: Path, out: Path, written: list[str], replace: bool) -> None:
    """Move the staged files into the existing folder ``out``, results.json last.

    A process killed at any point leaves either the previous complete results or no
    results.json at all (it is removed first and put back last), and a manifest that lists
    every file HeteroSim may have left there, so nothing it wrote is ever taken for a user's.
    """
    previous = _manifest_files(out) or []
    _write_manifest(out, sorted(set(previous) | set(written)))
    marker = out / COMPLETE_MARKER
    if (replace or COMPLETE_MARKER in written) and COMPLETE_MARKER in previous and marker.is_file():
        marker.unlink()
    if replace:
        _remove_listed(out, [f for f in previous if f not in written])
        previous = []
    last = []
    for path in sorted(stage.rglob("*")):
        relative = path.relative_to(stage)
        target = out / relative
        if path.is_dir():
            target.mkdir(exist_ok=True)
        elif str(relative) == COMPLETE_MARKER:
            last.append((path, target))
        else:
            os.replace(path, target)
    _write_manifest(out, sorted(set(previous) | set(written)))
    for path, target in last:
        os.replace(path, target)


@contextmanager
def staged_output(out: Path, *, replace: bool = True, option: str = "--out") -> Iterator[Path]:
    """Yield a temporary folder; on success its files move into ``out``.

    ``replace=True`` removes the files of an earlier HeteroSim output in ``out`` first (stale
    files of an earlier run disappear); ``replace=False`` keeps them and adds the new files (for
    commands that fill one folder in several steps, e.g. one subfolder per variant). Files that
    HeteroSim did not write are never removed; a non-empty folder without a manifest is refused.
    Staging folders of killed runs found beside ``out`` are removed.
    """
    out = check_output_folder(out, option)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        home = out if out.is_dir() else out.parent
        remove_stale_stages(home)
        stage = Path(tempfile.mkdtemp(prefix=f"{STAGE_PREFIX}{os.getpid()}-", dir=home))
    except OSError as exc:
        raise UserError(f"{option} {out}: {exc.strerror or exc}") from None
    try:
        stage.chmod(0o755)  # mkdtemp makes it private; the results folder is an ordinary one
        yield stage
        written = sorted(str(p.relative_to(stage)) for p in stage.rglob("*") if not p.is_dir())
        if not out.exists():
            (stage / MANIFEST).write_text(json.dumps({"files": written}, indent=1) + "\n")
            os.replace(stage, out)
            return
        _install(stage, out, written, replace)
    except OSError as exc:
        raise UserError(f"{option} {out}: cannot write results: {_reason(exc)}") from None
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def _reason(exc: OSError) -> str:
    if exc.errno == errno.ENOSPC:
        return "no space left on the device"
    return exc.strerror or str(exc)


def check_output_file(path: Path | str, option: str = "--out") -> Path:
    """Fail (exit 2) before any work when ``path`` cannot be written as one file: a folder, a
    pipe or device, a place under a file, or a folder that cannot be written to."""
    path = Path(path).expanduser()
    text = str(path)
    if not text or "\0" in text or len(path.name.encode()) > 255:
        raise UserError(f"{option} {text[:80]!r}: expected a file name")
    try:
        if path.exists() and not path.is_file():
            raise UserError(f"{option} {path}: exists and is not a regular file")
        parent = path.resolve().parent
        if parent.exists():
            if not parent.is_dir():
                raise UserError(f"{option} {path}: {parent} is not a folder")
            _probe_writable(parent)
        else:
            check_output_folder(parent, option)
    except OSError as exc:
        raise UserError(f"{option} {path}: cannot write there: {exc.strerror or exc}") from None
    return path


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _current_umask()


def write_file_atomically(path: Path | str, data: str | bytes, option: str = "--out") -> Path:
    """Write one output file through a temporary file beside it and a rename: a reader sees the
    old file or the complete new one, never a part. An existing folder at ``path`` is refused.
    On failure (a full disk) the temporary file and the folders created for ``path`` are removed."""
    path = Path(path).expanduser()
    if path.is_dir():
        raise UserError(f"{option} {path}: is a folder; expected a file name")
    created = [p for p in (path.parent, *path.parent.parents) if not p.exists()]
    if created:
        check_output_folder(path.parent, option)  # a parent under a file, a read-only place
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name[:200]}.", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data.encode() if isinstance(data, str) else data)
            os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp makes it private; results are ordinary files
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    except OSError as exc:
        for folder in created:  # innermost first; one holding something else stays
            try:
                folder.rmdir()
            except OSError:
                break
        raise UserError(f"{option} {path}: cannot write: {_reason(exc)}") from None
    return path


def write_json_atomically(path: Path | str, data: Any) -> Path:
    """Write ``data`` as indented JSON with sorted keys (values JSON does not know as their
    ``str``) through :func:`write_file_atomically`."""
    return write_file_atomically(path, json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")
