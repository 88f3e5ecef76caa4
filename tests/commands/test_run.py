"""heterosim run end to end on a tiny shipped experiment, in both fidelities."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from heterosim.cli import main

TINY = Path(__file__).resolve().parents[1] / "data" / "tiny_experiment.yaml"
CONTRACT_BREAKDOWN = ("compute_s", "exposed_comm_s", "bubble_s", "intra_host_comm_s", "inter_host_comm_s")
CONTRACT_NETWORK = ("flows", "bytes", "drops", "retransmits", "pfc_pause_frames", "ecn_marks", "cnps")


def run_cli(tmp_path: Path, name: str, *extra: str) -> dict:
    out = tmp_path / name
    assert main(["run", str(TINY), "--out", str(out), "--quiet", *extra]) == 0
    return json.loads((out / "results.json").read_text())


@pytest.fixture(scope="module")
def flow_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("flow")
    return tmp / "a", run_cli(tmp, "a", "--fidelity", "flow")


@pytest.fixture(scope="module")
def packet_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("packet")
    return tmp / "p", run_cli(tmp, "p", "--fidelity", "packet")


def check_contract(results: dict, fidelity: str) -> None:
    assert results["iteration_time_s"] > 0
    for key in CONTRACT_BREAKDOWN:
        assert results["breakdown"][key] >= 0
    b = results["breakdown"]
    assert b["compute_s"] + b["exposed_comm_s"] + b["bubble_s"] == pytest.approx(
        results["iteration_time_s"], rel=1e-9
    )
    assert len(results["ranks"]) == 16
    for row in results["ranks"]:
        for key in ("rank", "gpu", "host", "busy_s", "compute_s", "comm_s"):
            assert key in row
        assert row["compute_s"] + row["exposed_comm_s"] + row["bubble_s"] == pytest.approx(
            results["iteration_time_s"], rel=1e-9
        )
        assert row["busy_s"] <= results["iteration_time_s"] * (1 + 1e-12)
    assert {r["gpu"] for r in results["ranks"]} == {"H100-SXM", "A100-80GB-SXM"}
    for key in CONTRACT_NETWORK:
        assert key in results["network"]
    assert results["network"]["flows"] > 0 and results["network"]["bytes"] > 0
    sim = results["sim"]
    assert sim["fidelity"] == fidelity and sim["events"] > 0 and sim["version"]


@pytest.mark.ns3
def test_flow_run_has_every_contract_key(flow_run):
    out, results = flow_run
    check_contract(results, "flow")
    # The H100 stage is faster, so the heterogeneity-aware partition gives it more layers.
    first, last = results["partition"]["stage_layers"]
    assert first[1] - first[0] >= last[1] - last[0]
    for name in (
        "ranks.csv",
        "collectives.csv",
        "flows.csv",
        "links.csv",
        "trace.json",
        "timeline.png",
        "breakdown.png",
        "link_utilization.png",
    ):
        assert (out / name).stat().st_size > 0, name


@pytest.mark.ns3
def test_packet_run_has_every_contract_key_and_agrees_with_flow(flow_run, packet_run):
    _, flow = flow_run
    _, packet = packet_run
    check_contract(packet, "packet")
    assert packet["network"]["drops"] == 0  # PFC on: lossless
    assert packet["network"]["bytes"] == flow["network"]["bytes"]  # same plan, same payload
    assert packet["iteration_time_s"] == pytest.approx(flow["iteration_time_s"], rel=0.15)


@pytest.mark.ns3
def test_trace_json_has_a_track_per_rank(flow_run):
    out, results = flow_run
    trace = json.loads((out / "trace.json").read_text())
    events = trace["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name"}
    assert len([p for p in names if p < 16]) == 16
    threads = {(e["pid"], e["args"]["name"]) for e in events if e.get("name") == "thread_name"}
    assert {(0, "compute"), (0, "send 0"), (0, "recv 0")} <= threads
    spans = [e for e in events if e["ph"] == "X"]
    assert spans and all(e["dur"] >= 0 for e in spans)
    end_us = max(e["ts"] + e["dur"] for e in spans)
    assert end_us == pytest.approx(results["iteration_time_s"] * 1e6, rel=1e-6)
    labels = {e["name"] for e in spans}
    assert {"qkv_proj", "attn_core", "fc1"} <= labels
    counters = {e["name"] for e in events if e["ph"] == "C"}
    assert "flows in flight" in counters


@pytest.mark.ns3
def test_packet_trace_has_queue_and_utilization_counters(packet_run):
    out, _ = packet_run
    events = json.loads((out / "trace.json").read_text())["traceEvents"]
    counters = {e["name"] for e in events if e["ph"] == "C"}
    assert {"max queue depth (bytes)", "mean utilization of sampled ports (%)"} <= counters
    utilization = [
        e["args"]["value"] for e in events if e["ph"] == "C" and e["name"].startswith("mean utilization")
    ]
    assert all(0.0 <= u <= 100.0 + 1e-6 for u in utilization) and max(utilization) > 0


@pytest.mark.ns3
def test_collectives_csv_lists_every_instance(flow_run):
    out, results = flow_run
    rows = list(csv.DictReader((out / "collectives.csv").open()))
    assert len(rows) == results["collectives"]["instances"] > 0
    assert results["collectives"]["granularity"] == "chunk"  # the default, recorded
    for row in rows:
        assert float(row["end_s"]) >= float(row["start_s"]) >= 0
        assert row["algorithm"] in ("ring", "tree", "nvls", "nvls_tree", "p2p")
        assert row["protocol"] in ("simple", "ll", "ll128")
        assert int(row["size_bytes"]) > 0 and int(row["ranks"]) >= 2


@pytest.mark.ns3
def test_same_seed_gives_identical_results(flow_run, tmp_path):
    _, first = flow_run
    second = run_cli(tmp_path, "again", "--fidelity", "flow")

    def strip(results: dict) -> dict:
        results = json.loads(json.dumps(results))
        results["sim"].pop("wall_s")
        results["sim"].pop("build_s", None)  # a timing, like wall_s
        results["sim"].pop("stage_wall_s")
        results["experiment"].pop("overrides", None)
        return results

    assert strip(first) == strip(second)


@pytest.mark.ns3
def test_override_is_echoed_and_applied(tmp_path):
    results = run_cli(tmp_path, "o", "--fidelity", "flow", "--set", "parallel.partition=uniform")
    assert "parallel.partition=uniform" in results["experiment"]["overrides"]
    assert results["experiment"]["resolved"]["parallel"]["partition"] == "uniform"
    first, last = results["partition"]["stage_layers"]
    assert first[1] - first[0] == last[1] - last[0]


def test_bad_override_is_one_line_exit_2(tmp_path, capsys):
    code = main(["run", str(TINY), "--out", str(tmp_path / "x"), "--quiet", "--set", "parallel.tp=3"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "tp" in err[0]
    assert not (tmp_path / "x").exists()


@pytest.mark.ns3
def test_several_iterations_chain_per_rank(flow_run, tmp_path):
    _, one = flow_run
    three = run_cli(tmp_path, "three", "--fidelity", "flow", "--no-plots", "--set", "simulation.iterations=3")
    times = three["iterations"]["time_s"]
    assert three["iterations"]["count"] == 3 and len(times) == 3
    # The first iteration is the single-iteration run; later ones cannot be longer than it
    # and are never shorter than the compute of the busiest rank.
    assert times[0] == pytest.approx(one["iteration_time_s"], rel=1e-9)
    busiest_compute = max(r["compute_s"] for r in one["ranks"])
    for t in times[1:]:
        assert busiest_compute <= t <= times[0] * (1 + 1e-9)
    assert three["iteration_time_s"] == pytest.approx(sum(times) / 3, rel=1e-9)
    b = three["breakdown"]
    assert b["compute_s"] == pytest.approx(one["breakdown"]["compute_s"], rel=1e-9)
