"""The ``packet`` fidelity: the ns-3 packet-level RDMA network (``ns3::PacketNetwork``).

Every topology link is a pair of ns-3 devices with the link's rate and delay; switches have
per-priority output queues, a shared buffer with PFC, RED ECN marking and ECMP; GPU and NIC
nodes run an RDMA (RoCEv2) transport with one queue pair per flow (or per NCCL connection,
whose flows are messages on it: ``simulation.queue_pairs``) and the selected congestion
control (see ``ns3_modules/rdma`` and ``ns3_modules/switch``). Flows between GPUs of one host
stay on NVLink/PCIe and never touch a NIC; flows between hosts run NIC to NIC, with the
GPUDirect PCIe segments modelled as a rate cap and a latency (see ``packet-network.h``).

Flows between hosts where either end is a ``transport: socket`` host run as NCCL's socket
transport over ns-3's own TCP on the same devices and switches (``ns3::SocketTransport``,
``ns3_modules/socket``); :func:`tcp_stats` reads its per-connection congestion-control counters
(cwnd, retransmissions, timeouts) and the sampled cwnd series.

Faults (:mod:`heterosim.engine.faults`) act on the ports: a link down drops what its ports hold
and what is on the wire, fabric routes are recomputed and the switches re-hash over the paths
left; a degraded link changes its ports' rate; a lossy link drops arriving frames at random.

Python builds the network, schedules flows from arrays, runs the simulator and reads every
counter back in bulk through ``ns3::PacketNetworkStats``; it is never called per packet or per
flow.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from heterosim.config.choices import (
    CC_ALGORITHMS,
    CC_TYPE_IDS,
    INTRA_HOST_MODELS,
    PACKET_ACCELERATIONS,
    require_choice,
)
from heterosim.config.experiment import NetworkConfig
from heterosim.config.fabric import check_load_balancing, check_uet
from heterosim.config.network_model import PACKET
from heterosim.engine import native
from heterosim.engine.attributes import check_network_attributes
from heterosim.engine.topology import Topology, to_native
from heterosim.errors import UserError

DEFAULT_PRIORITY = 3  # the lossless RoCE traffic class of common deployments
FLUID_PREFIXES = ("ns3::FluidNetwork::", "FluidNetwork::")
COUNTER_NAMES = (
    "flows",
    "bytes",
    "drops",
    "retransmits",
    "pfc_pause_frames",
    "ecn_marks",
    "cnps",
    "frames",
    "timeouts",
)
TCP_STREAM_FIELDS = (
    "first_flow",
    "src_node",
    "dst_node",
    "socket",
    "bytes",
    "received_bytes",
    "max_cwnd_bytes",
    "last_cwnd_bytes",
    "retransmits",
    "timeouts",
    "fast_recoveries",
)
TCP_ATTRIBUTE_PREFIXES = ("SocketTransport::", "ns3::SocketTransport::")
PORT_FIELDS = (
    "bytes_sent",
    "max_queue_bytes",
    "mean_queue_bytes",
    "pause_sent",
    "pause_received",
    "paused_ns",
    "ecn_marks",
    "drops",
    "frames_sent",
    "trims",  # network.trimming: data frames bound for the port cut to their header (kept only then)
)


def _attribute_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def create_packet_network(
    gbl: Any,
    topology_desc: Any,
    network: NetworkConfig,
    seed: int,
    sample_interval_ns: int = 0,
    sample_all_ports: bool = False,
    intra_host: str = "packet",
    acceleration: str = "exact",
) -> Any:
    """An ``ns3::PacketNetwork`` built on ``topology_desc`` (an ``ns3::TopologyDescription``).

    ``acceleration="fast"`` lets ``ns3::PacketFastForward`` skip settled stretches of the run
    (``PacketNetwork::Acceleration``; its thresholds are ``PacketFastForward::`` attributes);
    ``"memo"`` lets ``ns3::PacketEpisodeCache`` replay repeated contention episodes
    (``PacketEpisodeCache::`` attributes); ``"fast+memo"`` does both.

    ``intra_host="flow"`` carries flows between GPUs of one host in a fluid network on the host
    links (``PacketNetwork::HostFlows=fluid``) instead of frame by frame; the fabric stays
    packet-level.

    ``network`` gives the congestion control, MTU (payload bytes per packet), PFC, switch
    buffer, ECMP switch, load balancing of leaf/spine switches (``LoadBalancing``,
    ``LoadBalancer::FlowletGap``) and the NICs' loss recovery (``RdmaNic::Transport``);
    ``network.attributes`` overrides any attribute of the network or
    of the components it creates by name (``RateAi``, ``Dcqcn::RateAi``, ``EcnKmin``,
    ``AckInterval``, ...; ``Dcqcn::RateAi: 0bps`` derives DCQCN's step from each NIC's own line
    rate, see dcqcn.h). ``FluidNetwork::`` entries belong to the flow model and are skipped.
    """
    _check_settings(network, seed, intra_host, acceleration, sample_interval_ns)
    ns3 = gbl.ns3
    net = ns3.CreateObject[ns3.PacketNetwork]()
    settings = _settings(network, seed, sample_interval_ns, sample_all_ports, intra_host, acceleration)
    for name, value in settings.items():
        if not net.SetComponentAttribute(name, _attribute_text(value)):
            raise UserError(f"network: {name}: invalid value {value!r}")
    _apply_attribute_overrides(ns3, net, network)
    if not net.Build(topology_desc):
        raise _build_error(ns3, net, network)
    if net.GetSmallestSharedPool() == 0:
        raise UserError(
            f"{_where(network)}network: buffer: {network.buffer_bytes} bytes leave no shared buffer at a "
            "fabric switch once PFC headroom and per-port reserves are set aside; raise it"
        )
    return net


def _where(network: NetworkConfig) -> str:
    return f"{network.source}: " if network.source else ""


def _check_settings(
    network: NetworkConfig, seed: int, intra_host: str, acceleration: str, sample_interval_ns: int
) -> None:
    """The run's settings, each a one-line error when out of range or not runnable together."""
    require_choice("network: cc", network.cc, CC_ALGORITHMS)
    if seed < 0:
        raise UserError(f"simulation: seed: expected an integer >= 0, got {seed}")
    require_choice("simulation: intra_host", intra_host, INTRA_HOST_MODELS)
    require_choice("simulation: packet_acceleration", acceleration, PACKET_ACCELERATIONS)
    check_load_balancing(network, PACKET)
    check_uet(network)
    if sample_interval_ns < 0:
        raise UserError(f"simulation: sample_interval: expected >= 0, got {sample_interval_ns} ns")
    if "memo" in acceleration.split("+") and (network.trimming or network.cc == "rccc"):
        key = "network.trimming: true" if network.trimming else "network.cc: rccc"
        raise UserError(
            f"{_where(network)}simulation: packet_acceleration: {acceleration!r} replays recorded "
            f"episodes without the switches' trims and the receivers' credit pacers; with {key} use "
            "exact or fast"
        )


