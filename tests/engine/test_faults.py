"""Faults (issue 20): a link down during a data-parallel all-reduce at packet and flow level,
re-routing around a failed spine link, a degraded link, a lossy link, a straggler GPU against a
hand-computed timeline, and the straggler windows themselves."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from heterosim.config.experiment import parse_experiment
from heterosim.engine.faults import go_back_n_goodput
from heterosim.report.run_report import results_dict
from heterosim.simulate import run_experiment

pytestmark = pytest.mark.ns3

RTO = "100us"  # NIC retransmission timeout of these runs (network.attributes Rto)
# Data parallel over four single-GPU hosts, two per leaf, two spines (1:1): the gradient
# all-reduce (34 MB, ring, 4 channels) runs from 0.42 ms to 4.5 ms and crosses every NIC.
DP4 = {
    "name": "dp4",
    "model": {
        "arch": "gpt",
        "hidden": 512,
        "layers": 2,
        "heads": 8,
        "ffn": 2048,
        "vocab": 4096,
        "seq": 256,
        "name": "gpt-small",
    },
    "training": {"global_batch": 4, "micro_batch": 1, "seq_len": 256},
    "parallel": {"tp": 1, "pp": 1, "dp": 4},
    "cluster": {
        "name": "four-hosts-two-leaves",
        "host_types": {
            "h100": {"gpu": "H100-SXM", "gpus": 1, "fabric": "nvswitch", "nics": 1, "nic_speed": "100Gbps"}
        },
        "hosts": [{"type": "h100", "count": 4}],
        "fabric": {
            "kind": "fat-tree",
            "link_delay": "1us",
            "oversubscription": 1,
            "hosts_per_leaf": 2,
            "spine_speed": "100Gbps",
        },
    },
    "network": {"cc": "dcqcn", "pfc": True, "attributes": {"Rto": RTO}},
    "simulation": {"fidelity": "flow", "seed": 1},
    # the fault windows below are set against this GPU-bound compute, without the host's dispatch
    "framework": {"host_dispatch": "0us"},
}


def run(fidelity: str, faults: list[dict] | None = None, base: dict = DP4):
    data = copy.deepcopy(base)
    data["simulation"]["fidelity"] = fidelity
    if faults:
        data["faults"] = faults
    art = run_experiment(parse_experiment(data, "dp4.yaml"))
    return art, results_dict(art)


def allreduce_end_ns(art) -> int:
    colls = art.tables.collectives
    return int(art.engine.task_end_ns[colls["end_task"]].max())


def link_bytes(art, name: str) -> int:
    topo = art.topology
    a, b = name.split("-")
    index = {n: i for i, n in enumerate(topo.node_name)}
    link = int(
        np.flatnonzero(
            ((topo.link_a == index[a]) & (topo.link_b == index[b]))
            | ((topo.link_a == index[b]) & (topo.link_b == index[a]))
        )[0]
    )
    links = art.engine.links
    return int(np.asarray(links["bytes"])[np.asarray(links["link"]) == link].sum())


@pytest.fixture(scope="module")
def baselines():
    return {f: run(f) for f in ("flow", "packet")}


def test_link_down_during_allreduce_recovers_every_byte_and_delays_it_by_the_outage(baselines):
    outage_ns = 1_000_000
    fault = [{"at": "1ms", "link": "h1.nic0-leaf0", "down": "1ms"}]
    delay = {}
    with_baseline = copy.deepcopy(DP4)
    with_baseline["simulation"]["fault_baseline"] = True
    for fidelity in ("packet", "flow"):
        base_art, base = baselines[fidelity]
        art, res = run(fidelity, fault, base=with_baseline)
        assert not res["sim"]["partial"]
        assert np.all(art.engine.flows["end_ns"] >= 0)  # every flow delivered its last byte
        assert res["network"]["bytes"] == base["network"]["bytes"]
        record = res["faults"][0]
        assert record["kind"] == "down" and record["isolated_hosts"] == [1]
        assert record["active_s"] == pytest.approx(outage_ns * 1e-9)
        delay[fidelity] = allreduce_end_ns(art) - allreduce_end_ns(base_art)
        # results.json explains it: the same plan without the fault, and the delayed collective
        impact = res["fault_impact"]
        assert impact["baseline_iteration_time_s"] == pytest.approx(base["iteration_time_s"])
        assert impact["most_delayed"][0]["type"] == "ALL_REDUCE"
        assert impact["most_delayed"][0]["delay_s"] == pytest.approx(delay[fidelity] * 1e-9)
        assert impact["extra_s"] == pytest.approx(res["iteration_time_s"] - base["iteration_time_s"])
        if fidelity == "packet":
            # frames queued on or crossing the link were lost and retransmitted (go-back-N)
            assert record["frames_dropped"] > 0 and res["network"]["drops"] >= record["frames_dropped"]
            assert res["network"]["retransmits"] > 0
            assert record["transport_rto_s"] == pytest.approx(100e-6)
    # host 1 is cut off for the outage: the ring stops, and resumes when the link returns;
    # at packet level the lost frames cost at most a few retransmission timeouts more
    assert 0.8 * outage_ns <= delay["flow"] <= 1.1 * outage_ns
    assert 0.8 * outage_ns <= delay["packet"] <= outage_ns + 4 * 100_000
    assert 0.5 <= delay["packet"] / delay["flow"] <= 2.0  # the same order of effect


def test_flows_started_while_their_host_is_cut_off_wait_for_the_link(baselines):
    """The all-reduce starts (0.42 ms) while host 1's only link is down (0-1 ms): its flows have
    no route when they start, wait for the link (no native abort, no stall) and finish once it
    is back, about the rest of the outage later, at both fidelities."""
    fault = [{"at": "0ms", "link": "h1.nic0-leaf0", "down": "1ms"}]
    delay = {}
    for fidelity in ("packet", "flow"):
        base_art, base = baselines[fidelity]
        art, res = run(fidelity, fault)
        assert not res["sim"]["partial"]
        assert np.all(art.engine.flows["end_ns"] >= 0)
        assert res["network"]["bytes"] == base["network"]["bytes"]
        delay[fidelity] = allreduce_end_ns(art) - allreduce_end_ns(base_art)
    for fidelity, extra in delay.items():
        assert 0.3e6 <= extra <= 1.0e6, (fidelity, extra)


def test_spine_link_down_reroutes_over_the_other_spine(baselines):
    fault = [{"at": "1ms", "link": "leaf0-spine0", "down": "2ms"}]
    for fidelity in ("flow", "packet"):
        base_art, base = baselines[fidelity]
        art, res = run(fidelity, fault)
        record = res["faults"][0]
        assert record["flows_rerouted"] > 0 and record["isolated_hosts"] == []
        assert np.all(art.engine.flows["end_ns"] >= 0)
        # the bytes the failed link did not carry went over the other spine
        moved = link_bytes(base_art, "leaf0-spine0") - link_bytes(art, "leaf0-spine0")
        gained = link_bytes(art, "leaf0-spine1") - link_bytes(base_art, "leaf0-spine1")
        assert moved > 0 and gained == pytest.approx(moved, rel=0.02)
        # leaf-spine capacity is not the bottleneck (the NICs are): the all-reduce barely moves
        assert allreduce_end_ns(art) == pytest.approx(allreduce_end_ns(base_art), rel=0.01)


@pytest.mark.parametrize("fidelity, tolerance", [("flow", 0.02), ("packet", 0.1)])
def test_degraded_link_slows_the_ring_to_its_rate(baselines, fidelity, tolerance):
    base_art, _ = baselines[fidelity]
    # the default retransmission timeout: the 25G port's queue (up to ms) must not time out
    lossless = copy.deepcopy(DP4)
    lossless["network"]["attributes"] = {}
    art, res = run(fidelity, [{"at": "0ms", "link": "h0.nic0-leaf0", "rate": "25Gbps"}], base=lossless)
    colls = art.tables.collectives
    took = art.engine.task_end_ns[colls["end_task"]] - art.engine.task_start_ns[colls["start_task"]]
    base_took = (
        base_art.engine.task_end_ns[colls["end_task"]] - base_art.engine.task_start_ns[colls["start_task"]]
    )
    # a ring all-reduce moves 2(n-1)/n of the buffer through every link: 4x slower at 1/4 rate
    assert float(took[0] / base_took[0]) == pytest.approx(4.0, rel=tolerance)
    assert res["faults"][0]["rate_bps"] == 25e9 and res["faults"][0]["nominal_rate_bps"] == 100e9
    assert np.all(art.engine.flows["end_ns"] >= 0)
    assert res["network"]["drops"] == 0 and res["network"]["retransmits"] == 0


def test_go_back_n_goodput_formula():
    # W = ceil(100 Gb/s * 3.3 us / (8 * 4178 B)) = 10 frames in flight per round trip
    assert go_back_n_goodput(1e-3, 100e9, 3300.0, 4178) == pytest.approx(0.999 / 1.009)
    assert go_back_n_goodput(1e-6, 100e9, 3300.0, 4178) == pytest.approx(1.0, abs=1e-5)


def test_lossy_link_drops_frames_that_go_back_n_recovers(baselines):
    fault = [{"at": "0ms", "link": "h0.nic0-leaf0", "loss": 1e-3}]
    base_art, _ = baselines["packet"]
    art, res = run("packet", fault)
    record = res["faults"][0]
    assert record["frames_dropped"] > 0 and res["network"]["retransmits"] > record["frames_dropped"] // 2
    assert np.all(art.engine.flows["end_ns"] >= 0)
    assert allreduce_end_ns(art) > allreduce_end_ns(base_art)
    # the fluid model scales the link by the go-back-N goodput; that link bounds the ring
    base_flow, _ = baselines["flow"]
    flow_art, flow = run("flow", fault)
    factor = flow["faults"][0]["goodput_factor"]
    assert 0.9 < factor < 1.0
    colls = flow_art.tables.collectives
    took = int(
        flow_art.engine.task_end_ns[colls["end_task"][0]]
        - flow_art.engine.task_start_ns[colls["start_task"][0]]
    )
    base_took = int(
        base_flow.engine.task_end_ns[colls["end_task"][0]]
        - base_flow.engine.task_start_ns[colls["start_task"][0]]
    )
    assert took / base_took == pytest.approx(1 / factor, rel=0.01)


# TP 2 inside each host, DP 2 across two hosts: TP groups {GPU 0, 1} and {GPU 2, 3}.
TP2DP2 = copy.deepcopy(DP4)
TP2DP2["parallel"] = {"tp": 2, "pp": 1, "dp": 2}
TP2DP2["cluster"]["host_types"]["h100"]["gpus"] = 2
TP2DP2["cluster"]["hosts"] = [{"type": "h100", "count": 2}]
# compute runs for its planned durations: the straggler's stretch is checked against them (the
# contention of the backward's TP collectives beside the wgrad GEMMs would stretch them too)
TP2DP2["simulation"] = {**TP2DP2["simulation"], "compute_contention": False}


def tp_collectives(art, gpus: set[int]) -> np.ndarray:
    """Instances of the communicator whose GPUs are ``gpus``, in start order."""
    colls = art.tables.collectives
    groups = {int(k): {int(art.rank_gpu[r]) for r in v} for k, v in art.workload.groups.as_json().items()}
    mine = np.array([groups[int(g)] == gpus for g in colls["group"]])
    ids = np.flatnonzero(mine)
    return ids[np.argsort(art.engine.task_start_ns[colls["start_task"][ids]], kind="stable")]


def test_straggler_slows_exactly_the_collectives_that_wait_for_it():
    factor = 1.5
    base, _ = run("flow", base=TP2DP2)
    slow, res = run("flow", [{"at": "0ms", "gpu": 3, "slowdown": factor}], base=TP2DP2)
    colls = base.tables.collectives
    start_b, end_b = base.engine.task_start_ns, base.engine.task_end_ns
    start_s, end_s = slow.engine.task_start_ns, slow.engine.task_end_ns
    plan = base.tables.plan
    # Hand-computed timeline of the first tensor-parallel all-reduce of GPUs 2 and 3: both
    # compute the same ops back to back from 0, so it starts when GPU 3's compute before it is
    # done: at sum(d) nominally, at 1.5 * sum(d) with GPU 3 1.5x slower (GPU 2 waits for it).
    first = tp_collectives(base, {2, 3})[0]
    begin = start_b[colls["start_task"][first]]
    before = np.flatnonzero((plan.kind == 0) & (plan.gpu == 3) & (end_b >= 0) & (end_b <= begin))
    nominal = int(plan.duration_ns[before].sum())
    assert begin == nominal
    assert start_s[colls["start_task"][first]] == pytest.approx(factor * nominal, abs=len(before))
    assert (
        end_s[colls["end_task"][first]] - start_s[colls["start_task"][first]]
        == end_b[colls["end_task"][first]] - start_b[colls["start_task"][first]]
    )
    # the other tensor-parallel group never waits for GPU 3 before the data-parallel sync:
    # its collectives keep their times to the nanosecond
    dp = [
        i
        for i in range(len(colls["id"]))
        if colls["ranks"][i] == 2
        and i not in set(tp_collectives(base, {0, 1})) | set(tp_collectives(base, {2, 3}))
    ]
    first_dp = min(start_s[colls["start_task"][i]] for i in dp)
    other = [i for i in tp_collectives(base, {0, 1}) if end_b[colls["end_task"][i]] <= first_dp]
    assert other
    for i in other:
        assert start_s[colls["start_task"][i]] == start_b[colls["start_task"][i]]
        assert end_s[colls["end_task"][i]] == end_b[colls["end_task"][i]]
    # ... and every later collective of GPUs 2 and 3 is late
    for i in tp_collectives(base, {2, 3}):
        assert start_s[colls["start_task"][i]] > start_b[colls["start_task"][i]]
    record = res["faults"][0]
    compute3 = (plan.kind == 0) & (plan.gpu == 3)
    assert record["tasks_slowed"] == int(np.count_nonzero(compute3 & (plan.duration_ns > 1)))
    expected = (factor - 1) * plan.duration_ns[compute3].sum() * 1e-9
    # each stretched duration is rounded to the nanosecond
    assert record["extra_compute_s"] == pytest.approx(expected, abs=np.count_nonzero(compute3) * 1e-9)


def test_slowdown_windows_stretch_only_the_part_inside(native_lib):
    ns3 = native_lib.ns3
    windows = ns3.CreateObject[ns3.ComputeSlowdown]()
    gpu = np.array([0, 0], np.int32)
    start = np.array([1000, 5000], np.int64)
    end = np.array([2000, -1], np.int64)
    factor = np.array([2.0, 3.0])
    windows.SetWindows(2, gpu, start, end, factor)
    assert windows.Stretch(0, 500, 1000) == 1500  # 500 ns before, 500 ns of work in 1000 ns
    assert windows.Stretch(0, 1500, 1000) == 1250  # 250 of work in the window's last 500 ns
    assert windows.Stretch(0, 2500, 100) == 100  # between the windows
    assert windows.Stretch(0, 4000, 2000) == 4000  # 1000 free, then 1000 at 3x (open window)
    assert windows.Stretch(1, 0, 100) == 100  # another GPU
    assert windows.GetTasksSlowed() == 3 and windows.GetExtraNs() == 500 + 250 + 2000


def test_faults_are_in_results_and_on_a_perfetto_track(tmp_path):
    import json

    import yaml

    from heterosim.cli import main

    data = copy.deepcopy(DP4)
    data["faults"] = [
        {"at": "1ms", "link": "leaf0-spine0", "down": "1ms"},
        {"at": "0ms", "gpu": 2, "slowdown": 1.2, "until": "2ms"},
    ]
    path = tmp_path / "faults.yaml"
    path.write_text(yaml.safe_dump(data))
    out = tmp_path / "out"
    assert main(["run", str(path), "--out", str(out), "--quiet", "--no-plots"]) == 0
    results = json.loads((out / "results.json").read_text())
    assert [f["kind"] for f in results["faults"]] == ["down", "slowdown"]
    trace = json.loads((out / "trace.json").read_text())["traceEvents"]
    pid = next(e["pid"] for e in trace if e.get("ph") == "M" and e["args"].get("name") == "faults")
    slices = [e for e in trace if e["pid"] == pid and e["ph"] == "X"]
    assert [s["name"] for s in slices] == ["leaf0-spine0 down", "gpu 2 slowdown x1.2"]
    assert slices[0]["ts"] == pytest.approx(1000.0) and slices[0]["dur"] == pytest.approx(1000.0)
    assert any(e["pid"] == pid and e["ph"] == "i" for e in trace)


def test_routing_delay_leaves_traffic_on_the_dead_link_until_routes_converge(baselines):
    fault = [{"at": "1ms", "link": "leaf0-spine0", "down": "2ms"}]
    slow_routes = copy.deepcopy(DP4)
    slow_routes["network"]["routing_delay"] = "200us"
    instant = {f: run(f, fault) for f in ("flow", "packet")}
    delayed = {f: run(f, fault, base=slow_routes) for f in ("flow", "packet")}
    # packet: until the routes follow, frames hashed onto the dead link are dropped there
    assert (
        delayed["packet"][1]["faults"][0]["frames_dropped"]
        > instant["packet"][1]["faults"][0]["frames_dropped"]
    )
    assert np.all(delayed["packet"][0].engine.flows["end_ns"] >= 0)
    # flow: the flows on it stall for the 200 us, then move (the ring's later steps may catch up)
    f0, f1 = instant["flow"][0].engine.flows, delayed["flow"][0].engine.flows
    hit = (f0["start_ns"] <= 1_000_000) & (f0["end_ns"] >= 1_000_000)
    late = f1["end_ns"][hit] - f0["end_ns"][hit]
    assert hit.any() and 0 < late.max() <= 200_000 + 10_000  # the others may gain their share
    assert allreduce_end_ns(delayed["flow"][0]) >= allreduce_end_ns(instant["flow"][0])
    for f in ("flow", "packet"):
        assert delayed[f][1]["faults"][0]["flows_rerouted"] > 0
