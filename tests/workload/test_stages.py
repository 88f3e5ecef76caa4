"""Explicit heterogeneous plans (``parallel.stages``): validation, layout, groups, p2p, placement."""

from __future__ import annotations

import copy
from collections import Counter
from fractions import Fraction

import numpy as np
import pytest

from heterosim.config.experiment import parse_experiment
from heterosim.errors import UserError
from heterosim.plan.placement import place_plan
from heterosim.workload.generator import generate_workload
from heterosim.workload.groups import ParallelGroups, StagedLayout, boundary_transfers
from heterosim.workload.trace import COMM_COLL_NODE, COMM_RECV_NODE, COMM_SEND_NODE

CLUSTER = {
    "name": "mix",
    "gpus": {"Slow-GPU": {"tflops": {"fp16": 20, "fp32": 5}, "memory_gb": 24, "memory_tbps": 0.5}},
    "host_types": {
        "r3090": {"gpu": "RTX-3090", "gpus": 4, "nics": 1, "nic_speed": "25Gbps"},
        "slow": {"gpu": "Slow-GPU", "gpus": 4, "nics": 1, "nic_speed": "25Gbps"},
        "titan": {"gpu": "Titan-RTX", "gpus": 2, "nics": 1, "nic_speed": "25Gbps"},
    },
    "hosts": [{"type": "titan"}, {"type": "r3090", "count": 2}, {"type": "slow"}, {"type": "titan"}],
    "fabric": {"kind": "fat-tree"},
}
MODEL = {"arch": "gpt", "hidden": 512, "layers": 6, "heads": 8, "ffn": 2048, "vocab": 8192}


def experiment(stages: list, *, cluster: dict | None = None, training: dict | None = None, **parallel):
    data = {
        "name": "t",
        "model": MODEL,
        "training": {
            "global_batch": 8,
            "micro_batch": 1,
            "seq_len": 256,
            "dtype": "fp16",
            **(training or {}),
        },
        "parallel": {"stages": stages, **parallel},
        "cluster": cluster or CLUSTER,
        "simulation": {"fidelity": "flow"},
    }
    return parse_experiment(copy.deepcopy(data), "exp.yaml")


MIXED = [
    {
        "layers": 2,
        "replicas": [{"gpu": "RTX-3090", "tp": 4}, {"gpu": "Titan-RTX", "tp": 2, "micro_batches": 3}],
    },
    {"layers": 4, "replicas": [{"gpu": "Slow-GPU", "tp": 2}, {"gpu": "rtx-3090", "tp": 4}]},
]


def test_plan_is_a_typed_value_with_canonical_names() -> None:
    exp = experiment(MIXED)
    plan = exp.parallel.plan
    assert plan is not None and plan.pp == 2 and plan.dp == 2 and plan.world_size == 12
    assert [r.gpu for r in plan.stages[1].replicas] == ["Slow-GPU", "RTX-3090"]
    assert plan.pipeline_micro_batches(1) == 3 and plan.pipeline_micro_batches(0) is None
    assert exp.parallel.stage_layers == (2, 4) and exp.parallel.tp == 4
    assert plan.as_dict()[0]["replicas"][1] == {"gpu": "Titan-RTX", "tp": 2, "micro_batches": 3}


