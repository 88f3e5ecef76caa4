"""trace.json against the JSON trace-event format's rules as Perfetto applies them, on real runs of
both fidelities, and the lane assignment that makes communication spans nest."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from heterosim.plan.execution_plan import COMPUTE, FLOW
from heterosim.report.perfetto import assign_lanes
from heterosim.report.run_report import write_run_outputs

TINY = Path(__file__).resolve().parents[1] / "data" / "tiny_experiment.yaml"


def trace_rule_violations(document: dict) -> list[str]:
    """Problems that make Perfetto (or chrome://tracing) drop or misplace events: complete events
    ('X') on one thread that overlap without nesting, negative timestamps or durations, unknown
    phases (complete, metadata, counter, flow, instant), flow arrows ('s'/'f') without both ends,
    counters without a value. Empty: valid.

    Times are compared in integer nanoseconds, rounded from the microseconds written, as
    Perfetto's JSON importer reads them (``json::CoerceToTs``: llround(us * 1000))."""
    problems: list[str] = []
    spans: dict[tuple[int, int], list[tuple[float, float]]] = defaultdict(list)
    arrows: dict[object, set[str]] = defaultdict(set)
    for event in document["traceEvents"]:
        phase = event.get("ph")
        if phase not in {"X", "M", "C", "s", "f", "i"}:
            problems.append(f"unexpected phase {phase!r}: {event}")
            continue
        if phase == "M":
            continue
        if event["ts"] < 0:
            problems.append(f"negative ts: {event}")
        if phase == "X":
            if event["dur"] < 0:
                problems.append(f"negative dur: {event}")
            start = round(event["ts"] * 1000)
            spans[(event["pid"], event["tid"])].append((start, start + round(event["dur"] * 1000)))
        elif phase == "C" and not isinstance(event.get("args", {}).get("value"), (int, float)):
            problems.append(f"counter without a numeric value: {event}")
        elif phase in "sf":
            arrows[event["id"]].add(phase)
    for thread, intervals in spans.items():
        # nesting: sorted by start (longest first on ties), each span ends before the enclosing
        # open span ends, or starts after it ended
        intervals.sort(key=lambda iv: (iv[0], -iv[1]))
        open_ends: list[float] = []
        for start, end in intervals:
            while open_ends and open_ends[-1] <= start:
                open_ends.pop()
            if open_ends and end > open_ends[-1]:
                problems.append(
                    f"thread {thread}: span [{start}, {end}] overlaps one ending at "
                    f"{open_ends[-1]} without nesting"
                )
                break
            open_ends.append(end)
    problems += [
        f"flow arrow {key}: only {sorted(ends)}" for key, ends in arrows.items() if ends != {"s", "f"}
    ]
    return problems


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_lanes_never_overlap_and_use_the_peak_concurrency(seed):
    rng = np.random.default_rng(seed)
    n = 4000
    group = rng.integers(0, 5, n)
    start = rng.integers(0, 10_000, n)
    end = start + rng.integers(0, 300, n)  # zero-length spans included
    lane = assign_lanes(group, start, end)
    for g in range(5):
        mine = group == g
        for k in np.unique(lane[mine]):
            on_lane = np.flatnonzero(mine & (lane == k))
            order = on_lane[np.lexsort((end[on_lane], start[on_lane]))]
            assert np.all(start[order][1:] >= end[order][:-1]), (g, k)
        # greedy interval partitioning is optimal: lanes = most spans in progress at one instant
        times = np.concatenate([start[mine], end[mine]])
        steps = np.concatenate([np.ones(mine.sum()), -np.ones(mine.sum())])
        order = np.lexsort((steps, times))  # an end before a start at the same instant
        assert lane[mine].max() + 1 == int(np.cumsum(steps[order]).max())


def test_rule_checker_catches_overlap_without_nesting():
    def doc(*spans):
        return {
            "traceEvents": [
                {"ph": "X", "name": "a", "pid": 0, "tid": 0, "ts": ts, "dur": d} for ts, d in spans
            ]
        }

    assert trace_rule_violations(doc((0, 10), (2, 3), (10, 5))) == []  # nested, then adjacent
    assert trace_rule_violations(doc((0, 10), (5, 10)))  # overlaps the end
    assert trace_rule_violations(doc((0, -1)))
    assert trace_rule_violations({"traceEvents": [{"ph": "s", "id": 1, "ts": 0, "pid": 0, "tid": 0}]})


@pytest.fixture(scope="module", params=["flow", "packet"])
def tiny_run(request, native_lib):
    from heterosim.config.experiment import load_experiment
    from heterosim.simulate import run_experiment

    return run_experiment(load_experiment(TINY), fidelity=request.param)


@pytest.mark.ns3
def test_trace_loads_completely_in_perfetto(tiny_run, tmp_path):
    run = tiny_run
    results = write_run_outputs(run, tmp_path / "out", plots=False)
    document = json.loads((tmp_path / "out" / "trace.json").read_text())
    assert trace_rule_violations(document) == []
    plan, end = run.tables.plan, run.engine.task_end_ns
    computes = int(((plan.kind == COMPUTE) & (end >= 0)).sum())
    flows = int(((plan.kind == FLOW) & (end >= 0)).sum())
    # nothing dropped: every compute task once, every flow on its sender's and receiver's lanes
    assert (
        document["metadata"]
        == results["sim"]["trace_spans"]
        == {"spans": computes + 2 * flows, "dropped_spans": 0, "max_spans": 2_000_000}
    )
    spans = [e for e in document["traceEvents"] if e["ph"] == "X"]
    assert len(spans) == computes + 2 * flows
    threads = {
        (e["pid"], e["tid"]): e["args"]["name"] for e in document["traceEvents"] if e["name"] == "thread_name"
    }
    kinds: dict[int, set[str]] = {}
    for e in spans:
        kinds.setdefault(e["pid"], set()).add(threads[(e["pid"], e["tid"])].split()[0])
    assert {r: kinds.get(r) for r in range(len(run.rank_gpu))} == {
        r: {"compute", "send", "recv"} for r in range(len(run.rank_gpu))
    }
    sent = sum(e["args"]["bytes"] for e in spans if threads[(e["pid"], e["tid"])].startswith("send"))
    received = sum(e["args"]["bytes"] for e in spans if threads[(e["pid"], e["tid"])].startswith("recv"))
    assert sent == received == int(plan.bytes[(plan.kind == FLOW) & (end >= 0)].sum())
    arrows = [e for e in document["traceEvents"] if e["ph"] in "sf"]
    assert arrows  # the pipeline's point-to-point transfers are linked sender -> receiver
    counters = {e["name"] for e in document["traceEvents"] if e["ph"] == "C"}
    assert any(name.startswith("link ") and "utilisation" in name for name in counters)


@pytest.mark.ns3
def test_a_capped_trace_keeps_the_longest_spans_and_says_so(tiny_run, tmp_path, capsys):
    run = tiny_run
    results = write_run_outputs(run, tmp_path / "full", plots=False, trace_max_spans=0)
    total = results["sim"]["trace_spans"]["spans"]
    capsys.readouterr()
    results = write_run_outputs(run, tmp_path / "capped", plots=False, trace_max_spans=total // 4)
    info = results["sim"]["trace_spans"]
    assert info == {"spans": total // 4, "dropped_spans": total - total // 4, "max_spans": total // 4}
    assert f"keeps the {total // 4:,} longest of {total:,} spans" in capsys.readouterr().err
    document = json.loads((tmp_path / "capped" / "trace.json").read_text())
    assert trace_rule_violations(document) == []
    full = json.loads((tmp_path / "full" / "trace.json").read_text())
    kept = sorted((e["dur"] for e in document["traceEvents"] if e["ph"] == "X"), reverse=True)
    every = sorted((e["dur"] for e in full["traceEvents"] if e["ph"] == "X"), reverse=True)
    assert kept == every[: len(kept)]


def test_a_negative_trace_cap_fails_before_anything_runs(tmp_path, capsys):
    from heterosim.cli import main

    with pytest.raises(SystemExit) as stop:  # an argument error, as for any other bad option
        main(["run", "--trace-spans", "-1", "--out", str(tmp_path / "out")])
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(
        "heterosim run: error: argument --trace-spans: expected a number of spans >= 0 (0 = all), got '-1'"
    )
    assert not (tmp_path / "out").exists()


@pytest.mark.ns3
def test_trace_text_does_not_depend_on_the_span_chunk(tiny_run, tmp_path, monkeypatch):
    """Spans are written a chunk at a time (memory bounded by the chunk, not the run); the file
    is byte for byte the one written in a single piece, counters and metadata included."""
    import heterosim.report.perfetto as perfetto
    import heterosim.report.run_report as run_report

    write_run_outputs(tiny_run, tmp_path / "whole", plots=False)
    whole = (tmp_path / "whole" / "trace.json").read_bytes()
    spans = json.loads(whole)["metadata"]["spans"]
    assert spans > 3
    for chunk in (1, 3, spans - 1):

        def chunked(*args, chunk=chunk, **kwargs):
            return perfetto.write_perfetto_trace(*args, chunk_spans=chunk, **kwargs)

        monkeypatch.setattr(run_report, "write_perfetto_trace", chunked)
        write_run_outputs(tiny_run, tmp_path / f"chunk{chunk}", plots=False)
        assert (tmp_path / f"chunk{chunk}" / "trace.json").read_bytes() == whole
