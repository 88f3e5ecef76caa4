"""Which settings act at which fidelity, so ``run``, ``compare`` and ``sweep`` can say when a
setting cannot change the result.

Each network model knows the keys it ignores
(:meth:`heterosim.config.network_model.NetworkModel.no_effect_reason`): the fluid model
(``simulation.fidelity: flow``) has no queues, frames or congestion control, so the keys in
:data:`~heterosim.config.network_model.PACKET_ONLY` and every ``network.attributes`` key of a
class other than ``FluidNetwork::`` and ``SocketTransport::`` configure the packet network
alone; the keys in :data:`~heterosim.config.network_model.FLOW_ONLY` change the fluid model alone.
This module compares experiment mappings and words the warnings.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from heterosim.config.choices import DEFAULT_FIDELITY, FIDELITIES
from heterosim.config.network_model import network_model


def no_effect_reason(key: str, fidelity: str) -> str | None:
    """Why the dotted ``key`` cannot change a run at ``fidelity`` (None when it can, or when
    ``fidelity`` names no network model: loading the experiment reports that)."""
    return network_model(fidelity).no_effect_reason(key) if fidelity in FIDELITIES else None


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
