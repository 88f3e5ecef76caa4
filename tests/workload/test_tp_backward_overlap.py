"""The column-parallel backward's asynchronous TP collectives (``parallel.tp_backward_overlap``):
op lists, the trace's dependencies, the setting's resolution and errors, and a run."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from heterosim.catalog.models import ZOO
from heterosim.cli import main
from heterosim.config.experiment import FrameworkConfig, TrainingConfig, load_experiment
from heterosim.plan.compute.layer_check import single_gpu_parallel
from heterosim.plan.execution_plan import FLOW
from heterosim.simulate.experiment import _record_granularity, run_experiment
from heterosim.workload import ops as wo

TINY = "tests/data/tiny_experiment.yaml"


def _backward(overlap: bool | None, sp: bool = False, dtype: str = "bf16", model: str = "gpt3-175b"):
    training = TrainingConfig(1, 1, 2048, dtype, "none")
    parallel = replace(single_gpu_parallel(), tp=8, sequence_parallel=sp, tp_backward_overlap=overlap)
    return wo.layer_backward_ops(ZOO[model], training, parallel, 0)


def _at(ops, label: str) -> int:
    return [op.label for op in ops].index(label)


def test_the_input_gradient_all_reduce_runs_beside_the_wgrad_and_bias_gradient():
    ops = _backward(True)
    for gemm, where in (("qkv_proj", "attn"), ("fc1", "mlp")):
        i = _at(ops, f"tp_allreduce.{where}.bwd")
        assert ops[i - 1].label == f"{gemm}.dgrad"
        assert ops[i].overlap_next == 2
        assert [op.label for op in ops[i + 1 : i + 3]] == [f"{gemm}.wgrad", f"{gemm}.bias_grad"]
    assert not any(op.overlap_next for op in _backward(False))
    # the same ops and bytes either way: only where they may run changes
    strip = [replace(op, overlap_next=0) for op in ops]
    assert strip == _backward(False)


def test_with_sequence_parallelism_gather_beside_dgrad_and_scatter_beside_fp8_transpose_and_wgrad():
    ops = _backward(True, sp=True, dtype="fp8", model="llama3-8b")
    gather = _at(ops, "tp_allgather.attn_input.bwd")
    assert ops[gather].overlap_next == 1 and ops[gather + 1].label == "qkv_proj.dgrad"
    scatter = _at(ops, "tp_reducescatter.attn.bwd")
    beside = [op.label for op in ops[scatter + 1 : scatter + 1 + ops[scatter].overlap_next]]
    assert beside == ["qkv_proj.fp8_transpose", "qkv_proj.wgrad"]
    assert ops[scatter + 1 + len(beside)].label == "ln1.bwd"


def _parents(trace, node: int) -> set[int]:
    return set(trace.dep_idx[trace.dep_ptr[node] : trace.dep_ptr[node + 1]].tolist())


def _first(trace, label: str) -> int:
    names = np.array(trace.templates.label_names)[trace.templates.label[trace.template]]
    return int(np.flatnonzero(names == label)[0])


def test_trace_wgrad_does_not_wait_for_the_reduction_and_the_next_op_waits_for_both():
    exp = load_experiment(TINY)
    trace = run_experiment(exp).traces[0]
    reduce, wgrad, bias = (
        _first(trace, f"{x}") for x in ("tp_allreduce.attn.bwd", "qkv_proj.wgrad", "qkv_proj.bias_grad")
    )
    dgrad, after = _first(trace, "qkv_proj.dgrad"), _first(trace, "ln1.bwd")
    assert dgrad in _parents(trace, reduce) and dgrad in _parents(trace, wgrad)
    assert reduce not in _parents(trace, wgrad) and reduce not in _parents(trace, bias)
    assert {reduce, bias} <= _parents(trace, after)


def test_trace_with_sequence_parallelism_orders_the_two_collectives_and_feeds_the_wgrad():
    exp = load_experiment(TINY)
    exp = replace(exp, parallel=replace(exp.parallel, sequence_parallel=True))
    trace = run_experiment(exp).traces[0]
    gather, scatter = _first(trace, "tp_allgather.attn_input.bwd"), _first(trace, "tp_reducescatter.attn.bwd")
    dgrad, wgrad = _first(trace, "qkv_proj.dgrad"), _first(trace, "qkv_proj.wgrad")
    assert gather not in _parents(trace, dgrad)  # the gather runs beside the dgrad
    assert gather in _parents(trace, scatter)  # one communicator: its calls in order
    assert gather in _parents(trace, wgrad)  # the wgrad reads the gathered input
    assert scatter not in _parents(trace, wgrad)


def test_overlap_shortens_the_iteration_by_no_more_than_the_reductions_and_keeps_the_bytes():
    exp = load_experiment(TINY)
    serial = run_experiment(replace(exp, parallel=replace(exp.parallel, tp_backward_overlap=False)))
    overlap = run_experiment(exp)
    assert exp.parallel.tp_backward_overlap is True  # auto, framework megatron
    assert overlap.experiment.resolved["parallel"]["tp_backward_overlap"] is True  # results.json says so
    assert overlap.engine.makespan_ns < serial.engine.makespan_ns
    plan_a, plan_b = serial.tables.plan, overlap.tables.plan
    assert plan_a.bytes[plan_a.kind == FLOW].sum() == plan_b.bytes[plan_b.kind == FLOW].sum()

    # what is hidden is at most the backward reductions' time on the critical path, which runs
    # through one rank of each pipeline stage: pp x the most any rank spends in them
    def reduction_ns(rank: int) -> int:
        t = serial.traces[rank]
        first = int(serial.tables.node_task_offset[rank])
        names = np.array(t.templates.label_names)[t.templates.label[t.template]]
        nodes = np.flatnonzero(np.isin(names, [f"tp_allreduce.{w}.bwd" for w in ("attn", "mlp", "head")]))
        end = serial.engine.task_end_ns[first : first + len(t)]
        return int(sum(int(end[n]) - int(end[n - 1]) for n in nodes))  # from its dgrad's end

    most = max(reduction_ns(r) for r in range(len(serial.traces)))
    assert 0 < serial.engine.makespan_ns - overlap.engine.makespan_ns <= exp.parallel.pp * most


@pytest.mark.parametrize(
    "framework, method, expected",
    [("megatron", None, True), ("deepspeed", None, False), ("megatron", "torch_async_tp", False)],
)
def test_auto_follows_the_framework(tmp_path, framework, method, expected):
    text = Path(TINY).read_text().replace("../../topologies", str(Path("topologies").resolve()))
    if framework != "megatron":
        text += f"framework: {{name: {framework}}}\n"
    if method:
        text = text.replace(
            "zero: 0,",
            f"zero: 0, sequence_parallel: true, tp_comm_overlap: true, tp_comm_overlap_method: {method},",
        )
    path = tmp_path / "e.yaml"
    path.write_text(text)
    assert load_experiment(path).parallel.tp_backward_overlap is expected
    path.write_text(text.replace("zero: 0,", f"zero: 0, tp_backward_overlap: {str(not expected).lower()},"))
    assert load_experiment(path).parallel.tp_backward_overlap is (not expected)


def test_a_bad_value_is_a_one_line_error(tmp_path, capsys):
    text = Path(TINY).read_text().replace("../../topologies", str(Path("topologies").resolve()))
    bad = tmp_path / "bad.yaml"
    bad.write_text(text.replace("zero: 0,", "zero: 0, tp_backward_overlap: sometimes,"))
    assert main(["run", str(bad), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "parallel.tp_backward_overlap" in err[0] and "sometimes" in err[0]
    assert not (tmp_path / "o").exists()


def test_results_record_the_value_auto_resolves_to_for_a_config_built_in_code() -> None:
    exp = load_experiment(TINY)
    built = replace(exp, parallel=replace(exp.parallel, tp_backward_overlap=None))
    deepspeed = replace(built, framework=FrameworkConfig(name="deepspeed"))
    assert _record_granularity(built).resolved["parallel"]["tp_backward_overlap"] is True
    assert _record_granularity(deepspeed).resolved["parallel"]["tp_backward_overlap"] is False
