"""ns-3 event queue of every run, and the recycled per-frame events of the packet network."""

from __future__ import annotations

import numpy as np
import pytest

from heterosim.config.cluster import parse_cluster
from heterosim.config.experiment import NetworkConfig
from heterosim.engine import native, packet
from heterosim.engine.topology import build_topology

pytestmark = pytest.mark.ns3


def two_leaves_incast():
    """Eight single-GPU hosts on two leaves, 2:1 oversubscribed: ECN, PFC and ECMP all act."""
    topo = build_topology(
        parse_cluster(
            {
                "host_types": {
                    "n": {"gpu": "H100-SXM", "gpus": 1, "fabric": "pcie", "nics": 1, "nic_speed": "100Gbps"}
                },
                "hosts": [{"type": "n", "count": 8}],
                "fabric": {
                    "kind": "fat-tree",
                    "hosts_per_leaf": 4,
                    "link_delay": "1us",
                    "oversubscription": 2,
                },
            },
            "incast.yaml",
        )
    )
    src = [1, 2, 3, 4, 5, 6, 7, 4, 5]
    dst = [0, 0, 0, 0, 0, 0, 0, 1, 2]
    sizes = [(1 + i % 3) << 20 for i in range(len(src))]
    starts = [i * 700 for i in range(len(src))]
    return topo, src, dst, sizes, starts


def run_incast(scheduler: str | None) -> dict:
    gbl = native.load()
    if scheduler is not None:
        gbl.ns3.GlobalValue.Bind("SchedulerType", gbl.ns3.StringValue(scheduler))
    try:
        topo, src, dst, sizes, starts = two_leaves_incast()
        network = NetworkConfig(cc="dcqcn", mtu_bytes=4096, pfc=True, buffer_bytes=2 << 20, ecmp=True)
        return packet.run_flows(topo, network, src, dst, sizes, starts, stop_ns=100_000_000)
    finally:
        gbl.ns3.GlobalValue.Bind("SchedulerType", gbl.ns3.StringValue(native.EVENT_SCHEDULER))


def test_every_run_uses_the_bucketed_event_queue(native_lib):
    gbl = native.load()
    value = gbl.ns3.StringValue()
    gbl.ns3.GlobalValue.GetValueByName("SchedulerType", value)
    assert value.Get() == native.EVENT_SCHEDULER == "ns3::ShiftableScheduler"


def test_event_queue_changes_nothing_but_speed(native_lib):
    """Every queue pops by (time, insertion order): the same events in the same order, so every
    finish time, counter and event count is identical to ns-3's default MapScheduler and to its
    binary heap, and to the bucketed queue with a ring so small that most events wait in its far
    heap."""
    default = run_incast("ns3::MapScheduler")
    assert default["counters"]["ecn_marks"] > 0 and default["counters"]["pfc_pause_frames"] > 0
    assert (default["flows"]["end_ns"] > 0).all()
    gbl = native.load()
    import cppyy

    cppyy.include("ns3/config.h")
    cppyy.include("ns3/uinteger.h")
    gbl.ns3.Config.SetDefault("ns3::ShiftableScheduler::Buckets", gbl.ns3.UintegerValue(4))
    try:
        tiny_ring = run_incast(None)
    finally:
        gbl.ns3.Config.SetDefault("ns3::ShiftableScheduler::Buckets", gbl.ns3.UintegerValue(512))
    for other in (run_incast("ns3::PriorityQueueScheduler"), run_incast(None), tiny_ring):
        np.testing.assert_array_equal(default["flows"]["end_ns"], other["flows"]["end_ns"])
        assert default["counters"] == other["counters"]
        assert default["events"] == other["events"]


def test_frame_events_are_recycled(native_lib):
    """Receive and transmit-complete events come from a free list: none outlives a run, and a
    second identical run takes no new block from the heap (the first one's blocks are reused)."""
    event_class = native.load().ns3.QbbDeviceEvent
    first = run_incast(None)
    assert int(event_class.GetLive()) == 0
    allocated = int(event_class.GetAllocated())
    assert 0 < allocated
    second = run_incast(None)
    assert int(event_class.GetLive()) == 0
    assert int(event_class.GetAllocated()) == allocated
    assert second["events"] == first["events"] > 50_000