@pytest.mark.parametrize(
    "stages, extra, key, problem",
    [
        (
            [
                {"layers": 3, "replicas": [{"gpu": "RTX-3090"}]},
                {"layers": 3, "replicas": [{"gpu": "RTX-3090"}, {"gpu": "RTX-3090"}]},
            ],
            {},
            "parallel.stages[1].replicas",
            "2 replicas but stages[0] has 1",
        ),
        (
            [{"layers": 3, "replicas": [{"gpu": "RTX-3090"}]}],
            {},
            "parallel.stages",
            "layers sum to 3 but the model has 6",
        ),
        (
            [{"layers": 6, "replicas": [{"gpu": "Titan-RTX", "tp": 4}, {"gpu": "Titan-RTX", "tp": 2}]}],
            {},
            "parallel.stages[0].replicas[1].gpu",
            "needs 6 Titan-RTX GPUs up to here but the cluster 'mix' has 4",
        ),
        (
            [{"layers": 6, "replicas": [{"gpu": "A100"}]}],
            {},
            "parallel.stages[0].replicas[0].gpu",
            "GPU type 'A100' is not in the cluster",
        ),
        (
            [{"layers": 6, "replicas": [{"gpu": "RTX-3090", "tp": 3}]}],
            {},
            "parallel.stages[0].replicas[0].tp",
            "heads 8 not divisible by tp 3",
        ),
        (
            [
                {
                    "layers": 6,
                    "replicas": [
                        {"gpu": "RTX-3090", "micro_batches": 5},
                        {"gpu": "RTX-3090", "micro_batches": 4},
                    ],
                }
            ],
            {},
            "parallel.stages[*].replicas[*].micro_batches",
            "sum to 9",
        ),
        (
            [
                {"layers": 3, "replicas": [{"gpu": "RTX-3090", "micro_batches": 5}]},
                {"layers": 3, "replicas": [{"gpu": "RTX-3090", "micro_batches": 3}]},
            ],
            {},
            "parallel.stages[*].replicas[0].micro_batches",
            "different counts [3, 5]",
        ),
        (
            [{"layers": 6, "replicas": [{"gpu": "RTX-3090", "tpp": 2}]}],
            {},
            "parallel.stages[0].replicas[0].tpp",
            "unknown key",
        ),
        (
            [{"layers": 6, "replicas": [{"gpu": "RTX-3090"}]}],
            {"tp": 2},
            "parallel.tp",
            "not allowed with parallel.stages",
        ),
        (
            [{"layers": 6, "replicas": [{"gpu": "Slow-GPU"}]}],
            {"_dtype": "bf16"},
            "parallel.stages[0].replicas[0].gpu",
            "Slow-GPU has no bf16 peak (it has: fp16, fp32)",
        ),
        (
            [{"layers": 6, "replicas": [{"gpu": "RTX-3090", "tp": 2}, {"gpu": "RTX-3090", "tp": 4}]}],
            {"zero": 1},
            "parallel.stages[0].replicas",
            "different tp need zero: 0",
        ),
    ],
)
def test_bad_plans_are_one_line_errors_naming_the_key(stages, extra, key, problem) -> None:
    extra = dict(extra)
    training = {"dtype": extra.pop("_dtype")} if "_dtype" in extra else None
    with pytest.raises(UserError) as info:
        experiment(stages, training=training, **extra)
    message = str(info.value)
    assert message.startswith(f"exp.yaml: {key}: "), message
    assert problem in message and "\n" not in message


def test_layout_numbers_ranks_stage_replica_tp() -> None:
    lay = StagedLayout(((4, 2), (2, 4)), (("a", "b"), ("c", "a")))
    assert lay.world_size == 12
    assert lay.coords[:6].tolist() == [[0, 0, 0], [1, 0, 0], [2, 0, 0], [3, 0, 0], [0, 1, 0], [1, 1, 0]]
    assert lay.rank_of(1, 1, 1) == 9 and lay.rank_of(2, 0, 1) is None
    assert lay.tp_degree(5) == 2 and lay.gpu_type(9) == "a"
    assert lay.stage_is_mixed(0) and lay.stage_is_mixed(1)


