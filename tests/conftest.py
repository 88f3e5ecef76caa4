"""Shared fixtures: the compiled ns-3 modules are built and loaded once per test session."""

from __future__ import annotations

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
