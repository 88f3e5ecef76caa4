"""The dependency CSR built from COO edges (``coo_to_csr``): what every plan's DAG goes through."""

from __future__ import annotations

import numpy as np

from heterosim.plan.collectives.graph import coo_to_csr


def test_parents_are_sorted_deduplicated_and_counted_per_child():
    child = np.array([2, 0, 2, 2, 3, 0], np.int32)
    parent = np.array([1, 5, 0, 1, 2, 4], np.int32)
    ptr, idx = coo_to_csr(6, child, parent)
    assert ptr.dtype == np.int64 and idx.dtype == np.int64
    assert ptr.tolist() == [0, 2, 2, 4, 5, 5, 5]
    assert idx.tolist() == [4, 5, 0, 1, 2]  # task 0: 4, 5; task 2: 0, 1 (one 2 <- 1 dropped); 3: 2
    assert child.tolist() == [2, 0, 2, 2, 3, 0], "the inputs are left as they were"


def test_same_csr_as_a_reference_on_random_edges():
    rng = np.random.default_rng(7)
    n = 500
    child = rng.integers(0, n, 5000)
    parent = rng.integers(0, n, 5000)
    ptr, idx = coo_to_csr(n, child, parent)
    expected = [sorted({int(p) for c, p in zip(child, parent) if c == t}) for t in range(n)]
    assert [idx[ptr[t] : ptr[t + 1]].tolist() for t in range(n)] == expected


def test_no_edges():
    ptr, idx = coo_to_csr(3, np.zeros(0, np.int64), np.zeros(0, np.int64))
    assert ptr.tolist() == [0, 0, 0, 0] and idx.size == 0
