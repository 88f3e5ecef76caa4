"""Chrome/Perfetto trace (``trace.json``) of a run, in the JSON trace-event format.

One process per rank. Its threads hold only spans that follow one another or nest, so Perfetto
(and chrome://tracing) draws every one: a ``compute`` thread per compute stream of the GPU (a
stream runs one task at a time), and ``send`` / ``recv`` lanes for the flows the rank sends and
receives. Flows overlap freely (chunks of several channels and collectives in flight at once), so
each is put on the first lane of its rank and side that is free when it starts (greedy interval
partitioning: as few lanes as the peak number of flows in flight). Flow spans carry the peer rank
and the bytes; point-to-point transfers between pipeline stages are linked sender -> receiver by
flow arrows. A ``network`` process holds counter tracks (flows in flight, queues, the busiest
links' utilisation).

Times are microseconds, as the format asks. ``max_spans`` (``heterosim run --trace-spans``) caps
the spans written: past it the shortest are left out, and the caller is told how many, so the
cap is never silent. Lane assignment walks the kept flow spans once in Python (a heap per rank
and side), about a second per million spans; JSON output is per span anyway, written a chunk of
spans at a time.
"""

from __future__ import annotations

import heapq
import json
import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TextIO

import numpy as np

from heterosim.plan.execution_plan import COMPUTE, FLOW, ExecutionPlan, task_indices

SEND, RECV = 0, 1
SIDE_NAMES = ("send", "recv")
DEFAULT_MAX_SPANS = 2_000_000
SPAN_CHUNK = 65_536  # spans formatted as text at a time: the text of a few MB, not of the run
LENGTH_CHUNK = 1 << 20  # candidate span lengths drawn at a time to pick the longest (8 MiB)


def write_perfetto_trace(
    path: Path,
    plan: ExecutionPlan,
    start_ns: np.ndarray,
    end_ns: np.ndarray,
    rank_gpu: np.ndarray,
    rank_names: list[str],
    task_label: Callable[[np.ndarray], list[str]],
    counters: dict[str, tuple[np.ndarray, np.ndarray]] | None = None,
    max_spans: int | None = DEFAULT_MAX_SPANS,
    extra_events: list[dict] | None = None,
    contention: tuple[np.ndarray, np.ndarray] | None = None,
    chunk_spans: int = SPAN_CHUNK,
) -> dict[str, int]:
    """Write ``trace.json``; return ``{spans, dropped_spans, max_spans}`` (0: no cap).

    ``task_label(task_indices)`` names tasks; ``counters`` maps a track name to (time_ns, value)
    arrays; ``extra_events`` (e.g. :func:`fault_events`) are written as given. ``max_spans`` None or 0
    writes every span. ``contention`` (the slowed tasks, ascending, and their extra ns) adds
    ``contention_us`` to the compute spans that communication kernels beside them made longer.
    Spans are formatted and written ``chunk_spans`` at a time; the file does not depend on it.
    """
    num_gpus = max(plan.num_gpus, int(rank_gpu.max()) + 1 if rank_gpu.size else 0)
    gpu_rank = np.full(num_gpus, -1, dtype=np.int32)
    gpu_rank[rank_gpu] = np.arange(len(rank_gpu))
    segments = _candidate_spans(plan, end_ns, gpu_rank)
    total = sum(int(tasks.size) for _, tasks, _ in segments)
    ran_compute = plan.stream[(plan.kind == COMPUTE) & (end_ns >= 0)]
    streams = int(ran_compute.max()) + 1 if ran_compute.size else 1
    cap = int(max_spans or 0)
    chosen = _longest_spans(segments, start_ns, end_ns, cap) if cap and total > cap else None
    task, rank, side = _span_columns(segments, gpu_rank, chosen)
    del segments, chosen
    dropped = total - int(task.size)
    tid, lanes = _thread_ids(plan, task, rank, side, start_ns, end_ns, len(rank_names), streams)
    is_comp = side < 0
    events = _track_names(rank_names, rank[is_comp], tid[is_comp], lanes, streams)
    send = side == SEND
    peer = np.where(send, gpu_rank[plan.dst[task]], gpu_rank[plan.gpu[task]])
    lost = _SlowedTasks(*contention) if contention is not None and _of_plan(contention[0], plan) else None
    events += _p2p_arrows(plan, task, rank, tid, side, start_ns, end_ns)
    counter_pid = len(rank_names)
    if counters:
        events += _process_names(counter_pid, "network", -1)
    events += extra_events or []
    info = {"spans": int(task.size), "dropped_spans": dropped, "max_spans": cap}
    columns = _SpanColumns(task, rank, tid, is_comp, peer, start_ns, end_ns, plan.bytes, lost, task_label)
    with path.open("w") as handle:
        handle.write('{"traceEvents":[')
        out = _ItemWriter(handle)
        out.write([json.dumps(e, separators=(",", ":")) for e in events])
        step = max(int(chunk_spans), 1)
        for lo in range(0, int(task.size), step):
            out.write(columns.format(lo, lo + step))
        for track, (times, values) in (counters or {}).items():
            times_ns, levels = counter_steps(np.asarray(times), np.asarray(values, dtype=float))
            name = json.dumps(track)
            out.write(  # formatted as text, as spans are: a long run has millions of samples
                [
                    f'{{"ph":"C","name":{name},"pid":{counter_pid},"tid":0,"ts":{t!r},"args":{{"value":{v}}}}}'
                    for t, v in zip((times_ns / 1000.0).tolist(), _json_numbers(levels))
                ]
            )
        handle.write('],"displayTimeUnit":"ns","metadata":')
        handle.write(json.dumps(info, separators=(",", ":")))
        handle.write("}")
    return info


