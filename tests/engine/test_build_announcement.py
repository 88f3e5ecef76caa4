"""The first build of the C++ models says so on stderr whatever stderr is, and its time is kept
apart from the simulation's (results.json sim.build_s, not sim.wall_s)."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def test_a_build_announces_itself_on_a_non_terminal_stderr_and_is_timed(tmp_path, fake_cxx):
    compiler = fake_cxx
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


def test_two_processes_building_at_once_take_turns_and_compile_once(tmp_path):
    """Two runs started together after a source change: one builds, the other waits for it and
    loads the result (before the lock, the second one failed on the first one's include folder)."""
    compiler = tmp_path / "slow-cxx"
    log = tmp_path / "invocations"
    compiler.write_text(
        textwrap.dedent(f"""\
        #!/bin/sh
        out=""; prev=""
        for a in "$@"; do [ "$prev" = "-o" ] && out="$a"; prev="$a"; done
        [ -n "$out" ] && {{ echo "$out" >> {log}; sleep 0.05; : > "$out"; }}
        echo "slow-cxx 1.0"
        """)
    )
    compiler.chmod(0o755)
    env = {
        "HETEROSIM_CACHE_DIR": str(tmp_path / "cache"),
        "CXX": str(compiler),
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": ":".join(sys.path),
    }
    code = "from heterosim.engine import native; print(native.build().library)"
    runs = [
        subprocess.Popen(
            [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
        )
        for _ in range(2)
    ]
    outputs = [run.communicate(timeout=120) for run in runs]
    assert [run.returncode for run in runs] == [0, 0], [err for _, err in outputs]
    assert outputs[0][0] == outputs[1][0]  # the same library
    targets = log.read_text().split()
    assert len(targets) == len(set(targets))  # every object and the library made once
    assert sum("libheterosim-ns3" in target for target in targets) == 1  # one link
    assert sum("waiting for another process" in err for _, err in outputs) == 1
