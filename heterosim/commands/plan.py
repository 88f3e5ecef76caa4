"""``heterosim plan``: search TP/PP/DP layouts, stage partitions, replica placements and
micro-batch splits for an experiment's model, batch and cluster; print the best.

Exit status: 0 when a plan was simulated, 1 when none could be, 2 for bad input.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from heterosim.config.choices import GRANULARITIES
from heterosim.sweep.runner import EXECUTORS

EXAMPLES = """\
examples:
  heterosim plan workloads/examples/hetero_partition_h2.yaml --out out/plan/h2
  heterosim plan workloads/examples/plan_amp_het.yaml --top 8 --verify 1
  heterosim plan E.yaml --max-candidates 32 --workers 8 --resume
outputs in --out: results.json (every candidate: simulated, pruned with its reason, or pre-ranked
out), results.jsonl (the runs; --resume continues from it), search.json, best_plan.yaml
"""


def _ints(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return values


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "plan",
        help="search parallel plans for a heterogeneous cluster and rank them by simulation",
        epilog=EXAMPLES,
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "experiment",
        help="experiment YAML: model, training (global batch), "
        "cluster; its parallel layout is the default plan",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override an experiment key (repeatable)",
    )
    parser.add_argument("--out", help="output folder (default: out/plan/<experiment stem>)")
    parser.add_argument("--top", type=int, default=5, help="plans to print (default 5)")
    parser.add_argument(
        "--max-candidates",
        type=int,
        default=16,
        metavar="N",
        help="simulate at most N candidates, chosen by an analytic pre-rank "
        "(default 16; the default plan is always one)",
    )
    parser.add_argument(
        "--micro-batches",
        type=_ints,
        default=(1, 2, 4, 8, 16),
        metavar="LIST",
        help="micro-batch sizes to try (default 1,2,4,8,16)",
    )
    parser.add_argument(
        "--granularity",
        choices=GRANULARITIES,
        help="simulation.collective_granularity of the flow runs (default: the experiment's)",
    )
    parser.add_argument(
        "--verify", type=int, default=0, metavar="K", help="re-run the best K plans at packet fidelity"
    )
    parser.add_argument(
        "--workers", type=int, metavar="N", help="local worker processes (default: CPU count)"
    )
    parser.add_argument("--executor", choices=EXECUTORS, default="local")
    parser.add_argument("--address", metavar="HOST:PORT", help="Ray head (with --executor ray)")
    parser.add_argument(
        "--resume", action="store_true", help="continue a search in --out, skipping runs already recorded"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    parser.set_defaults(func=run)


def _gib(row: dict) -> str:
    return ", ".join(f"{g} {m:.1f}/{row['capacity_gib'][g]:.0f} GiB" for g, m in row["memory_gib"].items())


def run(args: argparse.Namespace) -> int:
    from heterosim.errors import UserError
    from heterosim.search.plan_search import PlanSearchSettings, search_plans

    if args.address and args.executor != "ray":
        raise UserError("--address: only used with --executor ray")
    if not Path(args.experiment).is_file():
        raise UserError(f"{args.experiment}: file not found")
    settings = PlanSearchSettings(
        max_candidates=args.max_candidates,
        micro_batches=args.micro_batches,
        top=args.top,
        verify=args.verify,
        granularity=args.granularity,
        workers=args.workers,
        executor=args.executor,
        address=args.address,
        resume=args.resume,
    )
    out = Path(args.out) if args.out else Path("out") / "plan" / Path(args.experiment).stem

    def log(message: str) -> None:
        if not args.quiet:
            print(message, file=sys.stderr, flush=True)

    results = search_plans(args.experiment, args.set, out, settings, log).results
    rows = {r["id"]: r for r in results["candidates"]}
    search = results["search"]
    counts = ", ".join(f"{n} {k}" for k, n in sorted(search["status"].items()))
    counts += "".join(f"; {n} pruned by {k}" for k, n in sorted(search["pruned"].items()))
    print(
        f"plan {search['model']} on {search['cluster']} ({search['world_size']} GPUs, global "
        f"batch {search['global_batch']}): {search['candidates']} candidates ({counts})"
    )
    default = rows[results["default"]]
    for i, cid in enumerate(results["ranking"][: args.top]):
        row = rows[cid]
        tag = " [default]" if row["default"] else ""
        print(f"{i + 1:>2}. {row['iteration_time_s'] * 1e3:10.3f} ms  {row['label']}{tag}")
        print(
            f"      memory {_gib(row)}; layers {row.get('stage_layers')}, micro-batches "
            f"{row.get('replica_micro_batches')}"
        )
        print(f"      why: {row['why']}")
        packet = row.get("packet")
        if packet:
            print(
                f"      packet: {packet['iteration_time_s'] * 1e3:.3f} ms"
                if "iteration_time_s" in packet
                else f"      packet: error: {packet['error']}"
            )
    if default.get("iteration_time_s") is not None and results["ranking"]:
        best = rows[results["ranking"][0]]
        gain = default["iteration_time_s"] / best["iteration_time_s"]
        print(
            f"default ({default['label']}): {default['iteration_time_s'] * 1e3:.3f} ms, rank "
            f"{default['rank']}; best is {gain:.2f}x faster"
        )
    else:
        print(f"default ({default['label']}): {default['status']}: {default.get('reason')}")
    for row in results["candidates"]:
        if row["kind"] == "as-written" and row.get("iteration_time_s") is not None:
            print(f"as written ({row['label']}): {row['iteration_time_s'] * 1e3:.3f} ms, rank {row['rank']}")
    print(f"results in      {out}/results.json (best plan: {out}/best_plan.yaml)")
    return 0 if results["ranking"] else 1
