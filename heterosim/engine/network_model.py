"""The network a plan runs on, one class per fidelity: the Python side of ``ns3::FlowNetwork``.

Each class extends the fidelity's :class:`heterosim.config.network_model.NetworkModel` (what the
network can do) with what runs it on ns-3. :func:`network_model` picks the model once from
``simulation.fidelity`` through the config layer's factory; the executor
(:mod:`heterosim.engine.executor`), the fault models (:mod:`heterosim.engine.faults`) and
``simulate.simulate_flow_set`` ask it what differs between the two networks instead of comparing
fidelity names:

- :class:`FluidNetworkModel` (``flow``): the max-min fluid network of :mod:`heterosim.engine.fluid`;
  its event queue empties when it cannot go on, a link fault changes capacities;
- :class:`PacketNetworkModel` (``packet``): the RDMA packet network of
  :mod:`heterosim.engine.packet` (imported on first use); its timers keep running when it is
  deadlocked, a link fault drops frames that the transport recovers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from heterosim.config.experiment import NetworkConfig, SimulationConfig
from heterosim.config.network_model import MODELS, FluidModel, PacketModel
from heterosim.config.network_model import NetworkModel as NetworkCapabilities
from heterosim.config.network_model import network_model as capabilities_of
from heterosim.config.scenario import ScenarioConfig
from heterosim.engine.fluid import create_fluid_network, fluid_counters, fluid_link_stats, run_flows_fluid
from heterosim.engine.topology import LINK_KIND_NAMES, Topology
from heterosim.errors import UserError
from heterosim.plan.execution_plan import FLOW, ExecutionPlan

if TYPE_CHECKING:
    from heterosim.engine.faults import FaultPlan

# The fluid link series keeps the rows of this many link directions of each kind (NIC and
# switch links; NVLink and PCIe), the ones that carried the most bytes: a 1,024-GPU iteration
# sampled every 10 us has ~10^8 rows, of which the report plots a few dozen directions.
LINK_SERIES_KEEP = 64
NETWORK_LINK_KINDS = (LINK_KIND_NAMES.index("access"), LINK_KIND_NAMES.index("fabric"))


@dataclass
class NetworkReadout:
    """What a network counted during a run, read before it is disposed."""

    counters: dict[str, int]  # flows, bytes, drops, retransmits, pfc_pause_frames, ecn_marks, cnps
    links: dict[str, np.ndarray]  # per link direction: link, direction, bytes, utilization, ...
    series: dict[str, Any]  # the model's own time series ("link"; or "queue" and "rate")
    retransmits: np.ndarray  # int64, per flow task
    events: int  # ns-3 events executed
    # per flow task, packet fidelity: data packets that reached the receiver ahead of the expected
    # byte and the largest such lead in MTU packets (RdmaNic trace source Reorder); None: zeros
    out_of_order: np.ndarray | None = None
    max_reorder_depth: np.ndarray | None = None
    fast_forward: dict[str, Any] = field(default_factory=dict)  # packet: fast-forward counters
    tcp: dict[str, Any] = field(default_factory=dict)  # packet with socket hosts: TCP tables


class NetworkModel(NetworkCapabilities, Protocol):
    """A network model the plan executor drives (``ns3::FlowNetwork`` in C++): what the
    fidelity's network can do, and how it runs."""

    def create(self, gbl: Any, desc: Any, network: NetworkConfig, simulation: SimulationConfig) -> Any:
        """The native network for the topology description ``desc``."""
        ...

    def default_stall_timeout_ns(
        self, plan: ExecutionPlan, topology: Topology, network: NetworkConfig, faults: FaultPlan | None
    ) -> int:
        """Simulated time without a task finishing that counts as a stall (0: only an empty queue)."""
        ...

    def stall_note(self, net: Any) -> str:
        """What the network adds to a stall's message ("" when nothing)."""
        ...

    def read(
        self, net: Any, topology: Topology, flow_tasks: np.ndarray, sim_end_ns: int, events: int
    ) -> NetworkReadout:
        """Counters, link table, series and per-flow retransmissions of the finished run."""
        ...

    def link_fault_drops(self, net: Any, link: int) -> int:
        """Frames a link fault dropped on ``link``."""
        ...

    def run_flow_set(self, topology: Topology, scenario: ScenarioConfig) -> dict[str, Any]:
        """The scenario's flows alone on a fresh network (``heterosim netbench``): per-flow table,
        counters, ``sim_end_ns``, ``events``, ``wall_s`` and the model's series."""
        ...