def _candidate_spans(
    plan: ExecutionPlan, end_ns: np.ndarray, gpu_rank: np.ndarray
) -> list[tuple[int, np.ndarray, np.ndarray]]:
    """Every span the trace could hold, as three segments in this order, each (side, task, GPU
    column): the compute tasks that ran (side -1, ``plan.gpu``), each flow on its sender's lane
    (SEND, ``plan.gpu``) and on its receiver's (RECV, ``plan.dst``); a span's rank is
    ``gpu_rank[column[task]]``, and GPUs without a rank (another job's) are left out. The flow
    segments share one task array when neither leaves a flow out (memory: a flow's index is
    kept once, its ranks only for the spans kept)."""
    ran = end_ns >= 0
    comp = np.flatnonzero((plan.kind == COMPUTE) & ran)
    # indices only, 32-bit where they fit and found a block at a time (memory); the kept spans'
    # come out as int64
    flows = task_indices((plan.kind == FLOW) & ran)
    del ran
    segments = []
    for side, tasks, column in ((-1, comp, plan.gpu), (SEND, flows, plan.gpu), (RECV, flows, plan.dst)):
        keep = np.empty(tasks.size, dtype=bool)
        for lo in range(0, tasks.size, LENGTH_CHUNK):
            np.greater_equal(
                gpu_rank[column[tasks[lo : lo + LENGTH_CHUNK]]], 0, out=keep[lo : lo + LENGTH_CHUNK]
            )
        if not keep.all():
            tasks = tasks[keep]
        segments.append((side, tasks, column))
    return segments


def _length_chunks(
    segments: list[tuple[int, np.ndarray, np.ndarray]], start_ns: np.ndarray, end_ns: np.ndarray
) -> Iterator[tuple[int, np.ndarray]]:
    """(position of the first, lengths in ns) of the candidate spans, a chunk at a time, segment
    after segment."""
    at = 0
    for _, tasks, _ in segments:
        for lo in range(0, tasks.size, LENGTH_CHUNK):
            index = tasks[lo : lo + LENGTH_CHUNK]
            length = end_ns[index]
            length -= start_ns[index]
            yield at + lo, length
        at += tasks.size


