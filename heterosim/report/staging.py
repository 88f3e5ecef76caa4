"""Write a results folder atomically, and never delete a file HeteroSim did not write.

Everything goes to a temporary folder first and is moved into place only when complete, so an
error (or Ctrl-C) while writing leaves the previous results untouched and no half-written files.

Every results folder carries a manifest (``.heterosim-output.json``) listing the files that
HeteroSim wrote there. Replacing a previous output removes exactly those files; anything else in
the folder (a user's notes, a thesis) stays. A folder that holds files but no manifest is not a
HeteroSim output and is refused before anything is written.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from heterosim.errors import UserError

MANIFEST = ".heterosim-output.json"
STAGE_PREFIX = ".heterosim-stage-"


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


def check_output_folder(out: Path | str, option: str = "--out") -> Path:
    """Fail (exit 2) before any work when ``out`` cannot take results; return it resolved.

    ``out`` may be missing (it is created), an empty folder, or an earlier HeteroSim output. A
    file, a folder holding other files, or a folder that cannot be written to is refused.
    """
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
            if not os.access(resolved, os.W_OK | os.X_OK):
                raise UserError(f"{option} {out}: folder is not writable")
            return resolved
        parent = resolved.parent
        while not parent.exists():
            parent = parent.parent
        if not parent.is_dir():
            raise UserError(f"{option} {out}: {parent} is a file, not a folder")
        if not os.access(parent, os.W_OK | os.X_OK):
            raise UserError(f"{option} {out}: cannot create it ({parent} is not writable)")
    except OSError as exc:
        raise UserError(f"{option} {out}: {exc.strerror or exc}") from None
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


@contextmanager
def staged_output(out: Path, *, replace: bool = True) -> Iterator[Path]:
    """Yield a temporary folder; on success its files move into ``out``.

    ``replace=True`` removes the files of an earlier HeteroSim output in ``out`` first (stale
    files of an earlier run disappear); ``replace=False`` keeps them and adds the new files (for
    commands that fill one folder in several steps, e.g. one subfolder per variant). Files that
    HeteroSim did not write are never removed; a non-empty folder without a manifest is refused.
    """
    out = check_output_folder(out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        stage = Path(tempfile.mkdtemp(prefix=STAGE_PREFIX, dir=out if out.is_dir() else out.parent))
    except OSError as exc:
        raise UserError(f"--out {out}: {exc.strerror or exc}") from None
    stage.chmod(0o755)  # mkdtemp makes it private; the results folder is an ordinary one
    try:
        yield stage
        written = sorted(str(p.relative_to(stage)) for p in stage.rglob("*") if not p.is_dir())
        if not out.exists():
            (stage / MANIFEST).write_text(json.dumps({"files": written}, indent=1) + "\n")
            os.replace(stage, out)
            return
        previous = _manifest_files(out) or []
        if replace:
            _remove_listed(out, previous)
            previous = []
        for path in sorted(stage.rglob("*")):
            target = out / path.relative_to(stage)
            if path.is_dir():
                target.mkdir(exist_ok=True)
            else:
                os.replace(path, target)
        files = sorted(set(previous) | set(written))
        tmp = out / f"{MANIFEST}.tmp"
        tmp.write_text(json.dumps({"files": files}, indent=1) + "\n")
        os.replace(tmp, out / MANIFEST)
    except OSError as exc:
        raise UserError(f"--out {out}: cannot write results: {exc.strerror or exc}") from None
    finally:
        shutil.rmtree(stage, ignore_errors=True)
