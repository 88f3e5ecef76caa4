"""Malformed and extreme input over every command and format: a clean one-line error (exit 2),
no traceback, no crash, no hang, no partial results, no process above 2 GiB.

The quick sample runs in the default test run; the slow set (several hundred cases) is run by
hand (``pytest -m slow tests/fuzz``, or ``python tests/fuzz/harness.py --count 500`` for the
counts recorded in benchmarks/README.md).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from corpus import Generator  # noqa: E402
from harness import run_cases, summary  # noqa: E402


def _check(seed: int, count: int, tmp_path: Path) -> None:
    outcomes = run_cases(Generator(seed).cases(count), tmp_path)
    failures = [
        f"{o.case.name}: {'; '.join(o.problems)} | argv {o.case.argv} | stderr {o.stderr.strip()[-300:]!r}"
        for o in outcomes
        if o.problems
    ]
    assert not failures, (
        f"{len(failures)} of {count} cases broke the promise ({summary(outcomes)}):\n" + "\n".join(failures)
    )
    assert sum(o.status == 2 for o in outcomes) >= count // 2  # mostly bad input, as generated


def test_fuzz_quick_sample(tmp_path):
    _check(seed=1, count=40, tmp_path=tmp_path)


@pytest.mark.slow
def test_fuzz_several_hundred(tmp_path):
    _check(seed=2, count=500, tmp_path=tmp_path)
