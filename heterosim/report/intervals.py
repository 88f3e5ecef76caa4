"""Lengths of unions of time intervals, grouped, in numpy (no Python loop over intervals)."""

from __future__ import annotations

import numpy as np


def union_length(starts: np.ndarray, ends: np.ndarray, groups: np.ndarray, num_groups: int) -> np.ndarray:
    """Total covered length of the intervals ``[starts, ends)`` in each group.

    Overlapping intervals of one group count once. Intervals with ``end <= start`` are ignored.
    Returns an int64 array of length ``num_groups``.
    """
    starts = np.asarray(starts, dtype=np.int64)
    ends = np.asarray(ends, dtype=np.int64)
    groups = np.asarray(groups, dtype=np.int64)
    keep = ends > starts
    starts, ends, groups = starts[keep], ends[keep], groups[keep]
    result = np.zeros(num_groups, dtype=np.int64)
    if starts.size == 0:
        return result
    order = np.lexsort((starts, groups))
    starts, ends, groups = starts[order], ends[order], groups[order]
    # Running maximum of ends within each group: shift ends by a per-group offset so that a
    # global cumulative max never carries across a group boundary.
    span = int(ends.max() - starts.min()) + 1
    offset = (groups - groups.min()) * span
    running_end = np.maximum.accumulate(ends + offset) - offset
    previous_end = np.empty_like(running_end)
    previous_end[0] = np.iinfo(np.int64).min
    previous_end[1:] = running_end[:-1]
    new_group = np.ones(groups.size, dtype=bool)
    new_group[1:] = groups[1:] != groups[:-1]
    previous_end[new_group] = np.iinfo(np.int64).min
    # Each interval adds the part of it that lies beyond everything before it in its group.
    contribution = np.clip(ends - np.maximum(starts, previous_end), 0, None)
    np.add.at(result, groups, contribution)
    return result
