"""CI runs the lint, format and type checks before the tests, and any finding fails it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def test_ci_checks_before_testing_and_stops_on_the_first_failure():
    run = (REPO / ".ci" / "run").read_text().splitlines()
    check = (REPO / ".ci" / "check").read_text()
    assert "set -euo pipefail" in run and "set -euo pipefail" in check
    assert run.index(".ci/check") < run.index("python3 -m pytest")
    for command in (
        "ruff check",
        "ruff format --check",
        "python3 -m mypy",
        "clang-format --style=file:ns3_modules/.clang-format --dry-run -Werror",
    ):
        assert command in check, command


@pytest.mark.parametrize(
    "tool, source",
    [
        (["ruff", "check"], "import os\n"),  # unused import
        (["ruff", "format", "--check"], "x = [1,2]\n"),
        (["mypy", "--no-incremental"], "x: int = 'a'\n"),
    ],
)
def test_each_checker_fails_on_a_finding(tmp_path, tool, source):
    path = tmp_path / "bad.py"
    path.write_text(source)
    result = subprocess.run(
        [sys.executable, "-m", *tool, str(path)], capture_output=True, text=True, cwd=tmp_path
    )
    assert result.returncode != 0, result.stdout


def test_clang_format_fails_on_a_finding(tmp_path):
    path = tmp_path / "bad.cc"
    path.write_text("int f(){return 1;}\n")
    result = subprocess.run(
        [
            "clang-format",
            f"--style=file:{REPO / 'ns3_modules' / '.clang-format'}",
            "--dry-run",
            "-Werror",
            str(path),
        ],
        capture_output=True,
        text=True,
    )
    assert result.returncode != 0
