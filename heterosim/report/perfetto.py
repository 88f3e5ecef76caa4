"""Chrome/Perfetto trace (``trace.json``): one process per rank with a compute and a
communication thread, and counter tracks for link utilization and queue depth.

Open it at ui.perfetto.dev or chrome://tracing. Times are microseconds, as the format asks.
A realistic iteration has millions of tasks: past ``max_events`` spans the shortest are left out
and the file says so in its metadata (``dropped_spans``), so the trace stays loadable.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np

from heterosim.plan.execution_plan import COMPUTE, FLOW, ExecutionPlan

COMPUTE_THREAD = 0
COMM_THREAD = 1


def write_perfetto_trace(
    path: Path,
    plan: ExecutionPlan,
    start_ns: np.ndarray,
    end_ns: np.ndarray,
    rank_gpu: np.ndarray,
    rank_names: list[str],
    task_label: Callable[[np.ndarray], list[str]],
    counters: dict[str, tuple[np.ndarray, np.ndarray]] | None = None,
    max_events: int = 200_000,
    extra_events: list[dict] | None = None,
) -> dict[str, int]:
    """Write ``trace.json``; return how many spans were written and dropped.

    ``task_label(task_indices)`` names tasks; ``counters`` maps a track name to
    (time_ns, value) arrays; ``extra_events`` (e.g. :func:`fault_events`) are written as given.
    """
    num_gpus = max(plan.num_gpus, int(rank_gpu.max()) + 1 if rank_gpu.size else 0)
    gpu_rank = np.full(num_gpus, -1, dtype=np.int32)
    gpu_rank[rank_gpu] = np.arange(len(rank_gpu))
    ran = end_ns >= 0
    comp = np.flatnonzero((plan.kind == COMPUTE) & ran)
    flows = np.flatnonzero((plan.kind == FLOW) & ran)
    # Spans in this order: compute tasks, then each flow on its sender's and on its receiver's
    # communication thread. Only the kept ones are materialised as (task, rank, thread).
    parts = []
    for tasks, side, thread in ((comp, plan.gpu, COMPUTE_THREAD), (flows, plan.gpu, COMM_THREAD),
                                (flows, plan.dst, COMM_THREAD)):
        rank = gpu_rank[side[tasks]]
        if rank.size and rank.min() < 0:
            tasks, rank = tasks[rank >= 0], rank[rank >= 0]
        parts.append((tasks, rank, thread))
    bounds = np.cumsum([0] + [tasks.size for tasks, _, _ in parts])
    total = int(bounds[-1])
    dropped = 0
    if total > max_events:
        chosen = longest(np.concatenate([end_ns[t] - start_ns[t] for t, _, _ in parts]), max_events)
        dropped = total - int(chosen.size)
    else:
        chosen = np.arange(total)
    part = np.searchsorted(bounds, chosen, side="right") - 1
    index = chosen - bounds[part]
    span_task = np.empty(chosen.size, dtype=np.int64)
    span_rank = np.empty(chosen.size, dtype=np.int64)
    span_thread = np.empty(chosen.size, dtype=np.int64)
    for i, (tasks, rank, thread) in enumerate(parts):
        mine = part == i
        span_task[mine] = tasks[index[mine]]
        span_rank[mine] = rank[index[mine]]
        span_thread[mine] = thread
    del parts, comp, flows
    labels = task_label(span_task)
    events: list[dict] = []
    for rank, name in enumerate(rank_names):
        events.append({"ph": "M", "name": "process_name", "pid": rank, "tid": 0,
                       "args": {"name": name}})
        events.append({"ph": "M", "name": "thread_name", "pid": rank, "tid": COMPUTE_THREAD,
                       "args": {"name": "compute"}})
        events.append({"ph": "M", "name": "thread_name", "pid": rank, "tid": COMM_THREAD,
                       "args": {"name": "communication"}})
    ts = (start_ns[span_task] / 1000.0).tolist()
    dur = ((end_ns[span_task] - start_ns[span_task]) / 1000.0).tolist()
    events += [{"ph": "X", "name": name, "pid": pid, "tid": tid, "ts": t, "dur": d}
               for name, pid, tid, t, d in zip(labels, span_rank.tolist(), span_thread.tolist(), ts, dur)]
    counter_pid = len(rank_names)
    if counters:
        events.append({"ph": "M", "name": "process_name", "pid": counter_pid, "tid": 0,
                       "args": {"name": "network"}})
        for track, (times, values) in counters.items():
            times_us = (np.asarray(times) / 1000.0).astype(float).tolist()
            values = np.asarray(values).astype(float).tolist()
            events += [{"ph": "C", "name": track, "pid": counter_pid, "tid": 0, "ts": t,
                        "args": {"value": v}} for t, v in zip(times_us, values)]
    events += extra_events or []
    document = {
        "traceEvents": events,
        "displayTimeUnit": "ns",
        "metadata": {"spans": int(span_task.size), "dropped_spans": dropped},
    }
    path.write_text(json.dumps(document, separators=(",", ":")))
    return {"spans": int(span_task.size), "dropped_spans": dropped}


def longest(length: np.ndarray, count: int) -> np.ndarray:
    """Indices (ascending) of the ``count`` largest ``length`` values; among equal lengths the
    lower indices win. Same as ``np.sort(np.argsort(-length, kind="stable")[:count])``, with a
    threshold from a value sort (no indices; ``np.partition`` degrades on the many equal
    lengths a plan has)."""
    if count >= length.size:
        return np.arange(length.size)
    if count <= 0:
        return np.zeros(0, dtype=np.int64)
    threshold = np.sort(length)[length.size - count]
    above = np.flatnonzero(length > threshold)
    ties = np.flatnonzero(length == threshold)[:count - above.size]
    return np.sort(np.concatenate([above, ties]))


def fault_events(faults: list[dict] | None, pid: int, run_end_s: float) -> list[dict]:
    """Perfetto events of results.json ``faults``: a process "faults" with one thread per fault,
    a slice for the time the fault is in force and an instant event (with what it did) at its
    start."""
    if not faults:
        return []
    events: list[dict] = [{"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
                           "args": {"name": "faults"}}]
    for fault in faults:
        target = fault.get("link") or f"gpu {fault.get('gpu')}"
        detail = {"down": "down", "rate": f"rate {fault.get('rate_bps', 0) / 1e9:g} Gb/s",
                  "loss": f"loss {fault.get('probability', 0):g}",
                  "slowdown": f"slowdown x{fault.get('slowdown', 1):g}"}[fault["kind"]]
        name = f"{target} {detail}"
        tid = int(fault["index"])
        start = fault["at_s"] * 1e6
        end = (fault["until_s"] if fault.get("until_s") is not None else max(run_end_s, fault["at_s"])) * 1e6
        args = {k: v for k, v in fault.items() if isinstance(v, (int, float, str)) or v is None}
        events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                       "args": {"name": f"fault {tid}: {target}"}})
        events.append({"ph": "X", "name": name, "pid": pid, "tid": tid, "ts": start,
                       "dur": max(end - start, 0.0), "args": args})
        events.append({"ph": "i", "name": f"{name} (start)", "pid": pid, "tid": tid, "ts": start,
                       "s": "p", "args": args})
    return events
