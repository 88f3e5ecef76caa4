"""Bring your own workload: `heterosim run --traces` and `heterosim import aicb`, end to end."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import yaml

from heterosim.cli import main

DATA = Path(__file__).resolve().parents[1] / "data"
INTEROP = Path(__file__).resolve().parents[1] / "workload" / "data" / "chakra_interop"
RING = INTEROP / "custom_ring_allreduce_8npus_1MB"
ALLREDUCE = INTEROP / "all_reduce_4npus_1MB"
CLUSTER8 = DATA / "byo" / "cluster_8gpu.yaml"
CLUSTER4 = DATA / "byo" / "cluster_4gpu.yaml"
MIXED16 = Path(__file__).resolve().parents[2] / "topologies" / "mixed_16gpu.yaml"
TINY = DATA / "tiny_experiment.yaml"
AICB = DATA / "aicb_interop"
MIB = 1 << 20
CONTRACT = ("iteration_time_s", "breakdown", "ranks", "network", "sim")
BREAKDOWN = ("compute_s", "exposed_comm_s", "bubble_s", "intra_host_comm_s", "inter_host_comm_s")
NETWORK = ("flows", "bytes", "drops", "retransmits", "pfc_pause_frames", "ecn_marks", "cnps")


def _run(out: Path, *args: str) -> dict:
    assert main(["run", "--out", str(out), "--quiet", "--no-plots", *args]) == 0
    return json.loads((out / "results.json").read_text())


def _contract(results: dict) -> None:
    for key in CONTRACT:
        assert key in results
    assert set(BREAKDOWN) <= set(results["breakdown"]) and set(NETWORK) <= set(results["network"])
    assert results["iteration_time_s"] > 0 and results["sim"]["fidelity"] == "flow"
    b = results["breakdown"]
    assert b["compute_s"] + b["exposed_comm_s"] + b["bubble_s"] == pytest.approx(
        results["iteration_time_s"], rel=1e-9
    )
    assert results["network"]["drops"] == 0


def test_foreign_ring_allreduce_traces(tmp_path: Path) -> None:
    r = _run(tmp_path / "ring", "--traces", str(RING), "--cluster", str(CLUSTER8), "--fidelity", "flow")
    _contract(r)
    n, size = 8, MIB
    # ring all-reduce as send/recv chains: each rank sends 2 (n-1)/n of the buffer
    per_rank = 2 * (n - 1) * size // n
    sent: dict[int, int] = {}
    with (tmp_path / "ring" / "flows.csv").open() as handle:
        for row in csv.DictReader(handle):
            sent[int(row["src_gpu"])] = sent.get(int(row["src_gpu"]), 0) + int(row["bytes"])
            assert int(row["dst_gpu"]) == (int(row["src_gpu"]) + 1) % n
    assert sent == {g: per_rank for g in range(n)}
    assert r["network"]["bytes"] == n * per_rank and r["network"]["flows"] == n * 14
    assert r["collectives"]["p2p_bytes"] == n * per_rank
    # recorded durations: seven 7 us reduction kernels per rank, whatever the GPU
    assert {round(x["compute_s"] * 1e9) for x in r["ranks"]} == {7 * 7000}
    assert r["compute_provenance"]["trace"] == 1.0
    # the chain is serial: 14 transfers (2 of them inter-host) and 7 kernels per rank
    assert r["iteration_time_s"] > 7 * 7e-6 + 14 * (131072 * 8 / 400e9)


def test_foreign_collective_traces(tmp_path: Path) -> None:
    r = _run(tmp_path / "ar", "--traces", str(ALLREDUCE), "--cluster", str(CLUSTER4), "--fidelity", "flow")
    _contract(r)
    assert r["collectives"]["instances"] == 1
    with (tmp_path / "ar" / "collectives.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert [(x["type"], int(x["size_bytes"]), int(x["ranks"])) for x in rows] == [("ALL_REDUCE", MIB, 4)]


def test_our_traces_match_the_direct_run(tmp_path: Path) -> None:
    """Written by `heterosim workload`, read back: the same plan, so the same iteration time.

    Both commands partition with the compute model (heterogeneity-aware, the default), so the
    pipeline is cut at the same layers.
    """
    assert main(["workload", str(TINY), "--out", str(tmp_path / "traces")]) == 0
    direct = _run(tmp_path / "direct", str(TINY), "--fidelity", "flow")
    traced = _run(
        tmp_path / "traced",
        "--traces",
        str(tmp_path / "traces"),
        "--cluster",
        str(MIXED16),
        "--fidelity",
        "flow",
    )
    _contract(traced)
    assert traced["iteration_time_s"] == direct["iteration_time_s"]
    assert traced["breakdown"] == direct["breakdown"] and traced["network"] == direct["network"]
    assert traced["ranks"] == direct["ranks"] and traced["sim"]["events"] == direct["sim"]["events"]
    assert traced["partition"]["stage_layers"] == direct["partition"]["stage_layers"]


def test_import_micro_allreduce_and_run(tmp_path: Path) -> None:
    exp = tmp_path / "micro.yaml"
    assert main(["import", "aicb", str(AICB / "microAllReduce.txt"), "--out", str(exp)]) == 0
    data = yaml.safe_load(exp.read_text())
    assert data["parallel"]["tp"] == 8 and data["model"]["hidden"] == 2048
    assert exp.read_text().startswith("# Imported from the SimAI/AICB workload")
    r = _run(tmp_path / "run", str(exp), "--fidelity", "flow")
    _contract(r)
    assert r["collectives"]["instances"] > 0 and {x["rank"] for x in r["ranks"]} == set(range(8))


def test_import_analytical_with_cluster_and_run_small(tmp_path: Path) -> None:
    exp = tmp_path / "sub" / "analytical.yaml"
    assert main(["import", "aicb", str(AICB / "workload_analytical.txt"), "--out", str(exp)]) == 0
    data = yaml.safe_load(exp.read_text())
    assert (
        data["parallel"]["tp"],
        data["parallel"]["pp"],
        data["parallel"]["dp"],
        data["parallel"]["ep"],
    ) == (2, 12, 384, 16)
    assert data["model"]["layers"] == 96 and data["training"]["global_batch"] == 24 * 384
    small = [
        "--set",
        f"cluster={CLUSTER8}",
        "--set",
        "parallel.pp=2",
        "--set",
        "parallel.dp=2",
        "--set",
        "parallel.ep=2",
        "--set",
        "model.layers=4",
        "--set",
        "training.global_batch=4",
        "--set",
        "model.hidden=2048",
        "--set",
        "model.heads=16",
        "--set",
        "model.kv_heads=16",
        "--set",
        "model.ffn=8192",
        "--set",
        "model.moe.expert_ffn=8192",
        "--set",
        "training.seq_len=1024",
    ]
    r = _run(tmp_path / "run", str(exp), "--fidelity", "flow", *small)
    _contract(r)
    assert r["collectives"]["instances"] > 0 and r["collectives"]["p2p_bytes"] > 0
    # with a cluster file of the right size, the YAML refers to it relative to itself
    cluster = tmp_path / "big.yaml"
    cluster.write_text(
        yaml.safe_dump(
            {
                "name": "h100-9216",
                "host_types": {
                    "h": {
                        "gpu": "H100-SXM",
                        "gpus": 8,
                        "fabric": "nvswitch",
                        "nics": 8,
                        "nic_speed": "400Gbps",
                    }
                },
                "hosts": [{"type": "h", "count": 1152}],
            }
        )
    )
    out2 = tmp_path / "sub" / "with_cluster.yaml"
    assert (
        main(
            [
                "import",
                "aicb",
                str(AICB / "workload_analytical.txt"),
                "--cluster",
                str(cluster),
                "--out",
                str(out2),
            ]
        )
        == 0
    )
    assert yaml.safe_load(out2.read_text())["cluster"] == "../big.yaml"


@pytest.mark.parametrize(
    "args",
    [
        ["run", "--traces", str(RING)],
        ["run", "--cluster", str(CLUSTER8)],
        ["run", str(TINY), "--traces", str(RING), "--cluster", str(CLUSTER8)],
        ["run", "--traces", str(ALLREDUCE), "--cluster", str(CLUSTER8)],
        ["run", "--traces", str(DATA / "nowhere"), "--cluster", str(CLUSTER8)],
        ["run", "--traces", str(RING), "--cluster", str(CLUSTER8), "--set", "model.hidden=8"],
        ["import", "aicb", str(DATA / "nowhere.txt")],
        ["import", "aicb", str(AICB / "microAllReduce.txt"), "--cluster", str(CLUSTER4)],
        ["import", "aicb", str(AICB / "README.md")],
        ["import", "aicb", str(AICB / "microAllReduce.txt"), "--seq-len", "1000"],
    ],
)
def test_bad_inputs_are_one_line_errors(args: list[str], tmp_path: Path, capsys) -> None:
    out = ["--out", str(tmp_path / "o")] if args[0] == "run" else []
    assert main([*args, *out]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"heterosim {args[0]}: error: ") and "\n" not in err
    assert "Traceback" not in err