def _settings(
    network: NetworkConfig,
    seed: int,
    sample_interval_ns: int,
    sample_all_ports: bool,
    intra_host: str,
    acceleration: str,
) -> dict[str, Any]:
    """The packet network's and its components' attributes the experiment sets."""
    settings: dict[str, Any] = {
        "Cc": CC_TYPE_IDS[network.cc],
        "Mtu": int(network.mtu_bytes),
        "PfcEnabled": bool(network.pfc),
        "BufferSize": int(network.buffer_bytes),
        "Ecmp": bool(network.ecmp),
        "LoadBalancing": network.load_balancing,
        "LoadBalancer::FlowletGap": f"{int(network.flowlet_gap_ns)}ns",
        "RdmaNic::Transport": network.transport,
        "Seed": int(seed) & 0xFFFFFFFF,
        "SampleInterval": f"{int(sample_interval_ns)}ns",
        "SampleAllPorts": bool(sample_all_ports),
        "HostFlows": "fluid" if intra_host == "flow" else "packet",
        "Acceleration": acceleration,
    }
    if network.trimming:  # switches trim, UET receivers NACK the headers (config/fabric.py)
        settings["RdmaSwitch::Trimming"] = True
        settings["RdmaNic::UetTrimming"] = True
    if sample_interval_ns > 0:  # cwnd series of socket hosts at the sampling period
        settings["SocketTransport::CwndSampleInterval"] = f"{int(sample_interval_ns)}ns"
    return settings


