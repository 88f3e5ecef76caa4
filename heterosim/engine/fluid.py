"""The ``flow`` fidelity: a fluid network model (``ns3::FluidNetwork``) on the packet model's topology.

Every flow takes the same route the packet network gives it (ECMP choice by
``TopologyDescription::FlowHash`` of the seed, flow id and endpoints, the packet network's hash)
and moves as a fluid at its max-min fair rate: each direction of each link is a resource with
capacity equal to its rate, and rates are recomputed (progressive filling) whenever a flow starts
or finishes. Recomputation is local and exact: only the flows the change can affect are
re-filled, and the result is checked against the max-min condition (every flow has a saturated
link on which no flow is faster) and widened until it holds; the ns-3 attribute
``FluidNetwork::LocalRecompute=false`` re-fills the whole connected component instead (same
rates, slower; see fluid-network.h). A flow of ``B``
bytes finishes ``sum(delay) + sum(P / rate) - P / min(rate)`` after its fluid transfer, with
``P = min(mtu, B)``: propagation plus one packet stored and forwarded per hop.

Frame overhead: network links (NIC access and switch fabric links) carry RoCEv2 frames, so the
share of their rate available to payload is ``mtu / (mtu + ROCE_OVERHEAD_BYTES)``, with the same
frame sizes as the packet model (ns3_modules/rdma/model/rdma-nic.h, RdmaFrameSizes): per data
packet Ethernet 14 + FCS 4 + IPv4 20 + UDP 8 + BTH 12 + ICRC 4 = 62 bytes plus preamble/SFD 8 and
inter-frame gap 12 (IEEE 802.3) = 82, and the ACK the packet model's NICs return for every data
packet (``RdmaNic::AckInterval`` = 1: 66 + 20 = 86 bytes). APPROXIMATION: the ACK bytes travel
on the reverse direction of the link; charging them to the data direction is exact when every
link direction carries data one way and the ACKs of the other (rings, all-to-all: collectives)
and pessimistic by 2 % for one-way transfers over an otherwise idle link. NVLink and PCIe links
carry payload only (their effective rates are set in heterosim.config.cluster). Experiments
get it by default (``network.frame_overhead: roce``); ``frame_overhead: none`` (the default of a
``NetworkConfig`` built in code) carries payload only, the behaviour before; the ns-3 attribute
``FluidNetwork::HeaderBytes`` in ``network.attributes`` overrides the number.

Spraying (``load_balancing: spray`` or ``spray_rr``, ``transport: uet``): every flow between hosts
is split evenly over all equal-cost fabric paths (``FluidNetwork::Spray``; each leaf and spine
switch divides what reaches it evenly over its next hops), which is where per-packet spraying
converges over many packets, and the max-min filling counts each link's load as the sum of the
flows' shares on it. UET's NSCC is abstracted as max-min fair sharing, like every congestion
control here. APPROXIMATION: no reordering, no queues and no losses of the lossy UET fabric.

Faults (:mod:`heterosim.engine.faults`): a link that goes down gets capacity 0 and the active
flows whose re-hashed path changes move to it (a flow left without a path waits at rate 0); a
degraded link gets its new capacity; a lossy link's capacity is scaled by the go-back-N goodput
(an approximation: the model has no frames to lose). Rates are then re-filled.

Approximations, by design: no queues (no queueing delay, no buffer limits), no congestion-control
dynamics (rates jump to the max-min fair allocation instantly), no packet loss, retransmission or
PFC, no priorities between traffic classes. Where the packet model is governed by those effects
(incast queues, PFC pauses, slow CC convergence) the two disagree.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from heterosim.config.choices import SPRAYING_LOAD_BALANCING
from heterosim.config.experiment import NetworkConfig
from heterosim.config.fabric import check_load_balancing
from heterosim.config.network_model import FLUID
from heterosim.engine import native
from heterosim.engine.attributes import check_network_attributes
from heterosim.engine.topology import Topology, to_native
from heterosim.errors import UserError

ATTRIBUTE_PREFIXES = ("ns3::FluidNetwork::", "FluidNetwork::")
ROCE_DATA_HEADER_BYTES = 62 + 20  # headers + preamble/SFD/IFG per data packet (RdmaFrameSizes)
ROCE_ACK_BYTES = 66 + 20  # one ACK frame per data packet (RdmaNic::AckInterval = 1)
ROCE_OVERHEAD_BYTES = ROCE_DATA_HEADER_BYTES + ROCE_ACK_BYTES
TCP_IP_HEADER_BYTES = 52  # IPv4 20 + TCP 20 + timestamp option 12 (SocketTransport's segment)


def sprays(network: NetworkConfig) -> bool:
    """Whether the fabric switches spray every flow's packets: ``load_balancing: spray`` or
    ``spray_rr``, or ``transport: uet`` (its per-packet entropy sprays over ECMP switches)."""
    return network.load_balancing in SPRAYING_LOAD_BALANCING or network.transport == "uet"


def create_fluid_network(gbl: Any, desc: Any, network: NetworkConfig, seed: int) -> Any:
    """An ``ns3::FluidNetwork`` on ``desc`` (an ``ns3::TopologyDescription``).

    ``network.mtu_bytes`` sets the store-and-forward packet size; ``network.attributes`` entries
    named ``FluidNetwork::<Attribute>`` (or ``ns3::FluidNetwork::<Attribute>``) override the
    model's attributes; other entries belong to the packet model and are ignored here, except
    ``SocketTransport::IpMtu`` and ``SocketTransport::TcpInitialCwnd``, which also set the fluid
    socket flows' segment (MTU - 52 header bytes) and initial window.
    """
    check_load_balancing(network, FLUID)
    ns3 = gbl.ns3
    texts = check_network_attributes(ns3, network.attributes, network.source)  # both models
    net = ns3.CreateObject[ns3.FluidNetwork]()
    net.SetAttribute("Mtu", ns3.UintegerValue(int(network.mtu_bytes)))
    net.SetAttribute("Seed", ns3.UintegerValue(int(seed) & 0xFFFFFFFF))
    net.SetAttribute("Ecmp", ns3.BooleanValue(bool(network.ecmp)))
    net.SetAttribute("Spray", ns3.BooleanValue(sprays(network)))
    header = ROCE_OVERHEAD_BYTES if network.frame_overhead == "roce" else 0
    net.SetAttribute("HeaderBytes", ns3.UintegerValue(header))
    for key, value in network.attributes.items():  # the socket transport's TCP, for its fluid flows
        name = str(key).removeprefix("ns3::")
        if name == "SocketTransport::IpMtu":
            net.SetAttribute("SocketMss", ns3.UintegerValue(int(value) - TCP_IP_HEADER_BYTES))
        elif name == "SocketTransport::TcpInitialCwnd":
            net.SetAttribute("SocketInitialCwnd", ns3.UintegerValue(int(value)))
    for key, value in network.attributes.items():
        for prefix in ATTRIBUTE_PREFIXES:
            if str(key).startswith(prefix):
                name = str(key)[len(prefix) :]
                if not net.SetAttributeFailSafe(name, ns3.StringValue(texts[str(key)])):
                    raise UserError(
                        f"{network.source or 'experiment'}: network: attributes: {key}: "
                        f"not a FluidNetwork attribute or bad value {value!r}"
                    )
    net.SetTopology(desc)
    return net


def fluid_link_stats(net: Any, topology: Topology, sim_end_ns: int) -> dict[str, np.ndarray]:
    """Per link direction (entry ``2 * link + direction``, direction 0 = a->b): bytes carried,
    busy time (some flow active) and utilization = bytes * 8 / (rate * sim_end)."""
    count = 2 * topology.num_links
    carried = np.zeros(count, np.uint64)
    busy = np.zeros(count, np.int64)
    net.CopyLinkStats(carried, busy)
    rate = np.repeat(topology.link_rate_bps, 2)
    seconds = max(sim_end_ns, 1) * 1e-9
    return {
        "link": np.repeat(np.arange(topology.num_links, dtype=np.int32), 2),
        "direction": np.tile(np.array([0, 1], np.int8), topology.num_links),
        "bytes": carried.astype(np.int64),
        "busy_ns": busy,
        "utilization": np.divide(
            carried.astype(np.float64) * 8.0, rate * seconds, out=np.zeros(count), where=rate > 0
        ),
    }


def fluid_counters(net: Any) -> dict[str, int]:
    """The network counters of the run contract; the fluid model has no drops, pauses or marks."""
    return {
        "flows": int(net.GetFlowsStarted()),
        "bytes": int(net.GetBytesDelivered()),
        "drops": 0,
        "retransmits": 0,
        "pfc_pause_frames": 0,
        "ecn_marks": 0,
        "cnps": 0,
    }


def reset_simulator(gbl: Any) -> None:
    """Destroy ns-3's simulator state so that the next run starts at time 0 with no events."""
    gbl.ns3.Simulator.Destroy()


