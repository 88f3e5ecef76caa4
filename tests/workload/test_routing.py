"""Uneven expert routing: token copies per (source, expert), all-to-all-v sizes per rank pair,
capacity and drops (heterosim/workload/routing.py), and the traces built from them."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from heterosim.catalog.models import MoEConfig
from heterosim.cli import main
from heterosim.config.experiment import parse_experiment
from heterosim.config.moe_routing import MoeRouting
from heterosim.workload.generator import generate_workload
from heterosim.workload.routing import expert_selection, layer_counts

MOE = MoEConfig(experts=8, top_k=2, expert_ffn=64)
TOKENS, EP = 1024, 4
H = 256
MODEL = {
    "arch": "llama",
    "hidden": H,
    "layers": 4,
    "heads": 4,
    "ffn": 512,
    "vocab": 1024,
    "seq": 512,
    "moe": {"experts": 8, "top_k": 2, "expert_ffn": 64},
}


def _experiment(routing: dict | None, ep: int = 4, dp: int = 4, tmp: Path | None = None):
    model = dict(MODEL, moe_routing=routing) if routing is not None else dict(MODEL)
    data = {
        "model": model,
        "training": {"global_batch": 2 * dp, "micro_batch": 1, "seq_len": 512},
        "parallel": {"tp": 1, "pp": 1, "dp": dp, "ep": ep},
        "cluster": {
            "host_types": {"h": {"gpu": "H100-SXM", "gpus": dp, "nics": dp, "nic_speed": "400Gbps"}},
            "hosts": [{"type": "h", "count": 1}],
        },
        "simulation": {"fidelity": "flow"},
    }
    return parse_experiment(data, str(tmp / "exp.yaml") if tmp else "exp.yaml", base_dir=tmp)


@pytest.mark.parametrize("skew", [0.0, 0.7, 1.2, 3.0])
def test_every_source_routes_tokens_times_top_k_distinct_copies(skew: float) -> None:
    counts = layer_counts(MoeRouting("zipf", skew, 3), MOE, 0, TOKENS, EP)
    assert counts.shape == (EP, MOE.experts)
    assert (counts.sum(axis=1) == TOKENS * MOE.top_k).all()
    assert counts.max() <= TOKENS  # a token picks an expert at most once


def test_selection_caps_an_expert_at_every_token_and_keeps_top_k() -> None:
    q = expert_selection(np.array([100.0, 1, 1, 1]), 2)
    assert q[0] == 1.0 and math.isclose(q.sum(), 2.0) and np.allclose(q[1:], 1 / 3)


def test_zipf_shares_follow_rank_power_law() -> None:
    """With top_k = 1 and no cap binding, expert shares are r^-s / sum(r^-s)."""
    moe = MoEConfig(experts=8, top_k=1, expert_ffn=1)
    counts = layer_counts(MoeRouting("zipf", 1.0, 5), moe, 0, 1 << 20, 1)[0]
    shares = np.sort(counts)[::-1] / counts.sum()
    ranks = np.arange(1, 9, dtype=float) ** -1.0
    assert np.allclose(shares, ranks / ranks.sum(), atol=1e-6)


def test_determinism_by_seed_and_layers_differ() -> None:
    a = layer_counts(MoeRouting("zipf", 1.2, 7), MOE, 0, TOKENS, EP)
    assert np.array_equal(a, layer_counts(MoeRouting("zipf", 1.2, 7), MOE, 0, TOKENS, EP))
    hot = [int(np.argmax(layer_counts(MoeRouting("zipf", 1.2, s), MOE, 0, TOKENS, EP)[0])) for s in range(8)]
    assert len(set(hot)) > 1  # the seed picks which expert is popular
    layers = [
        int(np.argmax(layer_counts(MoeRouting("zipf", 1.2, 7), MOE, i, TOKENS, EP)[0])) for i in range(8)
    ]
    assert len(set(layers)) > 1  # ... and it differs from layer to layer


def test_histogram_is_dealt_to_sources_exactly() -> None:
    row = (900, 300, 700, 100, 2000, 0, 1500, 2692)  # sums to 1024 * 4 * 2
    counts = layer_counts(MoeRouting("histogram", histogram=(row,)), MOE, 0, TOKENS, EP)
    assert tuple(counts.sum(axis=0)) == row
    assert (counts.sum(axis=1) == TOKENS * 2).all()
    assert (counts.max(axis=0) - counts.min(axis=0) <= 1).all()


def test_histogram_with_its_own_token_count_is_scaled() -> None:
    row = (90, 30, 70, 10, 200, 0, 150, 250)  # 400 tokens * top_k 2
    counts = layer_counts(MoeRouting("histogram", histogram=(row,), histogram_tokens=400), MOE, 0, TOKENS, EP)
    assert counts.sum() == TOKENS * EP * 2
    assert np.allclose(counts.sum(axis=0) / counts.sum(), np.array(row) / 800, atol=1e-3)


def test_capacity_drops_and_pads_as_megatron() -> None:
    """capacity = ceil(tokens * top_k / experts * factor) per expert and source
    (Megatron-core get_capacity); beyond it copies are dropped, or every expert gets exactly
    the capacity with pad_to_capacity."""
    cap = math.ceil(TOKENS * 2 / 8 * 1.0)
    even = layer_counts(MoeRouting("zipf", 1.5, 1), MOE, 0, TOKENS, EP)
    dropped = layer_counts(MoeRouting("zipf", 1.5, 1, capacity_factor=1.0), MOE, 0, TOKENS, EP)
    assert np.array_equal(dropped, np.minimum(even, cap)) and dropped.sum() < even.sum()
    padded = layer_counts(
        MoeRouting("zipf", 1.5, 1, capacity_factor=1.0, pad_to_capacity=True), MOE, 0, TOKENS, EP
    )
    assert (padded == cap).all()
    huge = layer_counts(
        MoeRouting("zipf", 0.0, 1, capacity_factor=8.0, pad_to_capacity=True), MOE, 0, TOKENS, EP
    )
    assert (huge == TOKENS).all()  # a capacity above the tokens takes every token
    for policy in ("probs", "position"):  # which copies are dropped; not how many
        kept = layer_counts(
            MoeRouting("zipf", 1.5, 1, capacity_factor=1.0, drop_policy=policy), MOE, 0, TOKENS, EP
        )
        assert np.array_equal(kept, dropped)


def _node_splits(trace, label: str, layer: int) -> np.ndarray:
    """Per-peer bytes of the first node labelled ``label`` in ``layer`` (micro-batch 0)."""
    t = trace.templates
    names = np.array(t.label_names)[t.label[trace.template]]
    node = np.flatnonzero((names == label) & (trace.layer == layer) & (trace.micro_batch == 0))[0]
    return t.split_of(int(trace.template[node]))


def test_trace_all_to_all_v_conserves_bytes_per_rank_pair() -> None:
    """Dispatch: rank i sends rank j its copies for j's experts; combine returns exactly them;
    backward mirrors both. Sent = received per pair, each rank routes tokens*top_k*h*2 bytes."""
    w = generate_workload(_experiment({"distribution": "zipf", "skew": 1.2, "seed": 7}))
    traces = [w.trace(rank) for rank in range(4)]
    per_token = H * 2  # hidden x bf16
    for layer in range(4):
        pairs = w.routing_pairs(layer)
        assert pairs is not None and (pairs.sum(axis=1) == 512 * 2).all()
        for label, outbound in (
            ("ep_alltoall.dispatch", True),
            ("ep_alltoall.combine", False),
            ("ep_alltoall.combine.bwd", True),
            ("ep_alltoall.dispatch.bwd", False),
        ):
            matrix = np.stack([_node_splits(t, label, layer) for t in traces])
            assert np.array_equal(matrix, (pairs if outbound else pairs.T) * per_token), (label, layer)
        dispatch = np.stack([_node_splits(t, "ep_alltoall.dispatch", layer) for t in traces])
        combine = np.stack([_node_splits(t, "ep_alltoall.combine", layer) for t in traces])
        assert np.array_equal(dispatch, combine.T)  # what j got from i goes back from j to i
        assert (dispatch.sum(axis=1) == 512 * 2 * per_token).all()


def test_expert_gemm_follows_received_tokens() -> None:
    w = generate_workload(_experiment({"distribution": "zipf", "skew": 1.2, "seed": 7}))
    pairs = w.routing_pairs(0)
    assert pairs is not None
    for rank in range(4):
        ops = {op.label: op for op in w.layer_ops(0, 1, rank)[0]}
        received = int(pairs[:, rank].sum())
        assert ops["expert_fc1"].shape[0] == -(-received // 2)  # 2 local experts
    flops = [w.layer_ops(0, 1, r)[0] for r in range(4)]
    fc1 = [next(op.flops for op in ops if op.label == "expert_fc1") for ops in flops]
    assert max(fc1) > min(fc1)  # the hot expert's rank computes more


def test_uniform_routing_reproduces_todays_traces() -> None:
    base = generate_workload(_experiment(None))
    uniform = generate_workload(_experiment({"distribution": "uniform"}))
    for rank in range(4):
        a, b = base.trace(rank), uniform.trace(rank)
        assert np.array_equal(a.template, b.template)
        assert np.array_equal(a.templates.comm_bytes, b.templates.comm_bytes)
        assert np.array_equal(a.templates.flops, b.templates.flops)
        assert b.templates.comm_split.size == 0


def _error(tmp_path: Path, capsys, routing: dict, files: dict[str, str] | None = None) -> str:
    import yaml

    for name, text in (files or {}).items():
        (tmp_path / name).write_text(text)
    exp = {
        "model": dict(MODEL, moe_routing=routing),
        "training": {"global_batch": 8, "micro_batch": 1, "seq_len": 512},
        "parallel": {"tp": 1, "pp": 1, "dp": 4, "ep": 4},
        "cluster": {
            "host_types": {"h": {"gpu": "H100-SXM", "gpus": 4, "nics": 4, "nic_speed": "400Gbps"}},
            "hosts": [{"type": "h", "count": 1}],
        },
    }
    (tmp_path / "exp.yaml").write_text(yaml.safe_dump(exp))
    code = main(["workload", str(tmp_path / "exp.yaml"), "--out", str(tmp_path / "out"), "--summary-only"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    return err


GOOD_ROW = ",".join(["512"] * 8)  # 512 tokens * 4 ranks * top_k 2 = 4096 over 8 experts


@pytest.mark.parametrize(
    "routing,files,fragments",
    [
        ({"distribution": "zipf", "skew": 7}, None, ["model.moe_routing.skew", "<= 5"]),
        ({"distribution": "zipf", "skew": -1}, None, ["model.moe_routing.skew", ">= 0"]),
        ({"capacity_factor": -1.25}, None, ["model.moe_routing.capacity_factor", "-1.25"]),
        ({"capacity_factor": 0}, None, ["model.moe_routing.capacity_factor", "> 0"]),
        ({"pad_to_capacity": True}, None, ["model.moe_routing.pad_to_capacity", "capacity_factor"]),
        ({"distribution": "histogram"}, None, ["model.moe_routing.histogram", "needs a histogram file"]),
        ({"histogram": "missing.csv"}, None, ["missing.csv", "not found"]),
        (
            {"histogram": "h.csv"},
            {"h.csv": ",".join(["500"] * 8) + "\n"},
            ["h.csv", "model.moe_routing.histogram", "sums to 4000", "4096"],
        ),
        (
            {"histogram": "h.csv"},
            {"h.csv": "1,2,3\n"},
            ["h.csv", "model.moe_routing.histogram", "3 counts", "8 experts"],
        ),
        (
            {"histogram": "h.csv"},
            {"h.csv": f"{GOOD_ROW}\n{GOOD_ROW}\n"},
            ["h.csv", "2 rows", "1 (every MoE layer) or 4"],
        ),
        (
            {"histogram": "h.json"},
            {"h.json": '{"tokens": 10, "counts": [1,1,1,1,1,1,1,1]}'},
            ["h.json", "sums to 8", "20"],
        ),
        ({"histogram": "h.csv"}, {"h.csv": "x,1,1,1,1,1,1,1\n"}, ["h.csv", "non-negative integers"]),
        (
            {"distribution": "uniform", "skew": 1.0},
            None,
            ["model.moe_routing.skew", "only distribution: zipf"],
        ),
    ],
)
def test_bad_routing_is_a_one_line_error(tmp_path: Path, capsys, routing, files, fragments) -> None:
    err = _error(tmp_path, capsys, routing, files)
    for fragment in fragments:
        assert fragment in err, (fragment, err)


def test_histogram_over_the_token_count_per_expert(tmp_path: Path, capsys) -> None:
    row = ",".join(["2560", "1536"] + ["0"] * 6)  # 2560 > 2048 tokens of the group
    err = _error(tmp_path, capsys, {"histogram": "h.csv"}, {"h.csv": row + "\n"})
    assert "h.csv" in err and "2560 of 2048 tokens" in err


def test_histogram_file_runs(tmp_path: Path) -> None:
    (tmp_path / "h.csv").write_text("# tokens per expert\n" + GOOD_ROW + "\n")
    w = generate_workload(_experiment({"histogram": "h.csv"}, tmp=tmp_path))
    assert (w.routing_pairs(0) == 512 * 2 // 4).all()  # an even histogram: 256 copies per pair


def _node_split_list(trace) -> list[tuple[int, ...]]:
    t = trace.templates
    return [tuple(t.split_of(int(row)).tolist()) for row in trace.template]


def test_chakra_files_carry_the_per_member_sizes(tmp_path: Path) -> None:
    """Chakra has no all-to-all-v (mlcommons/chakra#209): the sizes travel in the extension
    attribute comm_split_bytes and come back per node; comm_size stays the rank's total."""
    from heterosim.workload.chakra import read_trace, traces_equal, write_trace

    w = generate_workload(_experiment({"distribution": "zipf", "skew": 1.2, "seed": 7}))
    trace = w.trace(1)
    path = tmp_path / "moe.1.et"
    write_trace(trace, path)
    back = read_trace(path)
    assert traces_equal(trace, back)
    assert _node_split_list(back) == _node_split_list(trace)
    assert sum(1 for s in _node_split_list(back) if s) == 4 * 4 * 2  # 4 a2a x 4 layers x 2 micro-batches
    changed = read_trace(path)
    changed.templates.comm_split = changed.templates.comm_split[::-1].copy()
    assert not traces_equal(trace, changed)  # equality compares the per-member sizes too


def test_trace_show_prints_the_per_member_sizes(tmp_path: Path, capsys) -> None:
    from heterosim.workload.chakra import write_trace

    w = generate_workload(_experiment({"distribution": "zipf", "skew": 1.2, "seed": 7}))
    trace = w.trace(0)
    path = tmp_path / "moe.0.et"
    write_trace(trace, path)
    assert main(["trace", "show", str(path), "--limit", "0"]) == 0
    out = capsys.readouterr().out
    first = _node_splits(trace, "ep_alltoall.dispatch", 0).tolist()
    assert f"ALL_TO_ALL {sum(first)} B group" in out and f"per member {first}" in out


@pytest.mark.parametrize(
    "comm_type,split,fragment",
    [
        (6, [10, 20], "sums to 30 but comm_size is 64"),
        (0, [32, 32], "only an ALL_TO_ALL"),
        (6, [-1, 65], "non-negative"),
    ],
)
def test_chakra_bad_split_is_a_user_error(tmp_path: Path, comm_type: int, split: list, fragment: str) -> None:
    from heterosim.errors import UserError
    from heterosim.workload.chakra import read_trace, schema, wire
    from heterosim.workload.trace import COMM_COLL_NODE

    a = schema.AttributeProto
    attr = [a(name="comm_type", int64_val=comm_type), a(name="comm_size", int64_val=64)]
    split_attr = a(name="comm_split_bytes")
    split_attr.int64_list.values.extend(split)
    node = schema.Node(id=1, name="a2a", type=COMM_COLL_NODE, attr=[*attr, split_attr])
    blobs = [schema.GlobalMetadata(version="1.0.0").SerializeToString(), node.SerializeToString()]
    path = tmp_path / "x.0.et"
    path.write_bytes(b"".join(wire.encode_varint(len(b)) + b for b in blobs))
    with pytest.raises(UserError, match=fragment):
        read_trace(path)
