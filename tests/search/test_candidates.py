"""Plan search without simulation: the candidate space, pruning with reasons, the pre-rank and
the ordering of simulated candidates."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from heterosim.config.experiment import parse_experiment
from heterosim.search.candidates import PER_TYPE, UNIFORM, Candidate, enumerate_candidates, tp_choices
from heterosim.search.prune import INVALID, MEMORY, assess
from heterosim.search.rank import analytic_estimate, order, select, why
from heterosim.simulate import generate_experiment_workload

FAST_SLOW = {
    "name": "fast-slow",
    "model": {
        "arch": "gpt",
        "hidden": 1024,
        "layers": 8,
        "heads": 8,
        "ffn": 4096,
        "vocab": 8192,
        "seq": 512,
        "name": "gpt-8l",
    },
    "training": {"global_batch": 8, "micro_batch": 1, "seq_len": 512, "dtype": "fp16", "recompute": "none"},
    "parallel": {"tp": 1, "pp": 2, "dp": 2, "schedule": "1f1b", "zero": 0, "partition": "uniform"},
    "cluster": {
        "name": "h100x2-t4x2",
        "host_types": {
            "fast": {"gpu": "H100-SXM", "gpus": 2, "fabric": "nvswitch", "nics": 1, "nic_speed": "100Gbps"},
            "slow": {"gpu": "T4-16GB-PCIe", "gpus": 2, "fabric": "pcie", "nics": 1, "nic_speed": "100Gbps"},
        },
        "hosts": [{"type": "fast", "count": 1}, {"type": "slow", "count": 1}],
        "fabric": {"kind": "fat-tree", "link_delay": "1us", "oversubscription": 1},
    },
    "network": {"cc": "dcqcn"},
    "simulation": {"fidelity": "flow", "seed": 1},
}


def fast_slow(**changes) -> dict:
    data = copy.deepcopy(FAST_SLOW)
    for key, value in changes.items():
        section, name = key.split("__")
        data[section][name] = value
    return data


def write(tmp_path: Path, data: dict) -> Path:
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _exp(data: dict):
    return parse_experiment(copy.deepcopy(data), "exp.yaml")


def _assess_all(data: dict, micro_batches=(1, 2, 4, 8)):
    exp = _exp(data)
    cands = enumerate_candidates(exp, dict(data["parallel"]), micro_batches)
    return cands, [assess(c, data, "exp.yaml", None, generate_experiment_workload) for c in cands]


def test_candidate_space_respects_hosts_heads_and_batch() -> None:
    exp = _exp(FAST_SLOW)
    assert tp_choices(exp) == [1, 2]  # hosts of 2 GPUs: a TP group never spans hosts
    cands = enumerate_candidates(exp, dict(FAST_SLOW["parallel"]), (1, 2, 4, 8))
    assert cands[0].default and cands[0].parallel["partition"] == "uniform"
    assert sum(c.default for c in cands) == 1
    assert len({c.id for c in cands}) == len(cands)  # no duplicates
    for c in cands:
        par = c.parallel
        if c.kind == UNIFORM:
            assert par["tp"] * par["pp"] * par["dp"] == 4
            assert 8 % (c.micro_batch * par["dp"]) == 0
    per_type = [c for c in cands if c.kind == PER_TYPE]
    assert per_type, "a two-type cluster has one-type-per-pipeline plans"
    for c in per_type:
        for j in range(len(c.parallel["stages"][0]["replicas"])):
            # every pipeline runs on a single GPU type
            assert len({s["replicas"][j]["gpu"] for s in c.parallel["stages"]}) == 1
        assert sum(s["layers"] for s in c.parallel["stages"]) == 8
    # deterministic: same ids in the same order
    again = enumerate_candidates(exp, dict(FAST_SLOW["parallel"]), (1, 2, 4, 8))
    assert [c.id for c in again] == [c.id for c in cands]


def test_one_gpu_type_has_no_per_type_plans() -> None:
    data = copy.deepcopy(FAST_SLOW)
    data["cluster"]["hosts"] = [{"type": "fast", "count": 2}]
    cands = enumerate_candidates(_exp(data), dict(data["parallel"]), (1,))
    assert cands and all(c.kind != PER_TYPE for c in cands)


def test_invalid_candidate_is_pruned_with_the_config_reason() -> None:
    bad = Candidate(UNIFORM, {"tp": 3, "pp": 1, "dp": 1, "partition": "auto"}, 1)
    result = assess(bad, FAST_SLOW, "exp.yaml", None, generate_experiment_workload)
    assert result.pruned == INVALID
    assert "tp*pp*dp" in result.reason and "\n" not in result.reason
    assert not result.reason.startswith("exp.yaml")


def test_memory_pruning_records_the_rank_and_its_need() -> None:
    # 48 layers of hidden 4096 (~10 B parameters): 16 bytes per parameter does not fit a 16 GB T4
    # nor an 80 GB H100 unless split over many stages
    data = fast_slow(model__layers=48, model__hidden=4096, model__heads=32, model__ffn=16384)
    cands, results = _assess_all(data, (1,))
    memory = [r for r in results if r.pruned == MEMORY]
    assert memory, "the big model must not fit every layout"
    for r in memory:
        assert "memory" in r.reason and ("GiB" in r.reason or "GB" in r.reason)
        assert "\n" not in r.reason
    # nothing that survives exceeds its GPUs' capacity by the same memory model
    for r in results:
        if r.ok:
            for gpu, need in r.memory_bytes.items():
                assert need <= r.experiment.cluster.gpu_spec(gpu).memory_bytes
    # pp 1 holds the whole model on one GPU: 10 B parameters x 16 bytes cannot fit
    assert all(r.pruned for r in results if r.candidate.kind == UNIFORM and r.candidate.parallel["pp"] == 1)


def test_pre_rank_keeps_default_and_cheapest() -> None:
    cands, results = _assess_all(FAST_SLOW)
    estimates = {r.candidate.id: analytic_estimate(r) for r in results if r.ok}
    assert all(v > 0 for v in estimates.values())
    chosen = select(results, estimates, 3)
    assert len(chosen) == 3 and chosen[0].candidate.default
    rest = sorted(
        (r for r in results if r.ok and not r.candidate.default),
        key=lambda r: (estimates[r.candidate.id], r.candidate.id),
    )
    assert [c.candidate.id for c in chosen[1:]] == [r.candidate.id for r in rest[:2]]
    # the default's uniform split leaves the T4 stage with half the layers: the estimate sees
    # that the speed-aware partition is faster
    default = next(r for r in results if r.candidate.default)
    auto = next(
        r
        for r in results
        if r.candidate.kind == UNIFORM
        and r.candidate.parallel == {**default.candidate.parallel, "partition": "auto"}
    )
    assert estimates[auto.candidate.id] < estimates[default.candidate.id]


def test_order_is_by_simulated_time_then_estimate_then_id() -> None:
    rows = [
        {"id": "c", "iteration_time_s": 2.0, "estimate_s": 1.0},
        {"id": "b", "iteration_time_s": 1.0, "estimate_s": 3.0},
        {"id": "a", "iteration_time_s": 1.0, "estimate_s": 3.0},
        {"id": "d", "iteration_time_s": 1.0, "estimate_s": 2.0},
        {"id": "e", "status": "pruned"},
    ]
    assert [r["id"] for r in order(rows)] == ["d", "a", "b", "c"]


@pytest.mark.parametrize(
    ("breakdown", "word"),
    [
        ({"compute_s": 0.7, "exposed_comm_s": 0.2, "bubble_s": 0.1}, "compute-bound"),
        ({"compute_s": 0.2, "exposed_comm_s": 0.7, "bubble_s": 0.1}, "communication-bound"),
        ({"compute_s": 0.2, "exposed_comm_s": 0.1, "bubble_s": 0.7}, "bubble"),
    ],
)
def test_why_names_the_largest_term(breakdown: dict, word: str) -> None:
    text = why(breakdown, 1.0)
    assert text.startswith(word.split()[0]) or word in text
    assert "70%" in text
