"""``heterosim netbench``: Jain's index and its window, the contract keys and files, atomic output,
the CC comparison table; on the packet network (ns3 marker): conservation and a tiny comparison."""

from __future__ import annotations

import csv
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from heterosim.cli import main
from heterosim.config.scenario import load_scenario
from heterosim.report.netbench_plots import busiest_sampled_ports
from heterosim.report.netbench_report import (
    FLOW_COLUMNS,
    fairness_from_series,
    fairness_window,
    goodput_series,
    jain_index,
)
from heterosim.simulate import FlowSetRun, run_netbench

REPO = Path(__file__).resolve().parents[2]
STAR = str(REPO / "topologies" / "star_8hosts_100g.yaml")
FLOW_KEYS = set(FLOW_COLUMNS)
NETWORK_KEYS = {"flows", "bytes", "drops", "retransmits", "pfc_pause_frames", "ecn_marks", "cnps"}
FILES = (
    "results.json",
    "flows.csv",
    "rates.csv",
    "queues.csv",
    "ports.csv",
    "rates.png",
    "queues.png",
    "fct.png",
)
HAS_PACKET = importlib.util.find_spec("heterosim.engine.packet") is not None
needs_packet = pytest.mark.skipif(
    not HAS_PACKET, reason="heterosim.engine.packet (the packet-level network) is not built yet"
)


def tiny_scenario(tmp_path: Path, **changes) -> Path:
    data = {
        "name": "tiny-incast",
        "cluster": STAR,
        "pattern": {"kind": "incast", "senders": [0, 1], "receiver": 2, "size": "512KiB"},
        "network": {"cc": "dcqcn", "pfc": True, "buffer": "4MiB", "mtu": "1KiB"},
        "simulation": {"stop": "5ms", "sample_interval": "5us", "seed": 1},
    }
    data.update(changes)
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def shared_bottleneck_raw(scenario, topology):
    """A synthetic run: flows split a 100 Gb/s bottleneck equally (exercises the report only)."""
    flows = scenario.flows
    n = len(flows)
    rate = 100e9 / n
    fct = np.ceil(flows.size_bytes * 8 / rate * 1e9).astype(np.int64)
    end = flows.start_ns + fct
    interval = scenario.simulation.sample_interval_ns
    t, f = [], []
    for i in range(n):
        times = np.arange(flows.start_ns[i], end[i], interval)
        t.append(times)
        f.append(np.full(len(times), i))
    times, ids = np.concatenate(t), np.concatenate(f)
    grid = np.arange(0, int(end.max()), interval)
    return {
        "flows": {
            "id": np.arange(n),
            "src": flows.src,
            "dst": flows.dst,
            "bytes": flows.size_bytes,
            "start_ns": flows.start_ns,
            "end_ns": end,
            "fct_ns": fct,
            "retransmits": np.zeros(n, np.int64),
        },
        "counters": {
            "flows": n,
            "bytes": flows.total_bytes,
            "drops": 0,
            "retransmits": 0,
            "pfc_pause_frames": 0,
            "ecn_marks": 0,
            "cnps": 0,
        },
        "ports": {
            "node": topology.link_a[:2],
            "link": np.arange(2),
            "direction": np.zeros(2),
            "bytes_sent": np.array([flows.total_bytes, 0]),
            "max_queue_bytes": np.array([2048, 0]),
            "mean_queue_bytes": np.array([512.5, 0]),
            "pause_sent": np.zeros(2),
            "pause_received": np.zeros(2),
            "paused_ns": np.zeros(2),
            "ecn_marks": np.zeros(2),
            "drops": np.zeros(2),
        },
        "series": {
            "queue": {
                "time_ns": np.repeat(grid, 2),
                "port": np.tile([0, 1], len(grid)),
                "bytes": np.tile([2048, 0], len(grid)),
            },
            "rate": {
                "time_ns": times,
                "flow": ids,
                "rate_bps": np.full(len(times), rate),
                "acked_bytes": ((times - flows.start_ns[ids]) * rate / 8e9).astype(np.int64),
            },
        },
        "events": 10,
        "sim_end_ns": int(end.max()),
        "wall_s": 0.001,
    }


