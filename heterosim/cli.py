"""The ``heterosim`` command: parse arguments, call one function per command, print.

Each sub-command lives in ``heterosim/commands/<name>.py`` with ``register(subparsers)``, which
adds its parser and sets ``func``. A :class:`~heterosim.errors.UserError` (or a bad option)
becomes one line on stderr and exit status 2; a file system error (a read-only or full disk) is
one line and exit status 2 too.

Exit status: 0 done; 1 some sweep variants failed, or out of memory; 2 bad input;
:data:`~heterosim.errors.EXIT_INTERRUPTED` (130) stopped by Ctrl-C and
:data:`~heterosim.errors.EXIT_TERMINATED` (143) stopped by SIGTERM, with whatever was simulated
written as partial results (their headline says PARTIAL).
"""

from __future__ import annotations

import argparse
import errno
import importlib
import sys
from collections.abc import Sequence

from heterosim import __version__
from heterosim.config.limits import set_max_memory
from heterosim.errors import (
    EXIT_INTERRUPTED,
    EXIT_TERMINATED,
    OUT_OF_MEMORY_HINT,
    Interrupted,
    UserError,
    is_out_of_memory,
)
from heterosim.interrupts import terminated_by_sigterm
from heterosim.notes import once_per_command

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
    "report",
)

DESCRIPTION = """\
HeteroSim predicts how long one LLM training iteration takes on a heterogeneous GPU cluster
(mixed GPU generations, NVLink and PCIe hosts, mixed NIC speeds) and shows what the network
does during it, with a packet-level ns-3 RDMA network (DCQCN, PFC, ECN) or a fast flow model.
"""


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line (``heterosim run: error: ...``), exit 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        first = message.strip().splitlines()[0] if message.strip() else "bad arguments"
        self.exit(2, f"{self.prog}: error: {first} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="heterosim", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--version", action="version", version=f"heterosim {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(f"heterosim.commands.{name}").register(subparsers)
    for sub in subparsers.choices.values():
        if "--max-memory" not in sub._option_string_actions:
            sub.add_argument(
                "--max-memory",
                metavar="SIZE",
                help="refuse, before allocating, a run estimated to need more memory "
                "than this (default: the memory available)",
            )
    return parser


def _value_options(parser: argparse.ArgumentParser) -> tuple[set[str], set[str]]:
    """Option strings that take one value, and every option string, over all sub-commands."""
    takes_value: set[str] = set()
    every: set[str] = set()
    parsers = [parser]
    while parsers:
        current = parsers.pop()
        for action in current._actions:
            every.update(action.option_strings)
            if (
                action.option_strings
                and action.nargs is None
                and not isinstance(
                    action, (argparse._StoreConstAction, argparse._HelpAction, argparse._VersionAction)
                )
            ):
                takes_value.update(action.option_strings)
            if isinstance(action, argparse._SubParsersAction):
                parsers.extend(action.choices.values())
    return takes_value, every


def attach_negative_values(parser: argparse.ArgumentParser, argv: Sequence[str]) -> list[str]:
    """``--size -1KiB`` -> ``--size=-1KiB``: a value that starts with a dash is given to its
    option (argparse would take it for an option and say "expected one argument"), so the
    option's own check says what is wrong with it."""
    takes_value, every = _value_options(parser)
    out: list[str] = []
    items = list(argv)
    i = 0
    while i < len(items):
        token = items[i]
        nxt = items[i + 1] if i + 1 < len(items) else None
        if (
            token in takes_value
            and nxt is not None
            and nxt.startswith("-")
            and nxt != "--"
            and nxt.split("=", 1)[0] not in every
        ):
            out.append(f"{token}={nxt}")
            i += 2
            continue
        out.append(token)
        i += 1
    return out


def _reject_empty_values(parser: argparse.ArgumentParser, argv: Sequence[str]) -> None:
    """An option given an empty value (``--out ''``) is an error, not its default."""
    takes_value, _ = _value_options(parser)
    items = list(argv)
    for i, token in enumerate(items):
        option, equals, value = token.partition("=")
        if equals and option in takes_value and value.strip() == "":
            parser.error(f"argument {option}: expected a non-empty value")
        if token in takes_value and i + 1 < len(items) and items[i + 1].strip() == "":
            parser.error(f"argument {token}: expected a non-empty value")


def _os_error_line(exc: OSError) -> str:
    reason = exc.strerror or str(exc) or type(exc).__name__
    if exc.errno == errno.ENOSPC:
        reason = "no space left on the device"
    where = exc.filename if exc.filename is not None else None
    return f"{where}: {reason}" if where else reason


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    _reject_empty_values(parser, argv)
    args = parser.parse_args(attach_negative_values(parser, argv))
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    command = f"heterosim {args.command}"
    try:
        set_max_memory(getattr(args, "max_memory", None))
        with once_per_command():  # a note printed by several worker processes shows once
            return int(args.func(args) or 0)
    except UserError as exc:
        message = str(exc).strip()
        first, _, rest = message.partition("\n")
        print(f"{command}: error: {first}", file=sys.stderr)
        if rest and getattr(exc, "show_details", True):
            print(rest, file=sys.stderr)
        return 2
    except Interrupted as exc:
        print(f"{command}: {exc}", file=sys.stderr)
        return exc.exit_status
    except KeyboardInterrupt as exc:
        terminated = terminated_by_sigterm(exc)
        print(f"{command}: {'terminated' if terminated else 'interrupted'}", file=sys.stderr)
        return EXIT_TERMINATED if terminated else EXIT_INTERRUPTED
    except BrokenPipeError:
        return 0
    except RecursionError:
        print(f"{command}: error: input nested too deeply to process", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"{command}: error: {_os_error_line(exc)}", file=sys.stderr)
        return 2
    except Exception as exc:
        if not is_out_of_memory(exc):
            raise
        print(f"{command}: error: out of memory ({OUT_OF_MEMORY_HINT})", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
