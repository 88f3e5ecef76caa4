"""Memory a run holds per task and per micro-batch (benchmarks/README.md, "Memory against the
micro-batch count"): the plan's arrays, the task times and the flow table, asserted against byte
formulas at 8 and 32 micro-batches per pipeline; the plan's engine-only columns freed once the run
is over; the narrow representations (32-bit times, 16-bit GPU ids, 32-bit dependency lists, 8-bit
flow blocks) writing what the wide ones write; and the bounded-memory writers, breakdown and trace
selection giving the results a single pass gives."""

from __future__ import annotations

import copy
import gc
import subprocess
import sys
import weakref
from dataclasses import replace

import numpy as np
import pytest

from heterosim.config.experiment import load_experiment
from heterosim.engine import executor as executor_module
from heterosim.engine import flow_table
from heterosim.engine.executor import execute_plan, widen_in_place
from heterosim.engine.flow_table import FLOW_TABLE_COLUMNS, TASK_BLOCK, FlowTable
from heterosim.plan import execution_plan
from heterosim.plan.execution_plan import (
    COMPUTE,
    FLOW,
    SCHEDULE_COLUMNS,
    TASK_COLUMNS,
    _connection_ids_by_columns,
    connection_ids,
    index_column,
)
from heterosim.report import breakdown, link_series, perfetto
from heterosim.report.numeric_csv import write_numeric_csv, write_numeric_csv_parts
from heterosim.report.run_report import results_dict, write_run_outputs
from heterosim.simulate.experiment import run_experiment
from heterosim.simulate.jobs import run_for_reports

TINY = "tests/data/tiny_experiment.yaml"  # micro-batch 1, 2 data-parallel replicas


@pytest.fixture(scope="module")
def runs():
    """The tiny experiment at 8 and 32 micro-batches per pipeline (flow fidelity)."""
    return {mb: run_experiment(load_experiment(TINY, [f"training.global_batch={2 * mb}"])) for mb in (8, 32)}


def plan_bytes(plan) -> int:
    return sum(v.nbytes for v in vars(plan).values() if isinstance(v, np.ndarray))


