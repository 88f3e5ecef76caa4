"""A wheel of the package, installed non-editable into a fresh environment, runs the shipped
default experiment: the C++ sources, workloads and topologies travel inside it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.ns3


def run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    result = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=900, env=env)
    assert result.returncode == 0, f"{' '.join(cmd)}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


def environment_seeing_this_one(env_dir: Path) -> Path:
    """A fresh virtual environment that also imports this interpreter's packages (ns3, cppyy,
    protobuf), after its own; returns its python.

    ``system_site_packages`` alone reaches the base interpreter's packages, which are not this
    one's when the tests run inside a virtual environment, so this environment's site-packages
    folders are named in a ``.pth`` file as plain paths: their own ``.pth`` files (an editable
    install of the checkout) are not processed, so ``heterosim`` comes from the wheel.
    """
    venv.create(env_dir, system_site_packages=True, with_pip=False)
    python = env_dir / "bin" / "python"
    child_site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    ours = dict.fromkeys(sysconfig.get_paths()[key] for key in ("purelib", "platlib"))
    (Path(child_site) / "parent-environment.pth").write_text("".join(f"{path}\n" for path in ours))
    return python


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
    python = environment_seeing_this_one(env_dir)
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
