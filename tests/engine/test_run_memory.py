"""Memory a run holds per task and per micro-batch (benchmarks/README.md, "Memory against the
micro-batch count"): the plan's arrays, the task times and the flow table, asserted against byte
formulas at 8 and 32 micro-batches per pipeline, and the bounded-memory writers and breakdown
giving the results a single pass gives."""

from __future__ import annotations

import numpy as np
import pytest

from heterosim.config.experiment import load_experiment
from heterosim.engine.flow_table import FLOW_TABLE_COLUMNS, FlowTable
from heterosim.plan.execution_plan import FLOW, TASK_COLUMNS
from heterosim.report import breakdown
from heterosim.report.numeric_csv import write_numeric_csv, write_numeric_csv_parts
from heterosim.simulate.experiment import run_experiment

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
        assert engine.flows.retained_bytes() == 8 * flows
    assert per_task_columns <= 84  # 95 B per task with the CSR at the OPT-350M plans' edge counts
    small, large = runs[8], runs[32]
    growth = len(large.tables.plan) - len(small.tables.plan)
    assert growth > 0
    per_micro_batch_bytes = (plan_bytes(large.tables.plan) + large.engine.flows.retained_bytes()) - (
        plan_bytes(small.tables.plan) + small.engine.flows.retained_bytes()
    )
    edges = large.tables.plan.dep_idx.size - small.tables.plan.dep_idx.size
    flows = large.engine.flows.flows - small.engine.flows.flows
    assert per_micro_batch_bytes == (per_task_columns + 8) * growth + 8 * edges + 8 * flows


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


def test_numeric_csv_in_parts_is_the_single_pass_file(tmp_path):
    rng = np.random.default_rng(3)
    columns = [rng.integers(-(10**12), 10**12, 1000), rng.random(1000) * 1e-3, rng.integers(0, 9, 1000)]
    write_numeric_csv(tmp_path / "one.csv", ["a", "b", "c"], columns)
    cuts = [0, 1, 333, 334, 1000]
    parts = [[c[lo:hi] for c in columns] for lo, hi in zip(cuts, cuts[1:])]
    write_numeric_csv_parts(tmp_path / "parts.csv", ["a", "b", "c"], parts, block_rows=7)
    assert (tmp_path / "parts.csv").read_bytes() == (tmp_path / "one.csv").read_bytes()


def test_breakdown_by_blocks_of_ranks_equals_one_block(runs, monkeypatch):
    art = runs[32]
    plan, engine = art.tables.plan, art.engine
    gpu_host = art.experiment.cluster.gpu_host
    args = (plan, engine.task_start_ns, engine.task_end_ns, art.rank_gpu, gpu_host, engine.makespan_ns)
    whole = breakdown.rank_breakdown(*args)
    monkeypatch.setattr(breakdown._host_unions, "__defaults__", (1,))  # one rank per block
    blocks = breakdown.rank_breakdown(*args)
    assert whole.inter_host_ns.sum() > 0 and whole.intra_host_ns.sum() > 0
    for name in ("compute_ns", "comm_ns", "busy_ns", "intra_host_ns", "inter_host_ns"):
        assert np.array_equal(getattr(whole, name), getattr(blocks, name)), name
