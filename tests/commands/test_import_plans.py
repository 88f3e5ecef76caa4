"""``heterosim import sailor|amp``: planners' plan files -> experiments with ``parallel.stages``.

Test data (tests/data/plans/, see its README.md) follows Sailor's plan JSON
(eth-easl/sailor sailor/Planner/sailor_planner/cpp_src/planner.py, get_sorted_plans) and AMP's
partition.json / rank_map.json (DachengLi1/AMP Megatron-LM-v1.1.5-3D_parallelism/amp_utils.py,
simulate; cost_het_cluster.py, predict and dp_cost).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from heterosim.cli import main
from heterosim.config.cluster import load_cluster
from heterosim.config.experiment import load_experiment
from heterosim.errors import UserError
from heterosim.importers.sailor_amp import read_amp_partition, read_sailor_plan

DATA = Path(__file__).resolve().parents[1] / "data" / "plans"
ROOT = Path(__file__).resolve().parents[2]


def test_sailor_plan_reads_stages_replicas_and_batch() -> None:
    imported = read_sailor_plan(DATA / "sailor_plan_mixed.json")
    plan = imported.plan
    # blocks 0 (embedding) and 7 (head) are not layers: stages hold 3 and 3 transformer layers
    assert [s.layers for s in plan.stages] == [3, 3]
    assert [(r.gpu, r.tp) for r in plan.stages[0].replicas] == [("RTX-3090", 2), ("RTX-2080", 4)]
    assert [(r.gpu, r.tp) for r in plan.stages[1].replicas] == [("Titan-RTX", 2), ("RTX-3090", 2)]
    assert (imported.micro_batch, imported.global_batch) == (1, 8)
    mapped = read_sailor_plan(DATA / "sailor_plan_mixed.json", {"RTX-2080": "RTX-2080-Ti"})
    assert mapped.plan.stages[0].replicas[1].gpu == "RTX-2080-Ti"


def test_import_sailor_writes_a_runnable_experiment(tmp_path: Path, capsys) -> None:
    shutil.copytree(DATA, tmp_path / "plans")
    out = tmp_path / "exp" / "sailor.yaml"
    code = main(
        [
            "import",
            "sailor",
            str(tmp_path / "plans" / "sailor_plan_mixed.json"),
            "--training-config",
            str(tmp_path / "plans" / "sailor_training_config.json"),
            "--cluster",
            str(tmp_path / "plans" / "workstations.yaml"),
            "--out",
            str(out),
        ]
    )
    assert code == 0
    text = out.read_text()
    assert text.startswith("# Imported from the sailor plan")
    data = yaml.safe_load(text)
    assert data["cluster"] == "../plans/workstations.yaml"
    # Sailor's runtime: fp32 and unfused attention (heterosim.importers.experiment_file SAILOR_DTYPE)
    assert data["training"] == {
        "global_batch": 8,
        "micro_batch": 1,
        "dtype": "fp32",
        "attention": "unfused",
        "seq_len": 256,
    }
    assert "dtype fp32 (the planner runtime default)" in text
    exp = load_experiment(out)
    plan = exp.parallel.plan
    assert plan is not None and plan.world_size == 10 and exp.model.layers == 6
    assert "2 stages x 2 replicas, 10 GPUs" in capsys.readouterr().out


@pytest.mark.parametrize(
    "edit, problem",
    [
        (
            lambda p: (
                p["pipeline_list"][0]["tmp_per_stage"][1].pop(),
                p["pipeline_list"][0].update(dp=[2, 1]),
            ),
            "1 replicas but stage 0 has 2",
        ),
        (lambda p: p["pipeline_list"][0].update(dp=[2, 3]), "dp[1]: says 3 but tmp_per_stage[1]"),
        (
            lambda p: p["pipeline_list"][0].update(layers_per_stage=[[0, 1, 2], [4, 5, 6, 7]]),
            "expected consecutive block indices",
        ),
        (
            lambda p: p["pipeline_list"][0].update(layers_per_stage=[[0], [1, 2, 3, 4, 5, 6, 7]]),
            "stage holds no transformer layer",
        ),
        (lambda p: p["pipeline_list"][0]["tmp_per_stage"][0][0].__setitem__(1, 4), "2 GPUs but tp 4"),
        (
            lambda p: p["pipeline_list"][0]["tmp_per_stage"][0][0][0].append(["Titan-RTX", 2, "z"]),
            "one replica on several GPU types",
        ),
        (lambda p: p.pop("pipeline_list"), "pipeline_list: expected a non-empty list"),
    ],
)
def test_bad_sailor_plans_are_one_line_errors(tmp_path: Path, edit, problem) -> None:
    plan = json.loads((DATA / "sailor_plan_mixed.json").read_text())
    edit(plan)
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    with pytest.raises(UserError) as info:
        read_sailor_plan(path)
    assert problem in str(info.value) and str(path) in str(info.value)
    assert "\n" not in str(info.value)


def test_sailor_gpu_missing_from_cluster_names_the_key(tmp_path: Path, capsys) -> None:
    cluster = yaml.safe_load((DATA / "workstations.yaml").read_text())
    del cluster["gpus"]
    # neither RTX-2080 nor its fallback RTX-2080-Ti (SAILOR_GPU_FALLBACKS) in the cluster
    cluster["host_types"]["r2080"]["gpu"] = "Titan-RTX"
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cluster))
    code = main(
        [
            "import",
            "sailor",
            str(DATA / "sailor_plan_mixed.json"),
            "--training-config",
            str(DATA / "sailor_training_config.json"),
            "--cluster",
            str(tmp_path / "c.yaml"),
            "--out",
            str(tmp_path / "e.yaml"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and "parallel.stages[0].replicas[1].gpu: GPU type 'RTX-2080'" in err
    assert not (tmp_path / "e.yaml").exists()  # nothing half-written


def test_amp_partition_and_rank_map() -> None:
    cluster = load_cluster(DATA / "amp_cluster.yaml")
    imported = read_amp_partition(DATA / "amp_partition.json", cluster, 2, DATA / "amp_rank_map.json")
    plan = imported.plan
    # boundaries [0, 5, 12] over [embed2h, noop, 6 layers, noop, noop, embed2v, noop]
    assert [s.layers for s in plan.stages] == [3, 3]
    # ranks 0-3 (stage 0) on node 1 (T4), ranks 4-7 (stage 1) on node 0 (V100)
    assert [r.gpu for r in plan.stages[0].replicas] == ["T4-16GB-PCIe"] * 2
    assert [r.gpu for r in plan.stages[1].replicas] == ["V100-SXM2-16GB"] * 2
    default = read_amp_partition(DATA / "amp_partition.json", cluster, 2)  # rank r on GPU r
    assert [r.gpu for r in default.plan.stages[0].replicas] == ["V100-SXM2-16GB"] * 2


def test_amp_rank_map_splitting_a_replica_over_types_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "rmap.json").write_text(json.dumps({"0": [0, 2, 4, 6], "1": [1, 3, 5, 7]}))
    with pytest.raises(UserError, match="stage 0 replica 0 spans GPU types"):
        read_amp_partition(
            DATA / "amp_partition.json", load_cluster(DATA / "amp_cluster.yaml"), 2, tmp_path / "rmap.json"
        )


def test_import_amp_cli(tmp_path: Path) -> None:
    out = tmp_path / "amp.yaml"
    code = main(
        [
            "import",
            "amp",
            str(DATA / "amp_partition.json"),
            "--rank-map",
            str(DATA / "amp_rank_map.json"),
            "--tp",
            "2",
            "--training-config",
            str(DATA / "sailor_training_config.json"),
            "--cluster",
            str(DATA / "amp_cluster.yaml"),
            "--global-batch",
            "8",
            "--out",
            str(out),
        ]
    )
    assert code == 0
    exp = load_experiment(out)
    assert exp.parallel.plan.stage_tp(0) == (2, 2) and exp.training.global_batch == 8
    assert exp.parallel.tp_backward_overlap is False  # AMP's Megatron-LM v1.1.5: blocking


def test_sailor_example_runs_its_tp_backward_blocking() -> None:
    """Sailor's Megatron-DeepSpeed turns the asynchronous TP all-reduce off under DeepSpeed: the
    import writes tp_backward_overlap: false, so the backward's TP collectives block."""
    exp = load_experiment(ROOT / "workloads" / "examples" / "sailor_workstations.yaml")
    assert exp.parallel.tp_backward_overlap is False and exp.parallel.plan is not None


