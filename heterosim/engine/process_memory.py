"""How the C library hands a long run's large temporaries back to the system (glibc only).

glibc serves an allocation from its own heap below ``M_MMAP_THRESHOLD`` and with a fresh
``mmap`` above it; the threshold starts at 128 KiB and, each time an mmapped block is freed,
rises to that block's size, up to 32 MiB on 64-bit systems (``mallopt(3)``, "M_MMAP_THRESHOLD";
glibc ``malloc/malloc.c``, ``DEFAULT_MMAP_THRESHOLD_MAX``). A run of millions of tasks frees
arrays of tens of MB over and over (numpy temporaries, the executor's tables), so after the first
ones the threshold sits high and the next arrays of up to 32 MiB come from the heap; freed there,
they stay in the process, scattered between live blocks that ``malloc_trim`` cannot return.
:func:`return_large_frees` pins the threshold at :data:`MMAP_THRESHOLD_BYTES`, so every freed
array of that size or more goes back at once, while smaller blocks (a chunk of flows.csv rows,
a block of a report's sides) stay in the heap where reusing them costs nothing. Measured on a
7.7 M-task run (benchmarks/HISTORY.md, "Memory against the micro-batch count: run state ..."):
peak RSS 1,453 MB with the dynamic threshold, 1,396 MB pinned at 4 MiB, 1,381 MB pinned at
128 KiB, which costs 10 % more wall time in page faults. Results do not depend on it.
"""

from __future__ import annotations

import ctypes
import ctypes.util

M_MMAP_THRESHOLD = -3  # glibc malloc.h
MMAP_THRESHOLD_BYTES = 4 << 20  # measured (module docstring): the large-array saving, no time cost


def return_large_frees() -> bool:
    """Serve allocations of ``MMAP_THRESHOLD_BYTES`` and more with their own mapping for the rest
    of the process (glibc ``mallopt``); return False where the C library has no ``mallopt``."""
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        mallopt = ctypes.CDLL(name).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES))
