"""``heterosim build``: compile the C++ models in ns3_modules/ now (normally done on first use)."""

from __future__ import annotations

import argparse

from heterosim.engine import native

EXAMPLES = """\
examples:
  heterosim build                 # build (or find cached) and print where the library is
  heterosim build --force         # rebuild every object, printing compiler commands
  HETEROSIM_BUILD_MODE=debug heterosim build   # -O0 -g build with libstdc++ assertions
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "build",
        help="compile the ns-3 C++ modules (cached)",
        epilog=EXAMPLES,
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--force", action="store_true", help="rebuild even if cached")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    paths = native.build(force=args.force, verbose=args.force)
    print(f"{paths.library} ({native.build_mode()} build)")
    return 0
