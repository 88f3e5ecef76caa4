"""The ``heterosim`` command: parse arguments, call one function per command, print.

Each sub-command lives in ``heterosim/commands/<name>.py`` with ``register(subparsers)``, which
adds its parser and sets ``func``. A :class:`~heterosim.errors.UserError` becomes one line on
stderr and exit status 2; Ctrl-C exits with 130.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from heterosim import __version__
from heterosim.errors import OUT_OF_MEMORY_HINT, UserError, is_out_of_memory

COMMAND_MODULES = (
    "run",
    "workload",
    "build",
    "trace",
    "netbench",
    "profile",
    "collective",
    "compare",
    "sweep",
    "validate",
    "import_cmd",
    "plan",
)

DESCRIPTION = """\
HeteroSim predicts how long one LLM training iteration takes on a heterogeneous GPU cluster
(mixed GPU generations, NVLink and PCIe hosts, mixed NIC speeds) and shows what the network
does during it, with a packet-level ns-3 RDMA network (DCQCN, PFC, ECN) or a fast flow model.
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="heterosim", description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"heterosim {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(f"heterosim.commands.{name}").register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    try:
        return int(args.func(args) or 0)
    except UserError as exc:
        message = str(exc).strip()
        first, _, rest = message.partition("\n")
        print(f"heterosim {args.command}: error: {first}", file=sys.stderr)
        if rest and getattr(exc, "show_details", True):
            print(rest, file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"heterosim {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:
        if not is_out_of_memory(exc):
            raise
        print(f"heterosim {args.command}: error: out of memory ({OUT_OF_MEMORY_HINT})", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
