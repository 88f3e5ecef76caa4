"""``heterosim workload``: write the per-rank Chakra ET traces, comm_group.json and workload.json.

Everything goes to a temporary folder beside ``--out`` first and is moved into place only when
every file is written, so an error never leaves a half-written output.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from heterosim.config.experiment import load_experiment
from heterosim.config.ranks import parse_ranks
from heterosim.errors import UserError
from heterosim.report.staging import check_output_folder, staged_output
from heterosim.workload.summary import rank_summary, workload_summary

EXAMPLES = """\
examples:
  heterosim workload workloads/default.yaml --out traces/
  heterosim workload workloads/simai/gpt3_175b_tp8_pp8.yaml --out out/175b --ranks 0-7
  heterosim workload workloads/default.yaml --out out/ --set parallel.partition=uniform
  heterosim workload workloads/default.yaml --out out/ --summary-only   # workload.json only

output (in --out):
  <prefix>.<rank>.et   one Chakra ET trace per rank (GlobalMetadata, then nodes)
  comm_group.json      process-group id -> member ranks
  workload.json        per-rank summary: GPU, stage, layers, micro-batches, FLOPs, collectives
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "workload",
        help="generate per-rank protobuf traces (Chakra ET) for an experiment",
        description=__doc__,
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("experiment", help="experiment YAML file")
    parser.add_argument("--out", required=True, help="output folder (created or replaced)")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override an experiment key, e.g. parallel.pp=4",
    )
    parser.add_argument("--ranks", help="only these ranks' traces, e.g. 0-7,64 (default: all)")
    parser.add_argument("--prefix", default="", help="trace file prefix (default: experiment name)")
    parser.add_argument(
        "--summary-only", action="store_true", help="write workload.json and comm_group.json but no .et files"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from heterosim.simulate import generate_experiment_workload
    from heterosim.workload.chakra import write_comm_groups, write_trace

    experiment = load_experiment(args.experiment, args.overrides)
    check_output_folder(args.out)
    start = time.perf_counter()
    workload = generate_experiment_workload(experiment)
    ranks = sorted(parse_ranks(args.ranks, workload.world_size)) if args.ranks else None
    prefix = args.prefix or experiment.name
    if "/" in prefix or not prefix:
        raise UserError(f"--prefix {prefix!r}: expected a plain file name prefix")
    out = Path(args.out)
    nodes = 0
    entries = []
    with staged_output(out) as tmp:
        for trace in workload.iter_traces(ranks):
            if not args.summary_only:
                write_trace(trace, tmp / f"{prefix}.{trace.rank}.et")
            entries.append(rank_summary(workload, trace))
            nodes += len(trace)
        summary = workload_summary(workload, traces=[])
        summary["ranks"] = entries
        summary["total_flops"] = int(sum(e["flops"] for e in entries))
        write_comm_groups({g.id: list(g.ranks) for g in workload.groups.groups}, tmp / "comm_group.json")
        (tmp / "workload.json").write_text(json.dumps(summary, indent=1) + "\n")
    elapsed = time.perf_counter() - start
    part = workload.partition
    layers = ", ".join(f"{r.start}-{r.stop - 1}" for r in part.chunk_layers)
    print(
        f"{experiment.name}: {workload.world_size} ranks, {len(entries)} traces, {nodes} nodes "
        f"in {elapsed:.1f}s -> {out}",
        file=sys.stdout,
    )
    counts = list(part.replica_micro_batches)
    shown = f"{counts[0]} x {len(counts)}" if len(set(counts)) == 1 else str(counts)
    print(f"  stage layers: {layers}; micro-batches per replica: {shown}")
    return 0
