"""``heterosim report``: one self-contained HTML page of a run, compare or sweep output folder."""

from __future__ import annotations

import argparse

EXAMPLES = """\
examples:
  heterosim report out/run                 # writes out/run/report.html
  heterosim report out/compare             # the side-by-side table, A's and B's figures together
  heterosim report out/sweeps/tiny         # metric plots, statistics over seeds, every variant
run, compare and sweep write the same page at the end with --report. The page inlines its images
and style, so it opens without network access and can be sent as one file.
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "report",
        help="write report.html: one page of a run, compare or sweep output folder",
        epilog=EXAMPLES,
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("out", metavar="OUT", help="output folder of heterosim run, compare or sweep")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from heterosim.report.html_report import report_when_asked

    report_when_asked(True, args.out)
    return 0
