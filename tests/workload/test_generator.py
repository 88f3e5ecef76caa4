"""Trace generator: hand-derived collective counts and bytes, send/recv matching, dependencies."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from heterosim.config.experiment import load_experiment, parse_experiment
from heterosim.workload.generator import generate_workload
from heterosim.workload.summary import trace_counts
from heterosim.workload.trace import COMM_COLL_NODE, COMM_RECV_NODE, COMM_SEND_NODE, COMP_NODE, DTYPES

ROOT = Path(__file__).resolve().parents[2]
MiB = 1 << 20
H, L, FFN, V, S = 1024, 8, 4096, 8192, 512
GPT = {"arch": "gpt", "hidden": H, "layers": L, "heads": 8, "ffn": FFN, "vocab": V, "seq": S}


def _cluster(gpus: int = 8, hosts: int = 1) -> dict:
    return {
        "host_types": {"h": {"gpu": "H100-SXM", "gpus": gpus, "nics": gpus, "nic_speed": "400Gbps"}},
        "hosts": [{"type": "h", "count": hosts}],
    }


def _workload(
    parallel: dict, model: dict | None = None, global_batch: int = 8, cluster: dict | None = None, **training
):
    data = {
        "model": model or dict(GPT),
        "training": {"global_batch": global_batch, "micro_batch": 1, "seq_len": S, **training},
        "parallel": {"dp_bucket": "1GiB", **parallel},
        "cluster": cluster or _cluster(),
    }
    return generate_workload(parse_experiment(data, "test.yaml"))


def _gpt_layer_params(tp: int) -> int:
    attention = 3 * H * (H // tp) + (H // tp) * H + 3 * (H // tp) + H
    mlp = 2 * H * (FFN // tp) + FFN // tp + H
    return attention + mlp + 2 * 2 * H  # two LayerNorms with weight and bias


def _coll(trace, name: str) -> dict:
    return trace_counts(trace)["collectives"].get(name, {"count": 0, "bytes": 0})


def test_tp_pp_dp_counts_and_bytes_match_hand_derivation() -> None:
    w = _workload({"tp": 2, "pp": 2, "dp": 2, "partition": "uniform"})
    m = 4  # 8 sequences / (micro-batch 1 * dp 2)
    act = 1 * S * H * 2  # b*s*h bf16 = 1 MiB
    per_layer = 4  # 2 all-reduces forward + 2 backward (Megatron TP without SP)
    grad = 4  # bf16 training: fp32 main grads
    emb_params = (V // 2) * H + S * H  # vocab shard + learned positions
    head_params = 2 * H + (V // 2) * H  # final LayerNorm + the last stage's tied-embedding copy

    first = w.trace(0)  # stage 0, layers 0-3, embedding
    tp_first = m * (per_layer * 4 + 1)  # + the vocab-parallel embedding all-reduce
    params0 = 4 * _gpt_layer_params(2) + emb_params
    ar = _coll(first, "ALL_REDUCE")
    assert ar["count"] == tp_first + 1 + 1  # + one DP bucket + the embedding-group all-reduce
    assert ar["bytes"] == tp_first * act + params0 * grad + (V // 2) * H * grad
    counts = trace_counts(first)
    assert counts["send_bytes"] == m * act and counts["recv_bytes"] == m * act

    last = w.trace(7)  # stage 1, layers 4-7, head
    ce = 1 * S * 4 + 2 * 1 * S * 4  # vocab-parallel cross-entropy: max, then (logit, sum-exp)
    tp_last = m * (per_layer * 4 + 2 + 1)  # + 2 cross-entropy + the logits' input-grad all-reduce
    params1 = 4 * _gpt_layer_params(2) + head_params
    ar = _coll(last, "ALL_REDUCE")
    assert ar["count"] == tp_last + 2
    assert ar["bytes"] == m * (17 * act + ce) + params1 * grad + (V // 2) * H * grad
    assert w.layout.pp_index(7) == 1 and w.layout.dp_index(7) == 1


def test_sequence_parallel_uses_allgather_reduce_scatter_and_smaller_p2p() -> None:
    w = _workload({"tp": 2, "pp": 2, "dp": 2, "sequence_parallel": True, "partition": "uniform"})
    trace = w.trace(0)
    m, act = 4, S * H * 2
    ag, rs = _coll(trace, "ALL_GATHER"), _coll(trace, "REDUCE_SCATTER")
    # per layer forward: all-gather + reduce-scatter around attention and around the MLP;
    # backward: the transposes (2 all-gathers, 2 reduce-scatters) plus the re-gather of both
    # sharded inputs for the weight gradients (Megatron keeps only the shard): 6 AG + 4 RS.
    # The embedding reduce-scatters forward and all-gathers backward.
    assert ag["count"] == m * (4 * 6 + 1) and rs["count"] == m * (4 * 4 + 1)
    assert ag["bytes"] == ag["count"] * act
    assert trace_counts(trace)["send_bytes"] == m * act // 2  # each TP rank sends its shard


def test_zero1_reduce_scatter_then_allgather() -> None:
    w = _workload({"tp": 1, "pp": 1, "dp": 8, "zero": 1}, global_batch=16)
    trace = w.trace(3)
    params = L * _gpt_layer_params(1) + V * H + S * H + 2 * H
    assert _coll(trace, "REDUCE_SCATTER") == {"count": 1, "bytes": params * 4}
    assert _coll(trace, "ALL_GATHER") == {"count": 1, "bytes": params * 2}
    assert _coll(trace, "ALL_REDUCE")["count"] == 0


def test_zero2_reduces_every_micro_batch() -> None:
    w = _workload({"tp": 1, "pp": 1, "dp": 8, "zero": 2}, global_batch=24)
    trace = w.trace(0)
    params = L * _gpt_layer_params(1) + V * H + S * H + 2 * H
    assert _coll(trace, "REDUCE_SCATTER") == {"count": 3, "bytes": 3 * params * 4}
    assert _coll(trace, "ALL_GATHER") == {"count": 1, "bytes": params * 2}


def test_zero3_gathers_each_block_in_forward_and_backward() -> None:
    w = _workload({"tp": 1, "pp": 1, "dp": 8, "zero": 3, "zero3_prefetch": 1}, global_batch=16)
    trace = w.trace(5)
    m, blocks = 2, L + 2  # embedding, layers, head (final LayerNorm only: tied embeddings)
    params = L * _gpt_layer_params(1) + V * H + S * H + 2 * H
    assert _coll(trace, "ALL_GATHER") == {"count": 2 * m * blocks, "bytes": 2 * m * params * 2}
    assert _coll(trace, "REDUCE_SCATTER") == {"count": m * blocks, "bytes": m * params * 4}


@pytest.mark.parametrize("prefetch", [0, 1, 2])
def test_zero3_prefetch_issues_gathers_ahead(prefetch: int) -> None:
    w = _workload({"tp": 1, "pp": 1, "dp": 8, "zero": 3, "zero3_prefetch": prefetch}, global_batch=8)
    trace = w.trace(0)
    t = trace.templates
    names = np.array(t.label_names)[t.label[trace.template]]
    kinds = trace.node_type
    # position of the first forward gather of layer k, relative to layer compute starts
    fwd = names == "zero3_allgather.fwd"
    first_gathers = np.flatnonzero(fwd)[: prefetch + 2]
    first_compute = int(np.flatnonzero(kinds == COMP_NODE)[0])
    before = int((first_gathers < first_compute).sum())
    assert before == max(1, prefetch)


def test_expert_parallel_all_to_all_and_expert_data_parallel() -> None:
    moe = {
        "arch": "llama",
        "hidden": 512,
        "layers": 4,
        "heads": 8,
        "ffn": 1024,
        "vocab": 1024,
        "seq": 256,
        "moe": {"experts": 4, "top_k": 2},
    }
    w = _workload({"tp": 1, "pp": 1, "dp": 8, "ep": 2}, model=moe, global_batch=16, seq_len=256)
    trace = w.trace(0)
    m = 2
    a2a = _coll(trace, "ALL_TO_ALL")
    per = 256 * 2 * 512 * 2  # tokens * top_k * hidden * bf16
    assert a2a == {"count": m * 4 * 4, "bytes": m * 4 * 4 * per}  # dispatch+combine, fwd+bwd
    groups = {int(g) for g in trace.templates.comm_group[trace.templates.node_type == COMM_COLL_NODE]}
    roles = {w.groups.group(g).role for g in groups}
    assert roles == {"ep", "dp", "ep_dp"}  # dense grads over dp, expert grads over ep_dp


def test_buckets_overlap_backward_and_count_matches_bucket_size() -> None:
    layer_grad = _gpt_layer_params(1) * 4
    w = _workload({"tp": 1, "pp": 1, "dp": 8, "dp_bucket": layer_grad}, global_batch=8)
    trace = w.trace(0)
    ar = _coll(trace, "ALL_REDUCE")
    assert ar["count"] == L + 1  # each layer closes a bucket; the embedding is the last one
    is_bucket = trace.node_type == COMM_COLL_NODE
    buckets = np.flatnonzero(is_bucket)
    # each bucket depends on one backward compute node, and no compute node depends on a bucket
    for b in buckets:
        parents = trace.parents(int(b))
        assert len(parents) == 1 and trace.node_type[parents[0]] == COMP_NODE
    child = np.repeat(np.arange(len(trace)), np.diff(trace.dep_ptr))
    waits_on_bucket = child[np.isin(trace.dep_idx, buckets)]
    first_optimizer = int(np.flatnonzero(trace.templates.phase[trace.template] == 2)[0])
    assert set(waits_on_bucket.tolist()) == {first_optimizer}
    # buckets are issued before the backward ends: the first bucket precedes later compute
    assert buckets[0] < np.flatnonzero(trace.node_type == COMP_NODE)[-1 - 3]


def test_grad_sync_after_backward_and_fp32_reduce() -> None:
    layer_grad = _gpt_layer_params(1) * 2
    w = _workload(
        {"tp": 1, "pp": 1, "dp": 8, "dp_bucket": layer_grad, "grad_sync": "after_backward"},
        global_batch=8,
        dtype="fp16",
        grad_reduce_dtype="fp32",
    )
    trace = w.trace(0)
    ar = _coll(trace, "ALL_REDUCE")
    fp16 = _coll(
        _workload({"tp": 1, "pp": 1, "dp": 8, "dp_bucket": layer_grad}, global_batch=8, dtype="fp16").trace(
            0
        ),
        "ALL_REDUCE",
    )
    assert ar["bytes"] == 2 * fp16["bytes"]  # fp32 on the wire instead of the fp16 main grads
    buckets = np.flatnonzero(trace.node_type == COMM_COLL_NODE)
    # the trace names the dtype the gradients travel in: fp32 here, fp16 (main grads) by default
    labels = {DTYPES[int(d)] for d in trace.templates.dtype[trace.template[buckets]]}
    assert labels == {"fp32"}
    plain = _workload(
        {"tp": 1, "pp": 1, "dp": 8, "dp_bucket": layer_grad}, global_batch=8, dtype="fp16"
    ).trace(0)
    plain_buckets = np.flatnonzero(plain.node_type == COMM_COLL_NODE)
    assert {DTYPES[int(d)] for d in plain.templates.dtype[plain.template[plain_buckets]]} == {"fp16"}
    last_compute = int(
        np.flatnonzero((trace.node_type == COMP_NODE) & (trace.templates.phase[trace.template] != 2))[-1]
    )
    for b in buckets:  # every bucket waits for the last backward op
        assert trace.parents(int(b)).tolist() == [last_compute]


def test_explicit_partition_reaches_the_traces() -> None:
    w = _workload({"tp": 1, "pp": 4, "dp": 2, "partition": [1, 3, 3, 1]})
    expected = {0: [0], 1: [1, 2, 3], 2: [4, 5, 6], 3: [7]}
    for rank in range(8):
        trace = w.trace(rank)
        seen = np.unique(trace.layer[trace.layer >= 0]).tolist()
        assert seen == expected[w.layout.pp_index(rank)], rank


def _p2p_edges(traces):
    sends, recvs = Counter(), Counter()
    for tr in traces:
        nt = tr.node_type
        for i in np.flatnonzero(nt == COMM_SEND_NODE):
            sends[
                (tr.rank, int(tr.peer[i]), int(tr.tag[i]), int(tr.templates.comm_bytes[tr.template[i]]))
            ] += 1
        for i in np.flatnonzero(nt == COMM_RECV_NODE):
            recvs[
                (int(tr.peer[i]), tr.rank, int(tr.tag[i]), int(tr.templates.comm_bytes[tr.template[i]]))
            ] += 1
    return sends, recvs


@pytest.mark.parametrize(
    "parallel,model",
    [
        ({"tp": 2, "pp": 4, "dp": 1}, None),
        ({"tp": 1, "pp": 4, "dp": 2, "schedule": "gpipe"}, None),
        ({"tp": 1, "pp": 2, "dp": 4, "vpp": 2, "schedule": "interleaved"}, None),
    ],
)
def test_every_send_has_exactly_one_matching_recv(parallel, model) -> None:
    w = _workload(parallel, model=model, global_batch=16)
    traces = list(w.traces)
    sends, recvs = _p2p_edges(traces)
    assert sends and sends == recvs
    assert max(sends.values()) == 1 and max(recvs.values()) == 1
    for tr in traces:
        tr.check()


def test_heterogeneous_replicas_sync_once_and_match_sends() -> None:
    exp = load_experiment(
        ROOT / "workloads" / "default.yaml", ["parallel.tp=4", "parallel.pp=1", "parallel.dp=4"]
    )
    w = generate_workload(exp)
    counts = w.partition.replica_micro_batches
    total = exp.training.global_batch // exp.training.micro_batch
    assert counts[0] > counts[-1] and sum(counts) == total  # H100 replicas get more
    buckets = set()
    for rank in (0, 15):
        trace = w.trace(rank)
        labels = np.array(trace.templates.label_names)[trace.templates.label[trace.template]]
        buckets.add(int((labels == "dp_grad_allreduce").sum()))
        assert int(trace.micro_batch.max()) + 1 == counts[w.layout.dp_index(rank)]
    assert len(buckets) == 1  # same bucket count on fast and slow replicas


def test_one_f_one_b_order_in_trace() -> None:
    w = _workload({"tp": 1, "pp": 4, "dp": 2}, global_batch=16)
    trace = w.trace(w.layout.rank_of(0, 0, 1))  # stage 1: 2 warm-up forwards
    comp = trace.node_type == COMP_NODE
    phases = trace.templates.phase[trace.template]
    mb = trace.micro_batch
    order = []
    for i in np.flatnonzero(comp):
        key = ("F" if phases[i] == 0 else "B", int(mb[i]))
        if phases[i] in (0, 1) and (not order or order[-1] != key):
            order.append(key)
    assert order[:4] == [("F", 0), ("F", 1), ("F", 2), ("B", 0)]


def test_default_experiment_summary_keys() -> None:
    w = generate_workload(load_experiment(ROOT / "workloads" / "default.yaml"))
    s = w.summary()
    assert set(s) >= {"world_size", "model", "params", "total_flops", "ranks", "groups"}
    keys = {
        "rank",
        "gpu",
        "host",
        "stage",
        "dp_replica",
        "layers",
        "micro_batches",
        "compute_nodes",
        "flops",
        "collectives",
        "send_bytes",
        "recv_bytes",
        "memory_bytes",
    }
    assert all(keys <= set(r) for r in s["ranks"]) and len(s["ranks"]) == 16
    assert s["total_flops"] == sum(r["flops"] for r in s["ranks"])
    # PP bytes are conserved across the cluster
    assert sum(r["send_bytes"] for r in s["ranks"]) == sum(r["recv_bytes"] for r in s["ranks"])


SIMAI = sorted((ROOT / "workloads" / "simai").glob("*.yaml"))


@pytest.mark.parametrize("path", SIMAI, ids=[p.stem for p in SIMAI])
def test_simai_suite_generates(path: Path) -> None:
    w = generate_workload(load_experiment(path))
    assert sum(len(r) for r in w.partition.chunk_layers) == w.experiment.model.layers
    for rank in (0, w.world_size - 1):
        trace = w.trace(rank)
        trace.check()
        assert trace_counts(trace)["flops"] > 0


def test_cli_writes_traces_groups_and_summary(tmp_path: Path) -> None:
    import json

    from heterosim.cli import main
    from heterosim.workload.chakra import read_comm_groups, read_trace, traces_equal

    out = tmp_path / "out"
    assert (
        main(
            [
                "workload",
                str(ROOT / "workloads" / "default.yaml"),
                "--out",
                str(out),
                "--ranks",
                "0-1,15",
                "--prefix",
                "gpt",
            ]
        )
        == 0
    )
    assert sorted(p.name for p in out.iterdir()) == [
        ".heterosim-output.json",
        "comm_group.json",
        "gpt.0.et",
        "gpt.1.et",
        "gpt.15.et",
        "workload.json",
    ]
    summary = json.loads((out / "workload.json").read_text())
    assert [r["rank"] for r in summary["ranks"]] == [0, 1, 15] and summary["world_size"] == 16
    groups = read_comm_groups(out / "comm_group.json")
    assert groups[0] == list(range(16))
    # The command partitions with the compute model, as `heterosim run` does.
    from heterosim.plan.compute.model import ComputeModel
    from heterosim.plan.compute.partition_cost import partition_cost_fn

    w = generate_workload(
        load_experiment(ROOT / "workloads" / "default.yaml"), cost_fn=partition_cost_fn(ComputeModel())
    )
    assert traces_equal(read_trace(out / "gpt.15.et"), w.trace(15))


def test_cli_error_leaves_no_partial_output(tmp_path: Path, capsys) -> None:
    from heterosim.cli import main

    out = tmp_path / "out"
    code = main(
        [
            "workload",
            str(ROOT / "workloads" / "default.yaml"),
            "--out",
            str(out),
            "--set",
            "training.micro_batch=64",
            "--set",
            "training.global_batch=128",
            "--set",
            "model.layers=2",
            "--set",
            "model.hidden=65536",
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and "needs" in err and "Traceback" not in err
    assert not out.exists() and list(tmp_path.iterdir()) == []
