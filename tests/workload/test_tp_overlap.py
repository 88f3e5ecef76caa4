"""TP communication overlap (Transformer Engine userbuffers): op lists, the DAG and a run."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from heterosim.catalog.models import ZOO
from heterosim.cli import main
from heterosim.config.experiment import TrainingConfig, load_experiment
from heterosim.plan.compute.layer_check import single_gpu_parallel
from heterosim.simulate.experiment import run_experiment
from heterosim.workload import ops as wo
from heterosim.workload.tp_overlap import PIPELINE_SPLITS

TINY = "tests/data/tiny_experiment.yaml"


def _ops(overlap: bool, phase: str):
    model = ZOO["gpt3-175b"]
    training = TrainingConfig(1, 1, 2048, "bf16", "none")
    parallel = replace(single_gpu_parallel(), tp=8, sequence_parallel=True, tp_comm_overlap=overlap)
    make = wo.layer_forward_ops if phase == "fwd" else wo.layer_backward_ops
    return make(model, training, parallel, 0)


def test_forward_gathers_run_beside_their_gemm_and_scatters_pipeline_under_theirs():
    plain, over = _ops(False, "fwd"), _ops(True, "fwd")
    labels = [op.label for op in over]
    for gather, gemm in (("tp_allgather.attn", "qkv_proj"), ("tp_allgather.mlp", "fc1")):
        i = labels.index(gather)
        assert over[i].overlap_next == 1 and labels[i + 1] == gemm
    for where, gemm in (("attn", "out_proj"), ("mlp", "fc2")):
        i = labels.index(f"tp_reducescatter.{where}.overlapped")
        assert over[i].overlap_next == 1 and labels[i + 1] == gemm
        assert labels[i + 2] == f"tp_reducescatter.{where}.last_chunk"
        whole = next(op for op in plain if op.label == f"tp_reducescatter.{where}")
        assert over[i].comm_bytes + over[i + 2].comm_bytes == whole.comm_bytes  # bytes kept
        assert over[i + 2].comm_bytes == pytest.approx(whole.comm_bytes / PIPELINE_SPLITS, rel=1e-6)
    assert sum(op.flops for op in over) == sum(op.flops for op in plain)


def test_backward_bulk_overlaps_gather_with_dgrad_and_scatter_with_wgrad():
    over = _ops(True, "bwd")
    labels = [op.label for op in over]
    i = labels.index("tp_allgather.attn_input.bwd")
    assert over[i].overlap_next == 1 and labels[i + 1] == "qkv_proj.dgrad"
    j = labels.index("tp_reducescatter.attn.bwd")
    assert over[j].overlap_next == 1 and labels[j + 1] == "qkv_proj.wgrad"
    assert not any(op.overlap_next for op in _ops(False, "bwd"))


def test_overlap_shortens_the_run_and_keeps_every_byte():
    exp = load_experiment(TINY)
    sp = replace(exp, parallel=replace(exp.parallel, sequence_parallel=True))
    over = replace(sp, parallel=replace(sp.parallel, tp_comm_overlap=True))
    a, b = run_experiment(sp), run_experiment(over)
    assert b.engine.makespan_ns < a.engine.makespan_ns
    flows_a = a.tables.plan.bytes[a.tables.plan.kind == 1].sum()
    flows_b = b.tables.plan.bytes[b.tables.plan.kind == 1].sum()
    assert flows_a == pytest.approx(flows_b, rel=0.01)  # chunking rounds, bytes stay
    # an overlapped gather starts with the GEMM beside it (same parent), not after it
    t0 = b.traces[0]
    names = np.array(t0.templates.label_names)[t0.templates.label[t0.template]]
    gather = np.flatnonzero(names == "tp_allgather.attn")[0]
    gemm = np.flatnonzero(names == "qkv_proj")[0]
    parents = lambda n: set(t0.dep_idx[t0.dep_ptr[n] : t0.dep_ptr[n + 1]].tolist())  # noqa: E731
    assert gather not in parents(gemm) and parents(gather) & parents(gemm)


def test_overlap_needs_sequence_parallelism(tmp_path, capsys):
    text = open(TINY).read().replace("zero: 0,", "zero: 0, tp_comm_overlap: true,")
    bad = tmp_path / "bad.yaml"
    bad.write_text(text.replace("../../topologies", str(__import__("pathlib").Path("topologies").resolve())))
    assert main(["run", str(bad), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "parallel.tp_comm_overlap" in err[0] and "sequence_parallel" in err[0]