def test_shipped_sailor_example_reimports_identically(tmp_path: Path) -> None:
    """workloads/examples/sailor_workstations.yaml is what `heterosim import sailor` writes."""
    example = ROOT / "workloads" / "examples"
    out = example / "reimport_check.yaml"
    try:
        assert (
            main(
                [
                    "import",
                    "sailor",
                    str(example / "sailor_plan_workstations.json"),
                    "--training-config",
                    str(example / "sailor_training_config_opt350.json"),
                    "--cluster",
                    str(ROOT / "topologies" / "workstations_mixed_24gpu.yaml"),
                    "--gpu-map",
                    "RTX-3090=RTX-3090-Blower",
                    "--out",
                    str(out),
                ]
            )
            == 0
        )
        assert yaml.safe_load(out.read_text()) == yaml.safe_load(
            (example / "sailor_workstations.yaml").read_text()
        )
    finally:
        out.unlink(missing_ok=True)


@pytest.mark.parametrize(
    "argv, problem",
    [
        (
            [
                "amp",
                str(DATA / "amp_partition.json"),
                "--model",
                "llama-7b",
                "--cluster",
                str(DATA / "amp_cluster.yaml"),
                "--global-batch",
                "8",
            ],
            "--tp is required",
        ),
        (
            ["sailor", str(DATA / "sailor_plan_mixed.json"), "--cluster", str(DATA / "workstations.yaml")],
            "--model (or --training-config) and --cluster",
        ),
        (
            [
                "sailor",
                str(DATA / "sailor_plan_mixed.json"),
                "--model",
                "llama-7b",
                "--cluster",
                str(DATA / "workstations.yaml"),
                "--gpu-map",
                "RTX-2080",
            ],
            "expected PLAN_NAME=GPU",
        ),
        (
            [
                "amp",
                str(DATA / "amp_partition.json"),
                "--tp",
                "3",
                "--model",
                "llama-7b",
                "--cluster",
                str(DATA / "amp_cluster.yaml"),
                "--global-batch",
                "8",
            ],
            "does not divide",
        ),
    ],
)
def test_import_usage_errors_exit_2(argv, problem, capsys, tmp_path) -> None:
    assert main(["import", *argv, "--out", str(tmp_path / "e.yaml")]) == 2
    err = capsys.readouterr().err.strip()
    assert problem in err and len(err.splitlines()) == 1
    assert not (tmp_path / "e.yaml").exists()


