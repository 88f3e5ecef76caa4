"""Context parallelism: rank order, the K/V ring against a hand-computed schedule, the all-gather
variant, bytes conserved, memory and FLOPs divided by cp, bad input."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import yaml

from heterosim.cli import main
from heterosim.config.experiment import load_experiment
from heterosim.errors import UserError
from heterosim.simulate.experiment import run_experiment
from heterosim.workload.chakra import read_trace, traces_equal, write_trace
from heterosim.workload.cp import CP_TAG_BASE
from heterosim.workload.flops import trace_flops
from heterosim.workload.generator import generate_workload
from heterosim.workload.groups import ParallelGroups, RankLayout
from heterosim.workload.memory import estimate_rank_memory, layer_activation_bytes
from heterosim.workload.ops_ends import optimizer_shard
from heterosim.workload.trace import (
    ALL_GATHER,
    COMM_COLL_NODE,
    COMM_RECV_NODE,
    COMM_SEND_NODE,
    COMP_NODE,
    REDUCE_SCATTER,
)

TINY = "tests/data/tiny_experiment.yaml"  # gpt 512 hidden, 8 heads, 4 layers, seq 512, 16 GPUs


def _experiment(*overrides: str):
    return load_experiment(TINY, ["parallel.dp=1", *overrides])


def _labels(trace) -> list[str]:
    names = trace.templates.label_names
    return [names[i] for i in trace.templates.label[trace.template]]


def _kv_bytes(tp: int, cp: int) -> int:
    # K and V of s/cp tokens, kv heads 8/tp of head dim 64, bf16: 2 * b * s/cp * 8/tp * 64 * 2
    return 2 * 1 * (512 // cp) * (8 // tp) * 64 * 2


# -- rank order and groups -----------------------------------------------------------------------


def test_rank_order_puts_cp_next_to_tp_as_megatron_does():
    """Megatron-core order tp-cp-ep-dp-pp with tp 2, cp 2, dp 2, pp 2 (16 ranks): CP groups are
    ranks 2 apart, the data+context-parallel groups join dp and cp, pipelines keep the CP index."""
    layout = RankLayout(tp=2, dp=2, pp=2, cp=2)
    assert layout.world_size == 16
    assert [layout.rank_of(0, 0, 0, c) for c in range(2)] == [0, 2]
    assert layout.rank_of(1, 1, 1, 1) == 1 + 2 * (1 + 2 * (1 + 2 * 1))
    groups = ParallelGroups(layout)
    by_role: dict[str, list[tuple[int, ...]]] = {}
    for g in groups.groups:
        by_role.setdefault(g.role, []).append(g.ranks)
    assert by_role["tp"][:2] == [(0, 1), (2, 3)]
    assert by_role["cp"] == [(0, 2), (1, 3), (4, 6), (5, 7), (8, 10), (9, 11), (12, 14), (13, 15)]
    assert by_role["dp"] == [(0, 2, 4, 6), (1, 3, 5, 7), (8, 10, 12, 14), (9, 11, 13, 15)]
    assert by_role["pp"][:2] == [(0, 8), (1, 9)]
    assert groups.pipeline_neighbours(2) == (None, 10)
    assert groups.cp_ring(2) == (0, 0)
    four = ParallelGroups(RankLayout(tp=1, dp=1, pp=1, cp=4))
    assert four.cp_ring(0) == (3, 1) and four.cp_ring(3) == (2, 0)


def test_without_cp_the_groups_are_unchanged():
    plain = ParallelGroups(RankLayout(tp=2, dp=2, pp=2))
    assert all(g.role != "cp" for g in plain.groups)
    assert [g.ranks for g in plain.groups if g.role == "dp"] == [(0, 2), (1, 3), (4, 6), (5, 7)]


# -- the ring against a hand-computed schedule ----------------------------------------------------


def _first_layer_ring(trace, phase_labels: tuple[str, ...]):
    """Indices of the first layer's ring sends/recvs and attention steps of one phase."""
    labels = _labels(trace)
    out = []
    for i, label in enumerate(labels):
        if label.startswith("cp_ring") or label in phase_labels:
            out.append(i)
    return out, labels


