"""Packet fidelity with ``simulation.intra_host: flow``: intra-host copies in the fluid model,
the fabric frame by frame, and nothing else changed."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from heterosim.cli import main
from heterosim.config.cluster import load_cluster
from heterosim.config.experiment import NetworkConfig
from heterosim.engine import packet
from heterosim.engine.fluid import run_flows_fluid
from heterosim.engine.topology import NIC, NVLINK, build_topology
from heterosim.errors import UserError

pytestmark = pytest.mark.ns3

REPO = Path(__file__).resolve().parents[2]

NETWORK = NetworkConfig(cc="dcqcn", mtu_bytes=4096, pfc=True, buffer_bytes=16 << 20, ecmp=True, attributes={})


def dgx_pair():
    """Two 8-GPU NVSwitch hosts, 8 x 400G NICs each, rail-optimised (the shipped topology)."""
    return build_topology(load_cluster(REPO / "topologies" / "two_host_h100.yaml"))


# Intra-host flows first (ids 0..5: a contended NVLink incast into GPU 3 and a ring), then
# inter-host flows (a 2-to-1 incast into GPU 8 of host 1, one of them cross-rail, and a
# cross-rail flow back).
INTRA = ([0, 1, 2, 4, 5, 6], [3, 3, 3, 5, 6, 4], [8 << 20, 4 << 20, 2 << 20, 3 << 20, 3 << 20, 3 << 20])
INTER = ([0, 1, 9], [8, 8, 2], [6 << 20, 6 << 20, 5 << 20])


def _flows():
    src = INTRA[0] + INTER[0]
    dst = INTRA[1] + INTER[1]
    size = INTRA[2] + INTER[2]
    start = [0, 0, 10_000, 0, 5_000, 0] + [0, 0, 2_000]
    return src, dst, size, start


def test_intra_host_flows_match_the_fluid_model_and_leave_the_fabric_unchanged(native_lib):
    topo = dgx_pair()
    src, dst, size, start = _flows()
    k = len(INTRA[0])
    frames = packet.run_flows(topo, NETWORK, src, dst, size, start, stop_ns=50_000_000)
    hybrid = packet.run_flows(topo, NETWORK, src, dst, size, start, stop_ns=50_000_000, intra_host="flow")
    fluid = run_flows_fluid(
        topo, NETWORK, np.array(src[:k]), np.array(dst[:k]), np.array(size[:k]), np.array(start[:k])
    )
    assert (hybrid["flows"]["end_ns"] > 0).all() and (frames["flows"]["end_ns"] > 0).all()
    # intra-host flows: exactly the fluid model's finish times
    assert hybrid["flows"]["end_ns"][:k].tolist() == fluid["flows"]["end_ns"].tolist()
    # inter-host flows: share no link with them, so the fabric run is the same frame for frame
    assert hybrid["flows"]["end_ns"][k:].tolist() == frames["flows"]["end_ns"][k:].tolist()
    nic = topo.node_kind[frames["ports"]["node"]] == NIC
    for key in ("bytes_sent", "frames_sent", "ecn_marks", "pause_sent"):
        assert hybrid["ports"][key][nic].tolist() == frames["ports"][key][nic].tolist(), key
    # The packet model of NVLink copies agrees with the fluid one where nothing contends (the
    # ring: payload-only frames, one frame of store-and-forward per hop) and on the time to drain
    # an incast; how the incast's flows share the NVSwitch port differs (frames queue FIFO in
    # the deep lossless host buffer, so the late flow waits behind the early ones' backlog,
    # while max-min shares equally at once).
    ring = frames["flows"]["fct_ns"][3:k] / hybrid["flows"]["fct_ns"][3:k]
    assert np.all(np.abs(ring - 1) < 0.01), ring
    drain = frames["flows"]["end_ns"][:3].max() / hybrid["flows"]["end_ns"][:3].max()
    assert abs(drain - 1) < 0.02, drain
    # and no NVLink frame was simulated, while NVLink bytes are still reported
    nvl = topo.link_kind[hybrid["ports"]["link"]] == NVLINK
    assert int(hybrid["ports"]["frames_sent"][nvl].sum()) == 0
    # every intra-host byte crosses two NVLink directions (GPU -> NVSwitch -> GPU)
    assert int(hybrid["ports"]["bytes_sent"][nvl].sum()) == 2 * sum(INTRA[2])
    assert int(frames["ports"]["bytes_sent"][nvl].sum()) == 2 * sum(INTRA[2])
    assert hybrid["counters"]["bytes"] == frames["counters"]["bytes"] == sum(size)
    assert hybrid["counters"]["flows"] == frames["counters"]["flows"] == len(size)
    assert hybrid["counters"]["frames"] < frames["counters"]["frames"]


def test_intra_host_model_name_is_checked(native_lib):
    topo = dgx_pair()
    with pytest.raises(UserError, match="intra_host"):
        packet.run_flows(topo, NETWORK, [0], [1], [1000], [0], stop_ns=1000, intra_host="fluid")
    # the ns-3 attribute itself only takes its two names
    bad = NetworkConfig(
        cc="dcqcn",
        mtu_bytes=4096,
        pfc=True,
        buffer_bytes=16 << 20,
        ecmp=True,
        attributes={"HostFlows": "frames"},
    )
    with pytest.raises(UserError, match="HostFlows"):
        packet.run_flows(topo, bad, [0], [1], [1000], [0], stop_ns=1000)
    fluid = NetworkConfig(
        cc="dcqcn",
        mtu_bytes=4096,
        pfc=True,
        buffer_bytes=16 << 20,
        ecmp=True,
        attributes={"HostFlows": "fluid"},
    )
    res = packet.run_flows(topo, fluid, [0], [1], [1 << 20], [0], stop_ns=10_000_000)
    nvl = topo.link_kind[res["ports"]["link"]] == NVLINK
    assert res["flows"]["end_ns"][0] > 0 and int(res["ports"]["frames_sent"][nvl].sum()) == 0


def test_intra_host_flow_in_an_experiment(tmp_path, native_lib, capsys):
    """The option reaches a whole run and results.json records it; a bad value is a one-line
    error naming the key, with nothing written."""
    out = tmp_path / "run"
    assert (
        main(
            [
                "run",
                str(REPO / "workloads" / "default.yaml"),
                "--no-plots",
                "--out",
                str(out),
                "--set",
                "simulation.intra_host=flow",
            ]
        )
        == 0
    )
    results = json.loads((out / "results.json").read_text())
    assert results["experiment"]["resolved"]["simulation"]["intra_host"] == "flow"
    assert results["network"]["drops"] == 0
    capsys.readouterr()
    assert (
        main(
            [
                "run",
                str(REPO / "workloads" / "default.yaml"),
                "--no-plots",
                "--out",
                str(tmp_path / "bad"),
                "--set",
                "simulation.intra_host=fluid",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "simulation.intra_host" in err[0] and "packet" in err[0]
    assert not (tmp_path / "bad").exists()


def test_long_packet_runs_of_intra_host_copies_get_a_hint():
    """The note names the share of intra-host bytes and the option, only where it applies."""
    from dataclasses import replace

    from heterosim.config.experiment import load_experiment
    from heterosim.simulate import intra_host_note, prepare_run

    exp = load_experiment(REPO / "workloads" / "examples" / "topology_ab.yaml")  # DP4 x TP8 on 32 GPUs
    prepared = prepare_run(exp)
    tables, topology = prepared.tables, prepared.topology
    plan = tables.plan
    flows = plan.kind == 1
    host = topology.node_host[topology.gpu_node]
    inside = host[plan.gpu[flows]] == host[plan.dst[flows]]
    share = plan.bytes[flows][inside].sum() / plan.bytes[flows].sum()
    assert share > 0.5  # TP8 all-reduces over NVSwitch dominate
    packet = replace(exp, simulation=replace(exp.simulation, fidelity="packet", intra_host="packet"))
    note = intra_host_note(packet, plan, topology, min_bytes=0)
    assert note is not None and f"{share:.0%}" in note and "simulation.intra_host=flow" in note
    assert intra_host_note(packet, plan, topology) is None  # a short run: no hint
    for sim in (replace(packet.simulation, intra_host="flow"), replace(packet.simulation, fidelity="flow")):
        assert intra_host_note(replace(packet, simulation=sim), plan, topology, min_bytes=0) is None
