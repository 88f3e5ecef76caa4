"""Heterogeneity-aware partitioner: min-max layer cuts, proportional micro-batches, memory."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from heterosim.config.experiment import parse_experiment
from heterosim.errors import UserError
from heterosim.workload.groups import RankLayout
from heterosim.workload.partition import (
    even_cuts,
    optimal_cuts,
    plan_partition,
    roofline_cost,
    split_micro_batches,
)

ROOT = Path(__file__).resolve().parents[2]
GPT_1B = {
    "arch": "gpt",
    "hidden": 2048,
    "layers": 24,
    "heads": 16,
    "ffn": 8192,
    "vocab": 51200,
    "seq": 2048,
    "name": "gpt-1.3b",
}


def _experiment(parallel: dict, global_batch: int = 32, micro_batch: int = 2, simulation: dict | None = None):
    data = {
        "model": dict(GPT_1B),
        "training": {"global_batch": global_batch, "micro_batch": micro_batch, "seq_len": 2048},
        "parallel": parallel,
        "cluster": str(ROOT / "topologies" / "mixed_16gpu.yaml"),
        "simulation": simulation or {},
    }
    return parse_experiment(data, "test.yaml")


def _layout(exp):
    p = exp.parallel
    return RankLayout(p.tp, p.dp, p.pp, p.ep, p.rank_order)


def _speed_cost(ratios: dict[str, float]):
    """Cost = FLOPs / speed, so GPU X is ratios[X] times faster than speed 1."""

    def cost(gpu: str, ops) -> float:
        return sum(op.flops for op in ops if not op.is_comm) / ratios[gpu] / 1e15

    return cost


def _no_memory(*_args) -> int:
    return 0


def test_optimal_cuts_follow_a_two_to_one_speed_ratio() -> None:
    table = np.stack([np.full(24, 1.0), np.full(24, 2.0)])  # stage 1 is twice as slow
    cuts = optimal_cuts(table)
    assert [len(r) for r in cuts] == [16, 8]


def test_optimal_cuts_is_optimal_against_brute_force() -> None:
    rng = np.random.default_rng(3)
    table = rng.uniform(0.5, 2.0, size=(3, 9))
    cuts = optimal_cuts(table, first_extra=1.0, last_extra=0.7)

    def worst(a: int, b: int) -> float:
        segs = [range(0, a), range(a, b), range(b, 9)]
        return max(
            table[v, s.start : s.stop].sum() + (1.0 if v == 0 else 0) + (0.7 if v == 2 else 0)
            for v, s in enumerate(segs)
        )

    best = min(worst(a, b) for a in range(1, 8) for b in range(a + 1, 9))
    assert worst(cuts[1].start, cuts[2].start) == pytest.approx(best)


def test_optimal_cuts_respects_memory_limits() -> None:
    table = np.stack([np.full(12, 1.0), np.full(12, 3.0)])
    max_end = np.full((2, 12), 12)
    max_end[0, 0] = 5  # stage 0 holds at most 5 layers
    cuts = optimal_cuts(table, max_end=max_end)
    assert [len(r) for r in cuts] == [5, 7]
    max_end[1, :] = 6  # stage 1 can never reach the last layer: infeasible
    assert optimal_cuts(table, max_end=max_end) is None


def test_stages_with_two_to_one_speed_get_layers_near_two_to_one() -> None:
    exp = _experiment({"tp": 4, "pp": 2, "dp": 2})  # stage 0 = H100 host, stage 1 = A100 host
    part = plan_partition(exp, _layout(exp), _speed_cost({"H100-SXM": 2.0, "A100-80GB-SXM": 1.0}), _no_memory)
    first, second = (len(r) for r in part.chunk_layers)
    assert first + second == 24
    # 2:1 would be 16:8; the embedding on stage 0 and the logits on stage 1 shift it by <= 1 layer
    assert abs(first - 16) <= 1 and first > second
    times = part.chunk_time_s
    assert max(times) / min(times) < 1.15  # balanced within one layer's cost


def test_replicas_with_three_to_one_speed_get_micro_batches_near_three_to_one() -> None:
    exp = _experiment({"tp": 8, "pp": 1, "dp": 2})  # replica 0 = H100 host, replica 1 = A100
    part = plan_partition(exp, _layout(exp), _speed_cost({"H100-SXM": 3.0, "A100-80GB-SXM": 1.0}), _no_memory)
    assert part.replica_micro_batches == (12, 4)  # 16 micro-batches split 3:1
    assert part.replica_speed[0] / part.replica_speed[1] == pytest.approx(3.0)


def test_uniform_mode_gives_equal_shares() -> None:
    exp = _experiment({"tp": 4, "pp": 2, "dp": 2, "partition": "uniform"})
    part = plan_partition(exp, _layout(exp), _speed_cost({"H100-SXM": 3.0, "A100-80GB-SXM": 1.0}), _no_memory)
    assert [len(r) for r in part.chunk_layers] == [12, 12]
    assert part.replica_micro_batches == (8, 8)
    exp = _experiment({"tp": 8, "pp": 1, "dp": 2, "partition": "uniform"})
    part = plan_partition(exp, _layout(exp), _speed_cost({"H100-SXM": 3.0, "A100-80GB-SXM": 1.0}), _no_memory)
    assert part.replica_micro_batches == (8, 8)


def test_explicit_partition_is_taken_as_given_with_equal_micro_batches() -> None:
    exp = _experiment({"tp": 4, "pp": 2, "dp": 2, "partition": [5, 19]})
    assert exp.parallel.partition == "explicit" and exp.parallel.stage_layers == (5, 19)
    part = plan_partition(exp, _layout(exp), _speed_cost({"H100-SXM": 3.0, "A100-80GB-SXM": 1.0}), _no_memory)
    assert part.mode == "explicit"
    assert part.chunk_layers == (range(0, 5), range(5, 24))
    assert part.replica_micro_batches == (8, 8)
    exp = _experiment({"tp": 4, "pp": 2, "dp": 2, "vpp": 2, "partition": [3, 9, 9, 3]})
    part = plan_partition(exp, _layout(exp), roofline_cost, _no_memory)
    assert part.layers_of(0, 1) == range(12, 21) and part.layers_of(1, 1) == range(21, 24)


def test_roofline_default_prefers_h100_stage() -> None:
    exp = _experiment({"tp": 4, "pp": 2, "dp": 2})
    part = plan_partition(exp, _layout(exp), roofline_cost, _no_memory)
    assert len(part.chunk_layers[0]) > len(part.chunk_layers[1])


def test_interleaved_partition_has_pp_times_vpp_chunks() -> None:
    exp = _experiment({"tp": 4, "pp": 2, "dp": 2, "vpp": 2, "schedule": "interleaved"})
    part = plan_partition(exp, _layout(exp), _speed_cost({"H100-SXM": 2.0, "A100-80GB-SXM": 1.0}), _no_memory)
    assert len(part.chunk_layers) == 4
    assert [r.start for r in part.chunk_layers][0] == 0 and part.chunk_layers[-1].stop == 24
    # chunks 0 and 2 run on the fast stage 0
    assert len(part.layers_of(0, 0)) + len(part.layers_of(0, 1)) > 12


def test_out_of_memory_names_rank_need_and_capacity() -> None:
    exp = _experiment({"tp": 4, "pp": 2, "dp": 2})

    def huge(layers: range, *_rest) -> int:
        return 50 * 10**9 * max(1, len(layers))

    with pytest.raises(UserError) as info:
        plan_partition(exp, _layout(exp), roofline_cost, huge)
    message = str(info.value)
    assert "rank" in message and "needs" in message and "but has" in message
    assert "\n" not in message
    exp = _experiment({"tp": 4, "pp": 2, "dp": 2, "partition": "uniform"})
    with pytest.raises(UserError, match=r"rank 0 \(H100-SXM, stage 0, layers 0-11\) needs"):
        plan_partition(exp, _layout(exp), roofline_cost, huge)


@pytest.mark.parametrize("partition", ["auto", "uniform"])
def test_memory_check_warn_runs_and_reports_every_full_stage(partition: str) -> None:
    exp = _experiment(
        {"tp": 4, "pp": 2, "dp": 2, "partition": partition}, simulation={"memory_check": "warn"}
    )

    def huge(layers: range, *_rest) -> int:
        return 50 * 10**9 * max(1, len(layers))

    part = plan_partition(exp, _layout(exp), roofline_cost, huge)
    assert sum(len(r) for r in part.chunk_layers) == 24
    assert len(part.memory_warnings) == 2  # one per pipeline stage
    assert all("needs" in w and "but has" in w for w in part.memory_warnings)
    fits = plan_partition(exp, _layout(exp), roofline_cost, _no_memory)
    assert fits.memory_warnings == ()


def test_memory_check_bad_value_names_the_key() -> None:
    with pytest.raises(UserError, match=r"test.yaml: simulation.memory_check: .*error.*warn"):
        _experiment({"tp": 4, "pp": 2, "dp": 2}, simulation={"memory_check": "maybe"})


def test_memory_limit_moves_layers_to_the_other_stage() -> None:
    exp = _experiment({"tp": 4, "pp": 2, "dp": 2})

    def per_layer(layers: range, *_rest) -> int:  # 6 GB per layer: 81,559 MiB holds 14 layers
        return 6 * 10**9 * len(layers)

    part = plan_partition(exp, _layout(exp), _speed_cost({"H100-SXM": 4.0, "A100-80GB-SXM": 1.0}), per_layer)
    assert len(part.chunk_layers[0]) == 14  # speed alone would give stage 0 about 19 layers


@pytest.mark.parametrize(
    "total,speeds,gran", [(16, [3, 1], 1), (100, [1, 2, 3, 4], 1), (7, [100, 1, 1], 1), (32, [1.5, 1], 4)]
)
def test_split_micro_batches_conserves_and_keeps_one_each(total, speeds, gran) -> None:
    counts = split_micro_batches(total, speeds, gran)
    assert sum(counts) == total and min(counts) >= gran
    assert all(c % gran == 0 for c in counts)
    ideal = np.array(speeds) / sum(speeds) * total
    if np.all(ideal >= gran):
        assert np.all(np.abs(np.array(counts) - ideal) < gran + 1e-9)
    else:  # the minimum share is taken from the fastest replica
        assert counts == [5, 1, 1]


def test_even_cuts() -> None:
    assert [len(r) for r in even_cuts(126, 16)] == [8] * 14 + [7] * 2
