"""End to end in flow fidelity: a mixed explicit plan on a cluster with a cluster-defined GPU."""

from __future__ import annotations

import json
from pathlib import Path

from heterosim.cli import main
from heterosim.config.experiment import load_experiment
from heterosim.plan.placement import place_plan

DATA = Path(__file__).resolve().parents[1] / "data" / "plans"
ROOT = Path(__file__).resolve().parents[2]


def _expected_gpus(exp) -> list[str]:
    return [r.gpu for s in exp.parallel.plan.stages for r in s.replicas for _ in range(r.tp)]


def test_mixed_plan_runs_and_places_every_replica_on_its_gpu_type(native_lib, tmp_path) -> None:
    path = DATA / "sailor_mixed_experiment.yaml"
    assert main(["run", str(path), "--out", str(tmp_path / "run")]) == 0
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    exp = load_experiment(path)
    cluster = exp.cluster
    ranks = results["ranks"]
    assert [r["gpu"] for r in ranks] == _expected_gpus(exp)
    assert "RTX-2080" in {r["gpu"] for r in ranks}  # the cluster file's own GPU ran
    for r in ranks:
        assert cluster.gpu_type[r["gpu_index"]] == r["gpu"]
        assert int(cluster.gpu_host[r["gpu_index"]]) == r["host"]
    assert [(r["stage"], r["dp_replica"], r["tp"]) for r in ranks] == [
        (0, 0, 2),
        (0, 0, 2),
        (0, 1, 4),
        (0, 1, 4),
        (0, 1, 4),
        (0, 1, 4),
        (1, 0, 2),
        (1, 0, 2),
        (1, 1, 2),
        (1, 1, 2),
    ]
    assert len({r["gpu_index"] for r in ranks}) == len(ranks)
    assert results["iteration_time_s"] > 0 and results["network"]["flows"] > 0
    stages = results["partition"]["stages"]  # the plan as run, micro-batches resolved
    counts = results["partition"]["replica_micro_batches"]
    assert [[r["micro_batches"] for r in s["replicas"]] for s in stages] == [counts, counts]
    assert stages[0]["replicas"][1] == {"gpu": "RTX-2080", "tp": 4, "micro_batches": counts[1]}
    # same run again: byte-identical results apart from wall times
    assert main(["run", str(path), "--out", str(tmp_path / "again")]) == 0
    again = json.loads((tmp_path / "again" / "results.json").read_text())
    assert again["iteration_time_s"] == results["iteration_time_s"]
    assert again["ranks"] == ranks


def test_workload_json_carries_gpu_stage_replica_tp(tmp_path) -> None:
    path = DATA / "sailor_mixed_experiment.yaml"
    assert main(["workload", str(path), "--out", str(tmp_path / "w"), "--summary-only"]) == 0
    summary = json.loads((tmp_path / "w" / "workload.json").read_text())
    exp = load_experiment(path)
    rank_gpu = place_plan(exp.cluster, exp.parallel.plan)
    assert [r["gpu"] for r in summary["ranks"]] == _expected_gpus(exp)
    assert [r["host"] for r in summary["ranks"]] == exp.cluster.gpu_host[rank_gpu].tolist()
    assert [r["tp"] for r in summary["ranks"]] == [2, 2, 4, 4, 4, 4, 2, 2, 2, 2]
    assert summary["parallel"]["stages"][0]["replicas"][1] == {"gpu": "RTX-2080", "tp": 4}
    counts = summary["partition"]["replica_micro_batches"]
    assert sum(counts) == 8 and min(counts) >= 1


def test_shipped_example_places_as_written() -> None:
    exp = load_experiment(ROOT / "workloads" / "examples" / "sailor_workstations.yaml")
    rank_gpu = place_plan(exp.cluster, exp.parallel.plan)
    assert [exp.cluster.gpu_type[g] for g in rank_gpu] == _expected_gpus(exp)
    assert set(exp.cluster.gpus) == {"RTX-2080", "RTX-3090-Blower"}
    # every TP group of 4 sits on one 4-GPU workstation
    hosts = exp.cluster.gpu_host[rank_gpu].reshape(-1, 4)
    assert all(len(set(row)) == 1 for row in hosts.tolist())


def test_cluster_defined_gpu_with_explicit_stages_loads_and_places(tmp_path) -> None:
    """A cluster-defined GPU (`gpus:`) with an explicit `parallel.stages` plan (its RTX-3090
    entry shadows the catalogue's, which has a 2-way NVLink bridge: a note says so)."""
    import yaml

    cluster = {
        "name": "workstations",
        "gpus": {
            "RTX-3090": {
                "tflops": {"fp16": 71, "bf16": 71, "fp32": 35.6},
                "memory_gb": 24,
                "memory_tbps": 0.936,
                "nvlink_gbps_per_dir": 0,
                "pcie_gen": 4,
            }
        },
        "host_types": {
            "r3090": {
                "gpu": "RTX-3090",
                "gpus": 8,
                "fabric": "pcie",
                "nics": 1,
                "nic_speed": "10Gbps",
                "transport": "socket",
            },
            "r2080": {"gpu": "RTX-2080-Ti", "gpus": 8, "fabric": "pcie", "nics": 1, "nic_speed": "10Gbps"},
            "titan": {"gpu": "Titan-RTX", "gpus": 8, "fabric": "pcie", "nics": 1, "nic_speed": "10Gbps"},
        },
        "hosts": [{"type": "r3090"}, {"type": "r2080", "count": 2}, {"type": "titan"}],
    }
    exp = {
        "name": "design-example",
        "model": {"arch": "gpt", "hidden": 1024, "layers": 24, "heads": 16, "vocab": 50272},
        "training": {"global_batch": 32, "micro_batch": 1, "seq_len": 1024, "dtype": "fp16"},
        "parallel": {
            "schedule": "1f1b",
            "stages": [
                {
                    "layers": 11,
                    "replicas": [
                        {"gpu": "RTX-3090", "tp": 8},
                        {"gpu": "RTX-2080-Ti", "tp": 8, "micro_batches": 12},
                    ],
                },
                {
                    "layers": 13,
                    "replicas": [
                        {"gpu": "Titan-RTX", "tp": 8},
                        {"gpu": "RTX-2080-Ti", "tp": 8, "micro_batches": 12},
                    ],
                },
            ],
        },
        "cluster": "cluster.yaml",
    }
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump(cluster))
    (tmp_path / "exp.yaml").write_text(yaml.safe_dump(exp))
    loaded = load_experiment(tmp_path / "exp.yaml")
    assert len(loaded.cluster.notes) == 1 and "nvlink_bytes_per_s" in loaded.cluster.notes[0]
    rank_gpu = place_plan(loaded.cluster, loaded.parallel.plan)
    assert [loaded.cluster.gpu_type[g] for g in rank_gpu] == _expected_gpus(loaded)
    assert loaded.cluster.gpu_host[rank_gpu].reshape(4, 8).tolist() == [[0] * 8, [1] * 8, [3] * 8, [2] * 8]
    # and it runs as written, its socket host beside RDMA hosts: every rank on the GPU it names
    from heterosim.cli import main

    out = tmp_path / "out"
    assert (
        main(
            [
                "run",
                str(tmp_path / "exp.yaml"),
                "--fidelity",
                "flow",
                "--out",
                str(out),
                "--quiet",
                "--no-plots",
            ]
        )
        == 0
    )
    results = json.loads((out / "results.json").read_text())
    assert [r["gpu"] for r in results["ranks"]] == _expected_gpus(loaded)
    assert results["iteration_time_s"] > 0 and not results["sim"]["partial"]
