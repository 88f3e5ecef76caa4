"""A wheel of the package, installed non-editable into a fresh environment, runs the shipped
default experiment: the C++ sources, workloads and topologies travel inside it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.ns3


def run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    result = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=900, env=env)
    assert result.returncode == 0, f"{' '.join(cmd)}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


def test_installed_wheel_runs_the_default_experiment(tmp_path, native_lib):
    dist = tmp_path / "dist"
    run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            str(REPO),
            "--no-deps",
            "--no-build-isolation",
            "--quiet",
            "-w",
            str(dist),
        ],
        cwd=tmp_path,
    )
    wheel = next(dist.glob("heterosim-*.whl"))
    env_dir = tmp_path / "env"
    venv.create(env_dir, system_site_packages=True, with_pip=False)  # ns3 and cppyy reused
    python = env_dir / "bin" / "python"
    run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--no-deps",
            "--quiet",
            "--ignore-installed",  # the checkout may be installed editable in the base environment
            str(wheel),
        ],
        cwd=tmp_path,
    )
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    where = run(
        [str(python), "-c", "import heterosim; print(heterosim.__file__)"], cwd=tmp_path, env=clean
    ).stdout.strip()
    assert Path(where).is_relative_to(env_dir), where  # not the checkout, not an editable install
    package = Path(where).parent
    for shipped in (
        "ns3_modules/rdma/model/dcqcn.cc",
        "workloads/default.yaml",
        "topologies/mixed_16gpu.yaml",
        "ns3_modules/rdma/CMakeLists.txt",
    ):
        assert (package / shipped).is_file(), shipped
    out = tmp_path / "out"
    result = run(
        [
            str(env_dir / "bin" / "heterosim"),
            "run",
            "--fidelity",
            "flow",
            "--out",
            str(out),
            "--no-plots",
            "--quiet",
        ],
        cwd=tmp_path,
        env=clean,
    )
    assert "iteration time" in result.stdout
    results = json.loads((out / "results.json").read_text())
    assert results["sim"]["fidelity"] == "flow" and not results["sim"]["partial"]
    assert results["network"]["flows"] == 455552  # the same plan as the checkout's default run
