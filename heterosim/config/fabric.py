"""The rules joining load balancing, transport and fidelity (``network.load_balancing``,
``network.transport``, ``network.accept_reordering``, ``simulation.fidelity``).

Per-packet load balancing (adaptive routing, spraying) reorders a flow's packets. A go-back-N
transport (``roce``) treats every packet ahead of the expected one as a loss and resends the
window from there, so the combination is refused unless ``network.accept_reordering: true``
says it is meant (to measure exactly that cost). Flowlet modes keep a flow on one port while
its packets are closer than the flowlet gap and are allowed with either transport.

The fluid model (flow fidelity) routes every flow on its one ECMP path; it has no model of a
flow split over several paths, so any other load balancing is refused there.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from heterosim.config.choices import REORDERING_LOAD_BALANCING, REORDERING_TRANSPORTS
from heterosim.config.network_model import PACKET, NetworkModel
from heterosim.errors import UserError

if TYPE_CHECKING:  # experiment.py calls this module while it parses
    from heterosim.config.experiment import NetworkConfig


def check_load_balancing(network: NetworkConfig, model: NetworkModel) -> None:
    """Raise a one-line UserError for a load balancing the transport or ``model`` cannot run."""
    where = f"{network.source}: " if network.source else ""
    mode = network.load_balancing
    if mode not in model.load_balancing_modes:
        raise UserError(
            f"{where}network.load_balancing: {mode!r} needs {PACKET.name} fidelity (the {model.name} "
            f"model routes each flow on one ECMP path); set simulation.fidelity: {PACKET.name} or "
            f"network.load_balancing: {model.load_balancing_modes[0]}"
        )
    if (
        mode in REORDERING_LOAD_BALANCING
        and network.transport not in REORDERING_TRANSPORTS
        and not network.accept_reordering
    ):
        raise UserError(
            f"{where}network.load_balancing: {mode!r} reorders packets, which transport "
            f"{network.transport!r} (go-back-N) treats as losses; set network.transport: "
            f"{REORDERING_TRANSPORTS[0]}, or network.accept_reordering: true to measure that"
        )
