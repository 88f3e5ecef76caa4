"""Settings that cannot act at a fidelity are known in one place and named in warnings."""

from __future__ import annotations

from heterosim.config.fidelity_scope import (
    differing_keys,
    fidelity_of,
    no_effect_reason,
    no_effect_warnings,
    override_warnings,
)


def test_packet_only_settings_have_no_effect_at_flow_fidelity():
    for key in ("network.cc", "network.pfc", "network.buffer", "simulation.intra_host"):
        assert no_effect_reason(key, "flow") and not no_effect_reason(key, "packet")
    assert no_effect_reason("network.attributes.Dcqcn::RateAi", "flow")
    assert not no_effect_reason("network.attributes.FluidNetwork::HeaderBytes", "flow")
    assert no_effect_reason("network.frame_overhead", "packet") and not no_effect_reason(
        "network.frame_overhead", "flow"
    )
    for key in ("network.mtu", "network.ecmp", "simulation.seed", "parallel.tp"):  # act at both
        assert not no_effect_reason(key, "flow") and not no_effect_reason(key, "packet")


def test_a_variant_differing_only_in_cc_at_flow_fidelity_is_one_warning():
    a = {"name": "x", "network": {"cc": "dcqcn"}, "simulation": {"fidelity": "flow", "seed": 1}}
    b = {"name": "x", "network": {"cc": "hpcc"}, "simulation": {"fidelity": "flow", "seed": 1}}
    keys = differing_keys(a, b)
    assert keys == ["network.cc"] and fidelity_of(a) == "flow" and fidelity_of({}) == "packet"
    (line,) = no_effect_warnings(keys, {"flow"}, "the two sides")
    assert line.startswith("network.cc has no effect at flow fidelity") and "give the same result" in line
    assert no_effect_warnings(keys, {"packet"}, "the two sides") == []
    assert no_effect_warnings(keys, {"packet", "flow"}, "the two sides") == []  # acts on one side


def test_overrides_that_cannot_act_are_named():
    lines = override_warnings(["network.cc=hpcc", "parallel.tp=2"], "flow")
    assert lines == [
        "--set network.cc=hpcc has no effect at flow fidelity "
        "(congestion control runs in the packet network only)"
    ]
