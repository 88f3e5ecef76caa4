"""The vectorised report code gives exactly what a straightforward implementation gives:
flows-style CSVs byte for byte as ``csv.writer``, the rank breakdown as plain Python loops over
its definitions."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from heterosim.plan.execution_plan import COMPUTE, FLOW, MARKER, ExecutionPlan
from heterosim.report.breakdown import rank_breakdown
from heterosim.report.intervals import union_length
from heterosim.report.numeric_csv import write_numeric_csv


def csv_module_bytes(tmp_path, header, columns) -> bytes:
    path = tmp_path / "reference.csv"
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(zip(*[c.tolist() for c in columns]))
    return path.read_bytes()


def awkward_columns(n: int, rng: np.random.Generator) -> list[np.ndarray]:
    big = rng.integers(-10**18, 10**18, n)
    big[:4] = [np.iinfo(np.int64).max, -np.iinfo(np.int64).max, 0, -1]
    specials = np.array([0.0, -0.0, np.nan, np.inf, -np.inf, 1e16, 9999999999999998.0, 1e-5,
                         1e-4, 123.0, 0.1, 5e-324, 1.7976931348623157e308, -2.5e-7])
    return [
        big,
        rng.integers(-5, 5, n).astype(np.int32),
        np.zeros(n, np.int64),
        rng.integers(0, 2**31, n).astype(np.uint32),
        rng.integers(9990, 10010, n).astype(np.int16),
        rng.standard_normal(n) * 10.0 ** rng.integers(-30, 30, n),
        np.resize(specials, n),
        rng.integers(0, 10**9, n) * 1e-9,
        np.sort(rng.integers(0, 50, n)) * 1e-9,  # long runs of equal values
        np.round(rng.random(n), 3).astype(np.float32),
    ]


@pytest.mark.parametrize("block_rows", [1, 7, 1000, 1 << 17])
def test_numeric_csv_is_byte_identical_to_csv_writer(tmp_path, block_rows):
    rng = np.random.default_rng(11)
    columns = awkward_columns(3001, rng)
    header = [f"col_{i}" for i in range(len(columns))]
    write_numeric_csv(tmp_path / "fast.csv", header, columns, block_rows=block_rows)
    assert (tmp_path / "fast.csv").read_bytes() == csv_module_bytes(tmp_path, header, columns)


def test_numeric_csv_single_column_and_empty(tmp_path):
    for columns in ([np.array([7, -70000, 0])], [np.array([0.5, -0.0])], [np.zeros(0, np.int64)]):
        write_numeric_csv(tmp_path / "fast.csv", ["x"], columns)
        assert (tmp_path / "fast.csv").read_bytes() == csv_module_bytes(tmp_path, ["x"], columns)


def test_numeric_csv_rejects_what_it_cannot_format(tmp_path):
    with pytest.raises(ValueError):
        write_numeric_csv(tmp_path / "x.csv", ["a"], [np.array(["text"])])
    with pytest.raises(ValueError):
        write_numeric_csv(tmp_path / "x.csv", ["a", "b"], [np.zeros(2), np.zeros(3)])


def test_union_with_sorted_starts_matches_general_sort():
    rng = np.random.default_rng(5)
    for _ in range(30):
        n = int(rng.integers(1, 400))
        starts = np.sort(rng.integers(0, 1000, n))
        ends = starts + rng.integers(-20, 200, n)
        groups = rng.integers(0, 9, n)
        assert np.array_equal(union_length(starts, ends, groups, 9, starts_sorted=True),
                              union_length(starts, ends, groups, 9))


# --- rank breakdown against its definitions, in plain Python ---------------------------------


def covered(intervals) -> int:
    total, reach = 0, None
    for s, e in sorted(i for i in intervals if i[1] > i[0]):
        if reach is None or s >= reach:
            total += e - s
            reach = e
        elif e > reach:
            total += e - reach
            reach = e
    return total


def reference_breakdown(plan, start, end, rank_gpu, gpu_host, iteration):
    names = ("compute", "comm", "busy", "intra", "inter")
    out = {k: [] for k in names}
    for gpu in rank_gpu:
        compute, spans, intra, inter = [], {}, [], []
        for t in range(len(plan)):
            if end[t] < 0:
                continue
            interval = (int(start[t]), int(end[t]))
            if plan.kind[t] == COMPUTE and plan.gpu[t] == gpu:
                compute.append(interval)
            if plan.kind[t] == FLOW and gpu in (plan.gpu[t], plan.dst[t]):
                # a self-flow (gpu -> gpu) counts once per side, as a sender and a receiver
                for side, other in ((plan.gpu[t], plan.dst[t]), (plan.dst[t], plan.gpu[t])):
                    if side != gpu:
                        continue
                    key = int(plan.collective[t]) if plan.collective[t] >= 0 else ("alone", t, other)
                    lo, hi = spans.get(key, (interval[0], interval[1]))
                    spans[key] = (min(lo, interval[0]), max(hi, interval[1]))
                    (intra if gpu_host[gpu] == gpu_host[other] else inter).append(interval)
        span_list = list(spans.values())
        busy = covered(compute + span_list)
        out["compute"].append(covered(compute))
        out["comm"].append(covered(span_list))
        out["busy"].append(busy)
        out["intra"].append(covered(intra))
        out["inter"].append(covered(inter))
    return {k: np.array(v, dtype=np.int64) for k, v in out.items()}


def random_plan(rng, num_gpus, n):
    kind = rng.choice([COMPUTE, FLOW, FLOW, MARKER], n).astype(np.uint8)
    gpu = rng.integers(0, num_gpus, n).astype(np.int32)
    dst = rng.integers(0, num_gpus, n).astype(np.int32)
    collective = np.where(rng.random(n) < 0.2, -1, rng.integers(0, 6, n)).astype(np.int64)
    plan = ExecutionPlan(
        kind=kind, gpu=gpu, dst=dst, bytes=np.ones(n, np.int64), duration_ns=np.zeros(n, np.int64),
        delay_ns=np.zeros(n, np.int64), stream=np.zeros(n, np.int16), priority=np.zeros(n, np.uint8),
        dep_ptr=np.zeros(n + 1, np.int64), dep_idx=np.zeros(0, np.int64),
        rank=np.zeros(n, np.int32), node=np.zeros(n, np.int64), collective=collective,
        num_gpus=num_gpus,
    )
    start = rng.integers(0, 500, n)
    end = start + rng.integers(0, 120, n)
    end[rng.random(n) < 0.05] = -1  # did not run
    start[end < 0] = -1
    return plan, start.astype(np.int64), end.astype(np.int64)


@pytest.mark.parametrize("seed", range(12))
def test_breakdown_matches_plain_python_definitions(seed):
    rng = np.random.default_rng(seed)
    num_gpus = int(rng.integers(2, 9))
    plan, start, end = random_plan(rng, num_gpus, int(rng.integers(0, 160)) if seed else 0)
    # some GPUs carry no rank (their tasks count for nobody); ranks map to GPUs in a shuffled order
    ranked = rng.permutation(num_gpus)[: int(rng.integers(1, num_gpus + 1))]
    gpu_host = (np.arange(num_gpus) // 2).astype(np.int32)
    iteration = int(max(end.max(initial=1), 1))
    bd = rank_breakdown(plan, start, end, ranked, gpu_host, iteration)
    ref = reference_breakdown(plan, start, end, ranked, gpu_host, iteration)
    assert np.array_equal(bd.compute_ns, ref["compute"])
    assert np.array_equal(bd.comm_ns, ref["comm"])
    assert np.array_equal(bd.busy_ns, ref["busy"])
    assert np.array_equal(bd.intra_host_ns, ref["intra"])
    assert np.array_equal(bd.inter_host_ns, ref["inter"])
    assert np.array_equal(bd.bubble_ns, np.maximum(iteration - ref["busy"], 0))
