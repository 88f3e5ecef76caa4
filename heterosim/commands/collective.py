"""``heterosim collective``: simulate one collective over a size range, nccl-tests style.

Each size is decomposed the way NCCL would run it (algorithm, protocol and channels from
NCCL's tuning model unless overridden), simulated on the cluster's network, and reported as
time, algorithm bandwidth and bus bandwidth (nccl-tests definitions: algbw = S / t in GB/s,
busbw = algbw x 2(n-1)/n for all-reduce, (n-1)/n for all-gather, reduce-scatter, all-to-all,
gather and scatter, 1 for broadcast, reduce and send/recv).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from heterosim.config.cluster import load_cluster
from heterosim.config.experiment import _network
from heterosim.config.fields import Section
from heterosim.config.limits import check_collective_request
from heterosim.errors import UserError
from heterosim.plan.collectives import decompose_collective
from heterosim.plan.collectives.common import (
    COLLECTIVES,
    bus_factor,
    collective_name,
)
from heterosim.report.staging import staged_output
from heterosim.units import format_size, parse_size_range

EXAMPLES = """\
examples:
  heterosim collective --cluster topologies/two_host_h100.yaml --op allreduce --size 1GiB --ranks 0-15
  heterosim collective --cluster C.yaml --op allgather --size 1KiB..8GiB --ranks 0-7 --algo ring --out out/
  heterosim collective --cluster C.yaml --op allreduce --size 8KiB --ranks 0-127 --algo tree --protocol ll
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "collective", help="simulate one collective over a size range (nccl-tests style)",
        description=__doc__, epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--cluster", required=True, help="cluster YAML file")
    parser.add_argument("--op", default="allreduce", help=f"one of: {', '.join(COLLECTIVES)}")
    parser.add_argument("--size", default="1GiB", help="size or power-of-two range, e.g. 1KiB..8GiB")
    parser.add_argument("--ranks", default=None, help="GPU ids in communicator order, e.g. 0-15 or 0,8,16")
    parser.add_argument("--algo", default="auto", choices=("auto", "ring", "tree", "nvls"))
    parser.add_argument("--protocol", default="auto", choices=("auto", "simple", "ll", "ll128"))
    parser.add_argument("--channels", type=int, default=0, help="channels (0: as NCCL would pick)")
    parser.add_argument("--root", type=int, default=0, help="root rank (broadcast, reduce, gather, scatter)")
    parser.add_argument("--fidelity", default="flow", choices=("flow", "packet"))
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--queue-pairs", default="connection", choices=("connection", "flow"),
                        help="one queue pair per NCCL connection (default) or per flow (chunk)")
    parser.add_argument("--out", default=None, help="directory for results.json and busbw_vs_size.png")
    parser.add_argument("--chakra", default=None, metavar="DIR",
                        help="also write the decomposition of the first size as Chakra SEND/RECV traces")
    parser.set_defaults(func=run)


def parse_ranks(text: str | None, world_size: int) -> list[int]:
    """``0-15`` / ``0,2,4`` / ``0-7,16-23`` -> GPU ids; None -> every GPU of the cluster."""
    if text is None:
        return list(range(world_size))
    ranks: list[int] = []
    try:
        for part in str(text)[:10_000].split(","):
            part = part.strip()
            if part.startswith("-"):
                raise UserError(f"--ranks {text}: GPU ids are >= 0, got {part}")
            if "-" in part:
                low, high = (int(x) for x in part.split("-", 1))
                if high < low:
                    raise ValueError
                if high >= world_size:
                    raise UserError(f"--ranks {text}: GPU {high} out of range 0..{world_size - 1}")
                ranks.extend(range(low, high + 1))
            else:
                ranks.append(int(part))
    except ValueError:
        raise UserError(f"--ranks: expected GPU ids like 0-15 or 0,8,16, got {text!r}") from None
    return ranks