def test_ring_forward_and_backward_match_the_hand_schedule_cp4():
    """cp = 4, tp = 2: per layer and micro-batch each rank sends 3 K/V chunks of
    2*1*128*4*64*2 = 131,072 bytes to CP rank +1 in the forward; the backward sends 4 messages to
    CP rank -1: K/V, K/V+dK/dV, K/V+dK/dV, dK/dV (131,072, 262,144, 262,144, 131,072).
    Transformer Engine 1.x's order: forward, the K/V cat, then per step the exchange for the next
    step, the copy of the K/V half the step attends (from step 1) and the step; exchange i waits
    for exchange i-1 and the copy of step i+1 waits for it; the output corrections end the
    attention. Backward, per step: the exchange, the copy, the step, the dQ accumulation, then
    the dK/dV accumulation, which waits for the exchange; the next exchange, carrying dK/dV,
    waits for that accumulation."""
    exp = _experiment("parallel.cp=4", "parallel.tp=2")
    w = generate_workload(exp)
    rank = 2  # tp 0, cp 1 of stage 0
    assert w.layout.cp_index(rank) == 1
    prev_rank, next_rank = w.groups.cp_ring(rank)
    assert (prev_rank, next_rank) == (0, 4)
    trace = w.trace(rank)
    trace.check()
    labels = _labels(trace)
    kv = _kv_bytes(tp=2, cp=4)
    assert kv == 131_072
    node_type = trace.node_type
    size = trace.templates.comm_bytes[trace.template]
    ring = ["cp_ring.kv.send", "cp_ring.kv.recv"]

    # the forward of the first layer of the first micro-batch
    first = labels.index("cp_kv_cat")
    fwd = list(range(first, first + 15))
    assert [labels[i] for i in fwd] == (
        ["cp_kv_cat", *ring, "attn_core"]
        + [*ring, "cp_step_copy", "attn_core"] * 2
        + ["cp_step_copy", "attn_core", "cp_out_correction"]
    )
    sends = [i for i in fwd if node_type[i] == COMM_SEND_NODE]
    recvs = [i for i in fwd if node_type[i] == COMM_RECV_NODE]
    steps = [i for i in fwd if labels[i] == "attn_core"]
    copies = [i for i in fwd if labels[i] == "cp_step_copy"]
    assert [int(trace.peer[i]) for i in sends] == [next_rank] * 3
    assert [int(trace.peer[i]) for i in recvs] == [prev_rank] * 3
    assert [int(size[i]) for i in sends + recvs] == [kv] * 6
    assert [int(trace.tag[i]) - CP_TAG_BASE for i in sends] == [0, 1, 2]
    assert set(trace.parents(sends[0])) == {first} and set(trace.parents(recvs[0])) == {first}
    for i in (1, 2):
        assert set(trace.parents(sends[i])) == {sends[i - 1], recvs[i - 1]}
    assert set(trace.parents(steps[0])) == {first}
    for i in (1, 2, 3):
        assert set(trace.parents(copies[i - 1])) == {steps[i - 1], sends[i - 1], recvs[i - 1]}
        assert set(trace.parents(steps[i])) == {copies[i - 1]}

    # the backward of that layer
    first = labels.index("cp_kv_copy")
    bwd = list(range(first, first + 24))
    step_ops = ["cp_step_copy", "attn_core.bwd", "cp_dq_accumulate", "cp_dkv_accumulate"]
    assert [labels[i] for i in bwd] == (
        ["cp_kv_copy", *ring, *step_ops]
        + ["cp_ring.kv_dkv.send", "cp_ring.kv_dkv.recv", *step_ops] * 2
        + ["cp_ring.dkv.send", "cp_ring.dkv.recv", *step_ops[1:]]
    )
    sends = [i for i in bwd if node_type[i] == COMM_SEND_NODE]
    recvs = [i for i in bwd if node_type[i] == COMM_RECV_NODE]
    steps = [i for i in bwd if labels[i] == "attn_core.bwd"]
    dkv = [i for i in bwd if labels[i] == "cp_dkv_accumulate"]
    assert [int(trace.peer[i]) for i in sends] == [prev_rank] * 4
    assert [int(trace.peer[i]) for i in recvs] == [next_rank] * 4
    assert [int(size[i]) for i in sends] == [kv, 2 * kv, 2 * kv, kv]
    assert [int(size[i]) for i in recvs] == [kv, 2 * kv, 2 * kv, kv]
    for i in range(4):
        assert {sends[i], recvs[i]} <= set(trace.parents(dkv[i]))  # the dK/dV received
        assert sends[i] not in trace.parents(steps[i])  # the step runs beside its exchange
    for i in (1, 2, 3):
        assert set(trace.parents(sends[i])) == {dkv[i - 1]}  # sends the accumulated dK/dV


