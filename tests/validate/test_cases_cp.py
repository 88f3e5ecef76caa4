"""Published runs with context parallelism: the shipped cases carry cp as the source states it,
fill the GPUs with tp*cp*pp*dp, and parse into experiments whose CP groups exchange K/V."""

from __future__ import annotations

import copy
from pathlib import Path

import yaml

from heterosim.config.experiment import parse_experiment
from heterosim.validate.cases import load_cases

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "validation" / "cases.yaml"
CP_CASES = {
    "nemo2407-h100-fp8-llama3-8b-8",
    "nemo2407-h100-fp8-llama3-70b-64",
    "mbridge-2509-h100-llama3.1-405b-1024",
    "mbridge-2511-h100-llama3.1-405b-1024",
    "mbridge-2602-h100-llama3.1-405b-1024",
}


def test_cp_cases_are_shipped_with_the_published_degree():
    cases = {c.id: c for c in load_cases(SHIPPED)}
    assert CP_CASES <= set(cases)
    raw = {c["id"]: c for c in yaml.safe_load(SHIPPED.read_text())["cases"]}
    for name in CP_CASES:
        par = cases[name].experiment["parallel"]  # type: ignore[index]
        published = raw[name]["published"]
        assert par["cp"] == published["parallel"]["cp"] == 2, name
        assert par["cp_comm"] == "p2p" and "parallel.cp_comm" in raw[name]["assumed"], name
        gpus = published["cluster"]["gpus"]
        assert par["tp"] * par["cp"] * par["pp"] * par["dp"] == gpus, name


def test_cp_case_parses_into_an_experiment_with_cp_groups():
    case = next(c for c in load_cases(SHIPPED) if c.id == "nemo2407-h100-fp8-llama3-8b-8")
    data = copy.deepcopy(case.experiment)
    assert data is not None
    exp = parse_experiment(data, "cases.yaml")
    assert exp.parallel.cp == 2 and exp.cluster.world_size == 8


def test_torchtitan_cp_cases_run_pytorchs_cp_and_the_others_transformer_engines():
    """torchtitan calls PyTorch's context_parallel (all-gather rotation by default); the NeMo and
    Megatron-Bridge runs use Transformer Engine's (parallel.cp_impl's default)."""
    raw = {c["id"]: c for c in yaml.safe_load(SHIPPED.read_text())["cases"]}
    torchtitan = [
        c for c in raw.values() if c["group"] == "torchtitan" and c["experiment"]["parallel"].get("cp", 1) > 1
    ]
    assert len(torchtitan) == 3
    for case in torchtitan:
        par = case["experiment"]["parallel"]
        assert (par["cp_impl"], par["cp_comm"]) == ("pytorch", "all_gather"), case["id"]
        assert case["assumed"]["parallel.cp_impl"]["value"] == "pytorch"
        assert parse_experiment(copy.deepcopy(case["experiment"]), "cases.yaml").parallel.cp_impl == "pytorch"
    for name in CP_CASES:
        assert "cp_impl" not in raw[name]["experiment"]["parallel"], name