def _apply_attribute_overrides(ns3: Any, net: Any, network: NetworkConfig) -> None:
    """``network.attributes`` (checked before ns-3 parses them); the fluid model's are skipped."""
    texts = check_network_attributes(ns3, network.attributes, network.source)
    for key, value in network.attributes.items():
        name = str(key)
        if name.startswith(FLUID_PREFIXES):
            continue
        if not net.SetComponentAttribute(name, texts[name]):
            raise UserError(
                f"{_where(network)}network: attributes: {name}: not an attribute of the packet network "
                f"or its components, or {value!r} is not a valid value for it"
            )


def _build_error(ns3: Any, net: Any, network: NetworkConfig) -> UserError:
    """Why ``PacketNetwork::Build`` refused: a host-flow mode, a TCP congestion control or the
    congestion control that ns-3 does not know."""
    where = _where(network)
    host_flows = ns3.StringValue()
    net.GetAttribute("HostFlows", host_flows)
    if str(host_flows.Get()) not in ("packet", "fluid"):
        return UserError(
            f"{where}network: attributes: HostFlows: expected packet or fluid, got {str(host_flows.Get())!r}"
        )
    tcp = next(
        (
            str(v)
            for k, v in network.attributes.items()
            if str(k).startswith(TCP_ATTRIBUTE_PREFIXES) and str(k).endswith("::TcpCongestionControl")
        ),
        None,
    )
    if tcp is not None:
        return UserError(
            f"{where}network: attributes: SocketTransport::TcpCongestionControl: {tcp!r} "
            "is not an ns-3 TCP congestion control (e.g. ns3::TcpCubic, "
            "ns3::TcpDctcp, ns3::TcpNewReno)"
        )
    return UserError(f"{where}network: cc: unknown congestion control {network.cc!r}")


FAST_FORWARD_FIELDS = (
    "episodes",
    "skipped_ns",
    "skipped_bytes",
    "checks",
    "not_settled",
    "congestion_or_losses",
    "next_change_too_close",
    "after_fault",
    "not_supported",
    "congested_episodes",
    "congested_skipped_ns",
)


def network_stats(net: Any) -> Any:
    """The ``ns3::PacketNetworkStats`` of ``net``: bulk copies of its counters and series."""
    return native.load().ns3.PacketNetworkStats(net)


def fast_forward_stats(net: Any) -> dict[str, int]:
    """Steady-state fast-forward counters (``PacketFastForward``; zeros in exact mode)."""
    values = np.zeros(len(FAST_FORWARD_FIELDS), np.uint64)
    network_stats(net).CopyFastForwardStats(values)
    return {name: int(v) for name, v in zip(FAST_FORWARD_FIELDS, values)}


MEMO_FIELDS = (
    "lookups",
    "hits",
    "recorded",
    "discarded",
    "not_idle",
    "not_eligible",
    "interrupted",
    "queue_pairs_replayed",
    "bytes_replayed",
    "frames_avoided",
    "entries",
    "entries_refused",
    "trajectory_samples",
    "congested_not_replayed",
)
MEMO_KEY = (
    "queue pairs created at one instant whose data/ACK paths share links, starting idle (no other "
    "unfinished queue pair or replay on those links, empty unpaused queues, fresh congestion "
    "control, one message each); key: per queue pair in creation order size, priority, host "
    "latencies, line and port rate, data and ACK link sequences as canonical link ids (numbered "
    "by first use) with direction; per canonical link rate, delay and kind; run-wide network "
    "settings fixed"
)


def memo_stats(net: Any) -> dict[str, Any]:
    """Episode memoization counters (``PacketEpisodeCache``; zeros without memo), the hit rate
    (hits / lookups) and a description of the cache key."""
    values = np.zeros(len(MEMO_FIELDS), np.uint64)
    network_stats(net).CopyMemoStats(values)
    out: dict[str, Any] = {name: int(v) for name, v in zip(MEMO_FIELDS, values)}
    out["hit_rate"] = out["hits"] / out["lookups"] if out["lookups"] else 0.0
    out["key"] = MEMO_KEY
    return out


