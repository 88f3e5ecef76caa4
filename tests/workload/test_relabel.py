"""Relabelled rank traces equal the traces built rank by rank (heterosim/workload/relabel.py)."""

from __future__ import annotations

from dataclasses import fields

import numpy as np
import pytest

from heterosim.config.experiment import load_experiment
from heterosim.workload.generator import RankProgram, generate_workload
from heterosim.workload.trace import OpTemplates, RankTrace

TINY = "tests/data/tiny_experiment.yaml"  # gpt 512 hidden, 8 heads, 4 layers, seq 512, 16 GPUs

CASES = [
    ["parallel.tp=2", "parallel.pp=2", "parallel.dp=4", "training.global_batch=16"],
    [
        "parallel.tp=2",
        "parallel.pp=2",
        "parallel.dp=4",
        "parallel.sequence_parallel=true",
        "parallel.distributed_optimizer=true",
        "training.global_batch=16",
    ],
    ["parallel.tp=2", "parallel.pp=2", "parallel.dp=4", "parallel.rank_order=dp-tp-pp"],
    ["parallel.tp=2", "parallel.pp=2", "parallel.dp=4", "parallel.rank_order=tp-pp-dp"],
    [
        "parallel.tp=2",
        "parallel.pp=2",
        "parallel.dp=4",
        "parallel.schedule=interleaved",
        "parallel.vpp=2",
        "training.global_batch=32",
    ],
    ["parallel.tp=2", "parallel.pp=2", "parallel.dp=2", "parallel.cp=2", "training.global_batch=8"],
    ["parallel.tp=2", "parallel.pp=1", "parallel.dp=8", "parallel.zero=3"],
    ["parallel.tp=2", "parallel.pp=2", "parallel.dp=4", "parallel.p2p_sync=blocking"],
    ["parallel.tp=2", "parallel.pp=2", "parallel.dp=4", "framework.name=deepspeed"],
]


def _same(a: RankTrace, b: RankTrace) -> None:
    for f in fields(RankTrace):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, OpTemplates):
            for g in fields(OpTemplates):
                u, v = getattr(x, g.name), getattr(y, g.name)
                assert np.array_equal(u, v) if isinstance(u, np.ndarray) else u == v, g.name
        elif isinstance(x, np.ndarray):
            assert np.array_equal(x, y), f.name
        else:
            assert x == y, f.name


@pytest.mark.parametrize("overrides", CASES, ids=lambda o: " ".join(o))
def test_every_rank_equals_its_direct_build(overrides: list[str]) -> None:
    workload = generate_workload(load_experiment(TINY, overrides))
    for rank in range(workload.world_size):
        _same(workload.trace(rank), RankProgram(workload, rank).build())
    # one build per stage, CP index, micro-batch count and GPU type (the tiny cluster mixes two)
    lay, mbs = workload.layout, workload.partition.replica_micro_batches
    kinds = {
        (lay.pp_index(r), lay.cp_index(r), mbs[lay.dp_index(r)], workload.gpu_type(r))
        for r in range(workload.world_size)
    }
    assert len(workload._prototypes) == len(kinds) < workload.world_size


def test_shared_arrays_are_read_only_and_the_rank_owns_its_peers_and_groups() -> None:
    workload = generate_workload(load_experiment(TINY, CASES[0]))
    a, b = workload.trace(0), workload.trace(2)
    assert np.shares_memory(a.template, b.template) and not b.template.flags.writeable
    assert not np.shares_memory(a.peer, b.peer) and b.peer.flags.writeable
    assert not np.shares_memory(a.templates.comm_group, b.templates.comm_group)