def test_plan_and_engine_bytes_per_task_do_not_grow_with_micro_batches(runs):
    per_task_columns = 0
    for mb, art in runs.items():
        plan, engine = art.tables.plan, art.engine
        tasks, edges, flows = len(plan), plan.dep_idx.size, int(np.count_nonzero(plan.kind == FLOW))
        per_task_columns = sum(getattr(plan, c).itemsize for c in TASK_COLUMNS)
        # the plan: its columns per task, the dependency CSR (8 B per task and per edge)
        assert plan_bytes(plan) == per_task_columns * tasks + 8 * (tasks + 1) + 8 * edges, mb
        # the run: start and end per task; the flow table only its task indices (the rest is
        # derived from the plan and the times when read)
        assert engine.task_start_ns.nbytes + engine.task_end_ns.nbytes == 16 * tasks
        assert isinstance(engine.flows, FlowTable)
        assert engine.flows.flows == flows
        # 32-bit connection ids (the tiny plan's collectives have connections); the task indices
        # are found again from the plan's kinds (a flow count per block of tasks)
        blocks = -(-tasks // TASK_BLOCK)
        assert engine.flows.retained_bytes() == 4 * flows + 8 * (blocks + 1)
        assert plan.rank.dtype == plan.node.dtype == np.int16 and plan.collective.dtype == np.int32
        assert plan.gpu.dtype == plan.dst.dtype == np.int16
        assert plan.bytes.dtype == plan.duration_ns.dtype == plan.delay_ns.dtype == np.int32
    assert per_task_columns <= 50  # 16-bit GPU ids: 67 B per task with the CSR at these edge counts
    small, large = runs[8], runs[32]
    growth = len(large.tables.plan) - len(small.tables.plan)
    assert growth > 0
    per_micro_batch_bytes = (plan_bytes(large.tables.plan) + large.engine.flows.retained_bytes()) - (
        plan_bytes(small.tables.plan) + small.engine.flows.retained_bytes()
    )
    edges = large.tables.plan.dep_idx.size - small.tables.plan.dep_idx.size
    flows = large.engine.flows.flows - small.engine.flows.flows
    blocks = [-(-len(art.tables.plan) // TASK_BLOCK) for art in (small, large)]
    assert per_micro_batch_bytes == (
        (per_task_columns + 8) * growth + 8 * edges + 4 * flows + 8 * (blocks[1] - blocks[0])
    )


def test_flow_table_columns_are_the_plans(runs):
    art = runs[8]
    plan, engine, flows = art.tables.plan, art.engine, art.engine.flows
    task = np.flatnonzero(plan.kind == FLOW)
    assert list(flows) == list(FLOW_TABLE_COLUMNS)
    assert np.array_equal(flows["task"], task)
    assert np.array_equal(flows["src"], plan.gpu[task]) and flows["src"].dtype == np.int32
    assert np.array_equal(flows["dst"], plan.dst[task])
    assert np.array_equal(flows["bytes"], plan.bytes[task])
    assert np.array_equal(flows["start_ns"], engine.task_start_ns[task])
    assert np.array_equal(flows["end_ns"], engine.task_end_ns[task])
    assert np.array_equal(flows["collective"], plan.collective[task])
    assert not flows["retransmits"].any() and flows["retransmits"].shape == task.shape
    part = flows.rows(5, 17)
    assert all(np.array_equal(part[k], flows[k][5:17]) for k in FLOW_TABLE_COLUMNS)
    assert "task" in flows and "nothing" not in flows
    with pytest.raises(KeyError):
        flows["nothing"]


@pytest.mark.parametrize("block", [1, 3, 64, 1 << 16])
def test_flow_rows_find_their_tasks_in_any_block_of_tasks(runs, monkeypatch, block):
    """The flow table's task indices, found again from the plan's kinds a block of tasks at a
    time, are the plan's FLOW tasks for every slice of rows (blocks without flows included)."""
    monkeypatch.setattr(flow_table, "TASK_BLOCK", block)
    art = runs[8]
    plan, engine = art.tables.plan, art.engine
    task = np.flatnonzero(plan.kind == FLOW)
    table = FlowTable(plan, task, engine.task_start_ns, engine.task_end_ns, None, {})
    assert table.flows == task.size and np.array_equal(table["task"], task)
    cuts = [0, 1, 2, 5, 17, 100, task.size // 2, task.size - 1, task.size]
    for lo in cuts:
        for hi in cuts:
            got = table.rows(lo, hi)["task"]
            assert np.array_equal(got, task[lo:hi]) and got.dtype == np.int64, (lo, hi)
    with pytest.raises(ValueError, match="every FLOW task"):
        FlowTable(plan, task[1:], engine.task_start_ns, engine.task_end_ns, None, {})


def _outputs(art, folder) -> dict[str, bytes]:
    """Every file a run writes, by name; results.json without its wall times."""
    results = results_dict(art)
    for key in ("wall_s", "stage_wall_s"):
        results["sim"].pop(key, None)
    write_run_outputs(art, folder, results, plots=False)
    return {
        path.name: path.read_bytes() for path in sorted(folder.iterdir()) if path.name != "results.json"
    } | {"results": repr(results).encode()}


@pytest.mark.parametrize("micro_batches", [2, 8, 24])
def test_the_memory_saving_run_writes_what_the_plain_run_writes(tmp_path, micro_batches):
    """`heterosim run`'s path (the plan's schedule freed before the run, 32-bit ids, packed
    connection ids, blocked reports) against a run that keeps its whole plan: the same files,
    byte for byte, at several micro-batch counts."""
    sets = [f"training.global_batch={2 * micro_batches}", "simulation.sample_interval=10us"]
    plain = run_experiment(load_experiment(TINY, sets))
    lean = run_for_reports(load_experiment(TINY, sets))
    assert lean.tables.plan.released and not plain.tables.plan.released
    plan = plain.tables.plan
    flows = np.flatnonzero((plan.kind == FLOW) & (plan.collective >= 0) & (plan.channel >= 0))
    packed = connection_ids(plan)
    by_columns = _connection_ids_by_columns(
        plan, flows, (plan.collective, plan.channel, plan.gpu, plan.dst), np.full(len(plan), -1, np.int64)
    )
    assert packed.max() > 0 and np.array_equal(packed, by_columns)
    assert np.array_equal(plain.engine.task_end_ns, lean.engine.task_end_ns)
    want, got = _outputs(plain, tmp_path / "plain"), _outputs(lean, tmp_path / "lean")
    assert {"ranks.csv", "flows.csv", "trace.json", "results"} <= set(want)
    for name, content in want.items():
        assert got[name] == content, name


class _WideTimes:
    """The run's task times as int64 from the start (``PlanExecutor::BorrowTimes``), as before
    the 32-bit times: the reference the narrow ones must match."""

    def __init__(self, executor, n: int) -> None:
        self.start, self.end = np.full(max(n, 1), -1, np.int64), np.full(max(n, 1), -1, np.int64)
        self.n = n
        executor.BorrowTimes(n, self.start, self.end)

    def widen_if_full(self) -> None:
        """Nothing to widen: these times are int64 from the start."""

    def wide(self):
        return self.start[: self.n], self.end[: self.n]


@pytest.mark.parametrize("micro_batches", [2, 24])
def test_narrow_representations_write_what_wide_ones_write(tmp_path, monkeypatch, micro_batches):
    """`heterosim run`'s path with its narrow representations (32-bit task times, 16-bit GPU ids,
    32-bit dependency lists, 8-bit flow blocks) against the same path with each in its wide form:
    every file byte for byte."""
    sets = [f"training.global_batch={2 * micro_batches}", "simulation.sample_interval=10us"]
    narrow = run_for_reports(load_experiment(TINY, sets))
    assert narrow.tables.plan.gpu.dtype == np.int16
    with monkeypatch.context() as wide:
        wide.setattr(executor_module, "_TaskTimes", _WideTimes)
        wide.setattr(executor_module, "NARROW_BLOCKS_MAX", -1)
        wide.setattr(execution_plan.ExecutionPlan, "narrow_dependencies", lambda plan: 0)
        wide.setattr(
            execution_plan, "endpoint_columns", lambda g, d: (g.astype(np.int32), d.astype(np.int32))
        )
        reference = run_for_reports(load_experiment(TINY, sets))
    assert reference.tables.plan.gpu.dtype == np.int32
    assert np.array_equal(narrow.engine.task_start_ns, reference.engine.task_start_ns)
    assert narrow.engine.task_end_ns.dtype == np.int64
    want, got = _outputs(reference, tmp_path / "wide"), _outputs(narrow, tmp_path / "narrow")
    assert {"ranks.csv", "flows.csv", "trace.json", "results"} <= set(want)
    for name, content in want.items():
        assert got[name] == content, name


def _assert_same_run(art, first, second) -> None:
    """The engine gives every task the same start and end on both plans."""
    results = [
        execute_plan(plan, art.topology, art.experiment.network, art.experiment.simulation)
        for plan in (first, second)
    ]
    assert np.array_equal(results[0].task_start_ns, results[1].task_start_ns)
    assert np.array_equal(results[0].task_end_ns, results[1].task_end_ns)
    assert results[0].makespan_ns == results[1].makespan_ns > 0


def test_amounts_are_32_bit_together_only_when_every_value_fits():
    size, duration, delay = np.array([1, 2**31 - 1]), np.array([0, 5]), np.array([0, 7])
    narrow = execution_plan.amount_columns(size, duration, delay)
    assert [c.dtype for c in narrow] == [np.int32] * 3
    assert [c.tolist() for c in narrow] == [[1, 2**31 - 1], [0, 5], [0, 7]]
    wide = execution_plan.amount_columns(size, duration, np.array([0, 2**31]))  # a 2.1 s delay
    assert [c.dtype for c in wide] == [np.int64] * 3 and wide[2].tolist() == [0, 2**31]


def test_a_plan_runs_the_same_with_64_bit_amounts(runs, monkeypatch):
    """The engine reads 32-bit sizes, durations, delays and connection ids
    (``PlanExecutor::BorrowPlanNarrow``) as it reads 64-bit ones."""
    art = runs[8]
    narrow = replace(art.tables.plan)  # the same columns, the schedule not released
    monkeypatch.setattr(execution_plan, "amount_dtype", lambda *columns: np.int64)
    wide = replace(narrow)
    assert narrow.bytes.dtype == np.int32 and wide.bytes.dtype == wide.delay_ns.dtype == np.int64
    _assert_same_run(art, narrow, wide)


def test_a_plan_runs_the_same_with_32_bit_gpu_ids(runs, monkeypatch):
    """``endpoint_columns``: GPU ids in int16 when both columns fit (else int32), read by the
    engine (``PlanExecutor::BorrowEndpointsNarrow``) as it reads 32-bit ones."""
    art = runs[8]
    narrow = replace(art.tables.plan)
    monkeypatch.setattr(execution_plan, "fits", lambda values, dtype: dtype is not np.int16)
    wide = replace(narrow)
    assert narrow.gpu.dtype == narrow.dst.dtype == np.int16
    assert wide.gpu.dtype == wide.dst.dtype == np.int32 and np.array_equal(wide.dst, narrow.dst)
    _assert_same_run(art, narrow, wide)


def test_gpu_ids_are_16_bit_together_only_when_both_columns_fit():
    gpu, dst = execution_plan.endpoint_columns(np.array([-1, 0, 32767]), np.array([-1, 5, 2]))
    assert gpu.dtype == dst.dtype == np.int16 and gpu.tolist() == [-1, 0, 32767]
    gpu, dst = execution_plan.endpoint_columns(np.array([-1, 0, 3]), np.array([-1, 32768, 2]))
    assert gpu.dtype == dst.dtype == np.int32 and dst.tolist() == [-1, 32768, 2]


def test_a_plan_runs_the_same_with_32_bit_dependencies(runs):
    """``ExecutionPlan.narrow_dependencies``: the same parents in int32 (4 bytes per task and
    per dependency less), read by the engine (``PlanExecutor::BorrowParentsNarrow``) as it
    reads int64 ones."""
    art = runs[8]
    wide = replace(art.tables.plan)
    narrow = replace(art.tables.plan)
    n, edges = len(wide), wide.dep_idx.size
    assert narrow.narrow_dependencies() == 4 * (n + 1) + 4 * edges
    assert narrow.dep_ptr.dtype == narrow.dep_idx.dtype == np.int32 and wide.dep_ptr.dtype == np.int64
    assert np.array_equal(narrow.dep_ptr, wide.dep_ptr) and np.array_equal(narrow.dep_idx, wide.dep_idx)
    assert narrow.narrow_dependencies() == 0  # already narrow
    _assert_same_run(art, wide, narrow)
    # more dependencies than int32 counts: kept as they are
    huge = replace(art.tables.plan)
    huge.dep_ptr = huge.dep_ptr.copy()
    huge.dep_ptr[-1] = 2**31
    assert huge.narrow_dependencies() == 0 and huge.dep_ptr.dtype == np.int64


@pytest.mark.parametrize("n, block", [(1, 1), (2, 1), (1000, 7), (1000, 1 << 20), (4097, 64)])
def test_times_widened_in_place_are_the_32_bit_values(n, block):
    """The run's 32-bit times, held in the first half of the int64 arrays they become, widened
    in place a block at a time from the last down: every value as ``astype`` gives it."""
    values = np.random.default_rng(n).integers(-1, 2**31 - 1, n, dtype=np.int64).astype(np.int32)
    buffer = np.empty(n, np.int64)
    buffer.view(np.int32)[:n] = values
    widen_in_place(buffer, n, block)
    assert np.array_equal(buffer, values.astype(np.int64))


def test_id_columns_are_32_bit_only_when_every_id_fits():
    small = index_column(np.array([-1, 0, 2**31 - 1], np.int64))
    assert small.dtype == np.int32 and small.tolist() == [-1, 0, 2**31 - 1]
    for wide in ([-1, 2**31], [-(2**31) - 1, 0]):
        kept = index_column(np.array(wide, np.int64))
        assert kept.dtype == np.int64 and kept.tolist() == wide
    same = np.array([3, -1], np.int32)
    assert index_column(same) is same
    assert index_column(np.array([-1, 32767]), np.int16).dtype == np.int16
    assert index_column(np.array([-1, 32768]), np.int16).dtype == np.int32
    assert index_column(np.array([-1, 5]), np.int32).dtype == np.int32  # never below narrowest


@pytest.mark.parametrize("seed, chunk", [(0, 1 << 20), (1, 7), (2, 1000)])
def test_longest_spans_by_radix_select_are_one_sorts(monkeypatch, seed, chunk):
    """The trace's pick of the longest spans, drawn a chunk of lengths at a time and selected 16
    bits at a time, against a sort of every length: lengths across every digit, many ties."""
    monkeypatch.setattr(perfetto, "LENGTH_CHUNK", chunk)
    rng = np.random.default_rng(seed)
    n = 5000
    start = rng.integers(0, 2**40, n)
    length = np.where(rng.random(n) < 0.5, rng.integers(0, 4, n), rng.integers(0, 2**62, n))
    length[rng.integers(0, n, 50)] = 2**48 + 7  # ties straddling digit boundaries
    end = start + length
    segments = [(-1, np.arange(0, 1700), None), (0, np.arange(1700, n), None), (1, np.arange(300, 900), None)]
    every = np.concatenate([tasks for _, tasks, _ in segments])
    for count in (1, 2, 49, 50, 51, 2000, every.size - 1):
        want = perfetto.longest(end[every] - start[every], count)
        got = perfetto._longest_spans(segments, start, end, count)  # type: ignore[arg-type]
        assert np.array_equal(got, want), count


def test_numeric_csv_in_parts_is_the_single_pass_file(tmp_path):
    rng = np.random.default_rng(3)
    columns = [rng.integers(-(10**12), 10**12, 1000), rng.random(1000) * 1e-3, rng.integers(0, 9, 1000)]
    write_numeric_csv(tmp_path / "one.csv", ["a", "b", "c"], columns)
    cuts = [0, 1, 333, 334, 1000]
    parts = [[c[lo:hi] for c in columns] for lo, hi in zip(cuts, cuts[1:])]
    write_numeric_csv_parts(tmp_path / "parts.csv", ["a", "b", "c"], parts, block_rows=7)
    assert (tmp_path / "parts.csv").read_bytes() == (tmp_path / "one.csv").read_bytes()


@pytest.mark.parametrize(
    "blocked, block",
    [("_host_unions", 1), ("_instance_spans", 7)],  # one rank per block; 7 flows per block
)
def test_breakdown_by_blocks_equals_one_block(runs, monkeypatch, blocked, block):
    art = runs[32]
    plan, engine = art.tables.plan, art.engine
    gpu_host = art.experiment.cluster.gpu_host
    args = (plan, engine.task_start_ns, engine.task_end_ns, art.rank_gpu, gpu_host, engine.makespan_ns)
    whole = breakdown.rank_breakdown(*args)
    monkeypatch.setattr(getattr(breakdown, blocked), "__defaults__", (block,))
    blocks = breakdown.rank_breakdown(*args)
    assert whole.comm_ns.sum() > 0 and whole.inter_host_ns.sum() > 0 and whole.intra_host_ns.sum() > 0
    for name in ("compute_ns", "comm_ns", "busy_ns", "intra_host_ns", "inter_host_ns"):
        assert np.array_equal(getattr(whole, name), getattr(blocks, name)), name


@pytest.mark.parametrize("cap", [1, 7, 100, 1000])
def test_trace_keeps_the_spans_one_sort_of_every_candidate_keeps(runs, cap):
    art = runs[8]
    plan, start, end = art.tables.plan, art.engine.task_start_ns, art.engine.task_end_ns
    comp = np.flatnonzero((plan.kind == COMPUTE) & (end >= 0))
    flows = np.flatnonzero((plan.kind == FLOW) & (end >= 0))
    for gpus_with_a_rank in (plan.num_gpus, plan.num_gpus // 2):  # all; half (another job's)
        gpu_rank = np.full(plan.num_gpus, -1, np.int32)
        gpu_rank[:gpus_with_a_rank] = np.arange(gpus_with_a_rank)
        # every candidate at once: compute spans, then the flows' send and receive sides
        task = np.concatenate([comp, flows, flows])
        rank = np.concatenate(
            [gpu_rank[plan.gpu[comp]], gpu_rank[plan.gpu[flows]], gpu_rank[plan.dst[flows]]]
        )
        side = np.repeat(np.array([-1, 0, 1], np.int8), [comp.size, flows.size, flows.size])
        keep = rank >= 0
        task, rank, side = task[keep], rank[keep], side[keep]
        assert task.size > cap
        chosen = perfetto.longest(end[task] - start[task], cap)
        segments = perfetto._candidate_spans(plan, end, gpu_rank)
        everything = perfetto._span_columns(segments, gpu_rank, None)
        picked = perfetto._longest_spans(segments, start, end, cap)
        kept = perfetto._span_columns(segments, gpu_rank, picked)
        for got, want in zip(everything + kept, (task, rank, side, task[chosen], rank[chosen], side[chosen])):
            assert got.dtype == want.dtype and np.array_equal(got, want)


def test_a_released_plan_frees_its_engine_columns_and_reports_the_same(tmp_path):
    art = run_experiment(load_experiment(TINY, ["training.global_batch=16"]))
    plan = art.tables.plan
    before = results_dict(art)
    expected = copy.deepcopy(before)  # writing the outputs adds the trace's span counts
    write_run_outputs(art, tmp_path / "before", before, plots=False)
    # without faults the compute durations go too (only fault records read them after a run)
    released = (*SCHEDULE_COLUMNS, "duration_ns")
    assert art.faults is None
    held = {name: weakref.ref(getattr(plan, name)) for name in released}
    nbytes = sum(getattr(plan, name).nbytes for name in released)
    assert art.release_schedule() == nbytes > 0
    gc.collect()
    # nothing else held them: their memory is free (not merely unreferenced by the plan)
    assert [name for name, ref in held.items() if ref() is not None] == []
    assert plan.released and all(getattr(plan, name).size == 0 for name in released)
    after = results_dict(art)
    assert after == expected
    write_run_outputs(art, tmp_path / "after", after, plots=False)
    for path in sorted((tmp_path / "before").iterdir()):
        assert (tmp_path / "after" / path.name).read_bytes() == path.read_bytes(), path.name
    with pytest.raises(ValueError, match="released"):
        execute_plan(plan, art.topology, art.experiment.network, art.experiment.simulation)
    with pytest.raises(AssertionError, match="released"):
        plan.check()


PINNED_CHECK = """
import ctypes, ctypes.util, numpy as np
from heterosim.engine import process_memory
libc = ctypes.CDLL(ctypes.util.find_library("c"))
if not hasattr(libc, "mallinfo2"):
    raise SystemExit(3)  # not glibc >= 2.33


FIELDS = "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost"


class MallInfo2(ctypes.Structure):  # malloc.h
    _fields_ = [(name, ctypes.c_size_t) for name in FIELDS.split()]


libc.mallinfo2.restype = MallInfo2
big = np.ones(16 << 20, np.uint8)  # mapped; freed, it raises glibc's threshold to 16 MiB
del big
assert process_memory.return_large_frees()
size = 2 * process_memory.MMAP_THRESHOLD_BYTES
mapped = libc.mallinfo2().hblkhd
array = np.ones(size, np.uint8)  # the heap has no free block that large: a mapping of its own
assert libc.mallinfo2().hblkhd - mapped >= size, "not mapped"
del array
assert libc.mallinfo2().hblkhd == mapped, "not unmapped"
"""


def test_large_arrays_get_their_own_mapping_once_pinned():
    # a fresh process: a heap without large free blocks (malloc takes those before mapping)
    done = subprocess.run([sys.executable, "-c", PINNED_CHECK], capture_output=True, text=True)
    if done.returncode == 3:
        pytest.skip("not glibc >= 2.33")
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("shape", [(1, 3), (2, 3), (10, 4), (1000, 7), (5, 0)])
def test_link_rate_differences_in_place_by_blocks_are_np_diff(shape):
    matrix = np.cumsum(np.random.default_rng(1).random(shape), axis=0)
    expected = np.diff(matrix, axis=0)
    link_series._difference_in_place(matrix, cells=13)
    assert np.array_equal(matrix[1:], expected)
