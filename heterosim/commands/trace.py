"""``heterosim trace show``: print a Chakra ET trace (ours or another producer's) readably."""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from heterosim.workload.chakra import expand_nodes, rank_from_name, read_header, read_trace
from heterosim.workload.trace import (
    COLLECTIVE_NAMES,
    COMM_COLL_NODE,
    COMM_RECV_NODE,
    COMM_SEND_NODE,
    COMP_NODE,
)

EXAMPLES = """\
examples:
  heterosim trace show out/trace.0.et                  # metadata and the first 50 nodes
  heterosim trace show out/trace.0.et --limit 0        # every node
  heterosim trace show out/trace.0.et --json | jq .nodes[0]
  heterosim trace show all_reduce.1.et.gz              # gzip-compressed files work too
"""

TYPE_NAMES = {0: "INVALID", 1: "METADATA", 2: "MEM_LOAD", 3: "MEM_STORE", COMP_NODE: "COMP",
              COMM_SEND_NODE: "SEND", COMM_RECV_NODE: "RECV", COMM_COLL_NODE: "COLL"}


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "trace", help="inspect Chakra ET trace files", description=__doc__,
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    show = actions.add_parser(
        "show", help="print a trace's metadata and nodes", description=__doc__,
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    show.add_argument("file", metavar="FILE", help="a <prefix>.<rank>.et file (or .et.gz)")
    show.add_argument("--json", action="store_true", help="print JSON instead of a table")
    show.add_argument("--limit", type=int, default=50, metavar="N",
                      help="nodes to print (default 50; 0 = all)")
    show.set_defaults(func=run_show)


def node_records(path: str, limit: int) -> dict[str, object]:
    """The trace as plain data: header, rank, node count and the first ``limit`` nodes."""
    version, metadata = read_header(path)
    rank = rank_from_name(path)
    trace = read_trace(path, rank=0 if rank is None else rank)
    values = expand_nodes(trace)
    count = len(trace) if limit <= 0 else min(limit, len(trace))
    nodes = []
    for i in range(count):
        node: dict[str, object] = {"id": i, "type": TYPE_NAMES.get(int(values["node_type"][i]),
                                                                   str(values["node_type"][i]))}
        name = _name(values, i)
        node.update({"name": name, "op": str(values["op"][i]), "phase": str(values["phase"][i]),
                     "layer": int(values["layer"][i]),
                     "micro_batch": int(values["micro_batch"][i]),
                     "stage": int(values["stage"][i])})
        kind = int(values["node_type"][i])
        if kind == COMM_COLL_NODE:
            node.update({"comm_type": COLLECTIVE_NAMES.get(int(values["comm_type"][i]),
                                                           str(values["comm_type"][i])),
                         "comm_bytes": int(values["comm_bytes"][i]),
                         "group": int(values["comm_group"][i])})
        elif kind in (COMM_SEND_NODE, COMM_RECV_NODE):
            node.update({"comm_bytes": int(values["comm_bytes"][i]),
                         "peer": int(values["peer"][i]), "tag": int(values["tag"][i])})
        else:
            node.update({"flops": int(values["flops"][i]),
                         "bytes": int(values["bytes_moved"][i]),
                         "dtype": str(values["dtype"][i]),
                         "shape": [int(v) for v in values["shape"][i]]})
        if values["duration_ns"][i]:
            node["duration_ns"] = int(values["duration_ns"][i])
        node["deps"] = trace.parents(i).tolist()
        nodes.append(node)
    return {"file": str(path), "version": version, "metadata": metadata, "rank": trace.rank,
            "gpu_type": trace.gpu_type, "node_count": len(trace),
            "node_types": {TYPE_NAMES.get(int(k), str(k)): int(c) for k, c in
                           zip(*np.unique(values["node_type"], return_counts=True))},
            "nodes": nodes}


def _name(values: dict[str, np.ndarray], i: int) -> str:
    parts = []
    if values["layer"][i] >= 0:
        parts.append(f"L{values['layer'][i]}")
    if values["micro_batch"][i] >= 0:
        parts.append(f"mb{values['micro_batch'][i]}")
    return ".".join([*parts, str(values["label"][i])])


def _amount(node: dict[str, object]) -> str:
    if "comm_type" in node:
        return f"{node['comm_type']} {node['comm_bytes']} B group {node['group']}"
    if "peer" in node:
        return f"{node['comm_bytes']} B peer {node['peer']} tag {node['tag']}"
    return f"{node['flops']} FLOP {node['bytes']} B"


def print_table(data: dict[str, object]) -> None:
    print(f"file:      {data['file']}")
    print(f"version:   {data['version'] or '(none)'}")
    print(f"rank:      {data['rank']}   gpu: {data['gpu_type'] or '-'}")
    counts = ", ".join(f"{k} {v}" for k, v in data["node_types"].items())  # type: ignore[union-attr]
    print(f"nodes:     {data['node_count']} ({counts})")
    for key, value in data["metadata"].items():  # type: ignore[union-attr]
        text = str(value).replace("\n", " ")
        print(f"meta:      {key} = {text[:100]}{'...' if len(text) > 100 else ''}")
    header = ("id", "type", "name", "op", "phase", "layer", "mb", "flops/bytes or comm", "deps")
    rows = []
    for node in data["nodes"]:  # type: ignore[union-attr]
        deps = node["deps"]
        dep_text = ",".join(str(d) for d in deps[:6]) + (",..." if len(deps) > 6 else "")
        rows.append((str(node["id"]), node["type"], node["name"], node["op"], node["phase"],
                     str(node["layer"]), str(node["micro_batch"]), _amount(node), dep_text))
    widths = [max(len(h), *(len(r[c]) for r in rows)) if rows else len(h)
              for c, h in enumerate(header)]
    print()
    print("  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip())
    for row in rows:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip())
    shown = len(data["nodes"])  # type: ignore[arg-type]
    if shown < data["node_count"]:  # type: ignore[operator]
        print(f"... {data['node_count'] - shown} more nodes (--limit 0 shows all)")  # type: ignore[operator]


def run_show(args: argparse.Namespace) -> int:
    data = node_records(args.file, args.limit)
    if args.json:
        json.dump(data, sys.stdout, indent=1)
        print()
    else:
        print_table(data)
    return 0
