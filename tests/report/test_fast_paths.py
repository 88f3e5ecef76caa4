"""The vectorised report code gives exactly what a straightforward implementation gives:
flows-style CSVs byte for byte as ``csv.writer``, the rank breakdown as plain Python loops over
its definitions."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from heterosim.plan.execution_plan import COMPUTE, FLOW, MARKER, ExecutionPlan
from heterosim.report.breakdown import rank_breakdown
from heterosim.report.intervals import union_length
from heterosim.report.numeric_csv import write_numeric_csv
from heterosim.report.perfetto import longest
from heterosim.report.run_report import FLOW_COLUMNS, write_run_outputs


def csv_module_bytes(tmp_path, header, columns) -> bytes:
    path = tmp_path / "reference.csv"
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(zip(*[c.tolist() for c in columns]))
    return path.read_bytes()


def awkward_columns(n: int, rng: np.random.Generator) -> list[np.ndarray]:
    big = rng.integers(-(10**18), 10**18, n)
    big[:4] = [np.iinfo(np.int64).max, -np.iinfo(np.int64).max, 0, -1]
    specials = np.array(
        [
            0.0,
            -0.0,
            np.nan,
            np.inf,
            -np.inf,
            1e16,
            9999999999999998.0,
            1e-5,
            1e-4,
            123.0,
            0.1,
            5e-324,
            1.7976931348623157e308,
            -2.5e-7,
        ]
    )
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


@pytest.mark.parametrize("block_rows", [3, 1000, 1 << 17])
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


def test_union_in_chunks_carries_each_group_across_chunk_borders():
    rng = np.random.default_rng(8)
    for _ in range(60):
        n = int(rng.integers(1, 120))
        starts = rng.integers(0, 300, n)
        ends = starts + rng.integers(-10, 150, n)
        groups = rng.integers(0, 3, n)  # few groups: most span several chunks
        whole = union_length(starts, ends, groups, 3)
        assert np.array_equal(
            whole, np.array([covered(zip(starts[groups == g], ends[groups == g])) for g in range(3)])
        )
        for chunk in (1, 2, 3, 7):
            assert np.array_equal(union_length(starts, ends, groups, 3, chunk=chunk), whole)
            order = np.argsort(starts, kind="stable")
            assert np.array_equal(
                union_length(starts[order], ends[order], groups[order], 3, starts_sorted=True, chunk=chunk),
                whole,
            )


def test_union_with_sorted_starts_matches_general_sort():
    rng = np.random.default_rng(5)
    for _ in range(30):
        n = int(rng.integers(1, 400))
        starts = np.sort(rng.integers(0, 1000, n))
        ends = starts + rng.integers(-20, 200, n)
        groups = rng.integers(0, 9, n)
        assert np.array_equal(
            union_length(starts, ends, groups, 9, starts_sorted=True), union_length(starts, ends, groups, 9)
        )


def test_longest_is_a_stable_sort_by_length():
    rng = np.random.default_rng(2)
    for _ in range(300):
        n = int(rng.integers(0, 50))
        length = rng.integers(0, int(rng.integers(1, 6)), n)  # many ties
        count = int(rng.integers(0, n + 2))
        assert np.array_equal(longest(length, count), np.sort(np.argsort(-length, kind="stable")[:count]))


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
    kind, src, dst = plan.kind.tolist(), plan.gpu.tolist(), plan.dst.tolist()
    coll, start, end = plan.collective.tolist(), np.asarray(start).tolist(), np.asarray(end).tolist()
    host = np.asarray(gpu_host).tolist()
    ranked = set(np.asarray(rank_gpu).tolist())
    compute = {g: [] for g in ranked}
    spans = {g: {} for g in ranked}
    intra = {g: [] for g in ranked}
    inter = {g: [] for g in ranked}
    for t in range(len(kind)):
        if end[t] < 0:
            continue
        interval = (start[t], end[t])
        if kind[t] == COMPUTE and src[t] in ranked:
            compute[src[t]].append(interval)
        if kind[t] != FLOW:
            continue
        # a flow counts for its sender and for its receiver (twice for a self-flow)
        for side, other in ((src[t], dst[t]), (dst[t], src[t])):
            if side not in ranked:
                continue
            key = coll[t] if coll[t] >= 0 else ("alone", t, other)
            lo, hi = spans[side].get(key, interval)
            spans[side][key] = (min(lo, interval[0]), max(hi, interval[1]))
            (intra if host[side] == host[other] else inter)[side].append(interval)
    out = {k: [] for k in ("compute", "comm", "busy", "intra", "inter")}
    for gpu in np.asarray(rank_gpu).tolist():
        span_list = list(spans[gpu].values())
        out["compute"].append(covered(compute[gpu]))
        out["comm"].append(covered(span_list))
        out["busy"].append(covered(compute[gpu] + span_list))
        out["intra"].append(covered(intra[gpu]))
        out["inter"].append(covered(inter[gpu]))
    return {k: np.array(v, dtype=np.int64) for k, v in out.items()}


def random_plan(rng, num_gpus, n):
    kind = rng.choice([COMPUTE, FLOW, FLOW, MARKER], n).astype(np.uint8)
    gpu = rng.integers(0, num_gpus, n).astype(np.int32)
    dst = rng.integers(0, num_gpus, n).astype(np.int32)
    collective = np.where(rng.random(n) < 0.2, -1, rng.integers(0, 6, n)).astype(np.int64)
    plan = ExecutionPlan(
        kind=kind,
        gpu=gpu,
        dst=dst,
        bytes=np.ones(n, np.int64),
        duration_ns=np.zeros(n, np.int64),
        delay_ns=np.zeros(n, np.int64),
        stream=np.zeros(n, np.int16),
        priority=np.zeros(n, np.uint8),
        dep_ptr=np.zeros(n + 1, np.int64),
        dep_idx=np.zeros(0, np.int64),
        rank=np.zeros(n, np.int32),
        node=np.zeros(n, np.int64),
        collective=collective,
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


# --- a small run: every fast path against its straightforward form ---------------------------

TINY = Path(__file__).resolve().parents[1] / "data" / "tiny_experiment.yaml"


@pytest.fixture(scope="module", params=["flow", "packet"])
def tiny_run(request, native_lib, tmp_path_factory):
    from heterosim.config.experiment import load_experiment
    from heterosim.simulate import run_experiment

    run = run_experiment(load_experiment(TINY), fidelity=request.param)
    out = tmp_path_factory.mktemp(request.param) / "out"
    results = write_run_outputs(run, out, plots=False)
    return run, out, results


@pytest.mark.ns3
def test_run_flows_csv_is_what_csv_writer_writes(tiny_run, tmp_path):
    run, out, _ = tiny_run
    flows = {k: np.asarray(v).tolist() for k, v in run.engine.flows.items()}
    rows = []
    for i in range(len(flows["task"])):
        start, end = flows["start_ns"][i], flows["end_ns"][i]
        rows.append(
            [
                flows["task"][i],
                flows["src"][i],
                flows["dst"][i],
                flows["bytes"][i],
                start * 1e-9,
                end * 1e-9,
                (end - start) * 1e-9,
                flows["retransmits"][i] if "retransmits" in flows else 0,
                flows["collective"][i],
                flows["connection"][i],
                flows["out_of_order"][i],
                flows["max_reorder_depth"][i],
            ]
        )
    path = tmp_path / "reference.csv"
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(FLOW_COLUMNS)
        writer.writerows(rows)
    assert len(rows) > 100
    assert (out / "flows.csv").read_bytes() == path.read_bytes()
    # chunk granularity: some flows share a connection, each shared one has two flows at least
    connection = np.asarray(flows["connection"])
    shared = connection[connection >= 0]
    assert shared.size and np.bincount(shared).min() >= 2
    assert np.all(np.asarray(flows["collective"])[connection >= 0] >= 0)


@pytest.mark.ns3
def test_run_breakdown_is_the_plain_python_one(tiny_run):
    run, _, results = tiny_run
    ref = reference_breakdown(
        run.tables.plan,
        run.engine.task_start_ns,
        run.engine.task_end_ns,
        run.rank_gpu,
        run.experiment.cluster.gpu_host,
        run.engine.makespan_ns,
    )
    iteration = int(run.engine.makespan_ns)
    for r, row in enumerate(results["ranks"]):
        assert row["compute_s"] == ref["compute"][r] * 1e-9
        assert row["comm_s"] == ref["comm"][r] * 1e-9
        assert row["busy_s"] == ref["busy"][r] * 1e-9
        assert row["exposed_comm_s"] == (ref["busy"][r] - ref["compute"][r]) * 1e-9
        assert row["bubble_s"] == max(iteration - ref["busy"][r], 0) * 1e-9
        assert row["intra_host_comm_s"] == ref["intra"][r] * 1e-9
        assert row["inter_host_comm_s"] == ref["inter"][r] * 1e-9
