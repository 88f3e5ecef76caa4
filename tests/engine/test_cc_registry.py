"""Congestion control is chosen by ns-3 TypeId: config names map to TypeIds in one table, and each
class states what its frames carry."""

from __future__ import annotations

import pytest

from heterosim.config.choices import CC_TYPE_IDS

pytestmark = pytest.mark.ns3


def registered_cc_types(ns3) -> set[str]:
    base = ns3.TypeId.LookupByName("ns3::RdmaCongestionControl")
    names = set()
    for i in range(ns3.TypeId.GetRegisteredN()):
        tid = ns3.TypeId.GetRegistered(i)
        if tid != base and tid.IsChildOf(base) and tid.HasConstructor():
            names.add(str(tid.GetName()))
    return names


def test_the_config_table_names_every_registered_cc_class(native_lib):
    assert set(CC_TYPE_IDS.values()) == registered_cc_types(native_lib.ns3)


def test_each_class_states_its_int_header(native_lib):
    ns3 = native_lib.ns3
    sizes = {}
    for name, type_id in CC_TYPE_IDS.items():
        factory = ns3.ObjectFactory(type_id)
        cc = factory.Create["ns3::RdmaCongestionControl"]()
        sizes[name] = (bool(cc.UsesInt()), int(cc.GetIntHeaderBytes()))
    # HPCC alone carries INT: a 2-byte hop count and 8 bytes for each of 5 hops
    assert sizes == {
        "dcqcn": (False, 0),
        "hpcc": (True, 42),
        "timely": (False, 0),
        "dctcp": (False, 0),
        "none": (False, 0),
        "nscc": (False, 0),
        "rccc": (False, 0),
    }


def test_a_type_that_is_not_a_congestion_control_is_refused(native_lib):
    ns3 = native_lib.ns3
    net = ns3.CreateObject[ns3.PacketNetwork]()
    assert net.SetComponentAttribute("Cc", "ns3::Hpcc")
    assert not net.SetComponentAttribute("Cc", "ns3::NoSuchClass")
    assert net.SetComponentAttribute("Cc", "ns3::SwitchMmu")  # a TypeId, but no CC: Build refuses
    topology = ns3.CreateObject[ns3.TopologyDescription]()
    assert not net.Build(topology)
