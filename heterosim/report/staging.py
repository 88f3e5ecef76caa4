"""Write a results folder atomically: everything goes to a temporary folder beside it first.

An error (or Ctrl-C) while writing leaves the previous results untouched and no half-written
files behind.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from heterosim.errors import UserError


@contextmanager
def staged_output(out: Path, *, replace: bool = True) -> Iterator[Path]:
    """Yield a temporary folder beside ``out``; on success it becomes ``out``.

    ``replace=True`` swaps the whole folder (stale files of an earlier run disappear);
    ``replace=False`` moves the new files into an existing ``out`` and keeps the others (for
    commands that fill one folder in several steps, e.g. one subfolder per variant).
    """
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out}: exists and is not a folder")
    out.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    stage.chmod(0o755)  # mkdtemp makes it private; the results folder is an ordinary one
    try:
        yield stage
        if out.exists() and replace:
            shutil.rmtree(out)
        if not out.exists():
            os.replace(stage, out)
            return
        for path in sorted(stage.rglob("*")):
            target = out / path.relative_to(stage)
            if path.is_dir():
                target.mkdir(exist_ok=True)
            else:
                os.replace(path, target)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
