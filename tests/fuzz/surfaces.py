"""Fuzz cases for the newer input surfaces: several jobs, faults, ``parallel.stages``, custom
``gpus:``, socket hosts and ``SocketTransport::`` attributes, ``framework:``, ``--until`` on
jobs, ``import sailor|amp``, ``plan --resume`` state files, sweep metrics, and the fabric keys
``network.trimming``, ``network.cc: rccc``, load balancing at flow fidelity and
``simulation.replicas`` / ``fold_timing``.

Each generator takes the :class:`corpus.Generator` (its seeded ``rng``, base documents and
``_case``) and returns one :class:`corpus.Case` that breaks one thing.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
PLANS = REPO / "tests" / "data" / "plans"
RUN = ["run", "experiment.yaml", "--out", "out", "--no-plots", "--quiet"]
JOB = {
    "model": {
        "arch": "gpt",
        "hidden": 256,
        "layers": 2,
        "heads": 4,
        "ffn": 1024,
        "vocab": 4096,
        "seq": 256,
        "name": "gpt-micro",
    },
    "training": {"global_batch": 4, "micro_batch": 1, "seq_len": 256},
    "parallel": {"tp": 4, "pp": 1, "dp": 2},
}
JOBS = {
    "name": "two",
    "cluster": "cluster.yaml",
    "jobs": [
        {"name": "a", "gpus": "0-7", "experiment": JOB},
        {"name": "b", "gpus": "8-15", "start": "1ms", "experiment": JOB},
    ],
    "simulation": {"fidelity": "flow", "seed": 1},
}


def _yaml(data: Any) -> str:
    return yaml.safe_dump(data, sort_keys=False)


def _jobs_doc() -> dict[str, Any]:
    return copy.deepcopy(JOBS)


def jobs_case(gen: Any) -> Any:
    doc = _jobs_doc()
    big = list(range(gen.rng.choice([17, 5000, 500_000])))
    change = gen.rng.choice(
        [
            ("gpus-list", lambda d: d["jobs"][0].__setitem__("gpus", big)),
            ("gpus-commas", lambda d: d["jobs"][0].__setitem__("gpus", ",".join(["0"] * 200))),
            ("gpus-dup", lambda d: d["jobs"][0].__setitem__("gpus", [0, 0, 1, 2, 3, 4, 5, 6])),
            ("many-jobs", lambda d: d.__setitem__("jobs", d["jobs"] * 20)),
            ("dir", lambda d: d["jobs"][0].__setitem__("experiment", "sub")),
            ("job-null", lambda d: d["jobs"].__setitem__(0, None)),
            ("start-neg", lambda d: d["jobs"][1].__setitem__("start", "-1ms")),
            ("start-nan", lambda d: d["jobs"][1].__setitem__("start", "nanms")),
            ("exp-list", lambda d: d["jobs"][0].__setitem__("experiment", [1, 2])),
            ("tp-mismatch", lambda d: d["jobs"][0]["experiment"]["parallel"].__setitem__("tp", 3)),
            ("stages-null", lambda d: d["jobs"][0]["experiment"]["parallel"].__setitem__("stages", None)),
            (
                "faults-many",
                lambda d: d.__setitem__("faults", [{"at": "0ms", "gpu": 0, "slowdown": 2}] * 1001),
            ),
        ]
    )
    change[1](doc)
    return gen._case(f"jobs-{change[0]}", RUN, {"experiment.yaml": _yaml(doc)}, folders=("sub",))


def until_jobs_case(gen: Any) -> Any:
    """Valid: a jobs run stopped before, between or after the jobs start."""
    until = gen.rng.choice(["0.1ms", "0.9ms", "1.2ms", "50ms"])
    return gen._case(
        f"jobs-until-{until}", [*RUN, "--until", until], {"experiment.yaml": _yaml(_jobs_doc())}, strict=False
    )


FAULTS = [
    {"at": "0ms", "link": "h0.nic0-leaf0", "rate": "800Gbps"},
    {"at": "0ms", "link": "h0.nic0-leaf0", "rate": "100Tbps"},
    {"at": "0ms", "link": "h0.nic0-leaf0", "rate": "0bps"},
    {"at": "0ms", "link": "h0.nic0-leaf0", "loss": 0.9},
    {"at": "0ms", "link": "h0.nic0-leaf0", "down": False},
    {"at": "0ms", "gpu": 0, "slowdown": 0.001},
    {"at": "0ms", "gpu": 0, "slowdown": 1e9},
    {"at": "0ms", "gpu": "zero", "slowdown": 2},
    {"at": "0ms", "gpu": 0, "slowdown": 2, "until": "0ms"},
    {"at": "0ms", "gpu": 0, "slowdown": 2, "link": "h0.nic0-leaf0"},
]


def faults_case(gen: Any) -> Any:
    doc = copy.deepcopy(gen.docs["experiment.yaml"])
    pick = gen.rng.randrange(len(FAULTS) + 2)
    if pick == len(FAULTS):  # overlapping stragglers whose product leaves the physical range
        factor = gen.rng.choice([0.01, 0.05, 1000, 500])
        doc["faults"] = [{"at": "0ms", "gpu": 0, "slowdown": factor}] * 2
    elif pick == len(FAULTS) + 1:  # valid, warned about: a faster "straggler"
        doc["faults"] = [{"at": "0ms", "gpu": 1, "slowdown": 0.5}]
        return gen._case("faults-faster", RUN, {"experiment.yaml": _yaml(doc)}, strict=False)
    else:
        doc["faults"] = [FAULTS[pick]]
    return gen._case(f"faults-{pick}", RUN, {"experiment.yaml": _yaml(doc)})


SOCKET_VALUES = [
    ("TcpCongestionControl", "ns3::TcpBogus"),
    ("TcpCongestionControl", "ns3::Node"),
    ("TcpCongestionControl", ""),
    ("TcpCongestionControl", "$(rm -rf /)"),
    ("HostQueueDisc", "ns3::Nope"),
    ("HostQueueDisc", "ns3::TcpCubic"),
    ("IpMtu", 10),
    ("IpMtu", -1500),
    ("IpMtu", "nan"),
    ("TcpInitialCwnd", 0),
    ("TcpInitialCwnd", [1, 2]),
    ("TcpInitialCwnd", {"a": 1}),
    ("TcpSndBufSize", "lots"),
    ("TcpDelAckTimeout", "1s"),
    ("TcpDelAckTimeout", "soon"),
    ("NoSuchAttribute", 1),
]


def attributes_case(gen: Any) -> Any:
    doc = copy.deepcopy(gen.docs["experiment.yaml"])
    name, value = gen.rng.choice(SOCKET_VALUES)
    doc.setdefault("network", {})["attributes"] = {f"SocketTransport::{name}": value}
    doc["simulation"]["fidelity"] = gen.rng.choice(["flow", "packet"])
    return gen._case(f"socket-{name}", [*RUN, "--until", "0.2ms"], {"experiment.yaml": _yaml(doc)})


def closed_set_case(gen: Any) -> Any:
    """null, or a value outside its registry, for a closed set of names."""
    doc = copy.deepcopy(gen.docs["experiment.yaml"])
    cluster = copy.deepcopy(gen.docs["cluster.yaml"])
    which = gen.rng.choice(["framework", "transport", "gpus", "stages", "overhead"])
    if which == "framework":
        doc["framework"] = {"name": gen.rng.choice([None, "jax", 3, ["megatron"]])}
    elif which == "transport":
        next(iter(cluster["host_types"].values()))["transport"] = gen.rng.choice([None, "tcp", 1])
    elif which == "gpus":
        count = gen.rng.choice([1025, 100_000])
        cluster["gpus"] = {f"G{i}": {"peak_tflops": {"bf16": 100}} for i in range(count)}
    elif which == "stages":
        doc["parallel"] = {"stages": gen.rng.choice([None, [], "two", [{"layers": 1}] * 10_001])}
    else:
        key = gen.rng.choice(["host_op_overhead", "collective_overhead"])
        doc["framework"] = {key: gen.rng.choice(["1h", "3600s", "1001ms", {"H100": "3600s"}])}
    files = {"experiment.yaml": _yaml(doc), "cluster.yaml": _yaml(cluster)}
    return gen._case(f"closed-{which}", RUN, files)


SAILOR = ["import", "sailor", "plan.json", "--training-config", "config.json", "--cluster", "ws.yaml"]
AMP = ["import", "amp", "partition.json", "--tp", "2", "--model", "llama-7b", "--cluster", "amp.yaml"]


def _plan_files() -> dict[str, str | bytes]:
    return {
        "plan.json": (PLANS / "sailor_plan_mixed.json").read_text(),
        "config.json": (PLANS / "sailor_training_config.json").read_text(),
        "ws.yaml": (PLANS / "workstations.yaml").read_text(),
        "partition.json": (PLANS / "amp_partition.json").read_text(),
        "rank_map.json": (PLANS / "amp_rank_map.json").read_text(),
        "amp.yaml": (PLANS / "amp_cluster.yaml").read_text(),
    }


def import_case(gen: Any) -> Any:
    files = _plan_files()
    plan = json.loads(str(files["plan.json"]))
    argv = [*SAILOR, "--out", "out/e.yaml"]
    kind = gen.rng.choice(["option", "gbs", "nested", "rank", "bounds", "last"])
    if kind == "option":
        argv += [
            gen.rng.choice(["--micro-batch", "--global-batch", "--seq-len"]),
            gen.rng.choice(["0", "-1"]),
        ]
    elif kind == "gbs":
        plan["gbs"] = 8
        digits = "9" * gen.rng.choice([40, 5000])  # JSON text: Python cannot print such an int
        files["plan.json"] = json.dumps(plan).replace('"gbs": 8', f'"gbs": {digits}')
    elif kind == "nested":
        files["plan.json"] = "[" * 50_000 + "]" * 50_000
    else:
        argv = [*AMP, "--global-batch", "8", "--rank-map", "rank_map.json", "--out", "out/e.yaml"]
        if kind == "rank":
            files["rank_map.json"] = json.dumps(
                {"0": [gen.rng.choice(["x", None, [4], -1]), 5, 6, 7], "1": [0, 1, 2, 3]}
            )
        elif kind == "bounds":
            files["partition.json"] = json.dumps(list(range(100_001)))
        else:
            files["partition.json"] = json.dumps([0, 5, 10**12])
    return gen._case(f"import-{kind}", argv, files)


def resume_case(gen: Any) -> Any:
    """plan --resume over a damaged state folder (the folder is the user's: it must survive)."""
    manifest = gen.rng.choice([b"\x00\xff", b"[1]", b'{"settings": [1]}', b'{"experiment": 5}', b"{"])
    files: dict[str, str | bytes] = {
        "out/search.json": manifest,
        "out/results.jsonl": '{"id": "x", "status": "ok"}\n',
    }
    argv = ["plan", "experiment.yaml", "--out", "out", "--resume", "--quiet", "--max-candidates", "2"]
    return gen._case(
        "plan-resume", argv, files, out=None, keep={"out/results.jsonl": str(files["out/results.jsonl"])}
    )


def sweep_metric_case(gen: Any) -> Any:
    doc = copy.deepcopy(gen.docs["sweep.yaml"])
    doc["metrics"] = [gen.rng.choice(["jobs..x", ".", "breakdown.", "x" * 300, "jobs.0."])]
    argv = ["sweep", "sweep.yaml", "--out", "out", "--no-plots", "--quiet", "--workers", "1"]
    return gen._case("sweep-metric", argv, {"sweep.yaml": _yaml(doc)})


def sweep_jobs_case(gen: Any) -> Any:
    """A sweep over a several-jobs file whose grid key no variant can take (exit 2, not 1)."""
    keys = ["training.micro_batch", "jobs.2.start", "jobs.x.start", "jobs.0.bogus", "jobs.0.name.x"]
    key = gen.rng.choice([*keys, "network.bogus"])
    doc = {"name": "fuzz-jobs", "experiment": "jobs.yaml", "fidelity": "flow", "grid": {key: [1, 2]}}
    argv = ["sweep", "sweep.yaml", "--out", "out", "--no-plots", "--quiet", "--workers", "1"]
    return gen._case("sweep-jobs-grid", argv, {"sweep.yaml": _yaml(doc), "jobs.yaml": _yaml(_jobs_doc())})


BUSBW_CASE = {
    "id": "busbw",
    "group": "nccl-tests",
    "kind": "collective_busbw",
    "source": "fuzz",
    "measured": {"busbw_GBps": 100.0},
    "compare": {"quantity": "busbw_GBps"},
    "cluster": {
        "name": "h100x8",
        "host_types": {"h": {"gpu": "H100-SXM", "gpus": 8, "nics": 8, "nic_speed": "400Gbps"}},
        "hosts": [{"type": "h", "count": 1}],
    },
    "collective": {"op": "allreduce", "size": "16MiB", "ranks": 8, "algorithm": "ring"},
}


def validate_case(gen: Any) -> Any:
    if gen.rng.random() < 0.5:
        value = gen.rng.choice(["inf", "nan", "-inf", "1e400"])
        argv = ["validate", "cases.yaml", "--max-gpus", "1", "--out", "out", "--fail-above", value]
        return gen._case("validate-fail-above", argv)
    case = copy.deepcopy(BUSBW_CASE)
    key, value = gen.rng.choice(
        [("op", "allreduse"), ("ranks", 64), ("size", "2TiB"), ("algorithm", "bogus"), ("count", -1)]
    )
    if key == "count":
        case["cluster"]["hosts"][0]["count"] = value
    else:
        case["collective"][key] = value
    argv = ["validate", "cases.yaml", "--out", "out", "--quiet"]
    return gen._case(f"validate-busbw-{key}", argv, {"cases.yaml": _yaml({"cases": [case]})})


def fabric_case(gen: Any) -> Any:
    """A fabric or replica setting that is wrong, or cannot run with the rest (each must exit 2)."""
    doc = copy.deepcopy(gen.docs["experiment.yaml"])
    network, simulation = doc.setdefault("network", {}), doc.setdefault("simulation", {})
    uet = {"transport": "uet", "pfc": False, "cc": "nscc"}
    memo = {"fidelity": "packet", "packet_acceleration": "fast+memo"}
    which, (net, sim) = gen.rng.choice(
        [
            ("trimming-value", ({"trimming": gen.rng.choice(["maybe", 2, None, [True]])}, {})),
            ("trimming-roce", ({"trimming": True, "transport": "roce", "pfc": False}, {})),
            ("trimming-flow", ({**uet, "trimming": True}, {"fidelity": "flow"})),
            ("trimming-memo", ({**uet, "trimming": True}, memo)),
            ("rccc-roce", ({"cc": "rccc"}, {})),
            ("rccc-memo", ({**uet, "cc": "rccc"}, memo)),
            ("adaptive-flow", ({"load_balancing": "adaptive", "transport": "irn"}, {"fidelity": "flow"})),
            ("flowlet-flow", ({"load_balancing": "flowlet", "transport": "irn"}, {"fidelity": "flow"})),
            (
                "spray-go-back-n-flow",
                ({"load_balancing": "spray", "accept_reordering": True}, {"fidelity": "flow"}),
            ),
            ("replicas-value", ({}, {"replicas": gen.rng.choice(["some", 3, None, ["fold"], "fold fold"])})),
            ("replicas-fold-mixed", ({}, {"replicas": "fold"})),
            ("fold-timing-value", ({}, {"fold_timing": gen.rng.choice(["some", 3, None, ["all"]])})),
            ("fold-timing-without-fold", ({}, {"fold_timing": "representative"})),
        ]
    )
    network.update(net)
    simulation.update(sim)
    return gen._case(f"fabric-{which}", RUN, {"experiment.yaml": _yaml(doc)})


GENERATORS = (
    fabric_case,
    jobs_case,
    until_jobs_case,
    faults_case,
    attributes_case,
    closed_set_case,
    import_case,
    resume_case,
    sweep_metric_case,
    sweep_jobs_case,
    validate_case,
)


def surface_case(gen: Any) -> Any:
    """One case from one of the generators above, chosen by the generator's seed."""
    return gen.rng.choice(GENERATORS)(gen)