def _longest_spans(
    segments: list[tuple[int, np.ndarray, np.ndarray]], start_ns: np.ndarray, end_ns: np.ndarray, count: int
) -> np.ndarray:
    """Positions (ascending, over the segments in order) of the ``count`` longest candidate
    spans, as :func:`longest` picks them (0 < ``count`` < spans). The lengths are drawn a chunk at
    a time, never all at once (memory): the ``count``-th largest is found digit by digit, 16
    bits a pass from the top (a radix select over the non-negative lengths), then the spans
    above it and the first of those equal to it are picked in one more pass."""
    prefix, need = 0, count  # the digits found so far; spans still to pick among those below
    for shift in (48, 32, 16, 0):
        counts = np.zeros(1 << 16, np.int64)
        for _, length in _length_chunks(segments, start_ns, end_ns):
            if shift < 48:
                length = length[(length >> (shift + 16)) == (prefix >> (shift + 16))]
            counts += np.bincount((length >> shift) & 0xFFFF, minlength=1 << 16)
        from_top = np.cumsum(counts[::-1])
        digit = (1 << 16) - 1 - int(np.searchsorted(from_top, need))  # first reaching `need`
        need -= int(from_top[(1 << 16) - 1 - digit] - counts[digit])  # those above the digit
        prefix |= digit << shift
    total = sum(int(tasks.size) for _, tasks, _ in segments)
    position = np.int32 if total <= np.iinfo(np.int32).max else np.int64  # memory
    picked: list[np.ndarray] = []
    for first, length in _length_chunks(segments, start_ns, end_ns):
        ties = np.flatnonzero(length == prefix)[:need]
        need -= ties.size
        part = np.sort(np.concatenate([np.flatnonzero(length > prefix), ties])) + first
        picked.append(part.astype(position))
    return np.concatenate(picked)


def _span_columns(
    segments: list[tuple[int, np.ndarray, np.ndarray]], gpu_rank: np.ndarray, chosen: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(task int64, rank int32, side int8) of the spans at positions ``chosen`` (ascending; None:
    every span), in segment order."""
    tasks, ranks, sides = [], [], []
    lo = 0
    for side, task, column in segments:
        if chosen is not None:
            pick = chosen[(chosen >= lo) & (chosen < lo + task.size)] - lo
            lo += task.size
            task = task[pick]
        tasks.append(task)
        ranks.append(gpu_rank[column[task]])
        sides.append(np.full(task.size, side, np.int8))
    return np.concatenate(tasks).astype(np.int64, copy=False), np.concatenate(ranks), np.concatenate(sides)


def _thread_ids(
    plan: ExecutionPlan,
    task: np.ndarray,
    rank: np.ndarray,
    side: np.ndarray,
    start_ns: np.ndarray,
    end_ns: np.ndarray,
    ranks: int,
    streams: int,
) -> tuple[np.ndarray, np.ndarray]:
    """(thread id per span, send and receive lanes per rank): compute stream s is thread s, send
    lane k comes after the ``streams`` compute streams, receive lanes after the send lanes."""
    is_comp = side < 0
    tid = np.zeros(task.size, dtype=np.int64)
    tid[is_comp] = plan.stream[task[is_comp]]
    lanes = np.zeros((ranks, 2), dtype=np.int64)
    for s in (SEND, RECV):
        mine = np.flatnonzero(side == s)
        lane = assign_lanes(rank[mine], start_ns[task[mine]], end_ns[task[mine]])
        tid[mine] = lane
        if mine.size:
            np.maximum.at(lanes[:, s], rank[mine], lane + 1)
    send = side == SEND
    recv = side == RECV
    tid[send] += streams
    tid[recv] += streams + lanes[rank[recv], SEND]
    return tid, lanes


def _process_names(pid: int, name: str, sort_index: int) -> list[dict]:
    return [
        {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}},
        {"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": sort_index}},
    ]


def _track_names(
    rank_names: list[str], comp_rank: np.ndarray, comp_tid: np.ndarray, lanes: np.ndarray, streams: int
) -> list[dict]:
    """Metadata events naming each rank's process and its threads (compute streams in use, send
    and receive lanes), in rank order."""
    used_streams: list[set[int]] = [set() for _ in rank_names]
    for r, s in zip(comp_rank.tolist(), comp_tid.tolist()):
        used_streams[r].add(s)
    events: list[dict] = []
    for r, name in enumerate(rank_names):
        events += _process_names(r, name, r)
        sends, recvs = int(lanes[r, SEND]), int(lanes[r, RECV])
        threads = [(s, "compute" if s == 0 else f"compute stream {s}") for s in sorted(used_streams[r])]
        threads += [(streams + k, f"send {k}") for k in range(sends)]
        threads += [(streams + sends + k, f"recv {k}") for k in range(recvs)]
        for t, thread_name in threads:
            events.append(
                {"ph": "M", "name": "thread_name", "pid": r, "tid": t, "args": {"name": thread_name}}
            )
            events.append(
                {"ph": "M", "name": "thread_sort_index", "pid": r, "tid": t, "args": {"sort_index": t}}
            )
    return events


class _ItemWriter:
    """Writes JSON array items to a file, a comma between any two, list by list."""

    def __init__(self, handle: TextIO) -> None:
        self._handle = handle
        self._first = True

    def write(self, items: list[str]) -> None:
        if not items:
            return
        if not self._first:
            self._handle.write(",")
        self._handle.write(",".join(items))
        self._first = False


def _of_plan(tasks: np.ndarray, plan: ExecutionPlan) -> bool:
    """Whether slowed ``tasks`` (ascending) can be the plan's: none beyond its last task."""
    return tasks.size == 0 or int(tasks[-1]) < len(plan)