def run_flows_fluid(
    topology: Topology,
    network: NetworkConfig,
    src: np.ndarray,
    dst: np.ndarray,
    size_bytes: np.ndarray,
    start_ns: np.ndarray,
    *,
    seed: int = 1,
    stop_ns: int | None = None,
) -> dict[str, Any]:
    """Run independent flows through the fluid model (the layout of ``packet.run_flows``).

    ``stop_ns`` ends the simulation at that time, as the packet model does: flows still running
    then are unfinished (``end_ns`` -1).

    Returns ``{"flows": {id, src, dst, bytes, start_ns, end_ns, fct_ns}, "links": {...},
    "network": counters, "sim_end_ns", "events", "wall_s"}``; flow ids are 0..n-1 in input order.
    ``sim_end_ns`` is the last flow's end when every flow finished, else the simulator's time.
    """
    src = np.ascontiguousarray(src, dtype=np.uint32)
    dst = np.ascontiguousarray(dst, dtype=np.uint32)
    size = np.ascontiguousarray(size_bytes, dtype=np.uint64)
    start = np.ascontiguousarray(start_ns, dtype=np.int64)
    n = int(src.shape[0])
    if not (dst.shape == size.shape == start.shape == (n,)):
        raise UserError("flows: src, dst, size and start must have the same length")
    gpus = len(topology.gpu_node)
    if n and (int(src.max()) >= gpus or int(dst.max()) >= gpus):
        raise UserError(f"flows: GPU index out of range (the cluster has {gpus} GPUs)")
    if np.any(src == dst) or np.any(size == 0) or np.any(start < 0):
        raise UserError("flows: every flow needs two different GPUs, >= 1 byte, start >= 0")
    gbl = native.load()
    started = time.perf_counter()
    reset_simulator(gbl)
    desc = to_native(topology, gbl)
    net = create_fluid_network(gbl, desc, network, seed)
    ids = np.arange(n, dtype=np.uint32)
    prio = np.zeros(n, np.uint8)
    net.ScheduleFlows(n, ids, src, dst, size, start, prio)
    if stop_ns is not None:
        gbl.ns3.Simulator.Stop(gbl.ns3.NanoSeconds(int(stop_ns)))
    gbl.ns3.Simulator.Run()
    end = np.empty(n, np.int64)
    net.CopyFinishTimes(n, ids, end)
    events = int(gbl.ns3.Simulator.GetEventCount())
    sim_end = int(gbl.ns3.Simulator.Now().GetNanoSeconds())
    if n and np.all(end >= 0):  # every flow finished: the run ends with the last one (as packet's)
        sim_end = int(end.max())
    if net.GetFlowsUnroutable():
        message = str(net.GetUnroutableMessage())
        reset_simulator(gbl)
        raise UserError(f"flows: {message}")
    links = fluid_link_stats(net, topology, sim_end)
    counters = fluid_counters(net)
    reset_simulator(gbl)
    net.Dispose()
    return {
        "flows": {
            "id": ids.astype(np.int64),
            "src": src.astype(np.int32),
            "dst": dst.astype(np.int32),
            "bytes": size.astype(np.int64),
            "start_ns": start,
            "end_ns": end,
            "fct_ns": np.where(end >= 0, end - start, -1),
        },
        "links": links,
        "network": counters,
        "sim_end_ns": sim_end,
        "events": events,
        "wall_s": time.perf_counter() - started,
    }
