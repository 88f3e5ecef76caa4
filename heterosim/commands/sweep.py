"""``heterosim sweep``: run a base experiment over a grid of overrides, in parallel, resumably.

Exit status: 0 when every variant succeeded, 1 when some are recorded as errors, 2 for bad input.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from heterosim.report.html_report import add_report_option, report_when_asked

EXAMPLES = """\
examples:
  heterosim sweep workloads/sweeps/tiny_nic_seed.yaml --out out/sweeps/tiny
  heterosim sweep workloads/sweeps/cc_h4.yaml --workers 8 --resume
  heterosim sweep workloads/sweeps/cc_h4.yaml --executor ray --address ray-head:6379
sweep file: experiment (base, relative to the sweep file), grid (dotted key -> list of values),
optional fidelity, set (fixed overrides), metrics (what the plots show), workers.
outputs in --out: results.jsonl (one line per finished run, appended as runs finish),
runs/<id>/results.json, summary.csv, summary.json, <metric>_vs_<parameter>.png, sweep.json
(with --report, report.html)
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "sweep",
        help="run an experiment over a grid of overrides (local pool or Ray)",
        epilog=EXAMPLES,
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("sweep", help="sweep YAML file")
    parser.add_argument(
        "--executor",
        choices=("local", "ray"),
        default="local",
        help="local process pool (default) or a Ray cluster (needs the ray extra)",
    )
    parser.add_argument(
        "--address", metavar="HOST:PORT", help="Ray head to connect to (default: start a local Ray)"
    )
    parser.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="local worker processes (default: the sweep file's workers, else CPU count)",
    )
    parser.add_argument(
        "--resume", action="store_true", help="continue a sweep in --out, skipping variants already recorded"
    )
    parser.add_argument(
        "--retry-failed", action="store_true", help="with --resume: run variants recorded as errors again"
    )
    parser.add_argument("--out", help="output folder (default: out/sweeps/<sweep name>)")
    parser.add_argument("--no-plots", action="store_true", help="skip the summary plots")
    parser.add_argument("--quiet", action="store_true", help="no per-run lines on the terminal")
    add_report_option(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from heterosim.errors import UserError
    from heterosim.sweep.grid import load_sweep
    from heterosim.sweep.runner import run_sweep

    if args.workers is not None and args.workers < 1:
        raise UserError(f"--workers {args.workers}: expected a positive integer")
    if args.address and args.executor != "ray":
        raise UserError("--address: only used with --executor ray")
    spec = load_sweep(args.sweep)
    out = Path(args.out) if args.out else Path("out") / "sweeps" / spec.name

    def log(message: str) -> None:
        if not args.quiet:
            print(message, file=sys.stderr, flush=True)

    outcome = run_sweep(
        spec,
        out,
        executor=args.executor,
        workers=args.workers,
        address=args.address,
        resume=args.resume,
        retry_failed=args.retry_failed,
        plots=not args.no_plots,
        log=log,
    )
    status = outcome.summary.get("status", {})
    counts = ", ".join(f"{n} {name}" for name, n in sorted(status.items()))
    print(
        f"sweep {spec.name}: {outcome.variants} variants ({counts}); ran {len(outcome.ran)} now, "
        f"{outcome.skipped} already done"
    )
    for row in outcome.summary.get("rows", []):
        if row["status"] not in ("ok", "pending"):
            print(f"  {row['status']} {row['id']}: {row['error']}")
    print(f"summary in      {out}/summary.csv")
    report_when_asked(args.report, out)
    return 1 if status.get("error") else 0
