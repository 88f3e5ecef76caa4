"""The first build of the C++ models says so on stderr whatever stderr is, and its time is kept
apart from the simulation's (results.json sim.build_s, not sim.wall_s)."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def test_a_build_announces_itself_on_a_non_terminal_stderr_and_is_timed(tmp_path):
    # a stand-in compiler (writes its -o file), so the test costs no compilation
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
    env = {"HETEROSIM_CACHE_DIR": str(tmp_path / "cache"), "CXX": str(compiler), "PATH": "/usr/bin:/bin"}
    code = (
        "from heterosim.engine import native; native.build(); "
        "print(native.build_seconds() > 0); native.build(); print(native.build_seconds())"
    )
    first = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**env, "PYTHONPATH": ":".join(sys.path)},
    )
    assert first.returncode == 0, first.stderr
    assert "heterosim: compiling the C++ network models" in first.stderr  # stderr is a pipe here
    assert "heterosim: built libheterosim-ns3.so" in first.stderr
    built, total = first.stdout.split()
    assert built == "True" and float(total) > 0  # the cached second call adds nothing
    again = subprocess.run(
        [sys.executable, "-c", code.replace("> 0", "== 0")],
        capture_output=True,
        text=True,
        env={**env, "PYTHONPATH": ":".join(sys.path)},
    )
    assert again.stderr == "" and again.stdout.split() == ["True", "0.0"]  # cached: silent, 0 s
