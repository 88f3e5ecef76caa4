"""``network.attributes``: ns-3 attribute names and values checked before ns-3 sees them.

A name is looked up with ns-3's own introspection (``TypeId::LookupAttributeByName``) on the
classes the network models create; a misspelled name is an error at either fidelity. A value is
checked in two steps:

1. its text is checked in Python against the syntax of the attribute's value type and put in
   one canonical form (``TimeValue`` -> ``123ns``, ``DataRateValue`` -> ``400000000000bps``):
   ns-3's own parsers end the process (``NS_FATAL_ERROR`` / ``NS_ABORT``: "Can't Parse Time",
   "not properly formatted") on malformed text instead of reporting it, so no text reaches
   them unchecked; times and rates must be finite, non-negative, and inside the ranges of
   :mod:`heterosim.units` (a 1e-30 bit/s rate would make every serialisation delay overflow);
2. the canonical text goes through the attribute's checker
   (``AttributeChecker::CreateValidValue``), which applies the attribute's own range (e.g.
   ``EcnPmax`` in [0, 1]).

Every failure is a one-line :class:`~heterosim.errors.UserError` naming the attribute.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from heterosim.errors import UserError
from heterosim.units import MAX_TIME_NS, parse_rate

# Classes whose attributes ``network.attributes`` may set (PacketNetwork::SetComponentAttribute
# and the fluid model's FluidNetwork).
PACKET_TYPES = (
    "ns3::PacketNetwork",
    "ns3::RdmaNic",
    "ns3::SwitchMmu",
    "ns3::RedEcnMarker",
    "ns3::Dcqcn",
    "ns3::Hpcc",
    "ns3::Timely",
    "ns3::Dctcp",
    "ns3::NoCongestionControl",
    "ns3::SocketTransport",
    "ns3::PacketFastForward",
    "ns3::PacketEpisodeCache",
    "ns3::LoadBalancer",
)
FLUID_TYPE = "ns3::FluidNetwork"
ALL_TYPES = (*PACKET_TYPES, FLUID_TYPE)

_TIME = re.compile(
    r"^\s*([+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)\s*"
    r"(s|ms|us|ns|ps|fs|min|h|d)?\s*$"
)
_TIME_NS = {
    "s": 1e9,
    "ms": 1e6,
    "us": 1e3,
    "ns": 1.0,
    "ps": 1e-3,
    "fs": 1e-6,
    "min": 60e9,
    "h": 3600e9,
    "d": 86400e9,
    None: 1e9,
}
_INT = re.compile(r"^\s*[+]?[0-9]{1,20}\s*$")
_ZERO_RATE = re.compile(r"^\s*(?:0+\.?0*|\.0+)\s*(bps|b/s|Bps|B/s|[KMGT]bps|[KMGT]b/s|[KMGT]B/s)?\s*$")
_BOOL = {"true": "true", "t": "true", "1": "true", "false": "false", "f": "false", "0": "false"}
MAX_TEXT = 256


def _split(name: str) -> tuple[str, str]:
    """``Dcqcn::RateAi`` -> (``ns3::Dcqcn``, ``RateAi``); ``RateAi`` -> ("", ``RateAi``)."""
    cut = name.rfind("::")
    if cut < 0:
        return "", name
    cls = name[:cut]
    return (cls if cls.startswith("ns3::") else f"ns3::{cls}"), name[cut + 2 :]


# String attributes that name an ns-3 class: (class, attribute) -> (base TypeId the named class
# must derive from, other words accepted). SocketTransport creates the class by that name.
TYPE_ID_ATTRIBUTES = {
    ("ns3::SocketTransport", "TcpCongestionControl"): ("ns3::TcpCongestionOps", ()),
    ("ns3::SocketTransport", "HostQueueDisc"): ("ns3::QueueDisc", ("none",)),
}


# Time attributes that must stay in order: (class, shorter, longer, why). ns-3's RTO is
# max(MinRto, srtt + 4 rttvar) (tcp-socket-base.cc), so it can equal TcpMinRto exactly.
ORDERED_TIMES = (
    (
        "ns3::SocketTransport",
        "TcpDelAckTimeout",
        "TcpMinRto",
        "a lone segment's delayed ACK would wait for the sender's retransmission timeout",
    ),
)


def _fail(name: str, problem: str, source: str = "") -> UserError:
    where = f"{source}: " if source else ""
    return UserError(f"{where}network: attributes: {name}: {problem}")


def canonical_text(name: str, value: Any, value_type: str, source: str = "") -> str:
    """``value`` as text ns-3 parses without aborting, for an attribute of ``value_type``."""
    try:
        return _canonical_text(name, value, value_type)
    except UserError as exc:
        raise UserError(f"{source}: {exc}" if source else str(exc)) from None


def _canonical_text(name: str, value: Any, value_type: str) -> str:
    if isinstance(value, (dict, list, tuple, set)) or value is None:
        raise _fail(name, f"expected a single value, got {value!r:.60}")
    text = ("true" if value else "false") if isinstance(value, bool) else str(value)
    if len(text) > MAX_TEXT or "\0" in text:
        raise _fail(name, f"value of {len(text)} characters is not a valid {value_type}")
    if value_type == "ns3::BooleanValue":
        if text.strip().lower() not in _BOOL:
            raise _fail(name, f"expected true or false, got {text!r}")
        return _BOOL[text.strip().lower()]
    if value_type == "ns3::UintegerValue":
        if isinstance(value, float) or not _INT.match(text) or int(text) >= 2**64:
            raise _fail(name, f"expected a non-negative integer, got {text!r}")
        return str(int(text))
    if value_type == "ns3::DoubleValue":
        try:
            number = float(text)
        except ValueError:
            raise _fail(name, f"expected a number, got {text!r}") from None
        if not math.isfinite(number):
            raise _fail(name, f"expected a finite number, got {text!r}")
        return repr(number)
    if value_type == "ns3::TimeValue":
        match = _TIME.match(text)
        if not match:
            raise _fail(name, f"expected a time such as 10us, got {text!r}")
        time_ns = float(match.group(1)) * _TIME_NS[match.group(2)]
        if not math.isfinite(time_ns) or time_ns > MAX_TIME_NS:
            raise _fail(name, f"time {text!r} is longer than one day")
        return f"{int(round(time_ns))}ns"
    if value_type == "ns3::DataRateValue":
        if _ZERO_RATE.match(text):
            return "0bps"  # meaningful for some (Dcqcn::RateAi 0bps: from each NIC's line rate)
        try:
            rate = parse_rate(text)
        except ValueError as exc:
            raise _fail(name, str(exc)) from None
        return f"{int(round(rate))}bps"
    if value_type == "ns3::StringValue":
        return text
    raise _fail(name, f"attributes of type {value_type} cannot be set from a configuration")


def _find(ns3: Any, name: str, types: tuple[str, ...]) -> list[tuple[str, Any]]:
    """(class, checker) of every class in ``types`` that has the attribute ``name``."""
    cls, attr = _split(name)
    found = []
    for type_name in types:
        if (cls and cls != type_name) or (not cls and type_name == FLUID_TYPE):
            continue  # the fluid model's attributes are always written FluidNetwork::Name
        tid = ns3.TypeId.LookupByName(type_name)
        info = ns3.TypeId.AttributeInformation()
        if tid.LookupAttributeByName(attr, info):
            found.append((type_name, info.checker))
    return found


def checked_attribute_text(
    ns3: Any, name: str, value: Any, types: tuple[str, ...] = ALL_TYPES, source: str = ""
) -> str:
    """The canonical text of ``value`` for attribute ``name``, accepted by the checker of every
    class among ``types`` that has it (and, for an attribute naming an ns-3 class, a registered
    TypeId of the right kind); UserError naming ``source`` and the attribute when none has it or
    one refuses."""
    found = _find(ns3, str(name), types)
    if not found:
        known = ", ".join(t.removeprefix("ns3::") for t in types)
        raise _fail(name, f"not an attribute of {known}", source)
    text = ""
    for type_name, checker in found:
        value_type = str(checker.GetValueTypeName())
        text = canonical_text(name, value, value_type, source)
        if not checker.CreateValidValue(ns3.StringValue(text)):
            raise _fail(
                name,
                f"{value!r:.60} is outside the range {type_name.removeprefix('ns3::')} accepts for it",
                source,
            )
        _check_type_id(ns3, name, text, TYPE_ID_ATTRIBUTES.get((type_name, _split(str(name))[1])), source)
    return text


def _check_type_id(
    ns3: Any, name: str, text: str, rule: tuple[str, tuple[str, ...]] | None, source: str
) -> None:
    """``text`` names a registered ns-3 class derived from the rule's base (ns-3's own registry,
    ``TypeId::LookupByNameFailSafe`` and ``IsChildOf``), or is one of its other words."""
    if rule is None:
        return
    base, words = rule
    if text in words:
        return
    tid = ns3.TypeId()
    if not ns3.TypeId.LookupByNameFailSafe(text, tid) or not tid.IsChildOf(ns3.TypeId.LookupByName(base)):
        also = f" or {', '.join(words)}" if words else ""
        raise _fail(name, f"{text!r:.60} is not a registered ns-3 class derived from {base}{also}", source)


def check_network_attributes(ns3: Any, attributes: Mapping[str, Any], source: str = "") -> dict[str, str]:
    """Every entry of ``network.attributes`` checked (at either fidelity), and the
    :data:`ORDERED_TIMES` kept in order; returns the canonical texts by name. ``source`` (the
    file) starts every message."""
    texts = {
        str(name): checked_attribute_text(ns3, str(name), value, source=source)
        for name, value in attributes.items()
    }
    for type_name, shorter, longer, why in ORDERED_TIMES:
        low_name, low = _time_setting(ns3, texts, type_name, shorter)
        high_name, high = _time_setting(ns3, texts, type_name, longer)
        if low >= high:
            raise _fail(
                low_name,
                f"{low / 1e6:g} ms is not shorter than {high_name} ({high / 1e6:g} ms): {why}",
                source,
            )
    return texts


def _time_setting(ns3: Any, texts: Mapping[str, str], type_name: str, attr: str) -> tuple[str, int]:
    """(name, nanoseconds) of time attribute ``attr`` of ``type_name``: the configured value
    (``Class::Attr`` or plain ``Attr``), else the TypeId's initial value."""
    for name, text in texts.items():
        cls, bare = _split(name)
        if bare == attr and cls in ("", type_name):
            return name, int(canonical_text(name, text, "ns3::TimeValue")[:-2])
    info = ns3.TypeId.AttributeInformation()
    if not ns3.TypeId.LookupByName(type_name).LookupAttributeByName(attr, info):
        raise KeyError(f"{type_name} has no attribute {attr}")
    name = f"{type_name.removeprefix('ns3::')}::{attr}"
    initial = str(info.initialValue.SerializeToString(info.checker))
    return name, int(canonical_text(name, initial, "ns3::TimeValue")[:-2])
