"""The one user-facing error type (the CLI prints it as one line and exits with status 2), and
the recognition of running out of memory (in Python or in the C++ models)."""

from __future__ import annotations


class UserError(Exception):
    """Bad input from the user: a file, key or value that cannot be used.

    The message names the file (when there is one), the key and what was expected,
    e.g. ``cluster.yaml: host_types.h100.gpu: unknown GPU 'H10'; known: A100-40GB-SXM, ...``.
    """


EXIT_INTERRUPTED = 130  # Ctrl-C (128 + SIGINT): partial results written, headline says PARTIAL
EXIT_TERMINATED = 143  # SIGTERM (128 + SIGTERM): the same


class Interrupted(Exception):
    """A run stopped by Ctrl-C or SIGTERM after writing its partial results; the CLI prints the
    message as one line and exits with ``exit_status`` (130 or 143)."""

    def __init__(self, message: str, exit_status: int = EXIT_INTERRUPTED) -> None:
        super().__init__(message)
        self.exit_status = exit_status


OUT_OF_MEMORY_HINT = (
    "memory grows with GPUs, micro-batches and flows; "
    "simulation.collective_granularity=connection needs the least"
)


def is_out_of_memory(exc: BaseException) -> bool:
    """Whether ``exc`` is an allocation failure: Python's MemoryError or a C++ std::bad_alloc
    raised through cppyy."""
    return isinstance(exc, MemoryError) or "bad_alloc" in f"{type(exc).__name__} {exc}"