def test_jain_index_hand_computed():
    assert jain_index(np.array([1.0, 2.0, 3.0, 4.0])) == pytest.approx(100 / 120)  # 10^2/(4*30)
    assert jain_index(np.array([5.0, 5.0, 5.0])) == pytest.approx(1.0)
    assert jain_index(np.array([1.0, 0.0, 0.0, 0.0])) == pytest.approx(0.25)  # 1/n: one hog
    assert jain_index(np.array([0.0, 0.0])) is None


def test_fairness_uses_the_second_half_of_the_all_active_interval():
    # flow 0 active 0..5000 ns, flow 1 active 1000..9000 ns -> together 1000..5000, window 3000..5000
    start, end = np.array([0, 1000]), np.array([5000, 9000])
    assert fairness_window(start, end, 10_000) == (3000, 5000)
    t = np.arange(0, 9000, 500)
    times = np.concatenate([t[t < 5000], t[t >= 1000]])
    flows = np.concatenate([np.zeros((t < 5000).sum()), np.ones((t >= 1000).sum())])
    rates = np.where(times < 3000, np.where(flows == 0, 90.0, 10.0), np.where(flows == 0, 60.0, 40.0))
    rates[(flows == 1) & (times > 5000)] = 100.0  # flow 1 alone afterwards: outside the window
    jain, window, note = fairness_from_series(
        np.array([0, 1]), start, end, 10_000, {"time_ns": times, "flow": flows, "rate_bps": rates}
    )
    assert window == (3000, 5000) and note == ""
    assert jain == pytest.approx(100**2 / (2 * (60**2 + 40**2)))  # 0.9615


def test_fairness_measures_goodput_from_acknowledged_bytes():
    # both flows active 0..10000 ns, window 5000..10000; both senders pace at the same rate, but
    # flow 0 gets 60 bytes/ns acknowledged and flow 1 20: x = (480, 160) Gb/s,
    # J = 640^2 / (2 * (480^2 + 160^2)) = 0.8
    times = np.tile(np.arange(0, 10001, 1000), 2)
    flows = np.repeat([0, 1], 11)
    acked = np.where(flows == 0, 60 * times, 20 * times)
    series = {"time_ns": times, "flow": flows, "rate_bps": np.full(22, 1e12), "acked_bytes": acked}
    jain, window, note = fairness_from_series(
        np.array([0, 1]), np.array([0, 0]), np.array([10000, 10000]), 10000, series
    )
    assert window == (5000, 10000) and note == ""
    assert jain == pytest.approx(640**2 / (2 * (480**2 + 160**2)))  # 0.8
    goodput = goodput_series(series)
    assert np.isnan(goodput[0]) and np.isnan(goodput[11])  # first sample of each flow
    assert goodput[1:11] == pytest.approx(480e9) and goodput[12:] == pytest.approx(160e9)


def test_fairness_undefined_cases():
    series = {"time_ns": np.array([0, 0]), "flow": np.array([0, 1]), "rate_bps": np.array([1, 1])}
    jain, window, note = fairness_from_series(
        np.array([0, 1]), np.array([0, 6000]), np.array([5000, 9000]), 10_000, series
    )
    assert jain is None and window is None and "never all active" in note
    jain, window, note = fairness_from_series(
        np.array([0, 1]), np.array([0, 0]), np.array([-1, 4000]), 10_000, None
    )
    assert jain is None and window == (2000, 4000) and "no per-flow rate series" in note


def test_unfinished_flow_ends_at_the_end_of_the_run():
    assert fairness_window(np.array([0, 0]), np.array([-1, -1]), 8000) == (4000, 8000)