class FluidNetworkModel(FluidModel):
    """``flow``: the max-min fluid network (``ns3::FluidNetwork``)."""

    def create(self, gbl: Any, desc: Any, network: NetworkConfig, simulation: SimulationConfig) -> Any:
        net = create_fluid_network(gbl, desc, network, simulation.seed)
        if simulation.sample_interval_ns > 0:  # per-link carried bytes over time (link utilization plots)
            ns3 = gbl.ns3
            net.SetAttribute(
                "SampleInterval", ns3.TimeValue(ns3.NanoSeconds(int(simulation.sample_interval_ns)))
            )
        return net

    def default_stall_timeout_ns(
        self, plan: ExecutionPlan, topology: Topology, network: NetworkConfig, faults: FaultPlan | None
    ) -> int:
        return 0  # the event queue empties when no flow can go on

    def stall_note(self, net: Any) -> str:
        return f"; network: {net.GetUnroutableMessage()}" if net.GetFlowsUnroutable() else ""

    def read(
        self, net: Any, topology: Topology, flow_tasks: np.ndarray, sim_end_ns: int, events: int
    ) -> NetworkReadout:
        series: dict[str, Any] = {}
        counters = fluid_counters(net)
        links = fluid_link_stats(net, topology, sim_end_ns)
        link_series = fluid_link_series(net, sim_end_ns, topology)
        if link_series is not None:
            series["link"] = link_series
        return NetworkReadout(
            counters=counters,
            links=links,
            series=series,
            retransmits=np.zeros(len(flow_tasks), np.int64),
            events=events,
        )

    def link_fault_drops(self, net: Any, link: int) -> int:
        return 0

    def run_flow_set(self, topology: Topology, scenario: ScenarioConfig) -> dict[str, Any]:
        flows, sim = scenario.flows, scenario.simulation
        return run_flows_fluid(
            topology,
            scenario.network,
            flows.src,
            flows.dst,
            flows.size_bytes,
            flows.start_ns,
            seed=sim.seed,
            stop_ns=sim.stop_ns,
        )


class PacketNetworkModel(PacketModel):
    """``packet``: the RDMA packet network (``ns3::PacketNetwork``)."""

    def create(self, gbl: Any, desc: Any, network: NetworkConfig, simulation: SimulationConfig) -> Any:
        return packet_module().create_packet_network(
            gbl,
            desc,
            network,
            simulation.seed,
            simulation.sample_interval_ns,
            intra_host=simulation.intra_host,
            acceleration=simulation.packet_acceleration,
        )

    def default_stall_timeout_ns(
        self, plan: ExecutionPlan, topology: Topology, network: NetworkConfig, faults: FaultPlan | None
    ) -> int:
        # timers keep running in a deadlock: a stall is a long time without a task finishing
        timeout = default_stall_timeout_ns(plan, topology)
        if faults is not None:
            timeout += faults.stall_margin_ns(network)
        return timeout

    def stall_note(self, net: Any) -> str:
        return ""

    def read(
        self, net: Any, topology: Topology, flow_tasks: np.ndarray, sim_end_ns: int, events: int
    ) -> NetworkReadout:
        packet = packet_module()
        stats = packet.collect_packet_stats(net)
        readout = NetworkReadout(
            counters={key: int(value) for key, value in stats["counters"].items()},
            links=packet_links(stats["ports"], topology, sim_end_ns),
            series=dict(stats.get("series", {})),  # "queue" and "rate" tables
            retransmits=flow_column(stats.get("flows", {}), "retransmits", flow_tasks),
            events=int(stats.get("events", events)),
            out_of_order=flow_column(stats.get("flows", {}), "out_of_order", flow_tasks),
            max_reorder_depth=flow_column(stats.get("flows", {}), "max_reorder_depth", flow_tasks),
            fast_forward=stats.get("fast_forward", {}),
            tcp=stats.get("tcp") or {},
        )
        if readout.tcp:  # socket flows are no queue pairs: read their counters by task id
            readout.retransmits = flow_column(
                packet.flow_stats(net, flow_tasks.astype(np.uint32)), "retransmits", flow_tasks
            )
        return readout

    def link_fault_drops(self, net: Any, link: int) -> int:
        return int(net.GetLinkFaultDrops(link))

    def run_flow_set(self, topology: Topology, scenario: ScenarioConfig) -> dict[str, Any]:
        flows, sim = scenario.flows, scenario.simulation
        return packet_module().run_flows(
            topology,
            scenario.network,
            flows.src,
            flows.dst,
            flows.size_bytes,
            flows.start_ns,
            flows.priority if flows.explicit_priority else None,
            stop_ns=sim.stop_ns,
            sample_interval_ns=sim.sample_interval_ns,
            seed=sim.seed,
            acceleration=sim.packet_acceleration,
        )


_ENGINE_MODELS: dict[str, NetworkModel] = {
    model.name: model for model in (PacketNetworkModel(), FluidNetworkModel())
}
assert _ENGINE_MODELS.keys() == MODELS.keys(), "the engine runs every network model of the config layer"


