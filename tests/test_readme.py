"""Every command in README.md runs as written (from the repository root), succeeds and prints
what the README shows; every file the README, docs/*.md and every command's --help name exists.

The quick start's install step is the CI install (`.ci/run`), so it is checked for being the
same command rather than run again; `python3 -m pytest` is this very run. Printed outputs are
compared token by token: words exactly, numbers within 0.1 % or one unit of the last digit the
README prints; lines that report wall time are not compared (they vary with the machine).
"""

from __future__ import annotations

import argparse
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
INSTALL = "python3 -m pip install -e '.[test]'"
TEST = "python3 -m pytest"


DOCS = [README, *sorted((REPO / "docs").glob("*.md"))]
# a path in the repository: a top-level folder, then the rest; not the target of --out
REPO_PATH = re.compile(
    r"(?<![\w./-])(?<!--out )"
    r"((?:heterosim|workloads|topologies|docs|benchmarks|validation|docker|ns3_modules|tests|\.ci)"
    r"/[\w./-]*[\w/])"
)
NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?$")
NUMBER_SPLIT = re.compile(r"(?<![\w./-])([+-]?\d+(?:\.\d+)?(?:e[+-]?\d+)?)(?![\w./])")


def console_examples() -> list[tuple[str, list[str]]]:
    """Each ``$ command`` of README.md's console blocks with the lines printed under it."""
    examples: list[tuple[str, list[str]]] = []
    for block in re.findall(r"```console\n(.*?)```", README.read_text(), flags=re.S):
        for line in block.splitlines():
            if line.startswith("$ "):
                examples.append((line[2:].strip(), []))
            elif examples:
                examples[-1][1].append(line)
    return examples


def console_commands() -> list[str]:
    return [command for command, _ in console_examples()]


def help_texts() -> dict[str, str]:
    """Every command's and sub-command's --help text, by program name."""
    from heterosim.cli import build_parser

    texts, parsers = {}, [build_parser()]
    while parsers:
        parser = parsers.pop()
        texts[parser.prog] = parser.format_help()
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                parsers.extend(action.choices.values())
    return texts


def test_every_path_in_the_docs_and_help_exists():
    texts = {str(path.relative_to(REPO)): path.read_text() for path in DOCS} | help_texts()
    missing = [
        f"{where}: {name}"
        for where, text in texts.items()
        for name in sorted(set(REPO_PATH.findall(text)))
        if not (REPO / name).exists()
    ]
    assert not missing, "named but not in the repository:\n" + "\n".join(missing)


def _tokens_agree(expected: str, actual: str) -> bool:
    if expected == actual:
        return True
    if not (NUMBER.match(expected) and NUMBER.match(actual)):
        return False
    want, got = float(expected), float(actual)
    mantissa = expected.lower().split("e")[0]
    unit = 10.0 ** -(len(mantissa.split(".")[1]) if "." in mantissa else 0)
    if "e" in expected.lower():
        unit *= 10.0 ** int(expected.lower().split("e")[1])
    return math.isclose(want, got, rel_tol=1e-3) or abs(want - got) <= unit * 1.0001


def _lines_agree(expected: str, actual: str) -> bool:
    """Words and punctuation equal (spacing aside), numbers within rounding."""
    want, got = NUMBER_SPLIT.split(expected), NUMBER_SPLIT.split(actual)
    if len(want) != len(got):
        return False
    words_equal = all(a.split() == b.split() for a, b in zip(want[::2], got[::2]))
    return words_equal and all(_tokens_agree(a, b) for a, b in zip(want[1::2], got[1::2]))


def output_differences(expected: list[str], actual: list[str]) -> list[str]:
    """The README lines the actual output does not reproduce (wall-time lines are not compared)."""
    actual = [line for line in actual if line.strip()]
    expected = [line for line in expected if line.strip()]
    if len(actual) != len(expected):
        return [f"{len(expected)} lines in the README, {len(actual)} printed"]
    return [
        f"README: {want}\nnow:    {got}"
        for want, got in zip(expected, actual)
        if "wall" not in want and not _lines_agree(want, got)
    ]


def test_output_comparison_allows_rounding_and_nothing_more():
    readme = ["iteration time (ms)   8.261  1.000", "tokens/s  9.916e+05", "simulator 5.49 s wall"]
    assert (
        output_differences(readme, ["iteration time (ms)   8.262  1.000", "tokens/s  9.917e+05", "x"]) == []
    )
    assert output_differences(readme, ["iteration time (ms)   8.402  1.000", *readme[1:]])
    assert output_differences(readme, readme[:2])
    spans = ["{'spans': 933264, 'max': 2000000}"]
    assert output_differences(spans, ["{'spans': 933264, 'max': 2000000}"]) == []
    assert output_differences(spans, ["{'spans': 940000, 'max': 2000000}"])  # 0.7 % off
    assert output_differences(["out/run-2/ 3 flows"], ["out/run-3/ 3 flows"])  # names are words


def test_quick_start_is_two_commands_matching_ci():
    commands = console_commands()
    assert commands[0] == f"{INSTALL} && heterosim run"
    assert commands[1] == TEST
    ci = (REPO / ".ci" / "run").read_text()
    assert INSTALL in ci and TEST in ci


def runnable() -> list[str]:
    out = []
    for command in console_commands():
        if command == TEST:
            continue
        if command.startswith(INSTALL):
            command = command.split("&&", 1)[1].strip()
        out.append(command)
    return out


def output_no_later_command_reads(command: str, later: list[str]) -> Path | None:
    """The --out target of ``command`` when none of the ``later`` commands names it (so the test
    may delete it once checked: the comparisons write hundreds of MB of flows and traces each)."""
    argv = shlex.split(command)
    if "--out" not in argv:
        return None
    target = argv[argv.index("--out") + 1]
    return None if any(target in other for other in later) else REPO / target


def test_only_outputs_no_later_command_reads_are_deleted():
    run_a, plot_a = "heterosim run a.yaml --out out/a", "heterosim plot out/a/flows.csv"
    assert output_no_later_command_reads(run_a, [plot_a]) is None
    assert output_no_later_command_reads(run_a, ["heterosim run b.yaml --out out/b"]) == REPO / "out/a"
    assert output_no_later_command_reads("heterosim run", []) is None  # writes out/run, kept


@pytest.mark.ns3
@pytest.mark.parametrize("command", runnable())
def test_readme_command_runs_and_prints_what_the_readme_shows(command):
    try:
        _run_and_compare(command)
    finally:
        commands = runnable()
        disposable = output_no_later_command_reads(command, commands[commands.index(command) + 1 :])
        if disposable is not None and disposable.is_dir():
            shutil.rmtree(disposable, ignore_errors=True)


def _run_and_compare(command: str) -> None:
    argv = shlex.split(command)
    if argv[0] == "heterosim":
        argv = [sys.executable, "-m", "heterosim.cli", *argv[1:], *(["--quiet"] if argv[1] == "run" else [])]
    elif argv[0] == "python3":
        argv[0] = sys.executable
    result = subprocess.run(
        argv, cwd=REPO, capture_output=True, text=True, timeout=900, env={**os.environ, "MPLBACKEND": "Agg"}
    )
    assert result.returncode == 0, f"{command}\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}"
    shown = dict(console_examples()).get(command, [])
    differences = output_differences(shown, result.stdout.splitlines()) if shown else []
    assert not differences, f"{command}\n" + "\n".join(differences)