class _SlowedTasks:
    """The extra ns of the compute tasks contention slowed, looked up by task (0 for the
    others): two arrays of the slowed tasks, not one value per task of the plan."""

    def __init__(self, tasks: np.ndarray, extra_ns: np.ndarray) -> None:
        self.tasks, self.extra = tasks, extra_ns

    def extra_ns(self, task: np.ndarray) -> np.ndarray:
        """Extra ns of each of ``task`` (int64)."""
        out = np.zeros(task.shape[0], np.int64)
        if self.tasks.size:
            at = np.minimum(np.searchsorted(self.tasks, task), self.tasks.size - 1)
            hit = self.tasks[at] == task
            out[hit] = self.extra[at[hit]]
        return out


class _SpanColumns:
    """The kept spans' columns; :meth:`format` writes a slice of them as JSON text, so a run's
    millions of spans are never held as text at once (the file is the same, chunk or not)."""

    def __init__(
        self,
        task: np.ndarray,
        rank: np.ndarray,
        tid: np.ndarray,
        is_comp: np.ndarray,
        peer: np.ndarray,
        start_ns: np.ndarray,
        end_ns: np.ndarray,
        size: np.ndarray,
        lost_ns: _SlowedTasks | None,
        task_label: Callable[[np.ndarray], list[str]],
    ) -> None:
        self.task, self.rank, self.tid, self.is_comp, self.peer = task, rank, tid, is_comp, peer
        self.start_ns, self.end_ns, self.size, self.lost_ns = start_ns, end_ns, size, lost_ns
        self.task_label = task_label
        self.quoted: dict[str, str] = {}

    def format(self, lo: int, hi: int) -> list[str]:
        """Spans ``lo:hi`` as JSON text (floats as json.dumps writes them: repr), a few times
        faster than a dict per span through json.dumps."""
        task = self.task[lo:hi]
        labels = self.task_label(task)
        quoted = self.quoted
        for name in set(labels).difference(quoted):
            quoted[name] = json.dumps(name)
        ts = (self.start_ns[task] / 1000.0).tolist()
        dur = ((self.end_ns[task] - self.start_ns[task]) / 1000.0).tolist()
        lost = (
            (self.lost_ns.extra_ns(task) / 1000.0).tolist() if self.lost_ns is not None else [0.0] * task.size
        )
        return [
            f'{{"ph":"X","name":{quoted[name]},"pid":{pid},"tid":{t},"ts":{start!r},"dur":{length!r}}}'
            if comp and not extra_us
            else f'{{"ph":"X","name":{quoted[name]},"pid":{pid},"tid":{t},"ts":{start!r},"dur":{length!r},'
            f'"args":{{"contention_us":{extra_us!r}}}}}'
            if comp
            else f'{{"ph":"X","name":{quoted[name]},"pid":{pid},"tid":{t},"ts":{start!r},"dur":{length!r},'
            f'"args":{{"peer_rank":{p},"bytes":{size}}}}}'
            for name, pid, t, start, length, comp, p, size, extra_us in zip(
                labels,
                self.rank[lo:hi].tolist(),
                self.tid[lo:hi].tolist(),
                ts,
                dur,
                self.is_comp[lo:hi].tolist(),
                self.peer[lo:hi].tolist(),
                self.size[task].tolist(),
                lost,
            )
        ]


