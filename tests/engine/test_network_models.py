"""The engine's network models extend the config layer's, one per fidelity, chosen by its factory."""

from __future__ import annotations

import pytest

from heterosim.config.choices import FIDELITIES
from heterosim.config.network_model import network_model as capabilities_of
from heterosim.engine.network_model import FluidNetworkModel, PacketNetworkModel, network_model
from heterosim.errors import UserError


def test_each_fidelity_runs_on_the_engine_model_extending_its_capabilities():
    for name in FIDELITIES:
        model, capabilities = network_model(name), capabilities_of(name)
        assert isinstance(model, type(capabilities)) and model.name == name
        assert model.faults_drop_frames == capabilities.faults_drop_frames
    assert isinstance(network_model("packet"), PacketNetworkModel)
    assert isinstance(network_model("flow"), FluidNetworkModel)
    with pytest.raises(UserError, match=r"^simulation: fidelity: .*'analytic'"):
        network_model("analytic")
