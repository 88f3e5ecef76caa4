"""heterosim.config.network_model: one model per fidelity, chosen by one factory; what each can do."""

from __future__ import annotations

import dataclasses

import pytest

from heterosim.config.choices import DEFAULT_FIDELITY, FIDELITIES, LOAD_BALANCING
from heterosim.config.experiment import default_network
from heterosim.config.fabric import check_load_balancing
from heterosim.config.network_model import FLUID, MODELS, PACKET, network_model
from heterosim.errors import UserError


def test_the_factory_gives_one_model_per_fidelity_and_refuses_other_names():
    assert [network_model(name).name for name in FIDELITIES] == list(FIDELITIES)
    assert network_model("packet") is PACKET and network_model("flow") is FLUID
    assert set(MODELS) == set(FIDELITIES) and network_model(DEFAULT_FIDELITY) is PACKET
    with pytest.raises(UserError) as err:
        network_model("analytic", "exp.yaml: simulation.fidelity")
    message = str(err.value)
    assert (
        "\n" not in message
        and message.startswith("exp.yaml: simulation.fidelity")
        and "'analytic'" in message
    )


def test_only_the_packet_network_has_frames_queues_and_congestion_control():
    for flag in ("has_congestion_control", "faults_drop_frames", "accelerates", "models_intra_host"):
        assert getattr(PACKET, flag) and not getattr(FLUID, flag), flag
    assert PACKET.samples_ports and not FLUID.samples_ports
    assert PACKET.samples_flow_rates and not FLUID.samples_flow_rates


def test_the_fluid_model_runs_ecmp_and_spraying_only():
    assert PACKET.load_balancing_modes == LOAD_BALANCING
    assert FLUID.load_balancing_modes == ("ecmp", "spray", "spray_rr")
    assert PACKET.reorders_packets and not FLUID.reorders_packets
    for mode in LOAD_BALANCING:
        # transport irn: no reordering refusal, only the model's own rule
        network = dataclasses.replace(default_network(), load_balancing=mode, transport="irn")
        check_load_balancing(network, PACKET)
        if mode in ("ecmp", "spray", "spray_rr"):
            check_load_balancing(network, FLUID)
        else:
            with pytest.raises(UserError, match=f"'{mode}' needs packet fidelity"):
                check_load_balancing(network, FLUID)


def test_each_model_names_the_keys_it_ignores():
    assert PACKET.no_effect_reason("network.frame_overhead") and not FLUID.no_effect_reason(
        "network.frame_overhead"
    )
    for key in ("network.cc", "network.pfc", "network.buffer", "simulation.intra_host"):
        assert FLUID.no_effect_reason(key) and not PACKET.no_effect_reason(key)
    assert FLUID.no_effect_reason("network.attributes.Dcqcn::RateAi")
    assert not FLUID.no_effect_reason("network.attributes.SocketTransport::TcpSegmentSize")