def collect_packet_stats(net: Any) -> dict[str, Any]:
    """Every counter of a packet network, as numpy arrays (bulk copies from C++)."""
    reader = network_stats(net)
    counters = np.zeros(len(COUNTER_NAMES), np.uint64)
    reader.CopyCounters(counters)
    n_ports = int(net.GetNPorts())
    ports = {
        "node": np.zeros(n_ports, np.int32),
        "link": np.zeros(n_ports, np.int32),
        "direction": np.zeros(n_ports, np.uint8),
        "bytes_sent": np.zeros(n_ports, np.uint64),
        "max_queue_bytes": np.zeros(n_ports, np.uint64),
        "mean_queue_bytes": np.zeros(n_ports, np.float64),
        "pause_sent": np.zeros(n_ports, np.uint64),
        "pause_received": np.zeros(n_ports, np.uint64),
        "paused_ns": np.zeros(n_ports, np.int64),
        "ecn_marks": np.zeros(n_ports, np.uint64),
        "drops": np.zeros(n_ports, np.uint64),
        "frames_sent": np.zeros(n_ports, np.uint64),
        "trims": np.zeros(n_ports, np.uint64),
    }
    if n_ports:
        reader.CopyPortStats(*(ports[k] for k in ("node", "link", "direction", *PORT_FIELDS)))
    n_qps = int(net.GetNQueuePairs())
    ids = np.zeros(n_qps, np.uint32)
    if n_qps:
        reader.CopyQueuePairIds(ids)
    ids = np.sort(ids)
    flows = flow_stats(net, ids)
    trims = np.zeros(int(net.GetTopology().GetNNodes()), np.uint64)
    trimming = bool(reader.CopySwitchTrims(trims))
    stats: dict[str, Any] = {
        "counters": {name: int(v) for name, v in zip(COUNTER_NAMES, counters)},
        "ports": ports,
        "flows": flows,
        "events": int(native.load().ns3.Simulator.GetEventCount()),
        "frames_in_use": int(net.GetFramesInUse()),
        "fast_forward": {**fast_forward_stats(net), "memo": memo_stats(net)},
    }
    if trimming:  # only runs with network.trimming report trims (others stay as they were)
        stats["counters"]["trims"] = int(trims.sum())
        stats["switch_trims"] = {int(node): int(trims[node]) for node in np.flatnonzero(trims)}
    else:
        del ports["trims"]
    series = _series(reader)
    if series is not None:
        stats["series"] = series
    tcp = tcp_stats(net)
    if tcp is not None:
        stats["tcp"] = tcp
    return stats


def tcp_stats(net: Any) -> dict[str, Any] | None:
    """The socket transport's TCP counters: ``summary`` (totals, largest cwnd), ``streams``
    (one row per TCP connection: its NCCL connection's first flow, NIC nodes, socket index with
    0 = control socket, bytes, cwnd, retransmissions, timeouts, fast recoveries) and ``cwnd``
    (time_ns, stream, cwnd_bytes samples); None when every host uses RDMA."""
    sock = net.GetSocketTransport()
    if not sock:
        return None
    n = int(sock.GetNStreams())
    types = (
        np.uint32,
        np.uint32,
        np.uint32,
        np.uint32,
        np.uint64,
        np.uint64,
        np.uint32,
        np.uint32,
        np.uint64,
        np.uint64,
        np.uint64,
    )
    streams = {key: np.zeros(n, dtype) for key, dtype in zip(TCP_STREAM_FIELDS, types)}
    if n:
        sock.CopyStreamStats(*(streams[key] for key in TCP_STREAM_FIELDS))
    m = int(sock.GetNCwndSamples())
    cwnd: dict[str, np.ndarray] = {
        "time_ns": np.zeros(m, np.int64),
        "stream": np.zeros(m, np.uint32),
        "cwnd_bytes": np.zeros(m, np.uint32),
    }
    if m:
        sock.CopyCwndSeries(cwnd["time_ns"], cwnd["stream"], cwnd["cwnd_bytes"])
    summary = {
        "connections": int(len(np.unique(streams["first_flow"]))),
        "streams": n,
        "data_sockets_per_connection": int(sock.GetDataSockets()),
        "retransmits": int(sock.GetRetransmits()),
        "timeouts": int(sock.GetTimeouts()),
        "fast_recoveries": int(sock.GetRecoveries()),
        "host_drops": int(sock.GetHostDrops()),
        "fabric_drops": int(sock.GetFabricDrops()),
        "ce_marks_delivered": int(sock.GetCeDelivered()),
        "messages": int(sock.GetMessagesDone()),
        "bytes_delivered": int(sock.GetBytesDelivered()),
        "max_cwnd_bytes": int(streams["max_cwnd_bytes"].max()) if n else 0,
    }
    return {
        "summary": summary,
        "streams": {k: v.astype(np.int64) for k, v in streams.items()},
        "cwnd": {k: v.astype(np.int64) for k, v in cwnd.items()},
    }