def test_transformer_engine_passes_match_the_hand_count():
    """Bytes of TE 1.x's copies and merges per layer for the slowest CP rank, counted by hand
    from AttnFuncWithCP in units of q (the rank's query elements) with K (or V) k elements, bf16.
    cp 4, MHA (k = q): forward rank 3: K/V cat 8k, three K/V-half copies 4k, zero_ 2q and four
    corrections 6q = 46q; backward rank 0: saved K/V copy 8k, three Q/out/dout-half copies 6q,
    dQ half copy 2q, two half adds 3q, half copy + half add 5q, dK/dV cat 8k per step with a
    full copy 8k, two full adds 12k and the last step's half add + half copy 10k = 113q.
    cp 2, one K/V head per two Q heads (k = q/2): forward rank 1 12k + 14q = 20q; backward
    rank 0 42k + 13q = 34q."""
    for sets, fwd_q, bwd_q in (
        (["parallel.cp=4", "parallel.tp=2"], 46, 113),
        (["parallel.cp=2", "parallel.tp=4", "model.kv_heads=2"], 20, 34),
    ):
        w = generate_workload(_experiment(*sets))
        trace = w.trace(0)
        labels = _labels(trace)
        moved = trace.templates.bytes_moved[trace.template]
        q = (512 // w.experiment.parallel.cp) * (8 // w.experiment.parallel.tp) * 64
        for first, last, per_q in (
            ("cp_kv_cat", "cp_out_correction", fwd_q),
            ("cp_kv_copy", "qkv_proj.dgrad", bwd_q),
        ):
            span = [
                i
                for i in _layer_span(labels, first, last)
                if labels[i].startswith("cp_") and trace.node_type[i] == COMP_NODE
            ]
            assert int(moved[span].sum()) == per_q * q, (sets, first)


def test_ring_totals_per_iteration_and_conservation_per_rank_pair():
    """Every rank sends (cp-1) + 2(cp-1) K/V chunk-equivalents per layer and micro-batch, all of
    them to its ring neighbours, and every (sender, receiver) pair's sent bytes are received."""
    cp, tp = 4, 2
    exp = _experiment(f"parallel.cp={cp}", f"parallel.tp={tp}")
    w = generate_workload(exp)
    kv = _kv_bytes(tp, cp)
    sent: Counter[tuple[int, int]] = Counter()
    received: Counter[tuple[int, int]] = Counter()
    micro_batches = exp.micro_batches_per_replica
    for rank in range(w.world_size):
        trace = w.trace(rank)
        labels = _labels(trace)
        ring = np.array([label.startswith("cp_ring") for label in labels])
        size = trace.templates.comm_bytes[trace.template]
        layers = sum(len(r) for r in w.rank_layers(rank))
        for i in np.flatnonzero(ring):
            if trace.node_type[i] == COMM_SEND_NODE:
                sent[rank, int(trace.peer[i])] += int(size[i])
            else:
                received[int(trace.peer[i]), rank] += int(size[i])
        total = int(size[ring & (trace.node_type == COMM_SEND_NODE)].sum())
        assert total == micro_batches * layers * 3 * (cp - 1) * kv
        prev_rank, next_rank = w.groups.cp_ring(rank)
        assert {dst for src, dst in sent if src == rank} == {prev_rank, next_rank}
    assert sent == received


def test_cp_run_matches_every_send_with_its_recv_and_finishes():
    result = run_experiment(_experiment("parallel.cp=2"))
    assert result.engine.makespan_ns > 0


# -- the all-gather variant ------------------------------------------------------------------------


def test_all_gather_variant_gathers_kv_and_reduce_scatters_dkv_over_the_cp_group():
    cp, tp = 4, 2
    w = generate_workload(
        _experiment(f"parallel.cp={cp}", f"parallel.tp={tp}", "parallel.cp_comm=all_gather")
    )
    trace = w.trace(0)
    labels = _labels(trace)
    assert not any(label.startswith("cp_ring") for label in labels)
    t = trace.templates
    cp_group = w.groups.group_id(0, "cp")
    assert cp_group is not None and w.groups.group(cp_group).ranks == (0, 2, 4, 6)
    rows = {t.label_names[t.label[i]]: i for i in range(len(t))}
    half = _kv_bytes(tp, cp) // 2  # K or V of one rank
    for name, kind in (
        ("cp_allgather.k", ALL_GATHER),
        ("cp_allgather.v", ALL_GATHER),
        ("cp_reducescatter.dk", REDUCE_SCATTER),
        ("cp_reducescatter.dv", REDUCE_SCATTER),
    ):
        row = rows[name]
        assert t.comm_type[row] == kind and t.comm_group[row] == cp_group
        assert t.comm_bytes[row] == cp * half  # nccl-tests size: the gathered / scattered total
    first = labels.index("attn_core")
    assert labels[first - 2 : first + cp] == ["cp_allgather.k", "cp_allgather.v"] + ["attn_core"] * cp
    bwd = labels.index("attn_core.bwd")
    assert labels[bwd - 2 : bwd + cp + 2] == (
        ["cp_allgather.k", "cp_allgather.v"]
        + ["attn_core.bwd"] * cp
        + ["cp_reducescatter.dk", "cp_reducescatter.dv"]
    )


# -- PyTorch's context parallel (parallel.cp_impl: pytorch) ----------------------------------------


def _torch_cp(cp: int, comm: str):
    """The tiny experiment's 16 GPUs as pp 2 x tp x cp (tp = 8 / cp) under PyTorch's CP."""
    tp = 8 // cp
    exp = _experiment(
        f"parallel.cp={cp}", f"parallel.tp={tp}", "parallel.cp_impl=pytorch", f"parallel.cp_comm={comm}"
    )
    w = generate_workload(exp)
    trace = w.trace(0)
    trace.check()
    return w, trace, _labels(trace)


def _query_elements(tp: int, cp: int) -> int:
    # the rank's query (K, V repeated to its heads): b 1 x s/cp tokens x 8/tp heads x head dim 64
    return (512 // cp) * (8 // tp) * 64


def _layer_span(labels: list[str], first: str, last: str = "cp_cast_back") -> range:
    start = labels.index(first)
    return range(start, labels.index(last, start) + 1)


@pytest.mark.parametrize("cp", [2, 4])
@pytest.mark.parametrize("comm", ["all_gather", "p2p"])
def test_pytorch_cp_moves_the_bytes_counted_from_its_source(cp, comm):
    """Bytes of PyTorch's eager passes per layer for the slowest rank, counted by hand from
    _templated_ring_attention(_backward) in units of q (the rank's query elements), bf16:
    forward: K, V contiguous 8q, a cat before each of the first cp-1 steps 8q each, the fp32
    cast of each step's output 6q, the merge of steps 1.. 32q each, the cast back 6q:
    20 + 46 (cp-1); backward: fp32 zeros 12q, contiguous 8q, cats 8q each, step 0's dK/dV adds
    20q and the copies of the transposed fp32 accumulators before their first cat 16q, later
    steps' half-chunk adds and cats 26q, every step's fp32 cat(dK, dV) 16q and dQ add 10q, the
    casts back 6q + 12q: 100 + 60 (cp-1). cp 4 gives 158q and 280q."""
    _, trace, labels = _torch_cp(cp, comm)
    q = _query_elements(tp=8 // cp, cp=cp)
    moved = trace.templates.bytes_moved[trace.template]
    for first, last, per_q in (
        ("cp_kv_contiguous", "cp_cast_back", 20 + 46 * (cp - 1)),
        ("cp_grad_zeros", "cp_dkv_cast_back", 100 + 60 * (cp - 1)),
    ):
        span = [
            i
            for i in _layer_span(labels, first, last)
            if labels[i].startswith("cp_") and trace.node_type[i] == COMP_NODE
        ]
        assert int(moved[span].sum()) == per_q * q, (first, cp, comm)
    steps = [labels[i] for i in _layer_span(labels, "cp_kv_contiguous")].count("attn_core")
    assert steps == cp  # one SDPA call per K/V chunk


def test_pytorch_cp_all_gather_runs_beside_step_0_and_the_dkv_rotation_beside_the_next_step():
    """cp 4, all-gather rotate method: one all-gather of cat(K, V) (4q bytes per rank, K/V with
    the query's heads) waited at step 1's K/V cat; in the backward dK/dV (fp32, 8q bytes) go to CP
    rank +1 after each step's accumulation and before its dQ add, waited after the next step's
    SDPA backward; the last one after the dQ cast, by the dK/dV cast."""
    cp = 4
    w, trace, labels = _torch_cp(cp, "all_gather")
    q = _query_elements(tp=2, cp=cp)
    size = trace.templates.comm_bytes[trace.template]
    fwd = list(_layer_span(labels, "cp_kv_contiguous"))
    gather = next(i for i in fwd if labels[i] == "cp_allgather.kv")
    assert int(size[gather]) == cp * 4 * q and trace.node_type[gather] == COMM_COLL_NODE
    steps = [i for i in fwd if labels[i] == "attn_core"]
    assert gather not in trace.parents(steps[0]) and gather not in trace.parents(steps[0] + 1)
    assert labels[steps[0] + 2] == "cp_kv_cat" and gather in trace.parents(steps[0] + 2)
    bwd = list(_layer_span(labels, "cp_grad_zeros", "cp_dkv_cast_back"))
    sends = [i for i in bwd if labels[i] == "cp_rotate.dkv.send"]
    recvs = [i for i in bwd if labels[i] == "cp_rotate.dkv.recv"]
    adds = [i for i in bwd if labels[i] == "cp_dkv_accumulate"]
    dq = [i for i in bwd if labels[i] == "cp_dq_accumulate"]
    assert len(sends) == len(recvs) == len(adds) == len(dq) == cp
    prev_rank, next_rank = w.groups.cp_ring(0)
    assert {int(trace.peer[i]) for i in sends} == {next_rank}
    assert {int(trace.peer[i]) for i in recvs} == {prev_rank}
    assert {int(size[i]) for i in sends + recvs} == {8 * q}
    for i in range(cp):
        assert set(trace.parents(sends[i])) == {adds[i]} and set(trace.parents(dq[i])) == {adds[i]}
    for i in range(cp - 1):
        assert {sends[i], recvs[i]} <= set(trace.parents(adds[i + 1]))
        assert labels[adds[i + 1] - 1] == "attn_core.bwd"  # it runs beside the rotation
        assert sends[i] not in trace.parents(adds[i + 1] - 1)
    dq_cast, dkv_cast = bwd[-2], bwd[-1]
    assert labels[dq_cast] == "cp_cast_back" and sends[-1] not in trace.parents(dq_cast)
    assert {sends[-1], recvs[-1]} <= set(trace.parents(dkv_cast))


def test_pytorch_cp_rotations_are_conserved_per_rank_pair_and_the_run_finishes():
    """The all-to-all variant: K/V (4q) forward and backward, dK/dV (8q) backward, every rank to
    CP rank +1; every sent byte is received by that rank; the run completes."""
    cp = 4
    exp = _experiment(f"parallel.cp={cp}", "parallel.tp=2", "parallel.cp_impl=pytorch")
    w = generate_workload(exp)
    q = _query_elements(tp=2, cp=cp)
    layers_mb = exp.micro_batches_per_replica
    sent: Counter[tuple[int, int]] = Counter()
    received: Counter[tuple[int, int]] = Counter()
    for rank in range(w.world_size):
        trace = w.trace(rank)
        labels = _labels(trace)
        size = trace.templates.comm_bytes[trace.template]
        for i, label in enumerate(labels):
            if label.startswith("cp_rotate"):
                if trace.node_type[i] == COMM_SEND_NODE:
                    sent[rank, int(trace.peer[i])] += int(size[i])
                else:
                    received[int(trace.peer[i]), rank] += int(size[i])
        layers = sum(len(r) for r in w.rank_layers(rank))
        per_layer = 2 * (cp - 1) * 4 * q + cp * 8 * q
        assert sum(v for (src, _), v in sent.items() if src == rank) == layers_mb * layers * per_layer
        assert {dst for src, dst in sent if src == rank} == {w.groups.cp_ring(rank)[1]}
    assert sent == received
    assert run_experiment(exp).engine.makespan_ns > 0


def test_pytorch_cp_is_slower_than_transformer_engine_by_its_eager_passes():
    """Same model and split: PyTorch's merges, casts and copies add compute time."""
    base = ["parallel.cp=2", "parallel.cp_comm=all_gather"]
    te = run_experiment(_experiment(*base)).engine.makespan_ns
    torch = run_experiment(_experiment(*base, "parallel.cp_impl=pytorch")).engine.makespan_ns
    assert torch > te


# -- compute, memory and gradient reduction --------------------------------------------------------


def test_each_rank_does_one_cp_th_of_the_work_and_the_total_is_unchanged():
    base = load_experiment(TINY)
    cp = replace(base, parallel=replace(base.parallel, dp=1, cp=2))
    for kinds in (("gemm",), ("attention",)):
        assert trace_flops(cp.model, cp.training, cp.parallel, kinds) == trace_flops(
            base.model, base.training, base.parallel, kinds
        )
    from heterosim.workload.ops import layer_forward_ops

    plain = layer_forward_ops(base.model, base.training, base.parallel, 0)
    split = layer_forward_ops(cp.model, cp.training, cp.parallel, 0)
    attention = [sum(op.flops for op in ops if op.op_kind == "attention") for ops in (plain, split)]
    assert attention[1] * 2 == attention[0]  # causal attention over s, load-balanced over cp = 2
    gemms = [sum(op.flops for op in ops if op.op_kind == "gemm") for ops in (plain, split)]
    assert gemms[1] * 2 == gemms[0]


@pytest.mark.parametrize("cp", [2, 4, 8])
def test_activation_memory_divides_by_cp(cp):
    base = load_experiment(TINY)
    split = replace(base.parallel, cp=cp)
    for recompute in ("none", "selective", "full"):
        training = replace(base.training, recompute=recompute)
        whole = layer_activation_bytes(base.model, training, base.parallel, 0)
        assert layer_activation_bytes(base.model, training, split, 0) * cp == whole
    full = estimate_rank_memory(base.model, base.training, base.parallel, range(2), True, False, 2)
    part = estimate_rank_memory(base.model, base.training, split, range(2), True, False, 2)
    assert part.activations_bytes * cp == full.activations_bytes
    assert part.weights_bytes == full.weights_bytes  # CP replicates the weights


def test_gradients_are_reduced_and_optimizer_sharded_over_dp_times_cp():
    exp = _experiment("parallel.cp=2", "parallel.zero=1", "parallel.distributed_optimizer=true")
    w = generate_workload(exp)
    assert w.groups.size(0, "dp") == 2  # dp 1 x cp 2
    trace = w.trace(0)
    t = trace.templates
    dp_group = w.groups.group_id(0, "dp")
    grads = [i for i in range(len(t)) if t.label_names[t.label[i]].startswith("dp_")]
    assert grads and all(t.comm_group[i] == dp_group for i in grads)
    assert optimizer_shard(exp.parallel, 1000) == 500


def test_pipeline_transfers_carry_the_ranks_own_tokens():
    w = generate_workload(_experiment("parallel.cp=2"))
    trace = w.trace(0)
    sends = [i for i, label in enumerate(_labels(trace)) if label == "pp_send.fwd"]
    assert sends
    peer = int(trace.peer[sends[0]])
    assert w.layout.cp_index(peer) == w.layout.cp_index(0) and w.layout.pp_index(peer) == 1
    assert int(trace.templates.comm_bytes[trace.template[sends[0]]]) == 1 * 256 * 512 * 2


def test_chakra_trace_carries_the_ring(tmp_path: Path):
    w = generate_workload(_experiment("parallel.cp=2"))
    trace = w.trace(0)
    path = tmp_path / "cp.0.et"
    write_trace(trace, path)
    back = read_trace(path)
    assert traces_equal(trace, back)
    ring = [i for i, label in enumerate(_labels(back)) if label.startswith("cp_ring")]
    assert ring and all(int(back.peer[i]) == 4 for i in ring)
    groups = w.groups.as_json()  # comm_group.json names the CP groups beside the others
    cp_group = w.groups.group_id(0, "cp")
    assert groups[str(cp_group)] == [0, 4]


# -- bad input ---------------------------------------------------------------------------------------

CLUSTER = {
    "name": "c",
    "host_types": {"h100": {"gpu": "H100-SXM", "gpus": 8, "nics": 8, "nic_speed": "400Gbps"}},
    "hosts": [{"type": "h100", "count": 2}],
}


@pytest.mark.parametrize(
    "parallel,training,fragments",
    [
        ({"tp": 4, "pp": 2, "dp": 1, "cp": 2}, {"seq_len": 2050}, ["parallel.cp", "2*cp = 4", "2050"]),
        ({"tp": 4, "pp": 2, "dp": 2, "cp": 2}, {}, ["parallel.cp", "tp*cp*pp*dp", "32", "16 GPUs"]),
        (
            {"tp": 4, "pp": 2, "dp": 1, "cp": 2, "cp_comm": "ring"},
            {},
            ["parallel.cp_comm", "p2p, all_gather"],
        ),
        (
            {"tp": 4, "pp": 2, "dp": 1, "cp": 2, "cp_impl": "megatron"},
            {},
            ["parallel.cp_impl", "transformer_engine, pytorch"],
        ),
        ({"tp": 4, "pp": 2, "dp": 1, "cp": 0}, {}, ["parallel.cp"]),
        ({"tp": 4, "pp": 2, "dp": 1, "cp": 2}, {"attention": "unfused"}, ["parallel.cp", "flash"]),
    ],
)
def test_bad_cp_is_a_one_line_error(parallel, training, fragments, tmp_path: Path, capsys):
    experiment = {
        "model": "gpt3-6.7b",
        "training": {"global_batch": 32, "micro_batch": 1, **training},
        "parallel": parallel,
        "cluster": "cluster.yaml",
    }
    (tmp_path / "exp.yaml").write_text(yaml.safe_dump(experiment))
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump(CLUSTER))
    code = main(["workload", str(tmp_path / "exp.yaml"), "--out", str(tmp_path / "out"), "--summary-only"])
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    for fragment in ("exp.yaml", *fragments):
        assert fragment in lines[0], (fragment, lines[0])


def test_the_partitioner_counts_activations_per_cp_rank():
    """A 3M-token sequence: without CP stage 0 needs more than an H100's 80 GB under any split;
    with cp = 2 each rank holds half the tokens and the heterogeneity-aware partitioner finds a
    split that fits (the H100 stage takes three of the four layers)."""
    long = ["model.arch=llama", "model.seq=3145728", "training.seq_len=3145728"]
    with pytest.raises(UserError, match="needs .* of memory"):
        generate_workload(load_experiment(TINY, [*long, "parallel.dp=2"]))
    w = generate_workload(_experiment(*long, "parallel.cp=2"))
    assert [len(r) for r in w.partition.chunk_layers] == [3, 1]
    assert all(w.memory_bytes(rank) <= 80e9 for rank in (0, 8))
