"""A Chakra ET trace as plain data (header, node counts, nodes with their fields), for display."""

from __future__ import annotations

import numpy as np

from heterosim.workload.chakra.expand import expand_nodes
from heterosim.workload.chakra.reader import rank_from_name, read_header, read_trace
from heterosim.workload.trace import (
    COLLECTIVE_NAMES,
    COMM_COLL_NODE,
    COMM_RECV_NODE,
    COMM_SEND_NODE,
    COMP_NODE,
)

TYPE_NAMES = {
    0: "INVALID",
    1: "METADATA",
    2: "MEM_LOAD",
    3: "MEM_STORE",
    COMP_NODE: "COMP",
    COMM_SEND_NODE: "SEND",
    COMM_RECV_NODE: "RECV",
    COMM_COLL_NODE: "COLL",
}


def node_records(path: str, limit: int) -> dict[str, object]:
    """The trace as plain data: header, rank, node count and the first ``limit`` nodes."""
    version, metadata = read_header(path)
    rank = rank_from_name(path)
    trace = read_trace(path, rank=0 if rank is None else rank)
    values = expand_nodes(trace)
    count = len(trace) if limit <= 0 else min(limit, len(trace))
    nodes = []
    for i in range(count):
        node: dict[str, object] = {
            "id": i,
            "type": TYPE_NAMES.get(int(values["node_type"][i]), str(values["node_type"][i])),
        }
        name = _name(values, i)
        node.update(
            {
                "name": name,
                "op": str(values["op"][i]),
                "phase": str(values["phase"][i]),
                "layer": int(values["layer"][i]),
                "micro_batch": int(values["micro_batch"][i]),
                "stage": int(values["stage"][i]),
            }
        )
        kind = int(values["node_type"][i])
        if kind == COMM_COLL_NODE:
            node.update(
                {
                    "comm_type": COLLECTIVE_NAMES.get(
                        int(values["comm_type"][i]), str(values["comm_type"][i])
                    ),
                    "comm_bytes": int(values["comm_bytes"][i]),
                    "group": int(values["comm_group"][i]),
                }
            )
            lo, hi = values["comm_split_ptr"][i], values["comm_split_ptr"][i + 1]
            if hi > lo:  # an all-to-all-v: bytes to each member of the group
                node["comm_split_bytes"] = values["comm_split"][lo:hi].tolist()
        elif kind in (COMM_SEND_NODE, COMM_RECV_NODE):
            node.update(
                {
                    "comm_bytes": int(values["comm_bytes"][i]),
                    "peer": int(values["peer"][i]),
                    "tag": int(values["tag"][i]),
                }
            )
        else:
            node.update(
                {
                    "flops": int(values["flops"][i]),
                    "bytes": int(values["bytes_moved"][i]),
                    "dtype": str(values["dtype"][i]),
                    "shape": [int(v) for v in values["shape"][i]],
                }
            )
        if values["duration_ns"][i]:
            node["duration_ns"] = int(values["duration_ns"][i])
        node["deps"] = trace.parents(i).tolist()
        nodes.append(node)
    return {
        "file": str(path),
        "version": version,
        "metadata": metadata,
        "rank": trace.rank,
        "gpu_type": trace.gpu_type,
        "node_count": len(trace),
        "node_types": {
            TYPE_NAMES.get(int(k), str(k)): int(c)
            for k, c in zip(*np.unique(values["node_type"], return_counts=True))
        },
        "nodes": nodes,
    }


def _name(values: dict[str, np.ndarray], i: int) -> str:
    parts = []
    if values["layer"][i] >= 0:
        parts.append(f"L{values['layer'][i]}")
    if values["micro_batch"][i] >= 0:
        parts.append(f"mb{values['micro_batch'][i]}")
    return ".".join([*parts, str(values["label"][i])])
