"""The one user-facing error type (the CLI prints it as one line and exits with status 2), and
the recognition of running out of memory (in Python or in the C++ models)."""

from __future__ import annotations


class UserError(Exception):
    """Bad input from the user: a file, key or value that cannot be used.

    The message names the file (when there is one), the key and what was expected,
    e.g. ``cluster.yaml: host_types.h100.gpu: unknown GPU 'H10'; known: A100-40GB-SXM, ...``.
    """


OUT_OF_MEMORY_HINT = ("memory grows with GPUs, micro-batches and flows; "
                      "simulation.collective_granularity=connection needs the least")


def is_out_of_memory(exc: BaseException) -> bool:
    """Whether ``exc`` is an allocation failure: Python's MemoryError or a C++ std::bad_alloc
    raised through cppyy."""
    return isinstance(exc, MemoryError) or "bad_alloc" in f"{type(exc).__name__} {exc}"
