"""Sailor's MIT workstation plans (validation/sailor_mit/): HeteroSim against Sailor's measurements.

Usage: ``PYTHONPATH=$PWD python benchmarks/bench_sailor_mit.py [--network SPEED] [--seq N]
[--global-batch N]`` (flow fidelity, micro-batch counts above 4 x pp extrapolated from two shorter
runs as ``heterosim validate`` does; a few minutes on 2 cores).

Each plan file is Sailor's own (eth-easl/sailor, sailor/Planner/simulations/validation/mit/, commit
cf2c8e3), in the format ``heterosim import sailor`` reads; its ``real`` key is the iteration time
Sailor measured on the cluster, in seconds. The run uses Sailor's OPT-350 training config
(validation/sailor_mit/training_config_opt_350.json: sequence 2048) and the cluster
topologies/workstations/sailor_mit_6x8gpu.yaml (network from Sailor's measured bandwidth profile).

``--network 10Gbps`` puts every server on that NIC instead (the guess a user without the profile
makes); ``--seq 1024`` and ``--global-batch 32`` give the example config's values
(workloads/examples/sailor_training_config_opt350.json: sequence 1024, global batch 32). Prints
per plan the measured and predicted time and the error, then MAPE and Spearman
(heterosim.validate.stats). Nothing is fitted.

plan_config_N6_D2.json carries exactly the measurements of plan_config_N3_D1.json (real,
red_grads, max_mem) with a different global batch: a copy in Sailor's repository, not a
measurement of that plan, so it is run but left out of the statistics (``--all`` keeps it).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from heterosim.config.experiment import parse_experiment  # noqa: E402
from heterosim.config.importers import PlanImport, import_plan  # noqa: E402
from heterosim.validate.predict import iteration_time_s  # noqa: E402
from heterosim.validate.stats import error_pct, mape, spearman  # noqa: E402

PLANS = ROOT / "validation" / "sailor_mit"
CLUSTER = ROOT / "topologies" / "workstations" / "sailor_mit_6x8gpu.yaml"
CONFIG = PLANS / "training_config_opt_350.json"
# Sailor's "RTX-2080" has 11 GiB (basic_cluster_config.json, constants.py): an RTX 2080 Ti
GPU_MAP = ["RTX-2080=RTX-2080-Ti"]
COPIED = {"plan_config_N6_D2"}  # measurements identical to plan_config_N3_D1 (module docstring)


def _cluster(network: str | None, tmp: Path) -> Path:
    if network is None:
        return CLUSTER
    cluster = yaml.safe_load(CLUSTER.read_text())
    for host in cluster["host_types"].values():
        host["nic_speed"] = network
    path = tmp / f"cluster_{network}.yaml"
    path.write_text(yaml.safe_dump(cluster, sort_keys=False))
    return path


def _config(seq: int | None, tmp: Path) -> Path:
    if seq is None:
        return CONFIG
    config = json.loads(CONFIG.read_text())
    config["sequence_length"] = seq
    path = tmp / f"training_config_seq{seq}.json"
    path.write_text(json.dumps(config))
    return path


def predict(plan: Path, cluster: Path, config: Path, global_batch: int | None, dtype: str) -> float:
    """Predicted iteration time of one Sailor plan, in seconds (flow fidelity)."""
    options = PlanImport(
        training_config=str(config),
        cluster=str(cluster),
        gpu_map=GPU_MAP,
        global_batch=global_batch,
        dtype=dtype,
    )
    text = import_plan("sailor", str(plan), options, None).text
    raw = yaml.safe_load(text)
    raw["cluster"] = str(cluster)
    raw["simulation"] = {"fidelity": "flow"}
    exp = parse_experiment(raw, str(plan), base_dir=ROOT)
    t, _, _ = iteration_time_s(exp)
    return t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--network", help="every server's NIC speed instead of the measured profile")
    ap.add_argument("--seq", type=int, help="sequence length instead of Sailor's 2048")
    ap.add_argument("--global-batch", type=int, help="global batch instead of each plan's gbs")
    ap.add_argument("--dtype", default="fp32", help="training dtype (default fp32: module docstring)")
    ap.add_argument("--all", action="store_true", help="keep plan_config_N6_D2 in the statistics")
    ap.add_argument("--only", nargs="*", help="plan file stems to run")
    args = ap.parse_args()
    tmp = Path("/tmp") / "bench_sailor_mit"
    tmp.mkdir(exist_ok=True)
    cluster, config = _cluster(args.network, tmp), _config(args.seq, tmp)
    rows = []
    print(f"{'plan':20} {'measured s':>10} {'predicted s':>11} {'error %':>8} {'wall s':>7}")
    for plan in sorted(PLANS.glob("plan_config_*.json")):
        if args.only and plan.stem not in args.only:
            continue
        measured = float(json.loads(plan.read_text())["real"])
        start = time.perf_counter()
        t = predict(plan, cluster, config, args.global_batch, args.dtype)
        wall = time.perf_counter() - start
        note = "  (copied measurement: not counted)" if plan.stem in COPIED else ""
        print(
            f"{plan.stem:20} {measured:10.2f} {t:11.2f} {error_pct(t, measured):+8.1f} {wall:7.1f}{note}",
            flush=True,
        )
        if args.all or plan.stem not in COPIED:
            rows.append((t, measured))
    if len(rows) >= 2:
        preds, meas = [p for p, _ in rows], [m for _, m in rows]
        errors = [error_pct(p, m) for p, m in rows]
        print(f"{len(rows)} plans: MAPE {mape(errors):.1f}%, Spearman {spearman(preds, meas):.3f}")


if __name__ == "__main__":
    main()
