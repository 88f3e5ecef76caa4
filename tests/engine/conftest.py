"""Fixtures of the engine tests."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest


@pytest.fixture
def fake_cxx(tmp_path: Path) -> Path:
    """A stand-in C++ compiler that only writes its ``-o`` file, so a build test compiles nothing."""
    compiler = tmp_path / "fake-cxx"
    compiler.write_text(
        textwrap.dedent("""\
        #!/bin/sh
        out=""; prev=""
        for a in "$@"; do [ "$prev" = "-o" ] && out="$a"; prev="$a"; done
        [ -n "$out" ] && : > "$out"
        echo "fake-cxx 1.0"
        """)
    )
    compiler.chmod(0o755)
    return compiler
