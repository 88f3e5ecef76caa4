"""The test library of the ns-3 TestSuites is keyed by the suites and by the headers they share
(``test/*.h``): editing such a header rebuilds the library and the objects that include it."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

from heterosim.engine import native

BUILD_TWICE = """
import json
import sys
from pathlib import Path
from heterosim.engine import native
native.modules_dir = lambda: Path(sys.argv[1])
first = native.build_tests()
objects = {p.name for p in (native.cache_root() / "objects").glob("*.o")}
header = Path(sys.argv[1]) / "rdma" / "test" / "flow-runner-test-helper.h"
header.write_text(header.read_text() + "\\n// edited\\n")
second = native.build_tests()
rebuilt = {p.name for p in (native.cache_root() / "objects").glob("*.o")} - objects
print(json.dumps([first != second, sorted(name.rsplit("-", 1)[0] for name in rebuilt)]))
"""


def test_editing_a_shared_test_header_rebuilds_the_test_library(tmp_path, fake_cxx):
    compiler = fake_cxx
    modules = tmp_path / "ns3_modules"
    shutil.copytree(native.modules_dir(), modules)
    env = {"HETEROSIM_CACHE_DIR": str(tmp_path / "cache"), "CXX": str(compiler), "PATH": "/usr/bin:/bin"}
    run = subprocess.run(
        [sys.executable, "-c", BUILD_TWICE, str(modules)],
        capture_output=True,
        text=True,
        env={**env, "PYTHONPATH": ":".join(sys.path)},
    )
    assert run.returncode == 0, run.stderr
    changed, rebuilt = json.loads(run.stdout)
    assert changed
    # every test object is keyed by the test headers; library objects are not
    suites = sorted(p.stem for p in modules.glob("*/test/*.cc"))
    assert rebuilt == suites
