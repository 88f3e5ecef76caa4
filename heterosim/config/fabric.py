"""The rules joining load balancing, transport and fidelity (``network.load_balancing``,
``network.transport``, ``network.accept_reordering``, ``simulation.fidelity``), and those
joining the UET transport to its congestion control and PFC (``network.cc``, ``network.pfc``).

Per-packet load balancing (adaptive routing, spraying) reorders a flow's packets. A go-back-N
transport (``roce``) treats every packet ahead of the expected one as a loss and resends the
window from there, so the combination is refused unless ``network.accept_reordering: true``
says it is meant (to measure exactly that cost). Flowlet modes keep a flow on one port while
its packets are closer than the flowlet gap and are allowed with either transport.

The fluid model (flow fidelity) routes every flow on its one ECMP path, or, for ``spray``,
``spray_rr`` and ``transport: uet`` (per-packet entropy over ECMP switches), splits it evenly over
all equal-cost paths, which is where spraying converges over many packets. It refuses adaptive
routing and flowlets: adaptive routing converges to a max-min allocation over the paths, which
an even split is not as soon as load or link rates are asymmetric, and flowlet switching moves
a flow between paths at gaps whose effect depends on the traffic's timing. It also refuses
spraying over go-back-N (``accept_reordering: true``): that setting exists to measure the
throughput go-back-N loses to reordered packets, and the fluid model has no packets.

The Ultra Ethernet transport (``transport: uet``) is built for a lossy fabric: UET 1.0 requires
no PFC (Ultra Ethernet Consortium, "Ultra Ethernet Specification 1.0", June 2025; Hoefler et
al., arXiv 2508.08906, 2025), so ``pfc`` defaults to false with it and an explicit
``pfc: true`` is refused; its congestion control is one UET defines (``choices.UET_CCS``),
NSCC by default; RCCC (``rccc``, receiver credits) runs only with UET.

Packet trimming (``network.trimming``, off by default as in UET 1.0, where it is an optional
switch feature) cuts a data packet the switch buffer cannot take to its header, which the
receiver NACKs at once; only the UET transport reads trimmed headers, so ``trimming: true`` is
refused with another transport (go-back-N RoCE over PFC never drops, IRN has no trim NACK), and
at flow fidelity (the fluid model has no packets to trim).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from heterosim.config.choices import REORDERING_LOAD_BALANCING, REORDERING_TRANSPORTS, UET_CCS, UET_ONLY_CCS
from heterosim.config.network_model import PACKET, NetworkModel
from heterosim.errors import UserError

if TYPE_CHECKING:  # experiment.py calls this module while it parses
    from heterosim.config.experiment import NetworkConfig
    from heterosim.config.fields import Section


def check_load_balancing(network: NetworkConfig, model: NetworkModel) -> None:
    """Raise a one-line UserError for a load balancing the transport or ``model`` cannot run."""
    where = f"{network.source}: " if network.source else ""
    mode = network.load_balancing
    if network.trimming and model.name != PACKET.name:
        raise UserError(
            f"{where}network.trimming: true cuts packets at the switches, which the {model.name} "
            f"model (no packets) does not model; set simulation.fidelity: {PACKET.name} or "
            "network.trimming: false"
        )
    if mode not in model.load_balancing_modes:
        raise UserError(
            f"{where}network.load_balancing: {mode!r} needs {PACKET.name} fidelity (the {model.name} "
            f"model runs {', '.join(model.load_balancing_modes)}: one ECMP path or an even split, "
            f"not paths chosen by load or timing); set simulation.fidelity: {PACKET.name} or "
            f"network.load_balancing: {model.load_balancing_modes[0]}"
        )
    go_back_n = mode in REORDERING_LOAD_BALANCING and network.transport not in REORDERING_TRANSPORTS
    if go_back_n and network.accept_reordering and not model.reorders_packets:
        raise UserError(
            f"{where}network.accept_reordering: true measures what go-back-N loses to reordered "
            f"packets, which the {model.name} model (no packets) cannot show; set "
            f"simulation.fidelity: {PACKET.name} or network.transport: {REORDERING_TRANSPORTS[0]}"
        )
    if go_back_n and not network.accept_reordering:
        raise UserError(
            f"{where}network.load_balancing: {mode!r} reorders packets, which transport "
            f"{network.transport!r} (go-back-N) treats as losses; set network.transport: "
            f"{REORDERING_TRANSPORTS[0]}, or network.accept_reordering: true to measure that"
        )


def check_uet(network: NetworkConfig, section: Section | None = None) -> None:
    """Raise a one-line UserError for a ``transport: uet`` network with PFC on or a congestion
    control UET does not define, or for ``trimming: true`` with another transport, naming
    ``section``'s file and key (or ``network.source``)."""
    problem = None
    if network.transport != "uet":
        if network.cc in UET_ONLY_CCS:
            problem = (
                "cc",
                f"{network.cc!r} is UET's receiver-credit congestion control; it needs "
                f"network.transport: 'uet', got {network.transport!r}",
            )
        elif network.trimming:
            problem = (
                "trimming",
                f"true needs network.transport: 'uet' (the transport that NACKs trimmed packets); "
                f"got transport {network.transport!r}"
                + (" with PFC on, where switches never drop" if network.pfc else "")
                + "; set network.transport: uet or network.trimming: false",
            )
    elif network.pfc:
        problem = (
            "pfc",
            "true contradicts network.transport: 'uet', which runs on a lossy fabric (UET needs "
            "no PFC); remove network.pfc or set it false, or use network.transport: roce or irn",
        )
    elif network.cc not in UET_CCS:
        problem = (
            "cc",
            f"{network.cc!r} is not a congestion control of network.transport: 'uet'; expected "
            f"one of {', '.join(UET_CCS)}",
        )
    if problem is None:
        return
    if section is not None:
        raise section.error(*problem)
    where = f"{network.source}: " if network.source else ""
    raise UserError(f"{where}network.{problem[0]}: {problem[1]}")
