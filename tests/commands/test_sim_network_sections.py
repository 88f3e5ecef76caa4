"""``collective`` and ``netbench`` results.json carry ``sim`` and ``network`` as ``run`` does, in
both fidelities: the engine's cost (wall time without start-up and build, ns-3 events) and the
network counters, whose byte count is every byte the flows injected."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from heterosim.cli import main

pytestmark = pytest.mark.ns3

REPO = Path(__file__).resolve().parents[2]
# run's results.json ``network`` keys (docs/results.md)
NETWORK_KEYS = {"flows", "bytes", "drops", "retransmits", "pfc_pause_frames", "ecn_marks", "cnps"}


def check_sections(doc: dict, fidelity: str, injected: int, flows: int) -> None:
    sim, network = doc["sim"], doc["network"]
    assert sim["fidelity"] == fidelity
    assert sim["events"] > 0 and isinstance(sim["events"], int)
    assert 0 <= sim["wall_s"] < 60
    assert NETWORK_KEYS <= set(network)
    assert network["bytes"] == injected  # bytes carried = bytes the flows injected
    assert network["flows"] == flows
    assert network["drops"] == network["retransmits"] == 0  # PFC on: lossless
    if fidelity == "packet":
        assert sim["packet_acceleration"]["mode"] == "fast"  # the default


@pytest.mark.parametrize("fidelity", ["flow", "packet"])
def test_collective_results_have_sim_and_network(native_lib, tmp_path, fidelity):
    """Ring all-gather of 4 MiB over 8 ranks, Simple protocol: each rank sends 7/8 of the buffer
    to its ring neighbour, 7 x 4 MiB in all (nccl-tests' definition, no protocol overhead)."""
    size, ranks = 4 << 20, 8
    argv = ["collective", "--cluster", str(REPO / "topologies" / "star_8hosts_100g.yaml")]
    argv += ["--op", "allgather", "--size", "4MiB", "--ranks", "0-7", "--algo", "ring"]
    argv += ["--protocol", "simple", "--fidelity", fidelity, "--out", str(tmp_path / "out")]
    assert main(argv) == 0
    doc = json.loads((tmp_path / "out" / "results.json").read_text())
    check_sections(doc, fidelity, (ranks - 1) * size, doc["flows"])
    assert doc["flows"] > 0 and doc["granularity"] == "chunk"


def tiny_incast(tmp_path: Path) -> Path:
    """A 2-to-1 incast of 512 KiB per sender on eight 100G hosts."""
    scenario = {
        "name": "tiny-incast",
        "cluster": str(REPO / "topologies" / "star_8hosts_100g.yaml"),
        "pattern": {"kind": "incast", "senders": [0, 1], "receiver": 2, "size": "512KiB"},
        "network": {"cc": "dcqcn", "pfc": True, "buffer": "4MiB", "mtu": "1KiB"},
        "simulation": {"stop": "5ms", "seed": 1},
    }
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(scenario))
    return path


@pytest.mark.parametrize("fidelity", ["flow", "packet"])
def test_netbench_results_have_sim_and_network(native_lib, tmp_path, fidelity):
    """Both fidelities: events counted, every injected byte in the network counters, and the
    run ends with its last flow (not at the stop time)."""
    path = tiny_incast(tmp_path)
    out = tmp_path / "out"
    assert main(["netbench", str(path), "--fidelity", fidelity, "--out", str(out)]) == 0
    doc = json.loads((out / "results.json").read_text())
    check_sections(doc, fidelity, 2 * 512 * 1024, 2)
    assert doc["summary"]["delivered_bytes"] == doc["summary"]["injected_bytes"] == 2 * 512 * 1024
    last_end = max(f["end_s"] for f in doc["flows"])
    assert doc["sim"]["sim_end_s"] == pytest.approx(last_end, abs=1e-9) and last_end < 5e-3


def test_collective_granularity_changes_the_flows_not_the_bytes(native_lib, tmp_path):
    """--granularity connection: one flow per ring neighbour pair (8), carrying the same 7 x 4 MiB
    as NCCL's chunk-by-chunk schedule; results.json says which granularity ran."""
    docs = {}
    for granularity in ("chunk", "connection"):
        out = tmp_path / granularity
        argv = ["collective", "--cluster", str(REPO / "topologies" / "star_8hosts_100g.yaml")]
        argv += ["--op", "allgather", "--size", "4MiB", "--ranks", "0-7", "--algo", "ring"]
        argv += ["--protocol", "simple", "--granularity", granularity, "--out", str(out)]
        assert main(argv) == 0
        docs[granularity] = json.loads((out / "results.json").read_text())
    assert docs["connection"]["granularity"] == "connection" and docs["connection"]["flows"] == 8
    assert docs["chunk"]["flows"] > 8
    assert docs["connection"]["network"]["bytes"] == docs["chunk"]["network"]["bytes"] == 7 * (4 << 20)


def test_netbench_cc_comparison_sums_the_events_of_its_runs(native_lib, tmp_path):
    out = tmp_path / "cmp"
    assert (
        main(["netbench", str(tiny_incast(tmp_path)), "--compare-cc", "dcqcn,none", "--out", str(out)]) == 0
    )
    summary = json.loads((out / "results.json").read_text())
    runs = [json.loads((out / cc / "results.json").read_text()) for cc in ("dcqcn", "none")]
    for run in runs:
        check_sections(run, "packet", 2 * 512 * 1024, 2)
    assert summary["sim"]["events"] == sum(run["sim"]["events"] for run in runs) > 0
    assert summary["sim"]["wall_s"] >= sum(run["sim"]["wall_s"] for run in runs)