SAILOR = [
    "sailor",
    str(DATA / "sailor_plan_mixed.json"),
    "--training-config",
    str(DATA / "sailor_training_config.json"),
    "--cluster",
    str(DATA / "workstations.yaml"),
]
AMP = ["amp", "--tp", "2", "--model", "llama-7b", "--cluster", str(DATA / "amp_cluster.yaml")]
AMP += ["--global-batch", "8"]


def _fails(argv: list[str], capsys, tmp_path: Path, *fragments: str) -> None:
    out = tmp_path / "e.yaml"
    assert main(["import", *argv, "--out", str(out)]) == 2
    err = [ln for ln in capsys.readouterr().err.strip().splitlines() if "warning:" not in ln]
    assert len(err) == 1, err
    for fragment in fragments:
        assert fragment in err[0], err[0]
    assert not out.exists()


@pytest.mark.parametrize("option", ["--micro-batch", "--global-batch", "--seq-len"])
def test_import_sailor_zero_options_are_refused(option, capsys, tmp_path) -> None:
    _fails([*SAILOR, option, "0"], capsys, tmp_path, f"{option}: expected an integer >= 1, got 0")


def test_import_sailor_huge_batch_is_one_line(capsys, tmp_path) -> None:
    plan = json.loads((DATA / "sailor_plan_mixed.json").read_text())
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan).replace('"gbs": 8', '"gbs": 1' + "0" * 5000))
    _fails([*SAILOR[:1], str(path), *SAILOR[2:]], capsys, tmp_path, str(path), "invalid JSON")
    path.write_text(json.dumps(plan).replace('"gbs": 8', '"gbs": 1' + "0" * 40))
    _fails([*SAILOR[:1], str(path), *SAILOR[2:]], capsys, tmp_path, f"{path}: gbs:", "41 digits")
    path.write_text("[" * 100_000 + "]" * 100_000)
    _fails([*SAILOR[:1], str(path), *SAILOR[2:]], capsys, tmp_path, f"{path}: invalid JSON")


def test_import_sailor_warns_when_the_batch_does_not_split_evenly(capsys, tmp_path) -> None:
    out = tmp_path / "e.yaml"
    assert main(["import", *SAILOR, "--global-batch", "7", "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "heterosim: warning:" in err and "does not split evenly" in err
    assert "does not split evenly" in out.read_text().split("\nname:")[0]


@pytest.mark.parametrize(
    "ranks, fragment",
    [(["x", 5, 6, 7], "ranks[0]"), ([None, 5, 6, 7], "ranks[0]"), ([[4], 5, 6, 7], "ranks[0]")],
)
def test_import_amp_rank_map_entries_are_checked(ranks, fragment, capsys, tmp_path) -> None:
    rank_map = tmp_path / "rank_map.json"
    rank_map.write_text(json.dumps({"0": ranks, "1": [0, 1, 2, 3]}))
    argv = [AMP[0], str(DATA / "amp_partition.json"), *AMP[1:], "--rank-map", str(rank_map)]
    _fails(argv, capsys, tmp_path, f"{rank_map}: node 0: {fragment}: expected a rank")


@pytest.mark.parametrize(
    "bounds, fragment", [(list(range(100_001)), "100,001 boundaries"), ([0, 5, 10**12], "last boundary")]
)
def test_import_amp_huge_partitions_are_refused_at_once(bounds, fragment, capsys, tmp_path) -> None:
    partition = tmp_path / "partition.json"
    partition.write_text(json.dumps(bounds))
    _fails([AMP[0], str(partition), *AMP[1:]], capsys, tmp_path, str(partition), fragment)
