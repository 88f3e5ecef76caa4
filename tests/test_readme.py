"""Every command in README.md runs as written (from the repository root) and succeeds.

The quick start's install step is the CI install (`.ci/run`), so it is checked for being the
same command rather than run again; `python3 -m pytest` is this very run.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
INSTALL = "python3 -m pip install -e '.[test]'"
TEST = "python3 -m pytest"


def console_commands() -> list[str]:
    blocks = re.findall(r"```console\n(.*?)```", README.read_text(), flags=re.S)
    return [line[2:].strip() for block in blocks for line in block.splitlines() if line.startswith("$ ")]


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


@pytest.mark.ns3
@pytest.mark.parametrize("command", runnable())
def test_readme_command_runs(command):
    argv = shlex.split(command)
    if argv[0] == "heterosim":
        argv = [sys.executable, "-m", "heterosim.cli", *argv[1:], *(["--quiet"] if argv[1] == "run" else [])]
    elif argv[0] == "python3":
        argv[0] = sys.executable
    result = subprocess.run(
        argv, cwd=REPO, capture_output=True, text=True, timeout=900, env={**os.environ, "MPLBACKEND": "Agg"}
    )
    assert result.returncode == 0, f"{command}\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}"
