"""Sailor's MIT workstation plans (validation/sailor_mit/, eth-easl/sailor
sailor/Planner/simulations/validation/mit/) import onto topologies/workstations/sailor_mit_6x8gpu.yaml
and place every replica on one server of its type; benchmarks/bench_sailor_mit.py runs them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from heterosim.cli import main
from heterosim.config.cluster import load_cluster
from heterosim.config.experiment import parse_experiment
from heterosim.importers.experiment_file import PlanImport, import_plan
from heterosim.plan.placement import place_plan

ROOT = Path(__file__).resolve().parents[2]
PLANS = ROOT / "validation" / "sailor_mit"
CLUSTER = ROOT / "topologies" / "workstations" / "sailor_mit_6x8gpu.yaml"
CONFIG = PLANS / "training_config_opt_350.json"
PLAN_FILES = sorted(PLANS.glob("plan_config_*.json"))


def test_the_nine_published_plans_are_shipped() -> None:
    assert [p.stem for p in PLAN_FILES] == [
        f"plan_config_{n}"
        for n in ("N2_D1", "N2_D2", "N3_D1", "N4_D1", "N4_D2", "N4_D4", "N6_D2", "N6_D3", "N6_D6")
    ]
    # Sailor's files carry the measured iteration time (s) under "real"
    assert all(isinstance(json.loads(p.read_text())["real"], float) for p in PLAN_FILES)


def test_cluster_network_is_sailors_measured_profile() -> None:
    """multizone_bandwidths_het.json: 1.15e8 B/s to the RTX 3090 server, 2.857e9 B/s between the others."""
    cluster = yaml.safe_load(CLUSTER.read_text())
    speeds = {name: t["nic_speed"] for name, t in cluster["host_types"].items()}
    assert speeds == {"rtx3090": "1Gbps", "titan": "25Gbps", "rtx2080ti": "25Gbps"}
    assert 0.8 < 1.15e8 * 8 / 1e9 < 1.0 and 20 < 2.857e9 * 8 / 1e9 < 25  # the profile's peaks in Gb/s
    assert [h["count"] for h in cluster["hosts"]] == [1, 2, 3]  # k1; n2-n3; r4-r6 (run_mit.sh)


@pytest.mark.parametrize("plan", PLAN_FILES, ids=[p.stem for p in PLAN_FILES])
def test_each_plan_imports_and_places_every_replica_on_one_server(plan: Path) -> None:
    raw = json.loads(plan.read_text())
    options = PlanImport(training_config=str(CONFIG), cluster=str(CLUSTER), gpu_map=["RTX-2080=RTX-2080-Ti"])
    exp_raw = yaml.safe_load(import_plan("sailor", str(plan), options, None).text)
    assert exp_raw["training"]["global_batch"] == raw["gbs"]  # the plan's batch, not the config's 1024
    assert exp_raw["model"]["seq"] == 2048  # Sailor's training_config_opt_350.json
    assert exp_raw["parallel"]["p2p_scatter_gather"] is True  # DeepSpeed's PartitionedTensor sends
    exp_raw["cluster"] = str(CLUSTER)
    exp = parse_experiment(exp_raw, str(plan), base_dir=ROOT)
    cluster = load_cluster(CLUSTER)
    gpus = place_plan(cluster, exp.parallel.plan)
    want = [
        {"RTX-2080": "RTX-2080-Ti"}.get(rep[0][0][0], rep[0][0][0])
        for stage in raw["pipeline_list"][0]["tmp_per_stage"]
        for rep in stage
        for _ in range(rep[1])
    ]
    assert [cluster.gpu_type[g] for g in gpus] == want
    assert len(set(gpus.tolist())) == gpus.size
    start = 0
    for stage in raw["pipeline_list"][0]["tmp_per_stage"]:
        for rep in stage:
            hosts = np.unique(cluster.gpu_host[gpus[start : start + rep[1]]])
            assert hosts.size == 1  # a TP group never leaves its server
            start += rep[1]


def test_sailors_rtx_2080_is_the_clusters_rtx_2080_ti_without_a_map(tmp_path: Path) -> None:
    """Sailor's "RTX-2080" has 11 GiB: an RTX 2080 Ti, used where the cluster has no RTX-2080."""
    plan = PLANS / "plan_config_N3_D1.json"
    options = PlanImport(training_config=str(CONFIG), cluster=str(CLUSTER))
    text = import_plan("sailor", str(plan), options, None).text
    assert "GPU names mapped: RTX-2080 -> RTX-2080-Ti" in text
    assert yaml.safe_load(text)["parallel"]["stages"][1]["replicas"][0]["gpu"] == "RTX-2080-Ti"
    # a cluster that defines its own RTX-2080 keeps it
    own = ROOT / "topologies" / "workstations" / "sailor_3x8gpu_geforce.yaml"
    kept = import_plan("sailor", str(plan), PlanImport(training_config=str(CONFIG), cluster=str(own)), None)
    assert yaml.safe_load(kept.text)["parallel"]["stages"][1]["replicas"][0]["gpu"] == "RTX-2080"


def test_plan_naming_a_gpu_the_cluster_lacks_is_one_line(tmp_path: Path, capsys) -> None:
    raw = json.loads((PLANS / "plan_config_N3_D1.json").read_text())
    raw["pipeline_list"][0]["tmp_per_stage"][2][0][0][0][0] = "A100-40"  # no A100 in the MIT cluster
    (tmp_path / "plan.json").write_text(json.dumps(raw))
    code = main(
        [
            "import",
            "sailor",
            str(tmp_path / "plan.json"),
            "--training-config",
            str(CONFIG),
            "--cluster",
            str(CLUSTER),
            "--out",
            str(tmp_path / "e.yaml"),
        ]
    )
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err
    assert "parallel.stages[2].replicas[0].gpu" in err and "A100-40GB-SXM" in err
    assert not (tmp_path / "e.yaml").exists()


def test_plan_needing_more_servers_than_the_cluster_has_is_one_line(tmp_path: Path, capsys) -> None:
    """N6_D6 needs three RTX-2080 servers; the 3-server cluster has one."""
    small = ROOT / "topologies" / "workstations" / "sailor_3x8gpu_geforce.yaml"
    code = main(
        [
            "import",
            "sailor",
            str(PLANS / "plan_config_N6_D6.json"),
            "--training-config",
            str(CONFIG),
            "--cluster",
            str(small),
            "--out",
            str(tmp_path / "e.yaml"),
        ]
    )
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err and "needs 16 RTX-2080 GPUs" in err
