"""``heterosim collective``: simulate one collective over a size range, nccl-tests style.

Each size is decomposed the way NCCL would run it (algorithm, protocol and channels from
NCCL's tuning model unless overridden), simulated on the cluster's network, and reported as
time, algorithm bandwidth and bus bandwidth (nccl-tests definitions: algbw = S / t in GB/s,
busbw = algbw x 2(n-1)/n for all-reduce, (n-1)/n for all-gather, reduce-scatter, all-to-all,
gather and scatter, 1 for broadcast, reduce and send/recv).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from heterosim.commands.collective_options import check_collective_request
from heterosim.config.choices import (
    COLLECTIVE_ALGORITHMS,
    COLLECTIVE_PROTOCOLS,
    DEFAULT_PACKET_ACCELERATION,
    FIDELITIES,
    GRANULARITIES,
    PACKET_ACCELERATIONS,
    QUEUE_PAIR_MODELS,
)
from heterosim.config.cluster import load_cluster
from heterosim.config.network_model import FLUID
from heterosim.config.ranks import parse_ranks
from heterosim.errors import UserError
from heterosim.plan.collectives.common import COLLECTIVES, collective_name
from heterosim.report.staging import staged_output
from heterosim.units import parse_size_range

EXAMPLES = """\
examples:
  heterosim collective --cluster topologies/two_host_h100.yaml --op allreduce --size 1GiB --ranks 0-15
  heterosim collective --cluster C.yaml --op allgather --size 1KiB..8GiB --ranks 0-7 --algo ring --out out/
  heterosim collective --cluster C.yaml --op allreduce --size 8KiB --ranks 0-127 --algo tree --protocol ll
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "collective",
        help="simulate one collective over a size range (nccl-tests style)",
        description=__doc__,
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--cluster", required=True, help="cluster YAML file")
    parser.add_argument("--op", default="allreduce", help=f"one of: {', '.join(COLLECTIVES)}")
    parser.add_argument("--size", default="1GiB", help="size or power-of-two range, e.g. 1KiB..8GiB")
    parser.add_argument("--ranks", default=None, help="GPU ids in communicator order, e.g. 0-15 or 0,8,16")
    parser.add_argument("--algo", default="auto", choices=COLLECTIVE_ALGORITHMS)
    parser.add_argument("--protocol", default="auto", choices=COLLECTIVE_PROTOCOLS)
    parser.add_argument("--channels", type=int, default=0, help="channels (0: as NCCL would pick)")
    parser.add_argument("--root", type=int, default=0, help="root rank (broadcast, reduce, gather, scatter)")
    parser.add_argument(
        "--fidelity",
        default=FLUID.name,
        choices=FIDELITIES,
        help=f"network model (default: {FLUID.name}, the fluid model, fast over many sizes)",
    )
    parser.add_argument(
        "--granularity",
        default="chunk",
        choices=GRANULARITIES,
        help="flows per chunk (NCCL's schedule, default), per ring step, or per GPU pair",
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--queue-pairs",
        default="connection",
        choices=QUEUE_PAIR_MODELS,
        help="one queue pair per NCCL connection (default) or per flow (chunk)",
    )
    parser.add_argument(
        "--packet-acceleration",
        default=DEFAULT_PACKET_ACCELERATION,
        choices=PACKET_ACCELERATIONS,
        help="packet fidelity: every frame (exact), settled stretches skipped (fast, the "
        "default), repeated contention episodes replayed (memo), or both (fast+memo)",
    )
    parser.add_argument("--out", default=None, help="directory for results.json and busbw_vs_size.png")
    parser.add_argument(
        "--chakra",
        default=None,
        metavar="DIR",
        help="also write the decomposition of the first size as Chakra SEND/RECV traces",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from heterosim.report.collective_report import HEADER, result_line, write_results
    from heterosim.simulate import CollectiveSpec, decompose_spec, engine_config, simulate_collective_sizes

    cluster = load_cluster(args.cluster)
    name = collective_name(args.op)
    try:
        sizes = parse_size_range(args.size)
    except ValueError as exc:
        raise UserError(f"--size: {exc}") from None
    ranks = parse_ranks(args.ranks, cluster.world_size)
    check_collective_request(args, sizes, ranks, cluster)  # ranges, output folders, budget
    spec = CollectiveSpec(
        name,
        tuple(ranks),
        algorithm=args.algo,
        protocol=args.protocol,
        channels=args.channels,
        root=args.root,
        granularity=args.granularity,
    )
    simulation = engine_config(
        fidelity=args.fidelity,
        seed=args.seed,
        queue_pairs=args.queue_pairs,
        packet_acceleration=args.packet_acceleration,
    )
    print(f"# {name} on {len(ranks)} ranks, {cluster.name}, fidelity {args.fidelity}")
    print(HEADER)
    rows = []
    for row in simulate_collective_sizes(cluster, spec, sizes, simulation):
        rows.append(row)
        print(result_line(row), flush=True)
    if args.out:
        with staged_output(Path(args.out)) as stage:
            write_results(stage, name, ranks, args.fidelity, rows, args.granularity)
        print(f"# wrote {Path(args.out) / 'results.json'}")
    if args.chakra:
        from heterosim.plan.collectives.chakra_export import write_collective_chakra

        with staged_output(Path(args.chakra), option="--chakra") as stage:
            paths = write_collective_chakra(decompose_spec(cluster, spec, sizes[0]), stage)
        print(f"# wrote {len(paths)} Chakra traces to {args.chakra}")
    return 0
