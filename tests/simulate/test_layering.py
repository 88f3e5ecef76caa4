"""The commands are argument parsing and printing: simulation goes through heterosim.simulate."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from heterosim.config.ranks import parse_ranks
from heterosim.errors import UserError

COMMANDS = Path(__file__).resolve().parents[2] / "heterosim" / "commands"
# modules below the simulate layer that only heterosim.simulate may drive
ENGINE_AND_PIPELINE = (
    "heterosim.engine",
    "heterosim.plan.from_traces",
    "heterosim.workload.generator",
    "heterosim.plan.collectives.decompose",
    "heterosim.plan.compute",
)
ALLOWED = {"build.py": ("heterosim.engine.native",), "profile.py": ("heterosim.plan.compute",)}


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


@pytest.mark.parametrize("path", sorted(COMMANDS.glob("*.py")), ids=lambda p: p.name)
def test_commands_are_thin_and_reach_the_engine_only_through_simulate(path):
    # statements, not lines: the formatter spreads one argparse call over several lines (the
    # largest command, run.py, is 74 statements in about 120 hand-wrapped lines)
    statements = sum(isinstance(node, ast.stmt) for node in ast.walk(ast.parse(path.read_text())))
    assert statements <= 80, f"{path.name} holds more than parsing and printing ({statements} statements)"
    allowed = ALLOWED.get(path.name, ())
    for module in imported_modules(path):
        if path.name == "build.py" and module == "heterosim.engine":  # from heterosim.engine import native
            continue
        if module.startswith(ENGINE_AND_PIPELINE) and not module.startswith(allowed):
            pytest.fail(f"{path.name} imports {module}; go through heterosim.simulate")


def test_rank_lists_keep_their_order_and_reject_bad_input():
    assert parse_ranks("0-3,8,10-11", 16) == [0, 1, 2, 3, 8, 10, 11]
    assert parse_ranks("8,0,4", 16) == [8, 0, 4]  # a communicator's order is kept
    assert parse_ranks(None, 4) == [0, 1, 2, 3]
    for text, message in (
        ("0-99", "rank 99 is outside 0..15"),
        ("a-b", "expected ranks like"),
        ("3-1", "expected ranks like"),
        ("1,2,1", "rank 1 is listed twice"),
        ("", "expected ranks like"),
    ):
        with pytest.raises(UserError, match=message):
            parse_ranks(text, 16)


def test_simulate_imports_neither_sweep_nor_search():
    # one run per call: the packages that run many simulations (sweep, search) sit above simulate
    for path in sorted((COMMANDS.parent / "simulate").glob("*.py")):
        for module in imported_modules(path):
            assert not module.startswith(("heterosim.sweep", "heterosim.search")), (
                f"simulate/{path.name} imports {module}"
            )
