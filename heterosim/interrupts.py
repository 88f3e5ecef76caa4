"""Signals that stop a command cleanly: SIGTERM handled like Ctrl-C.

A batch scheduler's time limit, ``kill`` or ``timeout`` send SIGTERM; background jobs ignore
Ctrl-C. Inside :func:`sigterm_as_interrupt` SIGTERM raises ``KeyboardInterrupt("terminated by
SIGTERM")`` in the main thread, so the same cleanup runs for both (workers stopped, partial
results recorded) and the CLI exits with 143 instead of 130.

Native code that polls for signals may turn that exception into a bare ``KeyboardInterrupt``
(Ray's ``ray.wait`` does), so the handler also records that SIGTERM arrived, and
:func:`interrupt_status` reads the record as well as the message.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager

from heterosim.errors import EXIT_INTERRUPTED, EXIT_TERMINATED

SIGTERM_MESSAGE = "terminated by SIGTERM"
_received = {"sigterm": False}  # set by the handler; reset when a block starts


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM raises KeyboardInterrupt while the block runs (main thread only)."""

    def interrupt(signum: int, frame: object) -> None:
        _received["sigterm"] = True
        raise KeyboardInterrupt(SIGTERM_MESSAGE)

    _received["sigterm"] = False
    try:
        previous = signal.signal(signal.SIGTERM, interrupt)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def terminated_by_sigterm(exc: BaseException) -> bool:
    """Whether the KeyboardInterrupt ``exc`` was raised for SIGTERM (not Ctrl-C)."""
    return SIGTERM_MESSAGE in str(exc) or _received["sigterm"]


def interrupt_status(exc: BaseException) -> tuple[str, int]:
    """(what happened, exit status) for a KeyboardInterrupt raised by Ctrl-C or SIGTERM."""
    if terminated_by_sigterm(exc):
        return SIGTERM_MESSAGE, EXIT_TERMINATED
    return "interrupted by the user (Ctrl-C)", EXIT_INTERRUPTED