def _json_numbers(values: np.ndarray) -> list[str]:
    """Each value as json.dumps writes it (repr, NaN and Infinity), without a call per value."""
    return [repr(v) if math.isfinite(v) else json.dumps(v) for v in values.tolist()]


def counter_steps(times_ns: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The samples of a counter track where its value changes (and the first and last): a counter
    holds its value until the next event, so the samples left out change nothing Perfetto draws.
    Hours of simulated time sampled every 10 us are mostly repeats (a GPU waiting on host
    overheads); a NaN is kept as it is (it differs from every value)."""
    if values.size <= 2:
        return times_ns, values
    keep = np.ones(values.size, dtype=bool)
    keep[1:-1] = values[1:-1] != values[:-2]
    return times_ns[keep], values[keep]


def _p2p_arrows(
    plan: ExecutionPlan,
    task: np.ndarray,
    rank: np.ndarray,
    tid: np.ndarray,
    side: np.ndarray,
    start_ns: np.ndarray,
    end_ns: np.ndarray,
) -> list[dict]:
    """Flow arrows from the send span to the recv span of each kept point-to-point transfer
    (a flow outside any collective: pipeline activations and gradients)."""
    p2p = (side >= 0) & (plan.collective[task] < 0)
    send = np.flatnonzero(p2p & (side == SEND))
    recv = np.flatnonzero(p2p & (side == RECV))
    both, si, ri = np.intersect1d(task[send], task[recv], return_indices=True)
    if not both.size:
        return []
    send, recv = send[si], recv[ri]
    mid = ((start_ns[both] + end_ns[both]) / 2000.0).tolist()
    out = []
    for t, m, sp, st, rp, rt in zip(
        both.tolist(), mid, rank[send].tolist(), tid[send].tolist(), rank[recv].tolist(), tid[recv].tolist()
    ):
        out.append({"ph": "s", "id": t, "name": "p2p", "cat": "p2p", "pid": sp, "tid": st, "ts": m})
        out.append(
            {"ph": "f", "bp": "e", "id": t, "name": "p2p", "cat": "p2p", "pid": rp, "tid": rt, "ts": m}
        )
    return out


def assign_lanes(group: np.ndarray, start_ns: np.ndarray, end_ns: np.ndarray) -> np.ndarray:
    """Lane of each span within its group such that spans on one lane never overlap (a span may
    start when the previous one on its lane ends). Each span takes the lowest-numbered free lane
    at its start, so a group uses as many lanes as its peak number of overlapping spans."""
    lane = np.zeros(group.size, dtype=np.int64)
    if not group.size:
        return lane
    order = np.lexsort((end_ns, start_ns, group))
    sorted_group = group[order]
    bounds = np.flatnonzero(sorted_group[1:] != sorted_group[:-1]) + 1
    out = np.empty(group.size, dtype=np.int64)
    # one group at a time: Python lists of one group's times, not of every span
    for lo, hi in zip([0, *bounds.tolist()], [*bounds.tolist(), group.size]):
        rows = order[lo:hi]
        out[lo:hi] = _lanes_of_group(start_ns[rows].tolist(), end_ns[rows].tolist())
    lane[order] = out
    return lane


def _lanes_of_group(s: list[int], e: list[int]) -> list[int]:
    """Lanes of one group's spans, given sorted by (start, end)."""
    busy: list[tuple[int, int]] = []  # (end, lane) of the group's spans in progress
    free: list[int] = []  # lanes free again, lowest first
    used = 0
    out = [0] * len(s)
    for i in range(len(s)):
        while busy and busy[0][0] <= s[i]:
            heapq.heappush(free, heapq.heappop(busy)[1])
        if free:
            k = heapq.heappop(free)
        else:
            k, used = used, used + 1
        out[i] = k
        heapq.heappush(busy, (e[i], k))
    return out


def longest(length: np.ndarray, count: int) -> np.ndarray:
    """Indices (ascending) of the ``count`` largest ``length`` values; among equal lengths the
    lower indices win. Same as ``np.sort(np.argsort(-length, kind="stable")[:count])``, with a
    threshold from a value sort (no indices; ``np.partition`` degrades on the many equal
    lengths a plan has)."""
    if count >= length.size:
        return np.arange(length.size)
    if count <= 0:
        return np.zeros(0, dtype=np.int64)
    return _at_least(length, np.sort(length)[length.size - count], count)


def _at_least(length: np.ndarray, threshold: np.integer | int, count: int) -> np.ndarray:
    """Indices (ascending) of the lengths above ``threshold`` and of the first of those equal to
    it, ``count`` in all (``threshold``: the ``count``-th largest length)."""
    above = np.flatnonzero(length > threshold)
    ties = np.flatnonzero(length == threshold)[: count - above.size]
    return np.sort(np.concatenate([above, ties]))


def fault_events(faults: list[dict] | None, pid: int, run_end_s: float) -> list[dict]:
    """Perfetto events of results.json ``faults``: a process "faults" with one thread per fault,
    a slice for the time the fault is in force and an instant event (with what it did) at its
    start."""
    if not faults:
        return []
    events: list[dict] = [
        {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": "faults"}}
    ]
    for fault in faults:
        target = fault.get("link") or f"gpu {fault.get('gpu')}"
        detail = {
            "down": "down",
            "rate": f"rate {fault.get('rate_bps', 0) / 1e9:g} Gb/s",
            "loss": f"loss {fault.get('probability', 0):g}",
            "slowdown": f"slowdown x{fault.get('slowdown', 1):g}",
        }[fault["kind"]]
        name = f"{target} {detail}"
        tid = int(fault["index"])
        start = fault["at_s"] * 1e6
        end = (fault["until_s"] if fault.get("until_s") is not None else max(run_end_s, fault["at_s"])) * 1e6
        args = {k: v for k, v in fault.items() if isinstance(v, (int, float, str)) or v is None}
        events.append(
            {
                "ph": "M",
                "name": "thread_name",
                "pid": pid,
                "tid": tid,
                "args": {"name": f"fault {tid}: {target}"},
            }
        )
        events.append(
            {
                "ph": "X",
                "name": name,
                "pid": pid,
                "tid": tid,
                "ts": start,
                "dur": max(end - start, 0.0),
                "args": args,
            }
        )
        events.append(
            {
                "ph": "i",
                "name": f"{name} (start)",
                "pid": pid,
                "tid": tid,
                "ts": start,
                "s": "p",
                "args": args,
            }
        )
    return events