def test_mixed_tp_gradient_shards_partition_the_stage() -> None:
    """Every gradient piece of a mixed-TP stage is reduced over exactly one rank per replica;
    each rank's shards add up to its share 1/tp of the stage."""
    lay = StagedLayout(((4, 2, 6),), (("a", "b", "c"),))
    groups = ParallelGroups(lay)
    for rank in range(lay.world_size):
        shards = groups.dp_shards(rank)
        assert sum(Fraction(k, total) for _, k, total in shards) == Fraction(1, lay.tp_degree(rank))
        for gid, _, _ in shards:
            members = groups.group(gid).ranks
            assert sorted(lay.dp_index(r) for r in members) == [0, 1, 2]
    # equal TP degrees keep the grid's groups: TP index i of every replica
    uniform = ParallelGroups(StagedLayout(((2, 2),), (("a", "b"),)))
    assert [g.ranks for g in uniform.groups if g.role == "dp"] == [(0, 2), (1, 3)]
    assert uniform.dp_shards(0) == []


@pytest.mark.parametrize("tp_from, tp_to", [(4, 2), (2, 4), (2, 3), (1, 8), (4, 4)])
@pytest.mark.parametrize("sp", [False, True])
def test_boundary_transfers_deliver_each_rank_what_it_needs(tp_from, tp_to, sp) -> None:
    moves = boundary_transfers(tp_from, tp_to, sp)
    received = Counter()
    for src, dst, share in moves:
        assert 0 <= src < tp_from and 0 <= dst < tp_to
        received[dst] += share
    need = Fraction(1, tp_to) if sp else Fraction(1)
    assert all(received[j] == need for j in range(tp_to))
    if sp:  # re-sharding moves exactly one tensor in total
        assert sum(share for *_, share in moves) == 1
    if tp_from == tp_to:  # the grid's pattern: rank i to rank i
        assert [(s, d) for s, d, _ in moves] == [(i, i) for i in range(tp_to)]


def _sends_and_recvs(workload):
    sends, recvs = Counter(), Counter()
    for trace in workload.traces:
        t = trace.templates
        kinds = t.node_type[trace.template]
        size = t.comm_bytes[trace.template]
        for i in np.flatnonzero(kinds == COMM_SEND_NODE):
            sends[(trace.rank, int(trace.peer[i]), int(trace.tag[i]), int(size[i]))] += 1
        for i in np.flatnonzero(kinds == COMM_RECV_NODE):
            recvs[(int(trace.peer[i]), trace.rank, int(trace.tag[i]), int(size[i]))] += 1
    return sends, recvs


@pytest.mark.parametrize("sp", [False, True])
def test_every_send_has_its_recv_across_tp_changes(sp: bool) -> None:
    exp = experiment(MIXED, sequence_parallel=sp)
    workload = generate_workload(exp)
    sends, recvs = _sends_and_recvs(workload)
    assert sends and sends == recvs
    # bytes conservation per micro-batch and direction: without SP every receiving rank gets a
    # whole b*s*h tensor; with SP the receiving TP group gets one tensor in total
    full = 1 * 256 * 512 * 2
    counts = workload.partition.replica_micro_batches
    fwd = sum(n * key[3] for key, n in sends.items() if key[2] % 2 == 0)
    receivers = 4 + 2  # stage 1: Slow-GPU tp 2 (pipeline 0), RTX-3090 tp 4 (pipeline 1)
    expected = full * (counts[0] * (1 if sp else 2) + counts[1] * (1 if sp else 4))
    assert fwd == expected and receivers == 6


def test_micro_batches_given_and_split_by_speed() -> None:
    exp = experiment(MIXED)
    part = generate_workload(exp).partition
    assert part.replica_micro_batches == (5, 3)  # pipeline 1 given 3 of 8; pipeline 0 the rest
    even = experiment(
        [{"layers": 6, "replicas": [{"gpu": "RTX-3090", "tp": 4}, {"gpu": "Slow-GPU", "tp": 4}]}]
    )
    part = generate_workload(even).partition
    assert part.replica_speed[0] > part.replica_speed[1]
    assert part.replica_micro_batches[0] > part.replica_micro_batches[1]
    assert sum(part.replica_micro_batches) == 8
    uniform = experiment(
        [{"layers": 6, "replicas": [{"gpu": "RTX-3090", "tp": 4}, {"gpu": "Slow-GPU", "tp": 4}]}],
        partition="uniform",
    )
    assert generate_workload(uniform).partition.replica_micro_batches == (4, 4)