def flow_stats(net: Any, ids: np.ndarray) -> dict[str, np.ndarray]:
    """Per-flow counters for ``ids`` (zeros for flows that never needed the network);
    ``out_of_order`` and ``max_reorder_depth`` (MTU packets) are the receiver's reordering
    counts (``RdmaNic`` trace source ``Reorder``)."""
    ids = np.ascontiguousarray(ids, np.uint32)
    n = len(ids)
    out = {
        key: np.zeros(n, np.uint64)
        for key in ("retransmits", "cnps", "rate_changes", "timeouts", "bytes_acked", "bytes_delivered")
    }
    if n:
        network_stats(net).CopyFlowStats(
            n,
            ids,
            out["retransmits"],
            out["cnps"],
            out["rate_changes"],
            out["timeouts"],
            out["bytes_acked"],
            out["bytes_delivered"],
        )
        out["out_of_order"] = np.zeros(n, np.uint64)
        out["max_reorder_depth"] = np.zeros(n, np.uint64)
        network_stats(net).CopyReorderStats(n, ids, out["out_of_order"], out["max_reorder_depth"])
    else:
        out["out_of_order"] = np.zeros(0, np.uint64)
        out["max_reorder_depth"] = np.zeros(0, np.uint64)
    return {"id": ids.astype(np.int64), **{k: v.astype(np.int64) for k, v in out.items()}}


def _series(reader: Any) -> dict[str, dict[str, np.ndarray]] | None:
    nq, nr = int(reader.GetNQueueSamples()), int(reader.GetNRateSamples())
    if nq == 0 and nr == 0:
        return None
    queue: dict[str, np.ndarray] = {
        "time_ns": np.zeros(nq, np.int64),
        "port": np.zeros(nq, np.uint32),
        "bytes": np.zeros(nq, np.uint64),
        "tx_bytes": np.zeros(nq, np.uint64),
    }
    rate: dict[str, np.ndarray] = {
        "time_ns": np.zeros(nr, np.int64),
        "flow": np.zeros(nr, np.uint32),
        "rate_bps": np.zeros(nr, np.float64),
        "acked_bytes": np.zeros(nr, np.uint64),
    }
    if nq:
        reader.CopyQueueSeries(queue["time_ns"], queue["port"], queue["bytes"], queue["tx_bytes"])
    if nr:
        reader.CopyRateSeries(rate["time_ns"], rate["flow"], rate["rate_bps"], rate["acked_bytes"])
    return {"queue": queue, "rate": rate}


