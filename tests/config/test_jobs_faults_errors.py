"""Bad job and fault specs are one-line errors with exit status 2, and nothing is written."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from heterosim.cli import main

CLUSTER = {
    "name": "four-hosts-two-leaves",
    "host_types": {
        "h100": {"gpu": "H100-SXM", "gpus": 2, "fabric": "nvswitch", "nics": 1, "nic_speed": "100Gbps"}
    },
    "hosts": [{"type": "h100", "count": 4}],
    "fabric": {
        "kind": "fat-tree",
        "link_delay": "1us",
        "oversubscription": 1,
        "hosts_per_leaf": 2,
        "spine_speed": "100Gbps",
    },
}
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
    "parallel": {"tp": 2, "pp": 1, "dp": 2},
}
JOBS = {
    "name": "two",
    "cluster": CLUSTER,
    "jobs": [{"gpus": "0-3", "experiment": JOB}, {"gpus": "4-7", "experiment": JOB}],
    "simulation": {"fidelity": "flow"},
}
ONE = {
    **copy.deepcopy(JOB),
    "name": "one",
    "cluster": CLUSTER,
    "simulation": {"fidelity": "flow"},
    "parallel": {"tp": 2, "pp": 1, "dp": 4},
}


def fails(tmp_path: Path, capsys, data: dict, *expected: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    out = tmp_path / "out"
    code = main(["run", str(path), "--out", str(out), "--quiet", "--no-plots"])
    err = capsys.readouterr().err.strip().splitlines()
    err = [line for line in err if not line.startswith(("heterosim: note:", "heterosim: warning:"))]
    assert code == 2, err
    assert len(err) == 1, err
    for text in expected:
        assert text in err[0], err[0]
    assert not out.exists()


def with_jobs(*gpus: str, parallel: dict | None = None) -> dict:
    data = copy.deepcopy(JOBS)
    data["jobs"] = [{"gpus": g, "experiment": copy.deepcopy(JOB)} for g in gpus]
    if parallel:
        data["jobs"][0]["experiment"]["parallel"] = parallel
    return data


def with_faults(*faults: dict) -> dict:
    return {**copy.deepcopy(ONE), "faults": list(faults)}


def test_overlapping_gpus(tmp_path, capsys):
    fails(tmp_path, capsys, with_jobs("0-3", "2-5"), "jobs[1]", "GPU 2 is already used by jobs[0]")


def test_gpu_out_of_range(tmp_path, capsys):
    fails(tmp_path, capsys, with_jobs("0-3", "6-9"), "jobs[1]: gpus", "GPU 8 does not exist")


def test_job_parallelism_must_match_its_gpus(tmp_path, capsys):
    fails(
        tmp_path,
        capsys,
        with_jobs("0-3", "4-7", parallel={"tp": 2, "pp": 1, "dp": 4}),
        "tp*pp*dp = 2*1*4 = 8",
        "4 GPUs",
    )


def test_unknown_link(tmp_path, capsys):
    fails(
        tmp_path,
        capsys,
        with_faults({"at": "0ms", "link": "h9.nic0-leaf0", "down": "1ms"}),
        "faults[0]: link",
        "no node 'h9.nic0'",
    )


def test_link_that_does_not_exist(tmp_path, capsys):
    fails(
        tmp_path,
        capsys,
        with_faults({"at": "0ms", "link": "h0.nic0-leaf1", "rate": "10Gbps"}),
        "faults[0]: link",
        "does not exist",
    )


def test_host_links_cannot_fail(tmp_path, capsys):
    fails(
        tmp_path,
        capsys,
        with_faults({"at": "0ms", "link": "h0.gpu0->h0.nvswitch", "loss": 0.01}),
        "faults[0]",
        "fabric links",
    )


def test_fault_after_the_run(tmp_path, capsys):
    fails(
        tmp_path,
        capsys,
        with_faults({"at": "10s", "link": "leaf0-spine0", "down": "1ms"}),
        "faults[0]: at",
        "after the end of the run",
    )


def test_straggler_gpu_must_exist(tmp_path, capsys):
    fails(
        tmp_path,
        capsys,
        with_faults({"at": "0ms", "gpu": 8, "slowdown": 2}),
        "faults[0]: gpu",
        "GPU 8 does not exist",
    )


def test_a_fault_has_one_kind(tmp_path, capsys):
    fails(
        tmp_path,
        capsys,
        with_faults({"at": "0ms", "link": "leaf0-spine0", "down": "1ms", "rate": "1Gbps"}),
        "faults[0]",
        "exactly one of",
    )


def test_until_before_at(tmp_path, capsys):
    fails(
        tmp_path,
        capsys,
        with_faults({"at": "2ms", "gpu": 1, "slowdown": 2, "until": "1ms"}),
        "faults[0].until",
        "after at",
    )


@pytest.mark.ns3
def test_permanent_partition_names_the_unreachable_host(tmp_path, capsys):
    fails(
        tmp_path,
        capsys,
        with_faults({"at": "1ms", "link": "h2.nic0-leaf1", "down": True}),
        "partitions the fabric",
        "unreachable hosts 2",
    )


@pytest.mark.ns3
def test_overlapping_faults_on_one_link(tmp_path, capsys):
    fails(
        tmp_path,
        capsys,
        with_faults(
            {"at": "0ms", "link": "leaf0-spine0", "down": "2ms"},
            {"at": "1ms", "link": "spine0-leaf0", "down": "2ms"},
        ),
        "faults[1]",
        "overlaps faults[0]",
    )


@pytest.mark.ns3
def test_two_lasting_outages_that_partition_together(tmp_path, capsys):
    fails(
        tmp_path,
        capsys,
        with_faults(
            {"at": "0ms", "link": "leaf0-spine0", "down": True},
            {"at": "0ms", "link": "leaf0-spine1", "down": True},
        ),
        "faults[1]",
        "partitions the fabric: unreachable hosts",
    )


def test_degraded_rate_above_the_line_rate(tmp_path, capsys):
    fails(
        tmp_path,
        capsys,
        with_faults({"at": "0ms", "link": "h0.nic0-leaf0", "rate": "400Gbps"}),
        "bad.yaml: faults[0]: rate:",
        "not below the line rate of link h0.nic0-leaf0",
    )


@pytest.mark.parametrize("factor, product", [(0.01, "0.0001"), (1000, "1e+06")])
def test_overlapping_slowdowns_must_multiply_to_a_physical_factor(tmp_path, capsys, factor, product):
    fails(
        tmp_path,
        capsys,
        with_faults({"at": "0ms", "gpu": 0, "slowdown": factor}, {"at": "0ms", "gpu": 0, "slowdown": factor}),
        "bad.yaml: faults[1]: slowdown:",
        f"multiply to {product}",
    )


def _warnings(tmp_path: Path, capsys, data: dict) -> list[str]:
    path = tmp_path / "ok.yaml"
    path.write_text(yaml.safe_dump(data))
    code = main(["run", str(path), "--out", str(tmp_path / "out"), "--quiet", "--no-plots"])
    err = capsys.readouterr().err
    assert code == 0, err
    return [line for line in err.splitlines() if line.startswith("heterosim: warning:")]


def test_a_faster_straggler_is_warned_about(tmp_path, capsys):
    warnings = _warnings(tmp_path, capsys, with_faults({"at": "0ms", "gpu": 0, "slowdown": 0.5}))
    assert len(warnings) == 1
    assert "ok.yaml: faults[0]: slowdown: 0.5 is below 1: GPU 0 runs 2x faster" in warnings[0]


def test_a_fault_on_a_link_no_flow_crosses_is_warned_about(tmp_path, capsys):
    """Each job stays under its own leaf (hosts 0-1, 2-3): no flow crosses a spine link, and
    every host's NIC link carries its job's data-parallel traffic."""
    data = copy.deepcopy(JOBS)
    data["faults"] = [
        {"at": "0ms", "link": "leaf0-spine0", "rate": "10Gbps"},
        {"at": "0ms", "link": "h0.nic0-leaf0", "rate": "50Gbps"},
    ]
    warnings = _warnings(tmp_path, capsys, data)
    assert len(warnings) == 1
    assert "faults[0]: link leaf0-spine0: no flow of this run can cross this link" in warnings[0]


@pytest.mark.parametrize("where, key", [("framework", "name"), ("cluster.host_types.h100", "transport")])
def test_null_for_a_closed_set_is_refused(tmp_path, capsys, where, key):
    data = copy.deepcopy(ONE)
    section = data
    for part in where.split("."):
        section = section.setdefault(part, {})
    section[key] = None
    shown = where.removeprefix("cluster.")
    fails(tmp_path, capsys, data, f"{shown}.{key}: expected one of", "got null")


def test_lists_longer_than_the_cluster_are_refused_before_they_are_read(tmp_path, capsys):
    data = with_jobs("0-3", "4-7")
    data["jobs"][0]["gpus"] = list(range(500_000))
    fails(tmp_path, capsys, data, "bad.yaml: jobs[0]: gpus: 500,000 GPU ids; the cluster has 8 GPUs")
    data = with_jobs("0-3", "4-7")
    data["jobs"][0]["gpus"] = ",".join(["0"] * 100)
    fails(tmp_path, capsys, data, "bad.yaml: jobs[0]: gpus: 100 GPU ids or ranges")
    data = with_jobs("0-3", "4-7")
    data["jobs"] = data["jobs"] * 5
    fails(tmp_path, capsys, data, "bad.yaml: jobs: 10 jobs; the cluster has 8 GPUs")
    fails(
        tmp_path,
        capsys,
        with_faults(*[{"at": "0ms", "gpu": 0, "slowdown": 2}] * 1001),
        "bad.yaml: faults: 1,001 entries; at most 1,000",
    )


def test_a_job_experiment_that_is_a_directory(tmp_path, capsys):
    data = with_jobs("0-3", "4-7")
    data["jobs"][1]["experiment"] = str(tmp_path)
    fails(tmp_path, capsys, data, "bad.yaml: jobs[1].experiment:", "is a directory")


def test_stages_and_custom_gpus_are_bounded(tmp_path, capsys):
    data = copy.deepcopy(ONE)
    data["parallel"] = {"stages": None}
    fails(tmp_path, capsys, data, "bad.yaml: parallel.stages: expected a non-empty list", "got null")
    data["parallel"] = {"stages": [{"layers": 1, "replicas": [{"gpu": "H100", "tp": 1}]}] * 10_001}
    fails(tmp_path, capsys, data, "bad.yaml: parallel.stages: 10,001 stages; at most 10,000")
    data = copy.deepcopy(ONE)
    data["cluster"]["gpus"] = {f"G{i}": {"peak_tflops": {"bf16": 100}} for i in range(1025)}
    fails(tmp_path, capsys, data, "bad.yaml: cluster: gpus: 1,025 GPU entries; at most 1,024")


def test_per_job_keys_can_be_set_by_index(tmp_path):
    from heterosim.config.jobs import load_any_experiment

    path = tmp_path / "jobs.yaml"
    path.write_text(yaml.safe_dump(JOBS))
    experiment = load_any_experiment(path, ["jobs.1.start=2ms", "jobs.0.experiment.training.global_batch=8"])
    assert experiment.jobs[1].start_ns == 2_000_000
    assert experiment.jobs[0].experiment.training.global_batch == 8


@pytest.mark.parametrize(
    "item, fragment",
    [("jobs.5.start=1ms", "5: expected an index 0..1"), ("jobs.x.start=1ms", "x: expected an index 0..1")],
)
def test_a_job_index_out_of_range_is_one_line(tmp_path, capsys, item, fragment):
    path = tmp_path / "jobs.yaml"
    path.write_text(yaml.safe_dump(JOBS))
    out = tmp_path / "out"
    assert main(["run", str(path), "--out", str(out), "--quiet", "--set", item]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and fragment in err[0], err
    assert not out.exists()
