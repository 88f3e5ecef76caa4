"""Shared fixtures: the compiled ns-3 modules are built and loaded once per test session."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def native_lib():
    """cppyy's global namespace with ns3_modules loaded (built on first use, cached)."""
    from heterosim.engine import native

    return native.load()


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    """Keeps each phase's report on the test item, so fixtures can see whether the test passed."""
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"report_{report.when}", report)


@pytest.fixture(autouse=True)
def _free_tmp_path_of_passed_tests(request):
    """Deletes a passed test's tmp_path at once (runs write traces of hundreds of MB; a full suite
    kept them all and needed gigabytes of disk); a failed test's files stay for inspection."""
    path = request.getfixturevalue("tmp_path") if "tmp_path" in request.fixturenames else None
    yield
    report = getattr(request.node, "report_call", None)
    if path is not None and report is not None and report.passed:
        shutil.rmtree(path, ignore_errors=True)
