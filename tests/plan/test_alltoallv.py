"""All-to-all-v: flows per rank pair from a size matrix, the even all-to-all as its special
case, and a skewed router's all-to-all time against the maximum per-link load."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from heterosim.catalog.models import MoEConfig
from heterosim.config.cluster import load_cluster
from heterosim.config.experiment import default_network, parse_experiment
from heterosim.config.moe_routing import MoeRouting
from heterosim.errors import UserError
from heterosim.plan.collectives import decompose_collective
from heterosim.plan.execution_plan import FLOW
from heterosim.workload.routing import layer_counts, pair_tokens

ROOT = Path(__file__).resolve().parents[2]
STAR = load_cluster(ROOT / "topologies" / "star_8hosts_100g.yaml")  # 8 x 1 GPU, 100G NICs, one switch
N = 8


def _flows(plan) -> dict[tuple[int, int], int]:
    out: dict[tuple[int, int], int] = {}
    flow = plan.kind == FLOW
    for s, d, b in zip(plan.gpu[flow], plan.dst[flow], plan.bytes[flow]):
        out[(int(s), int(d))] = out.get((int(s), int(d)), 0) + int(b)
    return out


def test_flows_carry_each_pair_of_the_matrix() -> None:
    rng = np.random.default_rng(3)
    pairs = rng.integers(0, 1 << 20, size=(N, N))
    pairs[2, 5] = 0
    plan = decompose_collective("alltoall", 0, list(range(N)), STAR, pair_bytes=pairs)
    flows = _flows(plan)
    expected = {(i, j): int(pairs[i, j]) for i in range(N) for j in range(N) if i != j and pairs[i, j]}
    assert flows == expected  # per pair: bytes sent == bytes received, none on the diagonal
    assert plan.size_bytes == int(pairs.sum())


def test_an_even_matrix_is_the_even_all_to_all() -> None:
    size = 8 << 20
    even = decompose_collective("alltoall", size, list(range(N)), STAR)
    v = decompose_collective("alltoall", 0, list(range(N)), STAR, pair_bytes=np.full((N, N), size // N))
    for name in ("kind", "gpu", "dst", "bytes", "delay_ns", "dep_ptr", "dep_idx"):
        assert np.array_equal(getattr(even, name), getattr(v, name)), name
    assert even.predicted_ns == v.predicted_ns


@pytest.mark.parametrize(
    "kwargs,fragment",
    [
        ({"pair_bytes": np.ones((N, N - 1), np.int64)}, "8 x 8 matrix"),
        ({"pair_bytes": -np.ones((N, N), np.int64)}, "non-negative"),
        ({"pair_bytes": np.ones((N, N), np.int64), "size_bytes": 5}, "differs from the sum"),
    ],
)
def test_bad_pair_matrix(kwargs, fragment) -> None:
    size = kwargs.pop("size_bytes", 0)
    with pytest.raises(UserError, match=fragment):
        decompose_collective("alltoall", size, list(range(N)), STAR, **kwargs)
    with pytest.raises(UserError, match="only an all-to-all"):
        decompose_collective("allgather", 0, list(range(N)), STAR, pair_bytes=np.ones((N, N), np.int64))


def _max_link_load(pairs: np.ndarray) -> int:
    """Bytes on the busiest NIC direction: what a rank sends or receives over the network."""
    off = pairs * ~np.eye(pairs.shape[0], dtype=bool)
    return int(max(off.sum(axis=0).max(), off.sum(axis=1).max()))


@pytest.mark.ns3
def test_skewed_router_all_to_all_time_follows_the_maximum_link_load() -> None:
    """On a non-blocking star every rank pair has its own path; the all-to-all-v is bound by the
    most loaded NIC direction (the hot expert's downlink), so its time ratio to the even
    all-to-all is the ratio of maximum per-link loads (within the fixed latency and the
    RoCE frame overhead, which scale both alike)."""
    from heterosim.engine.executor import engine_config, execute_plan
    from heterosim.engine.topology import build_topology

    topology = build_topology(STAR)
    moe = MoEConfig(experts=N, top_k=2, expert_ffn=1)
    per_token = 4096 * 2  # Mixtral hidden x bf16

    def run(skew: float) -> tuple[int, int]:
        pairs = pair_tokens(layer_counts(MoeRouting("zipf", skew, 7), moe, 0, 4096, N), N) * per_token
        plan = decompose_collective("alltoall", 0, list(range(N)), STAR, pair_bytes=pairs)
        engine = execute_plan(
            plan.to_execution_plan(STAR.world_size),
            topology,
            default_network(),
            engine_config(fidelity="flow"),
        )
        return engine.makespan_ns, _max_link_load(pairs)

    even_t, even_load = run(0.0)
    assert even_load == 7 * 4096 * 2 // 8 * per_token  # 7 peers, an eighth of the copies each
    for skew in (0.5, 1.0, 1.5):
        t, load = run(skew)
        assert load > even_load
        assert t / even_t == pytest.approx(load / even_load, rel=0.01), skew


def _moe_experiment(routing: dict | None):
    model = {"base": "mixtral-8x7b", "layers": 2}
    if routing is not None:
        model["moe_routing"] = routing
    data = {
        "model": model,
        "training": {"global_batch": 8, "micro_batch": 1, "seq_len": 1024},
        "parallel": {"tp": 1, "pp": 1, "dp": 8, "ep": 8},
        "cluster": str(ROOT / "topologies" / "star_8hosts_100g.yaml"),
        "simulation": {"fidelity": "flow", "memory_check": "warn"},
    }
    return parse_experiment(data, "moe.yaml")


@pytest.mark.ns3
def test_plan_instances_carry_the_routing_and_uniform_matches_today() -> None:
    from heterosim.simulate import run_experiment
    from heterosim.simulate.experiment import prepare_run

    zipf = _moe_experiment({"distribution": "zipf", "skew": 1.2, "seed": 7})
    prepared = prepare_run(zipf, with_topology=False)
    plan, coll = prepared.tables.plan, prepared.tables.collectives
    pairs = prepared.workload.routing_pairs(0)
    first = int(np.flatnonzero(coll["comm_type"] == 6)[0])  # layer 0's dispatch, micro-batch 0
    mine = (plan.collective == first) & (plan.kind == FLOW)
    flows = {(int(s), int(d)): int(b) for s, d, b in zip(plan.gpu[mine], plan.dst[mine], plan.bytes[mine])}
    assert flows == {(i, j): int(pairs[i, j]) * 4096 * 2 for i in range(8) for j in range(8) if i != j}
    assert coll["size_bytes"][first] == int(pairs.sum()) * 4096 * 2

    today = run_experiment(_moe_experiment(None)).engine.makespan_ns
    uniform = run_experiment(_moe_experiment({"distribution": "uniform"})).engine.makespan_ns
    # uniform through the all-to-all-v path: a capacity that drops nothing, equal shares
    v_path = run_experiment(_moe_experiment({"capacity_factor": 2.0})).engine.makespan_ns
    skewed = run_experiment(zipf).engine.makespan_ns
    assert today == uniform == v_path
    assert skewed > today


@pytest.mark.ns3
def test_traces_written_and_read_back_run_the_same_all_to_all_v(tmp_path: Path) -> None:
    """`heterosim workload` writes the per-member sizes into the Chakra files; `run --traces`
    rebuilds the same all-to-all-v instances, so the same iteration and the same flows."""
    import json

    import yaml

    from heterosim.cli import main

    star = ROOT / "topologies" / "star_8hosts_100g.yaml"
    exp = {
        "model": {"base": "mixtral-8x7b", "layers": 2, "moe_routing": {"distribution": "zipf", "skew": 1.2}},
        "training": {"global_batch": 8, "micro_batch": 1, "seq_len": 1024},
        "parallel": {"tp": 1, "pp": 1, "dp": 8, "ep": 8},
        "cluster": str(star),
        "simulation": {"fidelity": "flow", "memory_check": "warn"},
    }
    path = tmp_path / "moe.yaml"
    path.write_text(yaml.safe_dump(exp))
    assert main(["workload", str(path), "--out", str(tmp_path / "traces")]) == 0
    runs = {}
    for name, args in (
        ("direct", [str(path)]),
        ("traced", ["--traces", str(tmp_path / "traces"), "--cluster", str(star)]),
    ):
        out = tmp_path / name
        assert main(["run", "--out", str(out), "--quiet", "--no-plots", "--fidelity", "flow", *args]) == 0
        runs[name] = json.loads((out / "results.json").read_text())
    direct, traced = runs["direct"], runs["traced"]
    assert traced["iteration_time_s"] == direct["iteration_time_s"]
    assert traced["network"] == direct["network"]
    assert traced["collectives"]["by_type"]["ALL_TO_ALL"] == direct["collectives"]["by_type"]["ALL_TO_ALL"]
