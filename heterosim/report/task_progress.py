"""Progress of commands that run many simulations (``compare``, ``netbench --compare-cc``,
``sweep``, ``plan``, ``validate``): one line on stderr per finished run, with an ETA.

Like ``heterosim run``'s progress it goes to stderr, whether or not that is a terminal, and
``--quiet`` turns it off. The ETA assumes the runs still to come take as long as the finished
ones did on average and run ``workers`` at a time, in waves.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable


def format_duration(seconds: float) -> str:
    """``0.4 s``, ``12 s``, ``2 min 05 s``, ``1 h 02 min``."""
    seconds = max(0.0, seconds)
    if seconds < 10:
        return f"{seconds:.1f} s"
    whole = round(seconds)
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60:02d} s"
    return f"{whole // 3600} h {whole % 3600 // 60:02d} min"


def to_stderr(line: str) -> None:
    """Print one progress line on stderr at once."""
    print(line, file=sys.stderr, flush=True)


class TaskProgress:
    """Counts finished runs of a command and shows ``[k/n] LABEL DETAIL (elapsed, ETA)``
    through ``emit`` (:func:`to_stderr`; None: nothing is shown)."""

    def __init__(
        self,
        command: str,
        total: int,
        *,
        workers: int = 1,
        emit: Callable[[str], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.command = command
        self.total = total
        self.workers = max(1, min(workers, total or 1))
        self.emit = emit
        self.clock = clock
        self.started = clock()
        self.done_count = 0
        self.run_seconds: list[float] = []

    def message(self, text: str) -> None:
        """A line of its own: ``heterosim COMMAND: TEXT``."""
        if self.emit is not None:
            self.emit(f"heterosim {self.command}: {text}")

    def done(self, label: str, detail: str = "", run_s: float | None = None) -> None:
        """One run finished (``run_s``: its own wall time, when known)."""
        self.done_count += 1
        if run_s is not None:
            self.run_seconds.append(run_s)
        elapsed = self.clock() - self.started
        timing = f"{format_duration(elapsed)} elapsed"
        eta = self.eta_s()
        if eta is not None:
            timing += f", ETA {format_duration(eta)}"
        text = f"[{self.done_count}/{self.total}] {label}"
        self.message(f"{text}  {detail}  ({timing})" if detail else f"{text}  ({timing})")

    def eta_s(self) -> float | None:
        """Seconds until the last run finishes; None once every run has."""
        if self.done_count >= self.total or not self.done_count:
            return None
        elapsed = self.clock() - self.started
        if self.run_seconds:
            per_run = sum(self.run_seconds) / len(self.run_seconds)
        else:  # finished in waves of ``workers``
            per_run = elapsed / math.ceil(self.done_count / self.workers)
        return max(0.0, per_run * math.ceil(self.total / self.workers) - elapsed)