def test_ranks_carry_their_replicas_tp_and_gpu() -> None:
    workload = generate_workload(experiment(MIXED))
    for rank in range(workload.world_size):
        trace = workload.trace(rank)
        assert trace.gpu_type == workload.layout.gpu_type(rank)
        assert trace.metadata["tp"] == str(workload.layout.tp_degree(rank))
        groups = trace.templates.comm_group[trace.templates.node_type == COMM_COLL_NODE]
        tp_group = workload.groups.group_id(rank, "tp")
        assert (tp_group in groups.tolist()) == (workload.layout.tp_degree(rank) > 1)


def test_placement_puts_every_replica_on_its_named_gpu_type() -> None:
    exp = experiment(MIXED)
    plan, cluster = exp.parallel.plan, exp.cluster
    rank_gpu = place_plan(cluster, plan)
    layout = generate_workload(exp).layout
    assert len(set(rank_gpu.tolist())) == len(rank_gpu) == plan.world_size
    for rank, gpu in enumerate(rank_gpu):
        assert cluster.gpu_type[gpu] == layout.gpu_type(rank)
    hosts = cluster.gpu_host[rank_gpu]
    # TP groups that fit a host sit inside one host, first free host of the type in cluster order
    assert hosts[:4].tolist() == [1] * 4  # stage 0, RTX-3090 tp 4: first 3090 host
    assert hosts[4:6].tolist() == [0, 0]  # stage 0, Titan-RTX tp 2: the first Titan host
    assert hosts[6:8].tolist() == [3, 3]  # stage 1, Slow-GPU tp 2
    assert hosts[8:12].tolist() == [2] * 4  # stage 1, RTX-3090 tp 4: the second 3090 host


def test_tp_group_spans_hosts_only_when_no_host_fits() -> None:
    stages = [{"layers": 6, "replicas": [{"gpu": "Titan-RTX", "tp": 4}]}]
    exp = experiment(stages)
    rank_gpu = place_plan(exp.cluster, exp.parallel.plan)
    assert exp.cluster.gpu_host[rank_gpu].tolist() == [0, 0, 4, 4]
    assert all(exp.cluster.gpu_type[g] == "Titan-RTX" for g in rank_gpu)


def test_a_planner_can_hand_in_a_plan_value() -> None:
    """A search builds StagedPlan values and runs them on a base experiment."""
    from heterosim.config.experiment import ReplicaPlan, StagedPlan, StagePlan, experiment_with_plan

    base = experiment(MIXED)
    plan = StagedPlan((StagePlan(6, (ReplicaPlan("RTX-3090", 4), ReplicaPlan("slow-gpu", 4))),))
    exp = experiment_with_plan(base, plan, micro_batch_split="uniform")
    assert exp.parallel.pp == 1 and exp.parallel.dp == 2 and exp.parallel.stage_layers == (6,)
    assert exp.parallel.plan.stages[0].replicas[1].gpu == "Slow-GPU"
    assert generate_workload(exp).partition.replica_micro_batches == (4, 4)
    too_many = StagedPlan((StagePlan(6, (ReplicaPlan("Titan-RTX", 4), ReplicaPlan("Titan-RTX", 2))),))
    with pytest.raises(UserError, match=r"parallel.stages\[0\].replicas\[1\].gpu: the plan needs 6"):
        experiment_with_plan(base, too_many)