def _flow_arrays(
    topology: Topology,
    src: Sequence[int],
    dst: Sequence[int],
    size_bytes: Sequence[int],
    start_ns: Sequence[int],
    priority: Sequence[int] | None,
) -> dict[str, np.ndarray]:
    arrays = {
        "src": np.asarray(src, dtype=np.int64),
        "dst": np.asarray(dst, dtype=np.int64),
        "bytes": np.asarray(size_bytes, dtype=np.int64),
        "start": np.asarray(start_ns, dtype=np.int64),
    }
    n = len(arrays["src"])
    arrays["priority"] = (
        np.full(n, DEFAULT_PRIORITY, np.int64) if priority is None else np.asarray(priority, dtype=np.int64)
    )
    for name, values in arrays.items():
        if values.ndim != 1 or len(values) != n:
            raise UserError(f"flows: {name}: expected {n} values, one per flow")
    gpus = len(topology.gpu_node)
    for name in ("src", "dst"):
        bad = np.flatnonzero((arrays[name] < 0) | (arrays[name] >= gpus))
        if len(bad):
            raise UserError(
                f"flows[{bad[0]}]: {name}: GPU {arrays[name][bad[0]]} does not exist "
                f"(the cluster has GPUs 0..{gpus - 1})"
            )
    checks = (
        ("bytes", arrays["bytes"] <= 0, "expected a size > 0 bytes"),
        ("start", arrays["start"] < 0, "expected a start time >= 0"),
        ("priority", (arrays["priority"] < 0) | (arrays["priority"] > 7), "expected a traffic class 0..7"),
    )
    for name, bad_mask, expectation in checks:
        bad = np.flatnonzero(bad_mask)
        if len(bad):
            raise UserError(f"flows[{bad[0]}]: {name}: {expectation}, got {arrays[name][bad[0]]}")
    return arrays


def run_flows(
    topology: Topology,
    network: NetworkConfig,
    src: Sequence[int],
    dst: Sequence[int],
    size_bytes: Sequence[int],
    start_ns: Sequence[int],
    priority: Sequence[int] | None = None,
    *,
    stop_ns: int,
    sample_interval_ns: int = 0,
    seed: int = 1,
    sample_all_ports: bool = False,
    intra_host: str = "packet",
    acceleration: str = "exact",
) -> dict[str, Any]:
    """Run flows (ids 0..n-1 in argument order) on a fresh packet network until ``stop_ns``
    or until the last one finishes; return :func:`collect_packet_stats`' dict plus ``flows``
    (id, src, dst, bytes, start_ns, end_ns (-1 unfinished), fct_ns, retransmits, ...),
    ``sim_end_ns`` and ``wall_s`` (``intra_host`` as in :func:`create_packet_network`). The
    simulator is destroyed afterwards, so runs in one
    process are independent and repeatable.
    """
    if stop_ns <= 0:
        raise UserError(f"simulation: stop: expected a time > 0, got {stop_ns} ns")
    arrays = _flow_arrays(topology, src, dst, size_bytes, start_ns, priority)
    gbl = native.load()
    ns3 = gbl.ns3
    started = time.perf_counter()
    ns3.Simulator.Destroy()
    try:
        desc = to_native(topology, gbl)
        net = create_packet_network(
            gbl, desc, network, seed, sample_interval_ns, sample_all_ports, intra_host, acceleration
        )
        n = len(arrays["src"])
        ids = np.arange(n, dtype=np.uint32)
        if n:
            net.ScheduleFlows(
                n,
                ids,
                arrays["src"].astype(np.uint32),
                arrays["dst"].astype(np.uint32),
                arrays["bytes"].astype(np.uint64),
                arrays["start"].astype(np.int64),
                arrays["priority"].astype(np.uint8),
            )
            net.SetStopAfterFlows(n)
        ns3.Simulator.Stop(ns3.NanoSeconds(int(stop_ns)))
        ns3.Simulator.Run()
        sim_end_ns = int(ns3.Simulator.Now().GetNanoSeconds())
        end = np.full(n, -1, np.int64)
        if n:
            net.CopyFinishTimes(n, ids, end)
        stats = collect_packet_stats(net)
        per_flow = flow_stats(net, ids)
        net.Dispose()
    finally:
        ns3.Simulator.Destroy()
    done = end >= 0
    stats["flows"] = {
        "id": ids.astype(np.int64),
        "src": arrays["src"],
        "dst": arrays["dst"],
        "bytes": arrays["bytes"],
        "start_ns": arrays["start"],
        "end_ns": end,
        "fct_ns": np.where(done, end - arrays["start"], -1),
        **{k: v for k, v in per_flow.items() if k != "id"},
    }
    stats["sim_end_ns"] = sim_end_ns
    stats["wall_s"] = time.perf_counter() - started
    return stats