def network_model(fidelity: str) -> NetworkModel:
    """The engine's network model ``simulation.fidelity`` names (a UserError for any other name)."""
    return _ENGINE_MODELS[capabilities_of(fidelity).name]


def packet_module() -> Any:
    """:mod:`heterosim.engine.packet`, imported on first use (optional, heavy)."""
    try:
        from heterosim.engine import packet  # noqa: PLC0415 - optional, heavy, imported on use
    except ImportError as exc:
        raise UserError(
            f"simulation: fidelity: packet: the packet network (heterosim.engine.packet) is not "
            f"available: {exc}"
        ) from None
    return packet


def default_stall_timeout_ns(plan: ExecutionPlan, topology: Topology) -> int:
    """1 s, or 4x the longest single task (compute, delay, or the largest flow alone on the
    slowest link) if that is longer: no legitimate run goes that long without a task finishing
    unless its flows are starved by congestion for that long."""
    longest = 0.0
    if len(plan):
        longest = float(plan.duration_ns.max() + plan.delay_ns.max())
        flows = plan.kind == FLOW
        if flows.any():
            slowest = float(topology.link_rate_bps[topology.link_rate_bps > 0].min())
            longest += float(plan.bytes[flows].max()) * 8e9 / slowest
    return int(max(1e9, 4 * longest))


def packet_links(ports: dict[str, np.ndarray], topology: Topology, sim_end_ns: int) -> dict[str, np.ndarray]:
    """Packet model port table -> per link direction rows (bytes on the wire, with headers)."""
    links = {key: np.asarray(value) for key, value in ports.items()}
    links["link"] = links["link"].astype(np.int32)
    links["direction"] = links["direction"].astype(np.int8)
    links["bytes"] = links["bytes_sent"].astype(np.int64)
    rate = topology.link_rate_bps[links["link"]]
    seconds = max(sim_end_ns, 1) * 1e-9
    links["utilization"] = np.divide(
        links["bytes"] * 8.0, rate * seconds, out=np.zeros(len(rate)), where=rate > 0
    )
    return links


def fluid_link_series(net: Any, sim_end_ns: int, topology: Topology) -> dict[str, Any] | None:
    """The fluid model's per-link-direction series (None if not sampled): ``time_ns``,
    ``direction``, ``bytes`` rows (a row where a direction's carried payload bytes changed since
    its previous sample) of the :data:`LINK_SERIES_KEEP` directions of each kind that carried the
    most (ties: lower direction first); ``sample_time_ns``, every sample time with a row of any
    direction; ``direction_bytes``, each direction's bytes at its last row (0: none);
    ``directions_sampled``, how many directions have rows; ``kept_per_kind``."""
    net.SampleUntil(int(sim_end_ns))
    count = int(net.GetNLinkSamples())
    if count == 0:
        return None
    times = np.empty(int(net.GetNLinkSampleTimes()), np.int64)
    last = np.empty(2 * topology.num_links, np.uint64)
    net.CopyLinkSampleTimes(times, last)
    carried = np.flatnonzero(last > 0)
    on_network = np.isin(np.asarray(topology.link_kind)[carried // 2], NETWORK_LINK_KINDS)
    keep = np.sort(
        np.concatenate(
            [
                part[np.argsort(-last[part].astype(np.float64), kind="stable")[:LINK_SERIES_KEEP]]
                for part in (carried[on_network], carried[~on_network])
            ]
        )
    ).astype(np.uint32)
    rows = int(net.KeepLinkSeriesOf(len(keep), keep))
    out: dict[str, Any] = {
        "time_ns": np.empty(rows, np.int64),
        "direction": np.empty(rows, np.uint32),
        "bytes": np.empty(rows, np.uint64),
    }
    net.TakeLinkSeries(out["time_ns"], out["direction"], out["bytes"])  # frees its rows as it copies
    out.update(
        sample_time_ns=times,
        direction_bytes=last,
        directions_sampled=int(carried.size),
        kept_per_kind=LINK_SERIES_KEEP,
    )
    return out


def flow_column(flows: dict[str, np.ndarray], column: str, flow_tasks: np.ndarray) -> np.ndarray:
    """A per-flow column of the packet model's flow table, aligned to ``flow_tasks`` by id."""
    out = np.zeros(len(flow_tasks), np.int64)
    if column not in flows or "id" not in flows:
        return out
    ids = np.asarray(flows["id"], np.int64)
    values = np.asarray(flows[column], np.int64)
    position = np.searchsorted(flow_tasks, ids)
    ok = (position < len(flow_tasks)) & (flow_tasks[np.minimum(position, len(flow_tasks) - 1)] == ids)
    out[position[ok]] = values[ok]
    return out
