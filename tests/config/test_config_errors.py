"""Malformed experiment and cluster files: one-line error naming file and key, exit status 2."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from heterosim.cli import main

CLUSTER = {
    "name": "c",
    "host_types": {"h100": {"gpu": "H100-SXM", "gpus": 8, "nics": 8, "nic_speed": "400Gbps"}},
    "hosts": [{"type": "h100", "count": 2}],
}
EXPERIMENT = {
    "model": "gpt3-6.7b",
    "training": {"global_batch": 32, "micro_batch": 1},
    "parallel": {"tp": 4, "pp": 2, "dp": 2},
    "cluster": "cluster.yaml",
}


def _set(data: dict, dotted: str, value) -> dict:
    node = data
    keys = dotted.split(".")
    for key in keys[:-1]:
        node = node[key] if not key.isdigit() else node[int(key)]
    last = keys[-1]
    if value is _DELETE:
        del node[last]
    elif last.isdigit():
        node[int(last)] = value
    else:
        node[last] = value
    return data


_DELETE = object()

# (case id, file the change applies to, dotted key, new value, fragments the message must hold)
CASES = [
    (
        "unknown-gpu",
        "cluster",
        "host_types.h100.gpu",
        "H10",
        ["cluster.yaml", "host_types.h100.gpu", "unknown GPU 'H10'", "H100-SXM"],
    ),
    ("grid-vs-cluster", "experiment", "parallel.dp", 4, ["exp.yaml", "parallel", "tp*pp*dp", "16 GPUs"]),
    ("unknown-model", "experiment", "model", "gpt5", ["exp.yaml", "model", "unknown model 'gpt5'"]),
    (
        "missing-global-batch",
        "experiment",
        "training.global_batch",
        _DELETE,
        ["training.global_batch", "missing required key"],
    ),
    (
        "batch-not-divisible",
        "experiment",
        "training.global_batch",
        33,
        ["training.global_batch", "not divisible by micro_batch*dp"],
    ),
    (
        "bad-rate-unit",
        "cluster",
        "host_types.h100.nic_speed",
        "400Gbs",
        ["cluster.yaml", "host_types.h100.nic_speed"],
    ),
    ("typo-key", "experiment", "parallel.pipline", 2, ["exp.yaml", "pipline"]),
    (
        "sample-interval-without-unit",
        "experiment",
        "simulation",
        {"sample_interval": 10},
        ["exp.yaml", "simulation.sample_interval", "needs a unit"],
    ),
    (
        "unknown-attention",
        "experiment",
        "training.attention",
        "sparse",
        ["training.attention", "flash, unfused"],
    ),
    (
        "unknown-kernels",
        "experiment",
        "training.kernels",
        "jit",
        ["exp.yaml", "training.kernels", "fused, eager"],
    ),
    (
        "nvlink-efficiency-above-one",
        "cluster",
        "host_types.h100.nvlink_efficiency",
        1.5,
        ["cluster.yaml", "host_types.h100.nvlink_efficiency", "<= 1.0"],
    ),
    ("unknown-schedule", "experiment", "parallel.schedule", "zigzag", ["parallel.schedule", "zigzag"]),
    (
        "heads-vs-tp",
        "experiment",
        "model",
        {"arch": "gpt", "hidden": 3072, "layers": 8, "heads": 6},
        ["parallel.tp", "model heads 6 not divisible by tp 4"],
    ),
    (
        "unknown-host-type",
        "cluster",
        "hosts.0.type",
        "h200",
        ["cluster.yaml", "hosts[0].type", "unknown host type 'h200'"],
    ),
    ("negative-gpus", "cluster", "host_types.h100.gpus", -8, ["host_types.h100.gpus"]),
    (
        "interleaved-without-vpp",
        "experiment",
        "parallel.schedule",
        "interleaved",
        ["parallel.vpp", "vpp >= 2"],
    ),
    ("mtu-range", "experiment", "network", {"mtu": "64KiB"}, ["network.mtu", "256B..9KiB"]),
    ("ep-without-moe", "experiment", "parallel.ep", 2, ["parallel.ep", "moe"]),
    ("missing-cluster-file", "experiment", "cluster", "nowhere.yaml", ["nowhere.yaml", "file not found"]),
    ("bad-fabric-kind", "cluster", "fabric", {"kind": "torus"}, ["fabric.kind", "torus"]),
    (
        "partition-length",
        "experiment",
        "parallel.partition",
        [16, 8, 8],
        ["exp.yaml", "parallel.partition", "3 stages listed but pp*vpp = 2"],
    ),
    (
        "partition-sum",
        "experiment",
        "parallel.partition",
        [20, 8],
        ["parallel.partition", "layers sum to 28 but the model has 32"],
    ),
    (
        "unknown-recompute",
        "experiment",
        "training.recompute",
        "selective_ops",
        ["exp.yaml", "training.recompute", "none, selective, selective_op, full", "'selective_ops'"],
    ),
    (
        "partition-empty-stage",
        "experiment",
        "parallel.partition",
        [32, 0],
        ["parallel.partition", "at least one layer"],
    ),
    (
        "partition-not-ints",
        "experiment",
        "parallel.partition",
        [16.5, 15.5],
        ["parallel.partition", "list of layer counts"],
    ),
    (
        "partition-unknown-mode",
        "experiment",
        "parallel.partition",
        "greedy",
        ["parallel.partition", "greedy"],
    ),
    (
        "grad-reduce-dtype",
        "experiment",
        "training.grad_reduce_dtype",
        "fp64",
        ["training.grad_reduce_dtype", "fp64"],
    ),
    (
        "attention-kernel",
        "experiment",
        "training.attention_kernel",
        "xformers",
        ["training.attention_kernel", "flash-attention-triton", "xformers"],
    ),
    (
        "attention-kernel-unfused",
        "experiment",
        "training",
        {"global_batch": 32, "attention": "unfused", "attention_kernel": "flash-attention-2"},
        ["training.attention_kernel", "fused attention kernel", "unfused"],
    ),
    ("grad-sync", "experiment", "parallel.grad_sync", "never", ["parallel.grad_sync", "never"]),
    (
        "grad-sync-with-zero2",
        "experiment",
        "parallel",
        {"tp": 4, "pp": 2, "dp": 2, "zero": 2, "grad_sync": "after_backward"},
        ["parallel.grad_sync", "zero 0 or 1"],
    ),
]


def _run(tmp_path: Path, experiment: dict | str, cluster: dict | str, capsys) -> tuple[int, str]:
    for name, content in (("exp.yaml", experiment), ("cluster.yaml", cluster)):
        text = content if isinstance(content, str) else yaml.safe_dump(content)
        (tmp_path / name).write_text(text)
    code = main(["workload", str(tmp_path / "exp.yaml"), "--out", str(tmp_path / "out"), "--summary-only"])
    return code, capsys.readouterr().err


def test_the_valid_base_files_work(tmp_path: Path, capsys) -> None:
    code, err = _run(tmp_path, EXPERIMENT, CLUSTER, capsys)
    assert code == 0, err


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_malformed_file_gives_one_line_error(case, tmp_path: Path, capsys) -> None:
    _, which, key, value, fragments = case
    experiment = yaml.safe_load(yaml.safe_dump(EXPERIMENT))
    cluster = yaml.safe_load(yaml.safe_dump(CLUSTER))
    _set(experiment if which == "experiment" else cluster, key, value)
    code, err = _run(tmp_path, experiment, cluster, capsys)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("heterosim workload: error: ")
    assert "Traceback" not in err
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "text,fragment",
    [("model: [unclosed\n", "invalid YAML"), ("- just\n- a list\n", "expected a mapping at the top level")],
)
def test_unparseable_experiment(text: str, fragment: str, tmp_path: Path, capsys) -> None:
    code, err = _run(tmp_path, text, CLUSTER, capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and fragment in err
