"""One queue pair per NCCL connection: a collective's flows on one (channel, source, destination)
are messages sent one after another, and other traffic sees the connection as one flow.

Fluid-model times are checked exactly against the model's formula (transfer at the max-min rate
plus the path latency of heterosim.engine.fluid); packet-model times against the same shares
within packetization and congestion-control tolerances.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from heterosim.cli import main
from heterosim.config.cluster import load_cluster
from heterosim.config.experiment import NetworkConfig
from heterosim.engine.executor import engine_config, execute_plan
from heterosim.engine.topology import build_topology
from heterosim.errors import UserError
from heterosim.plan.execution_plan import FLOW, MARKER, ExecutionPlan, connection_ids

REPO = Path(__file__).resolve().parents[2]
MTU = 4096
NETWORK = NetworkConfig(cc="dcqcn", mtu_bytes=MTU, pfc=True, buffer_bytes=32 << 20, ecmp=True)
B = 4 << 20


def plan_of(flows: list[tuple[int, int, int, int, int]], num_gpus: int = 16) -> ExecutionPlan:
    """flows: (src, dst, bytes, collective, channel), all released at time 0."""
    n = len(flows)
    col = np.array(flows, np.int64).reshape(n, 5)
    return ExecutionPlan(
        kind=np.full(n, FLOW, np.uint8),
        gpu=col[:, 0].astype(np.int32),
        dst=col[:, 1].astype(np.int32),
        bytes=col[:, 2].copy(),
        duration_ns=np.zeros(n, np.int64),
        delay_ns=np.zeros(n, np.int64),
        stream=np.zeros(n, np.int16),
        priority=np.zeros(n, np.uint8),
        dep_ptr=np.zeros(n + 1, np.int64),
        dep_idx=np.zeros(0, np.int64),
        rank=np.full(n, -1, np.int32),
        node=np.full(n, -1, np.int64),
        collective=col[:, 3].copy(),
        num_gpus=num_gpus,
        channel=col[:, 4].astype(np.int16),
    )


@pytest.fixture(scope="module")
def topo():
    return build_topology(load_cluster(REPO / "topologies" / "two_host_h100.yaml"))


def lone_flow(topo, src: int, dst: int, size: int) -> tuple[float, int]:
    """(bottleneck rate in bytes/ns, path latency in ns) of a flow in the fluid model."""
    links = topo.path_links(src, dst, 0)
    rates = [float(topo.link_rate_bps[k]) for k in links]
    per_hop = [min(MTU, size) * 8e9 / r for r in rates]
    latency = int(sum(int(topo.link_delay_ns[k]) for k in links)) + round(sum(per_hop) - max(per_hop))
    return min(rates) / 8e9, latency


def transfer_ns(size: float, rate: float) -> int:
    return math.ceil(size / rate - 1e-6)


def test_connection_ids_group_channel_source_and_destination():
    plan = plan_of(
        [
            (0, 8, 100, 0, 1),
            (0, 8, 100, 0, 0),
            (0, 8, 100, 0, 1),
            (0, 8, 100, 0, 0),  # 2 channels
            (1, 9, 100, 0, 0),
            (1, 9, 100, 0, 0),
            (0, 8, 100, 1, 0),
            (0, 8, 100, 1, 0),  # other pair,
            (0, 8, 100, -1, -1),
            (0, 8, 100, -1, -1),  # other instance; p2p flows are never grouped
            (8, 0, 100, 0, 0),  # a connection of one flow (the reverse direction) is that flow alone
        ]
    )
    ids = connection_ids(plan)
    assert ids.tolist() == [0, 1, 0, 1, 2, 2, 3, 3, -1, -1, -1]
    plan.kind[3] = MARKER  # only flows are on connections: flow 1 is now alone on its channel
    assert connection_ids(plan).tolist() == [0, -1, 0, -1, 1, 1, 2, 2, -1, -1, -1]


def reference_connection_ids(plan: ExecutionPlan) -> list[int]:
    groups: dict[tuple, list[int]] = {}
    for i in range(len(plan)):
        if plan.kind[i] == FLOW and plan.collective[i] >= 0 and plan.channel[i] >= 0:
            key = (int(plan.collective[i]), int(plan.channel[i]), int(plan.gpu[i]), int(plan.dst[i]))
            groups.setdefault(key, []).append(i)
    out = [-1] * len(plan)
    shared = sorted((g for g in groups.values() if len(g) >= 2), key=lambda g: g[0])
    for number, members in enumerate(shared):
        for i in members:
            out[i] = number
    return out


@pytest.mark.parametrize("collective_base", [0, 1 << 40])  # one sort key, and the lexsort path
def test_connection_ids_match_a_reference_on_random_plans(collective_base):
    rng = np.random.default_rng(7)
    n = 3000
    src = rng.integers(0, 16, n)
    dst = (src + rng.integers(1, 16, n)) % 16
    collective = np.where(rng.random(n) < 0.1, -1, collective_base + rng.integers(0, 5, n))
    channel = np.where(collective < 0, -1, rng.integers(0, 4, n))
    plan = plan_of(list(zip(src, dst, [100] * n, collective, channel)))
    plan.kind[rng.random(n) < 0.05] = MARKER
    assert connection_ids(plan).tolist() == reference_connection_ids(plan)


def test_fluid_messages_of_a_connection_go_one_after_another(topo, native_lib):
    rate, latency = lone_flow(topo, 0, 8, B)
    plan = plan_of([(0, 8, B, 0, 0), (0, 8, B, 0, 0)])
    shared = execute_plan(plan, topo, NETWORK, engine_config(fidelity="flow", queue_pairs="connection"))
    assert shared.task_end_ns.tolist() == [transfer_ns(B, rate) + latency, 2 * transfer_ns(B, rate) + latency]
    separate = execute_plan(plan, topo, NETWORK, engine_config(fidelity="flow", queue_pairs="flow"))
    assert separate.task_end_ns.tolist() == [transfer_ns(2 * B, rate) + latency] * 2
    for res in (shared, separate):
        assert res.network["bytes"] == 2 * B
        assert int(res.links["bytes"].sum()) == 2 * B * len(topo.path_links(0, 8, 0))


def test_fluid_other_traffic_gets_one_share_against_a_connection(topo, native_lib):
    """Two chunks in flight on one connection and a pipeline send on the same NIC: the send gets
    half the link (one queue pair against one), not a third (one flow per chunk)."""
    rate, latency = lone_flow(topo, 0, 8, B)
    plan = plan_of([(0, 8, B, 0, 0), (0, 8, B, 0, 0), (0, 8, B, -1, -1)])
    shared = execute_plan(plan, topo, NETWORK, engine_config(fidelity="flow", queue_pairs="connection"))
    separate = execute_plan(plan, topo, NETWORK, engine_config(fidelity="flow", queue_pairs="flow"))
    assert shared.task_end_ns[2] == transfer_ns(2 * B, rate) + latency
    assert separate.task_end_ns[2] == transfer_ns(3 * B, rate) + latency
    # the connection ends as before (to the rounding of each message's transfer to whole ns):
    # the link was busy throughout
    assert separate.makespan_ns == transfer_ns(3 * B, rate) + latency
    assert abs(shared.makespan_ns - separate.makespan_ns) <= 1


@pytest.mark.ns3
def test_packet_messages_of_a_connection_share_one_queue_pair(topo, native_lib):
    rate, _ = lone_flow(topo, 0, 8, B)
    plan = plan_of([(0, 8, B, 0, 0), (0, 8, B, 0, 0), (0, 8, B, -1, -1)])
    shared = execute_plan(plan, topo, NETWORK, engine_config(fidelity="packet", queue_pairs="connection"))
    separate = execute_plan(plan, topo, NETWORK, engine_config(fidelity="packet", queue_pairs="flow"))
    wire = (MTU + 62) / MTU  # headers (RoCEv2 + INT) on every frame: rates are ~1.5 % lower
    # The send gets half the NIC against the connection; the connection's first message, at the
    # other half, ends with it; the second then has the whole NIC.
    first, second, send = shared.task_end_ns.astype(float) / (B / rate * wire)
    assert first == pytest.approx(2, rel=0.08) and send == pytest.approx(2, rel=0.08)
    assert second == pytest.approx(3, rel=0.08)
    # With a queue pair per chunk the send gets a third, and all three end together.
    assert separate.task_end_ns / (B / rate * wire) == pytest.approx([3, 3, 3], rel=0.08)
    for res in (shared, separate):
        assert res.network["bytes"] == 3 * B
        assert res.network["drops"] == 0 and res.network["retransmits"] == 0
        assert res.flows["bytes"].tolist() == [B, B, B]


@pytest.mark.ns3
def test_packet_and_fluid_agree_on_a_connection_burst(topo, native_lib):
    """Eight chunks posted at once on one connection, across hosts: the same FIFO in both models."""
    plan = plan_of([(0, 8, 1 << 20, 0, 0)] * 8)
    fluid = execute_plan(plan, topo, NETWORK, engine_config(fidelity="flow"))
    frames = execute_plan(plan, topo, NETWORK, engine_config(fidelity="packet"))
    assert np.all(np.diff(fluid.task_end_ns) > 0) and np.all(np.diff(frames.task_end_ns) > 0)
    ratio = frames.task_end_ns / fluid.task_end_ns
    assert np.all(np.abs(ratio - 1) < 0.05), ratio


def test_inconsistent_connection_is_an_execution_plan_error(topo, native_lib, monkeypatch):
    import heterosim.engine.executor as executor_module

    plan = plan_of([(0, 8, B, 0, 0), (0, 9, B, 0, 0)])
    monkeypatch.setattr(executor_module, "connection_ids", lambda p: np.zeros(len(p), np.int64))
    with pytest.raises(UserError, match="connection 0 joins flows 0 and 1"):
        execute_plan(plan, topo, NETWORK, engine_config(fidelity="flow"))
    monkeypatch.undo()
    with pytest.raises(UserError, match="queue_pairs"):
        execute_plan(plan, topo, NETWORK, engine_config(fidelity="flow", queue_pairs="chunk"))


def test_queue_pairs_setting_in_an_experiment(tmp_path, native_lib, capsys):
    out = tmp_path / "run"
    code = main(
        [
            "run",
            str(REPO / "workloads" / "default.yaml"),
            "--fidelity",
            "flow",
            "--no-plots",
            "--out",
            str(out),
            "--set",
            "simulation.queue_pairs=flow",
        ]
    )
    assert code == 0
    resolved = json.loads((out / "results.json").read_text())["experiment"]["resolved"]
    assert resolved["simulation"]["queue_pairs"] == "flow"
    bad = tmp_path / "bad"
    code = main(
        [
            "run",
            str(REPO / "workloads" / "default.yaml"),
            "--fidelity",
            "flow",
            "--no-plots",
            "--out",
            str(bad),
            "--set",
            "simulation.queue_pairs=chunk",
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and "simulation.queue_pairs" in err and "Traceback" not in err
    assert not bad.exists()


@pytest.mark.ns3
def test_packet_connection_recovers_losses_across_message_boundaries(topo, native_lib):
    """A lossy fabric (PFC off, small buffer) under a 3-to-1 incast of connections: go-back-N
    rewinds into earlier messages of a queue pair, every message still completes, in order per
    connection."""
    lossy = NetworkConfig(cc="none", mtu_bytes=MTU, pfc=False, buffer_bytes=256 << 10, ecmp=True)
    flows = []
    for src in (0, 1, 2):  # GPUs 0-2 of host 0 into GPU 8 of host 1: cross-rail for 1 and 2
        flows += [(src, 8, 1 << 20, src, 0)] * 4  # 4 messages on each connection
    plan = plan_of(flows)
    res = execute_plan(plan, topo, lossy, engine_config(fidelity="packet"), stall_timeout_ns=10**10)
    assert not res.partial and res.error is None
    assert res.network["drops"] > 0 and res.network["retransmits"] > 0
    assert res.network["bytes"] == 12 << 20
    ends = res.task_end_ns.reshape(3, 4)
    assert np.all(np.diff(ends, axis=1) > 0)  # FIFO per connection
