"""Re-run README.md's console examples and write what they print now under each command.

    python3 docs/refresh_examples.py topology_ab link_failure   # commands containing either
    python3 docs/refresh_examples.py --all

Run from the repository root. ``tests/test_readme.py`` runs the same commands and fails when
their output no longer matches the README (within rounding), so after a change that moves the
numbers, refresh the examples it names and re-read the prose around them.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
SKIPPED = ("pip install", "python3 -m pytest")  # installing and testing print nothing to keep


def run_example(command: str) -> str:
    """What ``command`` prints on stdout, run from the repository root as the test runs it."""
    argv = shlex.split(command)
    if argv[0] == "heterosim":
        argv = [sys.executable, "-m", "heterosim.cli", *argv[1:]]
    elif argv[0] == "python3":
        argv[0] = sys.executable
    env = {**os.environ, "MPLBACKEND": "Agg"}
    result = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, env=env, check=False)
    if result.returncode != 0:
        raise SystemExit(f"{command}: exit {result.returncode}\n{result.stderr[-2000:]}")
    return result.stdout


def refresh(text: str, wanted: list[str] | None) -> tuple[str, list[str]]:
    """README text with the output under each chosen ``$ command`` replaced; the commands run."""
    ran: list[str] = []

    def block(match: re.Match[str]) -> str:
        lines, out = match.group(1).splitlines(), []
        for line in lines:
            if line.startswith("$ "):
                command = line[2:].strip()
                out.append(line)
                chosen = wanted is None or any(word in command for word in wanted)
                if chosen and not any(skip in command for skip in SKIPPED):
                    out.extend(run_example(command).rstrip("\n").splitlines())
                    ran.append(command)
                    out.append("\0")  # drop the old output up to the next command
                continue
            if out and out[-1] == "\0":
                continue
            out.append(line)
        return "```console\n" + "\n".join(x for x in out if x != "\0") + "\n```"

    return re.sub(r"```console\n(.*?)\n```", block, text, flags=re.S), ran


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("words", nargs="*", help="refresh the commands that contain any of these")
    parser.add_argument("--all", action="store_true", help="refresh every example (long: packet runs)")
    args = parser.parse_args()
    if not args.words and not args.all:
        parser.error("name some commands (words they contain) or pass --all")
    text, ran = refresh(README.read_text(), None if args.all else args.words)
    README.write_text(text)
    print("\n".join(f"refreshed: {command}" for command in ran) or "no command matched")
    return 0


if __name__ == "__main__":
    sys.exit(main())
