"""Lengths of unions of time intervals, grouped, in numpy (no Python loop over intervals)."""

from __future__ import annotations

import numpy as np


def union_length(starts: np.ndarray, ends: np.ndarray, groups: np.ndarray, num_groups: int,
                 starts_sorted: bool = False) -> np.ndarray:
    """Total covered length of the intervals ``[starts, ends)`` in each group.

    Overlapping intervals of one group count once. Intervals with ``end <= start`` are ignored.
    ``starts_sorted=True`` promises non-decreasing ``starts``: the intervals are then only
    sorted by group (a stable radix sort for small group counts) instead of by (group, start).
    Returns an int64 array of length ``num_groups``.
    """
    starts = np.asarray(starts, dtype=np.int64)
    ends = np.asarray(ends, dtype=np.int64)
    groups = np.asarray(groups)
    keep = ends > starts
    if not keep.all():
        starts, ends, groups = starts[keep], ends[keep], groups[keep]
    result = np.zeros(num_groups, dtype=np.int64)
    if starts.size == 0:
        return result
    if starts_sorted:
        order = np.argsort(groups.astype(_small_int(num_groups), copy=False), kind="stable")
    else:
        order = np.lexsort((starts, groups))
    groups = groups[order].astype(np.int64)
    starts = starts[order]
    ends = ends[order]
    del order
    # Running maximum of ends within each group: shift ends by a per-group offset so that a
    # global cumulative max never carries across a group boundary.
    span = int(ends.max() - min(int(starts.min()), int(ends.min()))) + 1
    offset = groups - groups[0]
    offset *= span
    running_end = ends + offset
    np.maximum.accumulate(running_end, out=running_end)
    running_end -= offset
    del offset
    # previous_end[i]: the furthest end of the intervals before i in its group.
    previous_end = np.empty_like(running_end)
    previous_end[0] = np.iinfo(np.int64).min
    previous_end[1:] = running_end[:-1]
    del running_end
    first = np.flatnonzero(np.concatenate([[True], groups[1:] != groups[:-1]]))
    previous_end[first] = np.iinfo(np.int64).min
    # Each interval adds the part of it that lies beyond everything before it in its group.
    np.maximum(previous_end, starts, out=previous_end)
    contribution = np.subtract(ends, previous_end, out=previous_end)
    np.maximum(contribution, 0, out=contribution)
    result[groups[first]] = np.add.reduceat(contribution, first)
    return result


def _small_int(count: int) -> type:
    """The narrowest signed dtype holding 0..count-1 (int16 sorts by radix in numpy)."""
    if count <= np.iinfo(np.int16).max:
        return np.int16
    return np.int32 if count <= np.iinfo(np.int32).max else np.int64
