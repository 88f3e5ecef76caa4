"""``heterosim trace show``: print a Chakra ET trace (ours or another producer's) readably."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from heterosim.workload.chakra.records import node_records

EXAMPLES = """\
examples:
  heterosim trace show out/trace.0.et                  # metadata and the first 50 nodes
  heterosim trace show out/trace.0.et --limit 0        # every node
  heterosim trace show out/trace.0.et --json | jq .nodes[0]
  heterosim trace show all_reduce.1.et.gz              # gzip-compressed files work too
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "trace",
        help="inspect Chakra ET trace files",
        description=__doc__,
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    show = actions.add_parser(
        "show",
        help="print a trace's metadata and nodes",
        description=__doc__,
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    show.add_argument("file", metavar="FILE", help="a <prefix>.<rank>.et file (or .et.gz)")
    show.add_argument("--json", action="store_true", help="print JSON instead of a table")
    show.add_argument(
        "--limit", type=int, default=50, metavar="N", help="nodes to print (default 50; 0 = all)"
    )
    show.set_defaults(func=run_show)


def _amount(node: dict[str, object]) -> str:
    if "comm_type" in node:
        split = node.get("comm_split_bytes")
        per_member = f" per member {split}" if split else ""
        return f"{node['comm_type']} {node['comm_bytes']} B group {node['group']}{per_member}"
    if "peer" in node:
        return f"{node['comm_bytes']} B peer {node['peer']} tag {node['tag']}"
    return f"{node['flops']} FLOP {node['bytes']} B"


def print_table(data: dict[str, Any]) -> None:
    print(f"file:      {data['file']}")
    print(f"version:   {data['version'] or '(none)'}")
    print(f"rank:      {data['rank']}   gpu: {data['gpu_type'] or '-'}")
    counts = ", ".join(f"{k} {v}" for k, v in data["node_types"].items())
    print(f"nodes:     {data['node_count']} ({counts})")
    for key, value in data["metadata"].items():
        text = str(value).replace("\n", " ")
        print(f"meta:      {key} = {text[:100]}{'...' if len(text) > 100 else ''}")
    header = ("id", "type", "name", "op", "phase", "layer", "mb", "flops/bytes or comm", "deps")
    rows = []
    for node in data["nodes"]:
        deps = node["deps"]
        dep_text = ",".join(str(d) for d in deps[:6]) + (",..." if len(deps) > 6 else "")
        rows.append(
            (
                str(node["id"]),
                node["type"],
                node["name"],
                node["op"],
                node["phase"],
                str(node["layer"]),
                str(node["micro_batch"]),
                _amount(node),
                dep_text,
            )
        )
    widths = [max(len(h), *(len(r[c]) for r in rows)) if rows else len(h) for c, h in enumerate(header)]
    print()
    print("  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip())
    for row in rows:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip())
    shown = len(data["nodes"])
    if shown < data["node_count"]:
        print(f"... {data['node_count'] - shown} more nodes (--limit 0 shows all)")


def run_show(args: argparse.Namespace) -> int:
    data = node_records(args.file, args.limit)
    if args.json:
        json.dump(data, sys.stdout, indent=1)
        print()
    else:
        print_table(data)
    return 0
