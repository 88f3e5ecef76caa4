"""Which settings act at which fidelity: the one place that knows the packet-only and flow-only
keys, so ``run``, ``compare`` and ``sweep`` can say when a setting cannot change the result.

The fluid model (``simulation.fidelity: flow``) has no queues, frames or congestion control: the
keys in :data:`PACKET_ONLY` configure the packet network alone. ``network.attributes`` set ns-3
attributes by name; only ``FluidNetwork::`` and ``SocketTransport::`` ones reach the fluid model
(``heterosim/engine/fluid.py``), every other class is part of the packet network. The keys in
:data:`FLOW_ONLY` change the fluid model alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from heterosim.config.choices import DEFAULT_FIDELITY

PACKET_ONLY: dict[str, str] = {
    "network.cc": "congestion control runs in the packet network only",
    "network.pfc": "PFC pauses frames, which the fluid model does not have",
    "network.buffer": "switch buffers hold frames, which the fluid model does not have",
    "simulation.intra_host": "it chooses how the packet network carries copies inside a host",
    "simulation.packet_acceleration": "it chooses how the packet network skips settled stretches",
}
FLOW_ONLY: dict[str, str] = {
    "network.frame_overhead": "the packet network sends real frames, whatever this says"
}
FLUID_ATTRIBUTE_CLASSES = ("FluidNetwork::", "SocketTransport::")
_ATTRIBUTES = "network.attributes."


def no_effect_reason(key: str, fidelity: str) -> str | None:
    """Why the dotted ``key`` cannot change a run at ``fidelity`` (None when it can)."""
    if fidelity == "flow":
        if key in PACKET_ONLY:
            return PACKET_ONLY[key]
        if key.startswith(_ATTRIBUTES) and not key[len(_ATTRIBUTES) :].startswith(FLUID_ATTRIBUTE_CLASSES):
            return "only FluidNetwork:: and SocketTransport:: attributes reach the fluid model"
    elif fidelity == "packet" and key in FLOW_ONLY:
        return FLOW_ONLY[key]
    return None


def flatten(mapping: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"network": {"cc": "hpcc"}}`` -> ``{"network.cc": "hpcc"}`` (lists stay values)."""
    flat: dict[str, Any] = {}
    for key, value in mapping.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            flat.update(flatten(value, f"{dotted}."))
        else:
            flat[dotted] = value
    return flat


def differing_keys(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    """The dotted keys whose values differ between two experiment mappings."""
    flat_a, flat_b = flatten(a), flatten(b)
    return sorted(k for k in flat_a.keys() | flat_b.keys() if flat_a.get(k) != flat_b.get(k))


def fidelity_of(data: Mapping[str, Any]) -> str:
    """The fidelity an experiment mapping runs at (:data:`DEFAULT_FIDELITY` unless it says otherwise)."""
    simulation = data.get("simulation")
    fidelity = simulation.get("fidelity") if isinstance(simulation, Mapping) else None
    return fidelity if isinstance(fidelity, str) else DEFAULT_FIDELITY


def no_effect_warnings(keys: Iterable[str], fidelities: Iterable[str], what: str) -> list[str]:
    """One line per key that cannot change any of the runs (all at ``fidelities``); ``what``
    names the runs (``the two sides``, ``the sweep's variants``)."""
    chosen = sorted(set(fidelities))
    keys = list(keys)
    lines = []
    for key in keys:
        reasons = [no_effect_reason(key, fidelity) for fidelity in chosen]
        if chosen and all(reasons):
            alone = f"; it is all {what} differ in, so they give the same result" if len(keys) == 1 else ""
            lines.append(f"{key} has no effect at {'/'.join(chosen)} fidelity ({reasons[0]}){alone}")
    return lines


def override_warnings(overrides: Iterable[str], fidelity: str) -> list[str]:
    """One line per ``KEY=VALUE`` override that cannot change a run at ``fidelity``."""
    lines = []
    for item in overrides:
        key = item.split("=", 1)[0].strip()
        reason = no_effect_reason(key, fidelity)
        if reason:
            lines.append(f"--set {item.strip()} has no effect at {fidelity} fidelity ({reason})")
    return lines
