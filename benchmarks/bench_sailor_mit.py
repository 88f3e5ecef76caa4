"""Sailor's MIT workstation plans (validation/sailor_mit/): HeteroSim against Sailor's measurements.

Usage: ``PYTHONPATH=$PWD python benchmarks/bench_sailor_mit.py [--steps] [--network SPEED]
[--seq N] [--global-batch N] [--dtype D] [--attention A] [--whole-p2p]`` (flow fidelity,
micro-batch counts above 4 x pp extrapolated from two shorter runs as ``heterosim validate`` does;
about 2 min per pass over the plans on 2 cores, ``--steps`` six passes).

Each plan file is Sailor's own (eth-easl/sailor, sailor/Planner/simulations/validation/mit/, commit
cf2c8e3), in the format ``heterosim import sailor`` reads; its ``real`` key is the iteration time
Sailor measured on the cluster, in seconds. The run uses Sailor's OPT-350 training config
(validation/sailor_mit/training_config_opt_350.json: sequence 2048) and the cluster
topologies/workstations/sailor_mit_6x8gpu.yaml (network from Sailor's measured bandwidth profile).

``--network 10Gbps`` puts every server on that NIC instead (the guess a user without the profile
makes); ``--seq 1024`` and ``--global-batch 32`` give the example config's values
(workloads/examples/sailor_training_config_opt350.json: sequence 1024, global batch 32);
``--dtype``, ``--attention`` and ``--whole-p2p`` undo what ``heterosim import sailor`` writes for
Sailor's runtime (fp32, unfused attention, TP-partitioned pipeline sends). Prints per plan the
measured and predicted time and the error, then MAPE and Spearman (heterosim.validate.stats).
``--steps`` adds the mechanisms of :data:`STEPS` one at a time from the user's first guess and
prints every step; ``--profile-check`` times one micro-batch on one server (TP 1 and 8, fp32,
unfused attention) against Sailor's per-layer profile of these GPUs. Nothing is fitted.

plan_config_N6_D2.json carries exactly the measurements of plan_config_N3_D1.json (real,
red_grads, max_mem) with a different global batch: a copy in Sailor's repository, not a
measurement of that plan, so it is run but left out of the statistics (``--all`` keeps it).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from heterosim.config.experiment import parse_experiment  # noqa: E402
from heterosim.importers.experiment_file import PlanImport, import_plan  # noqa: E402
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


STEPS = (
    "before: 10 GbE, seq 1024, fp16, flash attention, whole-tensor p2p",
    "Sailor's training config: seq 2048",
    "Sailor's measured network: 1 GbE RTX 3090 server, 25 GbE others",
    "fp32 (Sailor's launch scripts: no --fp16/--bf16)",
    "unfused attention (no --use-flash-attn)",
    "TP-partitioned p2p (DeepSpeed PipelineEngine): the import as shipped",
)


@dataclass(frozen=True)
class Setup:
    """What a run changes against the import as shipped (None: keep the import's value)."""

    network: str | None = None
    seq: int | None = None
    global_batch: int | None = None
    dtype: str | None = None
    attention: str | None = None
    partitioned: bool | None = None


def step_setup(step: int) -> Setup:
    """Setup of cumulative step ``step`` of :data:`STEPS`."""
    return Setup(
        network="10Gbps" if step < 2 else None,
        seq=1024 if step < 1 else None,
        dtype="fp16" if step < 3 else None,
        attention="flash" if step < 4 else None,
        partitioned=False if step < 5 else None,
    )


def predict(plan: Path, setup: Setup, tmp: Path) -> float:
    """Predicted iteration time of one Sailor plan, in seconds (flow fidelity)."""
    cluster = _cluster(setup.network, tmp)
    options = PlanImport(
        training_config=str(_config(setup.seq, tmp)),
        cluster=str(cluster),
        gpu_map=GPU_MAP,
        global_batch=setup.global_batch,
        dtype=setup.dtype,
    )
    raw = yaml.safe_load(import_plan("sailor", str(plan), options, None).text)
    raw["cluster"] = str(cluster)
    raw["simulation"] = {"fidelity": "flow"}
    if setup.attention is not None:
        raw["training"]["attention"] = setup.attention
    if setup.partitioned is not None:
        raw["parallel"]["p2p_scatter_gather"] = setup.partitioned
    exp = parse_experiment(raw, str(plan), base_dir=ROOT)
    t, _, _ = iteration_time_s(exp)
    return t


# Sailor's per-layer profile of OPT-350 at micro-batch 2 (sailor/Planner/simulations/profiles_tmp.json,
# eth-easl/sailor commit cf2c8e3, ["OPT-350"][gpu]["2"][tp]): forward + backward of its 26 blocks
# summed, ms per micro-batch. Its "RTX-2080" is the 11 GiB RTX 2080 Ti.
SAILOR_PROFILE_MS = {
    ("rtx3090", 1): 824.4,
    ("rtx3090", 8): 1896.4,
    ("titan", 1): 1434.1,
    ("titan", 8): 776.2,
    ("rtx2080ti", 1): 1524.3,
    ("rtx2080ti", 8): 909.9,
}


def profile_check(tmp: Path) -> None:
    """One micro-batch of 2 on one server (TP 1 or 8) against Sailor's per-layer profile."""
    from heterosim.validate.predict import simulate_iteration_s

    config = json.loads(CONFIG.read_text())
    hosts = yaml.safe_load(CLUSTER.read_text())["host_types"]
    model = {
        "name": "OPT-350",
        "arch": "gpt",
        "hidden": config["hidden_size"],
        "layers": config["num_layers"],
        "heads": config["heads"],
        "vocab": config["vocab_size"],
        "seq": config["sequence_length"],
    }
    print(f"{'server':10} {'tp':>3} {'Sailor fwd+bwd ms':>17} {'HeteroSim ms':>12} {'error %':>8}")
    for (host, tp), sailor_ms in SAILOR_PROFILE_MS.items():
        host_type = dict(hosts[host], gpus=tp)
        if tp == 1:
            host_type.pop("pcie_switches", None)
            host_type.pop("sockets", None)
        raw = {
            "name": f"profile-{host}-tp{tp}",
            "model": model,
            "training": {"global_batch": 2, "micro_batch": 2, "dtype": "fp32", "attention": "unfused"},
            "parallel": {"tp": tp, "pp": 1, "dp": 1},
            "cluster": {"host_types": {host: host_type}, "hosts": [{"type": host, "count": 1}]},
            "simulation": {"fidelity": "flow", "memory_check": "warn"},
        }
        t, _ = simulate_iteration_s(parse_experiment(raw, "profile-check", base_dir=ROOT))
        print(f"{host:10} {tp:3d} {sailor_ms:17.1f} {t * 1e3:12.1f} {error_pct(t * 1e3, sailor_ms):+8.1f}")


def _stats(rows: list[tuple[float, float]]) -> str:
    preds, meas = [p for p, _ in rows], [m for _, m in rows]
    errors = [error_pct(p, m) for p, m in rows]
    return f"MAPE {mape(errors):.1f}%, Spearman {spearman(preds, meas):.3f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--network", help="every server's NIC speed instead of the measured profile")
    ap.add_argument("--seq", type=int, help="sequence length instead of Sailor's 2048")
    ap.add_argument("--global-batch", type=int, help="global batch instead of each plan's gbs")
    ap.add_argument("--dtype", help="training dtype instead of the import's (fp32 for Sailor)")
    ap.add_argument("--attention", help="training.attention instead of the import's (unfused)")
    ap.add_argument("--whole-p2p", action="store_true", help="every TP rank sends the whole tensor")
    ap.add_argument("--steps", action="store_true", help="run the mechanisms of STEPS one at a time")
    ap.add_argument(
        "--profile-check", action="store_true", help="one micro-batch per server against Sailor's profile"
    )
    ap.add_argument("--all", action="store_true", help="keep plan_config_N6_D2 in the statistics")
    ap.add_argument("--only", nargs="*", help="plan file stems to run")
    args = ap.parse_args()
    tmp = Path("/tmp") / "bench_sailor_mit"
    tmp.mkdir(exist_ok=True)
    if args.profile_check:
        profile_check(tmp)
        return
    plans = [p for p in sorted(PLANS.glob("plan_config_*.json")) if not args.only or p.stem in args.only]
    measured = {p.stem: float(json.loads(p.read_text())["real"]) for p in plans}
    counted = [p.stem for p in plans if args.all or p.stem not in COPIED]
    if args.steps:
        table = {p.stem: [predict(p, step_setup(i), tmp) for i in range(len(STEPS))] for p in plans}
        print(f"{'plan':18} {'measured':>8} " + " ".join(f"{i:>7}" for i in range(len(STEPS))))
        for stem, preds in table.items():
            mark = " (copy)" if stem in COPIED else ""
            print(f"{stem:18} {measured[stem]:8.2f} " + " ".join(f"{t:7.2f}" for t in preds) + mark)
        for i, name in enumerate(STEPS):
            print(f"step {i} {name}: {_stats([(table[s][i], measured[s]) for s in counted])}")
        return
    setup = Setup(
        args.network,
        args.seq,
        args.global_batch,
        args.dtype,
        args.attention,
        False if args.whole_p2p else None,
    )
    rows = []
    print(f"{'plan':20} {'measured s':>10} {'predicted s':>11} {'error %':>8} {'wall s':>7}")
    for plan in plans:
        start = time.perf_counter()
        t = predict(plan, setup, tmp)
        wall = time.perf_counter() - start
        note = "  (copied measurement: not counted)" if plan.stem in COPIED else ""
        err = error_pct(t, measured[plan.stem])
        print(
            f"{plan.stem:20} {measured[plan.stem]:10.2f} {t:11.2f} {err:+8.1f} {wall:7.1f}{note}", flush=True
        )
        if plan.stem in counted:
            rows.append((t, measured[plan.stem]))
    if len(rows) >= 2:
        print(f"{len(rows)} plans: {_stats(rows)}")


if __name__ == "__main__":
    main()