def simulate_collective(cluster, op: str, size_bytes: int, ranks: list[int], *, algorithm: str = "auto",
                        protocol: str = "auto", channels: int = 0, root: int = 0,
                        fidelity: str = "flow", seed: int = 1, topology=None, network=None,
                        queue_pairs: str = "connection") -> dict:
    """Decompose and simulate one collective; returns one nccl-tests row as a dict."""
    from heterosim.engine.executor import execute_plan
    from heterosim.engine.topology import build_topology

    name = collective_name(op)
    plan = decompose_collective(name, size_bytes, ranks, cluster, algorithm=algorithm, protocol=protocol,
                                channels=channels, root=root)
    topology = topology if topology is not None else build_topology(cluster)
    network = network if network is not None else _network(Section({}, ""))
    result = execute_plan(plan.to_execution_plan(cluster.world_size), topology, network,
                          fidelity=fidelity, seed=seed, queue_pairs=queue_pairs)
    time_s = result.makespan_ns * 1e-9
    n = len(ranks)
    algbw = size_bytes / time_s / 1e9 if time_s > 0 else 0.0
    return {
        "size_bytes": int(size_bytes), "count": int(size_bytes // 4), "time_s": time_s,
        "algbw_GBps": algbw, "busbw_GBps": algbw * bus_factor(name, n), "algorithm": plan.algorithm,
        "protocol": plan.protocol, "channels": plan.channels, "flows": plan.num_flows,
        "predicted_time_s": plan.predicted_ns * 1e-9,
    }


def run(args: argparse.Namespace) -> int:
    cluster = load_cluster(args.cluster)
    name = collective_name(args.op)
    try:
        sizes = parse_size_range(args.size)
    except ValueError as exc:
        raise UserError(f"--size: {exc}") from None
    ranks = parse_ranks(args.ranks, cluster.world_size)
    check_collective_request(args, sizes, ranks, cluster)  # ranges, output folders, budget
    from heterosim.engine.topology import build_topology

    topology = build_topology(cluster)
    network = _network(Section({}, ""))
    print(f"# {name} on {len(ranks)} ranks, {cluster.name}, fidelity {args.fidelity}")
    print(f"# {'size':>10} {'count':>12} {'time(us)':>11} {'algbw(GB/s)':>12} {'busbw(GB/s)':>12}"
          f"  algorithm  protocol  channels")
    rows = []
    for size in sizes:
        row = simulate_collective(cluster, name, size, ranks, algorithm=args.algo, protocol=args.protocol,
                                  channels=args.channels, root=args.root, fidelity=args.fidelity,
                                  seed=args.seed, topology=topology, network=network,
                                  queue_pairs=args.queue_pairs)
        rows.append(row)
        print(f"  {format_size(size):>10} {row['count']:>12} {row['time_s'] * 1e6:>11.2f} "
              f"{row['algbw_GBps']:>12.2f} {row['busbw_GBps']:>12.2f}  {row['algorithm']:<9}  "
              f"{row['protocol']:<8}  {row['channels']}", flush=True)
    if args.out:
        with staged_output(Path(args.out)) as stage:
            write_results(stage, name, ranks, args.fidelity, rows)
        print(f"# wrote {Path(args.out) / 'results.json'}")
    if args.chakra:
        from heterosim.plan.collectives.chakra_export import write_collective_chakra

        plan = decompose_collective(name, sizes[0], ranks, cluster, algorithm=args.algo,
                                    protocol=args.protocol, channels=args.channels, root=args.root)
        with staged_output(Path(args.chakra), option="--chakra") as stage:
            paths = write_collective_chakra(plan, stage)
        print(f"# wrote {len(paths)} Chakra traces to {args.chakra}")
    return 0


def write_results(out: Path, op: str, ranks: list[int], fidelity: str, rows: list[dict]) -> None:
    """results.json (DESIGN.md contract) and busbw_vs_size.png."""
    out.mkdir(parents=True, exist_ok=True)
    keys = ("size_bytes", "time_s", "algbw_GBps", "busbw_GBps", "algorithm", "protocol", "channels",
            "flows", "predicted_time_s")
    doc: dict = {"op": op, "ranks": list(map(int, ranks)), "fidelity": fidelity}
    if len(rows) == 1:
        doc.update({k: rows[0][k] for k in keys})
    else:
        doc["sizes"] = [{k: r[k] for k in keys} for r in rows]
    (out / "results.json").write_text(json.dumps(doc, indent=2) + "\n")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot([r["size_bytes"] for r in rows], [r["busbw_GBps"] for r in rows], marker="o")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("size (bytes)")
    ax.set_ylabel("bus bandwidth (GB/s)")
    ax.set_title(f"{op}, {len(ranks)} ranks, {fidelity}")
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(out / "busbw_vs_size.png", dpi=100)
    plt.close(fig)
