"""Lengths of unions of time intervals, grouped, in numpy (no Python loop over intervals)."""

from __future__ import annotations

import numpy as np


def union_length(
    starts: np.ndarray,
    ends: np.ndarray,
    groups: np.ndarray,
    num_groups: int,
    starts_sorted: bool = False,
    chunk: int = 1 << 21,
) -> np.ndarray:
    """Total covered length of the intervals ``[starts, ends)`` in each group (0..num_groups-1).

    Overlapping intervals of one group count once. Intervals with ``end <= start`` are ignored.
    ``starts_sorted=True`` promises non-decreasing ``starts``: the intervals are then only
    sorted by group (a stable radix sort for small group counts) instead of by (group, start).
    After the sort, intervals are taken ``chunk`` at a time (bounded temporary memory).
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
    # Offset per group for the running maximum below; wider than any interval of any group.
    span = int(ends.max() - min(int(starts.min()), int(ends.min()))) + 1
    carry_group, carry_end = -1, _NEVER
    for lo in range(0, order.size, chunk):
        part = order[lo : lo + chunk]
        carry_group, carry_end = _add_sorted(
            result, starts[part], ends[part], groups[part].astype(np.int64), span, carry_group, carry_end
        )
    return result


_NEVER = np.iinfo(np.int64).min


def _add_sorted(
    result: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    groups: np.ndarray,
    span: int,
    carry_group: int,
    carry_end: int,
) -> tuple[int, int]:
    """Add the covered lengths of intervals sorted by (group, start) to ``result``.
    ``carry_end`` is the furthest end seen so far in ``carry_group`` (the last group of the
    previous chunk); returns the same for this chunk's last group."""
    # Running maximum of ends within each group: shift ends by a per-group offset so that a
    # global cumulative max never carries across a group boundary.
    offset = groups - groups[0]
    offset *= span
    running_end = ends + offset
    np.maximum.accumulate(running_end, out=running_end)
    running_end -= offset
    del offset
    later = np.flatnonzero(groups[1:] != groups[:-1]) + 1  # first interval of each later group
    if groups[0] == carry_group:
        first_group = running_end[: later[0] if later.size else running_end.size]
        np.maximum(first_group, carry_end, out=first_group)
    # previous_end[i]: the furthest end of the intervals before i in its group.
    previous_end = np.empty_like(running_end)
    previous_end[0] = carry_end if groups[0] == carry_group else _NEVER
    previous_end[1:] = running_end[:-1]
    previous_end[later] = _NEVER
    carry = (int(groups[-1]), int(running_end[-1]))
    del running_end
    # Each interval adds the part of it that lies beyond everything before it in its group.
    np.maximum(previous_end, starts, out=previous_end)
    contribution = np.subtract(ends, previous_end, out=previous_end)
    np.maximum(contribution, 0, out=contribution)
    first = np.concatenate([[0], later])
    result[groups[first]] += np.add.reduceat(contribution, first)
    return carry


def _small_int(count: int) -> type:
    """The narrowest signed dtype holding 0..count-1 (int16 sorts by radix in numpy)."""
    if count <= np.iinfo(np.int16).max:
        return np.int16
    return np.int32 if count <= np.iinfo(np.int32).max else np.int64
