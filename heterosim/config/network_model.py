"""What each network model (``simulation.fidelity``) can do, chosen once from the fidelity name.

:func:`network_model` is the one place a fidelity name becomes behaviour: config checks, limits,
warnings, ``simulate``, ``validate`` and the reports ask the :class:`NetworkModel` it returns
instead of comparing fidelity names. The engine's models
(:mod:`heterosim.engine.network_model`) extend these two with what runs them on ns-3.

- :class:`PacketModel` (``packet``): the RDMA packet network: frames, queues, congestion
  control, per-packet load balancing, acceleration of settled stretches;
- :class:`FluidModel` (``flow``): the max-min fluid network: no frames, no queues, every flow on
  its one ECMP path, or split evenly over all of them where the switches spray (``spray``,
  ``spray_rr``, ``transport: uet``).
"""

from __future__ import annotations

from typing import Protocol

from heterosim.config.choices import DEFAULT_FIDELITY, FIDELITIES, LOAD_BALANCING, require_choice

# Keys only the packet network reads, and why the fluid model ignores them.
PACKET_ONLY: dict[str, str] = {
    "network.cc": "congestion control runs in the packet network only",
    "network.pfc": "PFC pauses frames, which the fluid model does not have",
    "network.buffer": "switch buffers hold frames, which the fluid model does not have",
    "simulation.intra_host": "it chooses how the packet network carries copies inside a host",
    "simulation.packet_acceleration": "it chooses how the packet network skips settled stretches",
}
# Keys only the fluid model reads, and why the packet network ignores them.
FLOW_ONLY: dict[str, str] = {
    "network.frame_overhead": "the packet network sends real frames, whatever this says"
}
# network.attributes.<Class>::<Name>: the classes whose attributes reach the fluid model
# (heterosim/engine/fluid.py); every other class is part of the packet network
FLUID_ATTRIBUTE_CLASSES = ("FluidNetwork::", "SocketTransport::")
_ATTRIBUTES = "network.attributes."


class NetworkModel(Protocol):
    """What one fidelity's network can do (``ns3::FlowNetwork`` is its C++ side)."""

    name: str  # its simulation.fidelity (heterosim.config.choices.FIDELITIES)
    description: str  # how messages name it ("the packet network", "the flow (fluid) model")
    # network.load_balancing modes it can run
    load_balancing_modes: tuple[str, ...]
    # a transport's loss of throughput from reordered packets (go-back-N under spraying) shows
    reorders_packets: bool
    has_congestion_control: bool  # network.cc acts (heterosim netbench --compare-cc)
    faults_drop_frames: bool  # a faulty link loses frames (the transport recovers them)
    accelerates: bool  # simulation.packet_acceleration applies
    models_intra_host: bool  # simulation.intra_host applies
    # simulation.sample_interval records every port's queue (NICs' and switches' access ports)
    samples_ports: bool
    # a flow set's simulation.sample_interval records each flow's rate (netbench)
    samples_flow_rates: bool

    def no_effect_reason(self, key: str) -> str | None:
        """Why the dotted ``key`` cannot change a run on this network (None when it can)."""
        ...


class PacketModel:
    """``packet``: the RDMA packet network (``ns3::PacketNetwork``)."""

    name: str = "packet"
    description: str = "the packet network"
    load_balancing_modes: tuple[str, ...] = LOAD_BALANCING
    reorders_packets: bool = True
    has_congestion_control: bool = True
    faults_drop_frames: bool = True
    accelerates: bool = True
    models_intra_host: bool = True
    samples_ports: bool = True
    samples_flow_rates: bool = True

    def no_effect_reason(self, key: str) -> str | None:
        return FLOW_ONLY.get(key)


class FluidModel:
    """``flow``: the max-min fluid network (``ns3::FluidNetwork``); a link records its bytes only
    when they change, a fault changes link capacities."""

    name: str = "flow"
    description: str = "the flow (fluid) model"
    # each flow on its one ECMP path (ecmp), or split evenly over every equal-cost path (spray,
    # spray_rr: what per-packet spraying converges to); adaptive routing converges to max-min
    # over the paths (not an even split under asymmetric load or faults) and flowlets to
    # something between ECMP and that, so both stay packet-only
    load_balancing_modes: tuple[str, ...] = ("ecmp", "spray", "spray_rr")
    reorders_packets: bool = False
    has_congestion_control: bool = False
    faults_drop_frames: bool = False
    accelerates: bool = False
    models_intra_host: bool = False
    samples_ports: bool = False
    samples_flow_rates: bool = False

    def no_effect_reason(self, key: str) -> str | None:
        if key in PACKET_ONLY:
            return PACKET_ONLY[key]
        if key.startswith(_ATTRIBUTES) and not key[len(_ATTRIBUTES) :].startswith(FLUID_ATTRIBUTE_CLASSES):
            return "only FluidNetwork:: and SocketTransport:: attributes reach the fluid model"
        return None


PACKET: NetworkModel = PacketModel()
FLUID: NetworkModel = FluidModel()
MODELS: dict[str, NetworkModel] = {model.name: model for model in (PACKET, FLUID)}
assert tuple(MODELS) == FIDELITIES, "one network model per fidelity, in the order of FIDELITIES"
assert DEFAULT_FIDELITY in MODELS


def network_model(fidelity: str, key: str = "simulation: fidelity") -> NetworkModel:
    """The network model ``fidelity`` names (a one-line UserError naming ``key`` for any other)."""
    return MODELS[require_choice(key, fidelity, FIDELITIES)]
