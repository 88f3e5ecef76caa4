"""``heterosim validate CASES.yaml``: predict published measurements, print the error table.

For each selected case: the prediction in the source's own units, the measured value, the signed
error %, then MAPE per group (end-to-end and collective-busbw cases summarised apart; cases
flagged SUSPECT/CONFLICT/APPROX or used for calibration reported in their own columns). Writes
results.json, parity.png, table.md (Markdown) and budget.csv to --out.

Error budget: under each end-to-end case a line splits the predicted iteration time into compute
(and the share of it by source: measured, interpolated, roofline, scaled), exposed communication
and bubble, beside the measured time and the miss (heterosim/validate/budget.py); results.json
carries it per case (``budget``) and budget.csv one row per case.

Exit status: 0; 1 when a case could not be predicted (reported as failed with its one-line
reason); 3 when every case ran but --fail-above PCT is given and some selected case's |error %|
exceeds PCT (the cases are listed); 2 for bad input.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from heterosim.config.choices import (
    FIDELITIES,
    GRANULARITIES,
    INTRA_HOST_MODELS,
    PACKET_ACCELERATIONS,
    QUEUE_PAIR_MODELS,
)
from heterosim.config.network_model import FLUID, PACKET, network_model
from heterosim.errors import UserError
from heterosim.report.staging import check_output_folder, staged_output
from heterosim.report.task_progress import TaskProgress, to_stderr
from heterosim.validate.cases import load_cases, select_cases
from heterosim.validate.report import summary_lines
from heterosim.validate.runner import case_lines, check_databases, predict_row, write_validation_outputs
from heterosim.validate.stats import group_summary

EXIT_PREDICTION_FAILED = 1
EXIT_ABOVE_THRESHOLD = 3

EXAMPLES = """\
examples:
  heterosim validate validation/cases.yaml --ci
  heterosim validate validation/cases.yaml --ci --fail-above 25
  heterosim validate validation/cases.yaml --group nccl-tests --out out/validate
  heterosim validate validation/cases.yaml --max-gpus 512 --granularity connection --out out/validate-full
  heterosim validate validation/cases.yaml --only megatron-readme2020-dgxa100-1b --fidelity packet
  heterosim validate validation/cases.yaml --max-gpus 128 --fidelity packet --intra-host flow
  heterosim validate validation/cases.yaml --only megatron-sc21-t1-1p7b --db PROFILE.db
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "validate",
        help="predicted vs measured for published cases, error %% and MAPE",
        description=__doc__,
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("cases", help="cases YAML file (validation/cases.yaml)")
    parser.add_argument("--group", action="append", default=None, help="only this group (repeatable)")
    parser.add_argument("--only", default=None, help="comma-separated case ids")
    parser.add_argument("--ci", action="store_true", help="only cases tagged ci: true")
    parser.add_argument("--max-gpus", type=int, default=None, help="skip cases with more GPUs")
    parser.add_argument(
        "--fidelity",
        default=FLUID.name,
        choices=FIDELITIES,
        help=f"network model (default: {FLUID.name}, the fluid model, fast over many cases)",
    )
    parser.add_argument(
        "--granularity",
        default=None,
        choices=GRANULARITIES,
        help="simulation.collective_granularity for end-to-end cases (default: "
        "the case's own, chunk); connection makes large cases cheap",
    )
    parser.add_argument(
        "--intra-host",
        default=None,
        choices=INTRA_HOST_MODELS,
        help="packet fidelity: flows inside a host as frames (packet, the default) "
        "or in the fluid model (flow; the fabric stays packet-level)",
    )
    parser.add_argument(
        "--queue-pairs",
        default=None,
        choices=QUEUE_PAIR_MODELS,
        help="simulation.queue_pairs: one queue pair per NCCL connection "
        "(connection, the default) or per flow (flow)",
    )
    parser.add_argument(
        "--packet-acceleration",
        default=None,
        choices=PACKET_ACCELERATIONS,
        help="packet fidelity: simulation.packet_acceleration for every case (default: the "
        "case's own, fast unless it says otherwise; exact simulates every frame; memo replays "
        "repeated episodes; fast+memo both)",
    )
    parser.add_argument(
        "--contention",
        choices=("on", "off"),
        default=None,
        help="simulation.compute_contention for every case (default: the case's own, on)",
    )
    parser.add_argument(
        "--fail-above",
        type=float,
        default=None,
        metavar="PCT",
        help="exit 3 when any selected case's |error %%| exceeds PCT (for CI)",
    )
    parser.add_argument(
        "--db",
        action="append",
        default=[],
        metavar="PROFILE.db",
        help="operation database from `heterosim profile`, used before the shipped data to time "
        "compute of end-to-end and layer cases, as `heterosim run --db` (repeatable; the first wins)",
    )
    parser.add_argument(
        "--quiet-budget", action="store_true", help="do not print the error-budget line under each case"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    parser.add_argument(
        "--out", default="out/validate", help="directory for results.json, parity.png, table.md, budget.csv"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    cases = load_cases(args.cases)
    check_output_folder(args.out)  # before any case runs
    check_databases(args.db)
    only = [x.strip() for x in args.only.split(",") if x.strip()] if args.only else None
    if args.max_gpus is not None and args.max_gpus < 1:
        raise UserError("--max-gpus: expected a positive number of GPUs")
    if args.fail_above is not None and not 0 < args.fail_above < float("inf"):
        raise UserError(f"--fail-above {args.fail_above}: expected a finite positive percentage")
    if args.packet_acceleration not in (None, "exact") and not network_model(args.fidelity).accelerates:
        raise UserError(f"--packet-acceleration: needs --fidelity {PACKET.name}")
    chosen, skipped = select_cases(cases, groups=args.group, only=only, ci=args.ci, max_gpus=args.max_gpus)
    if not chosen:
        raise UserError(f"{args.cases}: no case left after selection")
    for case, reason in skipped:
        print(f"# skipped {case.id}: {reason}")
    print(
        f"# {len(chosen)} cases, fidelity {args.fidelity}"
        + (f", collective granularity {args.granularity}" if args.granularity else "")
        + (f", intra-host {args.intra_host}" if args.intra_host else "")
        + (f", queue pairs per {args.queue_pairs}" if args.queue_pairs else "")
        + (f", packet acceleration {args.packet_acceleration}" if args.packet_acceleration else "")
    )
    print(f"# {'case':<42} {'quantity':<20} {'measured':>9} {'predicted':>9} {'error%':>8}  flags")
    rows: list[dict[str, Any]] = []
    start = time.perf_counter()
    progress = TaskProgress("validate", len(chosen), emit=None if args.quiet else to_stderr)
    for case in chosen:
        rows.append(
            predict_row(
                case,
                args.fidelity,
                args.granularity,
                args.intra_host,
                args.queue_pairs,
                args.packet_acceleration,
                args.db,
                None if args.contention is None else args.contention == "on",
            )
        )
        print("\n".join(case_lines(case, rows[-1], show_budget=not args.quiet_budget)), flush=True)
        progress.done(case.id)
    groups = group_summary(rows)
    print("\n".join(summary_lines(groups)))
    out = Path(args.out)
    meta = {
        "cases_file": str(args.cases),
        "fidelity": args.fidelity,
        "granularity": args.granularity,
        "intra_host": args.intra_host,
        "queue_pairs": args.queue_pairs,
        "packet_acceleration": args.packet_acceleration,
        "compute_contention": args.contention,
        "databases": list(args.db),
        "selection": {"group": args.group, "only": only, "ci": args.ci, "max_gpus": args.max_gpus},
        "skipped": [{"id": c.id, "reason": r} for c, r in skipped],
        "wall_s": time.perf_counter() - start,
    }
    with staged_output(out) as stage:  # all or nothing: a failure leaves no partial outputs
        written = write_validation_outputs(stage, rows, groups, meta)
    print(f"# wrote {', '.join(str(out / p.name) for p in written)}")
    if any(r["error_pct"] is None for r in rows):
        return EXIT_PREDICTION_FAILED
    if args.fail_above is not None:
        above = [r for r in rows if abs(r["error_pct"]) > args.fail_above]
        for r in above:
            print(f"# above --fail-above {args.fail_above:g} %: {r['id']} {r['error_pct']:+.1f} %")
        if above:
            return EXIT_ABOVE_THRESHOLD
    return 0