def _dp_allreduce_bytes_by_group(workload) -> dict[int, int]:
    """Bytes of every data-parallel gradient all-reduce group, counted once per group."""
    out: dict[int, int] = {}
    for trace in workload.traces:
        t = trace.templates
        rows = trace.template[t.node_type[trace.template] == COMM_COLL_NODE]
        for row in rows:
            gid = int(t.comm_group[row])
            if workload.groups.group(gid).role == "dp":
                out.setdefault(gid, 0)
        per_rank: dict[int, int] = {}
        for row in rows:
            gid = int(t.comm_group[row])
            if workload.groups.group(gid).role == "dp":
                per_rank[gid] = per_rank.get(gid, 0) + int(t.comm_bytes[row])
        for gid, size in per_rank.items():
            assert out[gid] in (0, size)  # every member reduces the same bytes
            out[gid] = size
    return out


def test_mixed_tp_stage_reduces_its_whole_gradient_once() -> None:
    """Gradient-shard groups of a stage with TP 2 and 4 replicas carry, together, the stage's
    full gradient: the same bytes one group carries when both replicas run TP 1."""

    def stage(tps):
        return [
            {"layers": 6, "replicas": [{"gpu": "RTX-3090", "tp": tps[0]}, {"gpu": "Slow-GPU", "tp": tps[1]}]}
        ]

    full = sum(
        _dp_allreduce_bytes_by_group(generate_workload(experiment(stage((1, 1)), dp_bucket="1GB"))).values()
    )
    mixed = _dp_allreduce_bytes_by_group(generate_workload(experiment(stage((2, 4)), dp_bucket="1GB")))
    assert len(mixed) == 4  # L = lcm(2, 4) = 4 pieces, each on its own pair of ranks
    assert abs(sum(mixed.values()) - full) <= len(mixed)  # floor of each share


def test_tied_embedding_reduction_across_different_tp_ends() -> None:
    """Pipeline 0 starts on TP 4 and ends on TP 2: its word-embedding gradient is reduced in
    lcm(4, 2) = 4 pieces between the ranks holding each piece, the whole table once."""
    workload = generate_workload(experiment(MIXED))
    assert workload.experiment.model.tied_embeddings
    groups = workload.groups
    embd = [g for g in groups.groups if g.role == "embd"]
    layout = workload.layout
    pipeline0 = [g for g in embd if layout.dp_index(g.ranks[0]) == 0]
    assert [g.ranks for g in pipeline0] == [(0, 6), (1, 6), (2, 7), (3, 7)]
    sizes: dict[int, int] = {}
    for rank in {r for g in pipeline0 for r in g.ranks}:
        trace = workload.trace(rank)
        t = trace.templates
        for row in np.flatnonzero(t.node_type == COMM_COLL_NODE):
            gid = int(t.comm_group[row])
            if gid in {g.id for g in pipeline0}:
                assert sizes.setdefault(gid, int(t.comm_bytes[row])) == int(t.comm_bytes[row])
    model = workload.experiment.model
    assert sum(sizes.values()) == model.vocab * model.hidden * 2  # fp16 training: 16-bit grads


@pytest.mark.parametrize("sp", [False, True])
def test_mixed_tp_inside_stages_and_across_boundaries_runs(native_lib, sp: bool) -> None:
    """Both stages mix TP 2 and 4 and pipelines change TP at the boundary: every shard
    collective and every re-sharding send/recv matches across ranks, so the plan builds and runs."""
    from heterosim.simulate import run_experiment

    run = run_experiment(experiment(MIXED, sequence_parallel=sp))
    assert run.engine.makespan_ns > 0
    sent = int(run.tables.p2p_bytes)
    full = 256 * 512 * 2  # one micro-batch's activation, fp16
    counts = run.workload.partition.replica_micro_batches
    # forward + backward, per micro-batch: the receiving TP group gets the whole tensor once per
    # rank (no SP: pipeline 0 lands on 2 ranks, pipeline 1 on 4; backward on 4 and 2) or once
    # in total (SP)
    per_mb = (2 if sp else 2 + 4, 2 if sp else 4 + 2)
    assert sent == full * (counts[0] * per_mb[0] + counts[1] * per_mb[1])
