"""Trimmed packets (``network.trimming``): the ``network`` counters of results.json.

A switch that trims cuts a data packet its buffer cannot take to its header
(``RdmaSwitch::Trim``) and counts it at the egress port the packet was bound for
(``QbbNetDevice::GetTrims``: the ``trims`` column of a packet run's port table, links.csv of
``heterosim run``, ports.csv of ``heterosim netbench``). A switch's trims are those of its ports.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from heterosim.engine.topology import Topology


def trim_counters(counters: Mapping[str, Any], ports: Mapping[str, Any] | None, topology: Topology) -> dict:
    """``trims`` (every switch's) and ``switch_trims`` ({switch name: trims} of the switches that
    trimmed, in node order) from a run's counters and per-port table (``node``, the switch sending
    on the port, and ``trims``); {} for a run without trimming (no ``trims`` counter)."""
    if "trims" not in counters:
        return {}
    out: dict[str, Any] = {"trims": int(counters["trims"]), "switch_trims": {}}
    if ports is not None and "trims" in ports and len(ports["trims"]):
        node = np.asarray(ports["node"], np.int64)
        per_node = np.bincount(
            node, weights=np.asarray(ports["trims"], np.float64), minlength=topology.num_nodes
        )
        out["switch_trims"] = {
            str(topology.node_name[n]): int(per_node[n]) for n in np.flatnonzero(per_node).tolist()
        }
    return out
