"""``heterosim compare``: run two experiments (or two variants of one) with paired seeds, side by side."""

from __future__ import annotations

import argparse
from pathlib import Path

from heterosim.config.choices import FIDELITIES
from heterosim.report.html_report import add_report_option, report_when_asked

EXAMPLES = """\
examples:
  heterosim compare workloads/compare/tiny_4gpu.yaml workloads/compare/tiny_4gpu_400g.yaml
  heterosim compare workloads/simai/gpt3_13b_tp2.yaml \\
      --variant dcqcn:network.cc=dcqcn --variant hpcc:network.cc=hpcc --out out/cc
  heterosim compare workloads/default.yaml --variant uniform:parallel.partition=uniform
outputs in --out: comparison.json, comparison.csv, comparison.png (breakdown bars), and each
side's full run outputs in A/ and B/ (with --report, report.html). delta = B - A, ratio = B / A.
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "compare",
        help="A/B: two experiments or two variants of one, side by side",
        epilog=EXAMPLES,
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "experiments", nargs="+", metavar="EXPERIMENT", help="A.yaml B.yaml, or one experiment with --variant"
    )
    parser.add_argument(
        "--variant",
        dest="variants",
        action="append",
        default=[],
        metavar="NAME:KEY=VALUE[,KEY=VALUE]",
        help="a side made of overrides of the one experiment (once: base vs it; twice: A vs B)",
    )
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override applied to both sides (repeatable)",
    )
    parser.add_argument("--fidelity", choices=FIDELITIES, help="network model for both sides")
    parser.add_argument("--out", default="out/compare", help="output folder (default: out/compare)")
    parser.add_argument(
        "--no-plots", action="store_true", help="skip each side's run plots (comparison.png is still written)"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    add_report_option(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from heterosim.report.compare_report import format_table
    from heterosim.sweep.compare import compare, sides_from_arguments

    side_a, side_b = sides_from_arguments(list(args.experiments), list(args.variants))
    out = Path(args.out)
    comparison = compare(
        side_a,
        side_b,
        out,
        common=list(args.overrides),
        fidelity=args.fidelity,
        plots=not args.no_plots,
        progress=not args.quiet,
    )
    print(f"A = {side_a.label}, B = {side_b.label} (run in parallel)")
    seeds, fidelity = comparison["seed"], comparison["fidelity"]
    seed_text = f"seed {seeds['a']}" if seeds["a"] == seeds["b"] else f"seeds {seeds['a']} / {seeds['b']}"
    fid_text = fidelity["a"] if fidelity["a"] == fidelity["b"] else f"{fidelity['a']} / {fidelity['b']}"
    print(f"{seed_text}, {fid_text} fidelity")
    print(format_table(comparison))
    for key in ("a", "b"):
        if comparison["partial"][key]:
            print(f"note: side {key.upper()} stopped early; its results are partial")
    print(f"results in      {out}/ (A/ and B/ hold each side's full outputs)")
    report_when_asked(args.report, out)
    return 0
