"""``heterosim profile``: time compute ops with PyTorch and write an operation database."""

from __future__ import annotations

import argparse

from heterosim.plan.compute import profiler

EXAMPLES = """\
examples:
  heterosim profile --out h100.db                         # standard GEMM/attention/norm/elementwise sweep
  heterosim profile --out h100.db --experiment exp.yaml   # the distinct ops of one experiment
  heterosim profile --out cpu.db --device cpu --repeats 5 # plumbing check (CPU times are not GPU times)
Use the result in a run: heterosim run exp.yaml --db h100.db (or ComputeModel(databases=["h100.db"])).
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "profile",
        help="time compute ops on the local GPU into an operation database",
        epilog=EXAMPLES,
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--out", required=True, help="SQLite database to create or append to")
    parser.add_argument("--experiment", help="profile the distinct ops of this experiment file")
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    parser.add_argument("--repeats", type=int, default=20, help="timed runs per op (median kept)")
    parser.add_argument("--warmup", type=int, default=5, help="untimed runs per op first")
    parser.add_argument("--no-l2-flush", action="store_true", help="do not flush L2 between runs")
    parser.add_argument("--gpu", help="catalogue name to file the rows under (default: detected)")
    parser.add_argument(
        "--dtype",
        choices=("bf16", "fp16", "fp32"),
        help="dtype of the standard sweep (default bf16 on GPU, fp32 on CPU)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from heterosim.report.staging import check_output_file

    check_output_file(args.out)  # before any op is timed
    ops = profiler.experiment_ops(args.experiment) if args.experiment else None
    profiler.profile(
        args.out,
        ops,
        device=args.device,
        repeats=args.repeats,
        warmup=args.warmup,
        l2_flush=not args.no_l2_flush,
        gpu=args.gpu,
        dtype=args.dtype,
    )
    return 0
