"""``heterosim import metis|flashflex``: plans of Metis and FlashFlex -> ``parallel.stages``.

Fixtures (tests/data/plans/README.md) are written for these tests in the formats the planners'
code prints or reads (SamsungLabs/Metis cost_het_cluster.py; Relaxed-System-Lab/FlashFlex
all_hetero_configs.json); no file from either tool was available to copy.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from heterosim.cli import main
from heterosim.config.cluster import load_cluster
from heterosim.config.experiment import load_experiment
from heterosim.errors import UserError
from heterosim.importers.metis_flashflex import read_flashflex_plan, read_metis_plan

DATA = Path(__file__).resolve().parents[1] / "data" / "plans"
CONFIG = (  # Sailor's training config format (the importers' way to give an inline model)
    '{"hidden_size": 512, "sequence_length": 256, "num_layers": 8, "vocab_size": 8192, "heads": 8}'
)


def model_args(tmp_path: Path) -> list[str]:
    path = tmp_path / "training_config.json"
    path.write_text(CONFIG)
    return ["--training-config", str(path)]


def test_metis_plan_places_replicas_type_by_type():
    cluster = load_cluster(DATA / "metis_cluster.yaml")
    imported, batches = read_metis_plan(DATA / "metis_results.txt", cluster, rank=1)
    plan = imported.plan
    # boundaries [0, 4, 10] over embedding + 8 layers + head: 3 and 5 transformer layers
    assert [s.layers for s in plan.stages] == [3, 5]
    # devices numbered T4 first (4), then A100 (12): stage 0 = 4 T4 + 4 A100, dp 4 x tp 2
    assert [(r.gpu, r.tp) for r in plan.stages[0].replicas] == [
        ("T4-16GB-PCIe", 2),
        ("T4-16GB-PCIe", 2),
        ("A100-80GB-SXM", 2),
        ("A100-80GB-SXM", 2),
    ]
    assert {r.gpu for r in plan.stages[1].replicas} == {"A100-80GB-SXM"}
    assert batches == 8 and plan.world_size == 16


@pytest.mark.parametrize(
    ("rank", "needle"),
    [
        (2, "stage 1 has dp 2 but"),  # 12 A100 then 4 T4: dp 2 in both, but ...
        (3, "stage 1 has dp 4 but stage 0 has 2"),
        (4, "replica 0 spans GPU types"),
        (9, "no plan of rank 9; ranks 1..4"),
    ],
)
def test_metis_plans_outside_parallel_stages_are_one_line_errors(rank, needle):
    cluster = load_cluster(DATA / "metis_cluster.yaml")
    if rank == 2:  # dp 2 in both stages: representable, so it imports
        imported, _ = read_metis_plan(DATA / "metis_results.txt", cluster, rank=2)
        assert [s.layers for s in imported.plan.stages] == [6, 2]
        assert [r.gpu for r in imported.plan.stages[1].replicas] == ["T4-16GB-PCIe"] * 2
        return
    with pytest.raises(UserError) as err:
        read_metis_plan(DATA / "metis_results.txt", cluster, rank=rank)
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_flashflex_plan_keeps_each_pipelines_micro_batches():
    cluster = load_cluster(DATA / "amp_cluster.yaml")
    imported = read_flashflex_plan(DATA / "flashflex_hetero_config.json", cluster)
    plan = imported.plan
    assert [s.layers for s in plan.stages] == [5, 3]
    assert [(r.gpu, r.tp, r.micro_batches) for r in plan.stages[0].replicas] == [
        ("V100-SXM2-16GB", 2, 4),
        ("T4-16GB-PCIe", 2, 2),
    ]
    assert imported.global_batch == 12


def test_flashflex_pipelines_with_different_partitions_are_refused(tmp_path):
    bad = tmp_path / "f.json"
    bad.write_text(
        '{"hetero_configs": [[2, 2], [4]], "layer_partitions": [[5, 3], [8]], '
        '"devices_id": [[[0, 0], [0, 0]], [[1, 1, 1, 1]]]}'
    )
    with pytest.raises(UserError) as err:
        read_flashflex_plan(bad, load_cluster(DATA / "amp_cluster.yaml"))
    assert "layer_partitions [8] differ from pipeline 0's [5, 3]" in str(err.value)


@pytest.mark.parametrize(
    ("fmt", "file", "cluster", "extra"),
    [
        ("metis", "metis_results.txt", "metis_cluster.yaml", ["--global-batch", "64"]),
        ("flashflex", "flashflex_hetero_config.json", "amp_cluster.yaml", ["--micro-batch", "2"]),
    ],
)
def test_import_writes_an_experiment_that_loads(tmp_path, capsys, fmt, file, cluster, extra):
    out = tmp_path / f"{fmt}.yaml"
    code = main(
        [
            "import",
            fmt,
            str(DATA / file),
            *model_args(tmp_path),
            "--cluster",
            str(DATA / cluster),
            "--out",
            str(out),
        ]
        + extra
    )
    assert code == 0, capsys.readouterr().err
    experiment = load_experiment(out)
    assert experiment.parallel.plan is not None and experiment.model.layers == 8
    assert f"Imported from the {fmt} plan" in out.read_text()


def test_metis_batch_that_does_not_split_is_a_one_line_error(tmp_path, capsys):
    code = main(
        [
            "import",
            "metis",
            str(DATA / "metis_results.txt"),
            *model_args(tmp_path),
            "--cluster",
            str(DATA / "metis_cluster.yaml"),
            "--global-batch",
            "10",
        ]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "does not split" in err[0]