def test_outputs_have_every_contract_key_and_file(tmp_path):
    scenario = load_scenario(tiny_scenario(tmp_path))
    out = tmp_path / "out"
    results = run_netbench(scenario, out, simulate_fn=shared_bottleneck_run)
    for name in FILES:
        assert (out / name).is_file() and (out / name).stat().st_size > 0, name
    saved = json.loads((out / "results.json").read_text())
    assert saved == json.loads(json.dumps(results))
    assert {"flows", "fairness_jain", "network", "sim", "scenario"} <= set(saved)
    assert [set(f) for f in saved["flows"]] == [FLOW_KEYS] * 2
    assert set(saved["network"]) == NETWORK_KEYS
    assert {"fidelity", "wall_s", "events", "version"} <= set(saved["sim"])
    first = saved["flows"][0]
    # equal split of 100 Gb/s between 2 flows of 512 KiB: FCT = 512 KiB * 8 / 50 Gb/s
    assert first["fct_s"] == pytest.approx(512 * 1024 * 8 / 50e9, abs=1e-9)  # whole ns
    assert first["goodput_Gbps"] == pytest.approx(50.0, rel=1e-4)
    assert saved["fairness_jain"] == pytest.approx(1.0)
    with (out / "flows.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 2 and set(rows[0]) == FLOW_KEYS
    with (out / "ports.csv").open() as handle:
        ports = list(csv.DictReader(handle))
    assert ports[0]["name"].startswith("h0.") and ports[0]["max_queue_bytes"] == "2048"
    assert (out / "rates.csv").read_text().startswith("time_s,flow,rate_Gbps,goodput_Gbps,acked_bytes\n")
    assert float(ports[0]["utilization"]) > 0
    assert (out / "queues.csv").read_text().startswith("time_s,port,name,queue_bytes\n")


def test_a_failing_run_leaves_nothing_behind(tmp_path):
    scenario = load_scenario(tiny_scenario(tmp_path))

    def broken(*_args):
        raise RuntimeError("simulated crash")

    with pytest.raises(RuntimeError):
        run_netbench(scenario, tmp_path / "out", simulate_fn=broken)
    assert not (tmp_path / "out").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["tiny.yaml"]


def test_comparison_has_one_row_per_cc(tmp_path):
    scenario = load_scenario(tiny_scenario(tmp_path))
    ccs = ("dcqcn", "hpcc", "none")
    results = run_netbench(scenario, tmp_path / "cmp", compare_cc=ccs, simulate_fn=shared_bottleneck_run)
    assert [row["cc"] for row in results["compare_cc"]] == list(ccs)
    with (tmp_path / "cmp" / "comparison.csv").open() as handle:
        assert [r["cc"] for r in csv.DictReader(handle)] == list(ccs)
    assert (tmp_path / "cmp" / "comparison.png").is_file()
    for cc in ccs:
        per_cc = json.loads((tmp_path / "cmp" / cc / "results.json").read_text())
        assert per_cc["scenario"]["cc"] == cc


def test_help_has_examples(capsys):
    with pytest.raises(SystemExit):
        main(["netbench", "--help"])
    text = capsys.readouterr().out
    assert "--compare-cc" in text and "workloads/netbench/incast_4to1.yaml" in text


# ---- packet-level network ----------------------------------------------------------------------


@pytest.mark.ns3
@needs_packet
def test_tiny_incast_on_packet_network_conserves_bytes(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["netbench", str(tiny_scenario(tmp_path)), "--out", str(out)]) == 0
    assert "fairness" in capsys.readouterr().out
    for name in FILES:
        assert (out / name).is_file(), name
    saved = json.loads((out / "results.json").read_text())
    assert [set(f) for f in saved["flows"]] == [FLOW_KEYS] * 2
    assert set(saved["network"]) == NETWORK_KEYS
    injected = 2 * 512 * 1024
    assert all(f["end_s"] is not None for f in saved["flows"])
    assert sum(f["bytes"] for f in saved["flows"]) == injected
    assert saved["network"]["bytes"] == injected  # bytes delivered = bytes injected
    assert saved["summary"]["delivered_bytes"] == injected  # as counted by the receivers
    assert saved["fairness_jain"] is not None and 0.5 <= saved["fairness_jain"] <= 1.0
    assert saved["network"]["drops"] == 0  # PFC on: lossless
    for f in saved["flows"]:  # no flow beats its NIC's 100 Gb/s line rate
        assert 0 < f["goodput_Gbps"] < 100.0


@pytest.mark.ns3
@needs_packet
def test_pfc_off_small_buffer_still_delivers_every_byte(tmp_path):
    path = tiny_scenario(tmp_path, network={"cc": "none", "pfc": False, "buffer": "64KiB", "mtu": "1KiB"})
    out = tmp_path / "out"
    assert main(["netbench", str(path), "--out", str(out)]) == 0
    saved = json.loads((out / "results.json").read_text())
    assert saved["network"]["drops"] > 0 and saved["network"]["retransmits"] > 0
    assert saved["network"]["pfc_pause_frames"] == 0
    assert all(f["end_s"] is not None for f in saved["flows"])
    assert saved["network"]["bytes"] == 2 * 512 * 1024
    assert saved["summary"]["delivered_bytes"] == 2 * 512 * 1024
    assert sum(f["retransmits"] for f in saved["flows"]) == saved["network"]["retransmits"]


@pytest.mark.ns3
@needs_packet
@pytest.mark.parametrize("trimming", [True, False])
def test_trims_reach_results_and_ports_per_switch(tmp_path, trimming):
    """A 4-to-1 UET incast into a 64 KiB buffer: with network.trimming the overflow is trimmed
    (results.json network.trims and switch_trims, ports.csv trims: the same count three ways,
    each trim resent once); without it, dropped, and no trims are reported."""
    network = {"transport": "uet", "trimming": trimming, "buffer": "64KiB", "mtu": "1KiB"}
    pattern = {"kind": "incast", "senders": [0, 1, 2, 3], "receiver": 4, "size": "512KiB"}
    out = tmp_path / "out"
    assert (
        main(["netbench", str(tiny_scenario(tmp_path, network=network, pattern=pattern)), "--out", str(out)])
        == 0
    )
    saved = json.loads((out / "results.json").read_text())
    ports = list(csv.DictReader((out / "ports.csv").open()))
    net = saved["network"]
    assert saved["summary"]["delivered_bytes"] == 4 * 512 * 1024
    if not trimming:
        assert "trims" not in net and "switch_trims" not in net and "trims" not in ports[0]
        assert net["drops"] > 0
        return
    assert net["drops"] == 0 and net["trims"] > 0 and net["retransmits"] == net["trims"]
    assert net["switch_trims"] == {"leaf0": net["trims"]}  # the star's one switch
    trimmed = [p for p in ports if int(p["trims"])]
    assert [p["name"] for p in trimmed] == ["leaf0->h4.nic0"]  # the port toward the receiver
    assert int(trimmed[0]["trims"]) == net["trims"]
    sent = 4 * 512 + net["retransmits"]  # 1 KiB packets, each resend one more
    assert net["trims"] <= sent


@pytest.mark.ns3
@needs_packet
def test_cc_comparison_on_tiny_incast(tmp_path, capsys):
    out = tmp_path / "cmp"
    code = main(
        [
            "netbench",
            str(tiny_scenario(tmp_path)),
            "--out",
            str(out),
            "--compare-cc",
            "dcqcn,hpcc,timely,dctcp,none",
        ]
    )
    assert code == 0
    saved = json.loads((out / "results.json").read_text())
    assert [r["cc"] for r in saved["compare_cc"]] == ["dcqcn", "hpcc", "timely", "dctcp", "none"]
    assert all(r["unfinished_flows"] == 0 for r in saved["compare_cc"])
    assert (out / "comparison.csv").is_file() and (out / "comparison.png").is_file()


def shared_bottleneck_run(scenario, topology):
    return FlowSetRun(
        scenario, topology, scenario.simulation.fidelity, shared_bottleneck_raw(scenario, topology)
    )


def fluid_shaped_run(scenario, topology):
    """The fluid model's layout: no counters/ports/series, per link-direction ``links`` instead."""
    run = shared_bottleneck_raw(scenario, topology)
    del run["counters"], run["ports"], run["series"], run["events"]
    run["flows"].pop("retransmits")
    run["network"] = {
        "flows": len(scenario.flows),
        "bytes": scenario.flows.total_bytes,
        "drops": 0,
        "retransmits": 0,
        "pfc_pause_frames": 0,
        "ecn_marks": 0,
        "cnps": 0,
    }
    links = topology.num_links
    run["links"] = {
        "link": np.repeat(np.arange(links), 2),
        "direction": np.tile([0, 1], links),
        "bytes": np.arange(2 * links),
        "busy_ns": np.zeros(2 * links),
        "utilization": np.zeros(2 * links),
    }
    return FlowSetRun(scenario, topology, scenario.simulation.fidelity, run)


def test_fluid_layout_fills_ports_from_links_and_leaves_fairness_undefined(tmp_path):
    scenario = load_scenario(tiny_scenario(tmp_path), ["simulation.fidelity=flow"])
    out = tmp_path / "out"
    results = run_netbench(scenario, out, simulate_fn=fluid_shaped_run)
    assert results["sim"]["fidelity"] == "flow"
    assert results["fairness_jain"] is None and "rate series" in results["fairness_note"]
    assert results["network"]["bytes"] == scenario.flows.total_bytes
    assert results["summary"]["max_queue_bytes"] is None
    with (out / "ports.csv").open() as handle:
        ports = list(csv.DictReader(handle))
    assert [int(p["bytes_sent"]) for p in ports] == list(range(len(ports)))
    assert ports[1]["name"].split("->")[::-1] == ports[0]["name"].split("->")  # both directions
    for name in FILES:
        assert (out / name).is_file(), name


def test_busiest_ports_with_unsigned_counters():
    ports = np.array([5, 6, 7, 5, 6, 7], dtype=np.uint32)
    depth = np.array([1.0, 9.0, 4.0, 2.0, 3.0, 8.0])
    peak = np.zeros(10, np.uint64)
    peak[[5, 6, 7, 9]] = [100, 3000, 2000, 10**6]  # port 9 is not sampled: never chosen
    assert busiest_sampled_ports(ports, depth, peak, 2) == [6, 7]
    assert busiest_sampled_ports(ports, depth, np.zeros(0), 3) == [6, 7, 5]  # from the samples


def test_compare_cc_with_the_fluid_model_is_refused(tmp_path, capsys):
    path = tiny_scenario(tmp_path)
    code = main(
        [
            "netbench",
            str(path),
            "--fidelity",
            "flow",
            "--compare-cc",
            "dcqcn,none",
            "--out",
            str(tmp_path / "out"),
        ]
    )
    assert code == 2 and "use --fidelity packet" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.ns3
@needs_packet
def test_same_seed_gives_identical_results_apart_from_wall_time(tmp_path):
    path = tiny_scenario(tmp_path)
    texts = []
    for name in ("a", "b"):
        assert main(["netbench", str(path), "--out", str(tmp_path / name)]) == 0
        saved = json.loads((tmp_path / name / "results.json").read_text())
        saved["sim"].pop("wall_s")
        texts.append(json.dumps(saved, sort_keys=True))
        for csv_name in ("flows.csv", "rates.csv", "queues.csv", "ports.csv"):
            texts.append((tmp_path / name / csv_name).read_text())
    half = len(texts) // 2
    assert texts[:half] == texts[half:]


@pytest.mark.ns3
def test_fluid_single_flow_runs_at_line_rate(tmp_path, native_lib):
    pattern = {"kind": "one-to-one", "senders": [0], "receiver": 5, "size": "4MiB"}
    path = tiny_scenario(tmp_path, pattern=pattern)
    out = tmp_path / "out"
    assert main(["netbench", str(path), "--fidelity", "flow", "--out", str(out)]) == 0
    saved = json.loads((out / "results.json").read_text())
    flow = saved["flows"][0]
    # fluid model: the 100 Gb/s NIC carries payload at line rate less the RoCEv2 frame bytes
    # (82 per 1 KiB packet of this scenario and its 86-byte ACK, heterosim/engine/fluid.py); FCT
    # adds only the path's propagation and one packet's store-and-forward per hop (a few us)
    serialization = 4 * 2**20 * 8 / 100e9 * (1024 + 168) / 1024
    assert serialization < flow["fct_s"] < serialization + 10e-6
    assert saved["sim"]["fidelity"] == "flow" and saved["fairness_jain"] is None
    assert saved["network"]["bytes"] == 4 * 2**20


def test_a_foreign_output_folder_is_one_error_line_before_any_progress(tmp_path, capsys):
    out = tmp_path / "users"
    out.mkdir()
    (out / "thesis.tex").write_text("mine")
    assert main(["netbench", str(tiny_scenario(tmp_path)), "--out", str(out)]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and "thesis.tex" in lines[0] and "error:" in lines[0]


@pytest.mark.ns3
def test_a_bad_attribute_is_one_error_line_before_any_progress(tmp_path, capsys, native_lib):
    path = tiny_scenario(
        tmp_path, network={"cc": "dcqcn", "attributes": {"Dcqcn::AlphaUpdateInterval": "soon"}}
    )
    code = main(["netbench", str(path), "--fidelity", "flow", "--out", str(tmp_path / "out")])
    lines = capsys.readouterr().err.splitlines()
    assert code == 2 and len(lines) == 1
    assert "tiny.yaml" in lines[0] and "Dcqcn::AlphaUpdateInterval" in lines[0]
    assert not (tmp_path / "out").exists()
