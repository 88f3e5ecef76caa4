"""Notes on stderr (``heterosim: note: ...``) printed once per command.

A command that runs simulations in worker processes (``sweep``, ``compare``, ``plan``) would
otherwise print the same note once per worker. Inside :func:`once_per_command` (the CLI wraps
every command in it) a note is printed by the first process that claims it: claiming creates a
file named by the note's hash in a folder the workers find through ``HETEROSIM_NOTES_DIR``, which
they inherit. Outside it (a library call, a test) every note is printed.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

NOTES_DIR_ENV = "HETEROSIM_NOTES_DIR"


def print_note(text: str) -> None:
    """Print ``heterosim: note: TEXT`` on stderr unless this command has printed it already."""
    if _claim(text):
        print(f"heterosim: note: {text}", file=sys.stderr, flush=True)


def _claim(text: str) -> bool:
    """True when no process of this command printed ``text`` yet (and now this one will)."""
    folder = os.environ.get(NOTES_DIR_ENV)
    if not folder or not os.path.isdir(folder):
        return True
    name = hashlib.sha256(text.encode()).hexdigest()[:32]
    try:
        os.close(os.open(os.path.join(folder, name), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    except FileExistsError:
        return False
    except OSError:  # the folder went away or is not writable: better twice than never
        return True
    return True


@contextmanager
def once_per_command() -> Iterator[None]:
    """Within the block, this process and the workers it starts print each note once."""
    previous = os.environ.get(NOTES_DIR_ENV)
    folder = tempfile.mkdtemp(prefix="heterosim-notes-")
    os.environ[NOTES_DIR_ENV] = folder
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(NOTES_DIR_ENV, None)
        else:
            os.environ[NOTES_DIR_ENV] = previous
        shutil.rmtree(folder, ignore_errors=True)
