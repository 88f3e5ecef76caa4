"""``heterosim validate CASES.yaml``: predict published measurements, print the error table.

For each selected case: the prediction in the source's own units, the measured value, the signed
error %, then MAPE per group (end-to-end and collective-busbw cases summarised apart; cases
flagged SUSPECT/CONFLICT/APPROX or used for calibration reported in their own columns). Writes
results.json, parity.png and table.md (Markdown) to --out. A case the simulator cannot run is
reported as failed with its one-line reason; the command then exits 1.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from heterosim.config.choices import FIDELITIES, GRANULARITIES, INTRA_HOST_MODELS, QUEUE_PAIR_MODELS
from heterosim.errors import OUT_OF_MEMORY_HINT, UserError, is_out_of_memory
from heterosim.validate.cases import load_cases, select_cases
from heterosim.validate.predict import predict
from heterosim.validate.report import markdown_table, result_row, write_parity_plot, write_results
from heterosim.validate.stats import group_summary

EXAMPLES = """\
examples:
  heterosim validate validation/cases.yaml --ci
  heterosim validate validation/cases.yaml --group nccl-tests --out out/validate
  heterosim validate validation/cases.yaml --max-gpus 512 --granularity connection --out out/validate-full
  heterosim validate validation/cases.yaml --only megatron-readme2020-dgxa100-1b --fidelity packet
  heterosim validate validation/cases.yaml --max-gpus 128 --fidelity packet --intra-host flow
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "validate", help="predicted vs measured for published cases, error %% and MAPE",
        description=__doc__, epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("cases", help="cases YAML file (validation/cases.yaml)")
    parser.add_argument("--group", action="append", default=None,
                        help="only this group (repeatable)")
    parser.add_argument("--only", default=None, help="comma-separated case ids")
    parser.add_argument("--ci", action="store_true", help="only cases tagged ci: true")
    parser.add_argument("--max-gpus", type=int, default=None, help="skip cases with more GPUs")
    parser.add_argument("--fidelity", default="flow", choices=FIDELITIES)
    parser.add_argument("--granularity", default=None, choices=GRANULARITIES,
                        help="simulation.collective_granularity for end-to-end cases (default: "
                             "the case's own, chunk); connection makes large cases cheap")
    parser.add_argument("--intra-host", default=None, choices=INTRA_HOST_MODELS,
                        help="packet fidelity: flows inside a host as frames (packet, the default) "
                             "or in the fluid model (flow; the fabric stays packet-level)")
    parser.add_argument("--queue-pairs", default=None, choices=QUEUE_PAIR_MODELS,
                        help="simulation.queue_pairs: one queue pair per NCCL connection "
                             "(connection, the default) or per flow (flow)")
    parser.add_argument("--out", default="out/validate", help="directory for results.json, parity.png")
    parser.set_defaults(func=run)


def _fmt(value: float | None, width: int = 9) -> str:
    if value is None:
        return f"{'-':>{width}}"
    return f"{value:>{width}.4g}"


def print_summary(groups: dict[str, Any]) -> None:
    print("# group                  n   MAPE%  mean err%   flagged n/MAPE%  calib n/MAPE%  failed")
    for name, s in sorted(groups.items(), key=lambda kv: (kv[0] in ("end-to-end",
                                                                     "collective_busbw"), kv[0])):
        print(f"  {name:<22} {s['main_n']:>2} {_fmt(s['main_mape_pct'], 7)} "
              f"{_fmt(s['main_mean_error_pct'], 10)}   {s['flagged_n']:>3}/{_fmt(s['flagged_mape_pct'], 7)}"
              f"    {s['calibration_n']:>2}/{_fmt(s['calibration_mape_pct'], 7)}  {s['failed']:>5}")


def run(args: argparse.Namespace) -> int:
    cases = load_cases(args.cases)
    only = [x.strip() for x in args.only.split(",") if x.strip()] if args.only else None
    if args.max_gpus is not None and args.max_gpus < 1:
        raise UserError("--max-gpus: expected a positive number of GPUs")
    chosen, skipped = select_cases(cases, groups=args.group, only=only, ci=args.ci,
                                   max_gpus=args.max_gpus)
    if not chosen:
        raise UserError(f"{args.cases}: no case left after selection")
    for case, reason in skipped:
        print(f"# skipped {case.id}: {reason}")
    print(f"# {len(chosen)} cases, fidelity {args.fidelity}"
          + (f", collective granularity {args.granularity}" if args.granularity else "")
          + (f", intra-host {args.intra_host}" if args.intra_host else "")
          + (f", queue pairs per {args.queue_pairs}" if args.queue_pairs else ""))
    print(f"# {'case':<42} {'quantity':<20} {'measured':>9} {'predicted':>9} {'error%':>8}  flags")
    rows: list[dict[str, Any]] = []
    start = time.perf_counter()
    for case in chosen:
        pred, error = None, None
        try:
            pred = predict(case, args.fidelity, args.granularity, args.intra_host, args.queue_pairs)
        except (UserError, ValueError) as exc:
            error = str(exc).splitlines()[0]
        except Exception as exc:  # noqa: BLE001 - only allocation failures are reported, others raise
            if not is_out_of_memory(exc):
                raise
            error = f"out of memory ({OUT_OF_MEMORY_HINT})"
        row = result_row(case, pred, error)
        rows.append(row)
        marks = ",".join(case.separate_flags + (["calibration"] if case.calibration else []))
        if pred is None:
            print(f"  {case.id:<42} FAILED: {error}", flush=True)
        else:
            print(f"  {case.id:<42} {case.quantity:<20} {_fmt(case.measured)} {_fmt(pred.value)} "
                  f"{row['error_pct']:>+8.1f}  {marks}", flush=True)
    groups = group_summary(rows)
    print_summary(groups)
    out = Path(args.out)
    meta = {"cases_file": str(args.cases), "fidelity": args.fidelity, "granularity": args.granularity,
            "intra_host": args.intra_host, "queue_pairs": args.queue_pairs,
            "selection": {"group": args.group, "only": only, "ci": args.ci,
                          "max_gpus": args.max_gpus},
            "skipped": [{"id": c.id, "reason": r} for c, r in skipped],
            "wall_s": time.perf_counter() - start}
    write_results(out, rows, groups, meta)
    write_parity_plot(out, rows)
    (out / "table.md").write_text(markdown_table(rows))
    print(f"# wrote {out / 'results.json'}, {out / 'parity.png'} and {out / 'table.md'}")
    return 1 if any(r["error_pct"] is None for r in rows) else 0
