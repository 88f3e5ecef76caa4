"""Ships the data folders beside the package inside it: the C++ sources (``ns3_modules/``,
compiled on first use), the shipped experiments (``workloads/``) and clusters
(``topologies/``). A checkout uses them in place; an installed package finds them as
``heterosim/ns3_modules``, ``heterosim/workloads`` and ``heterosim/topologies``
(heterosim/engine/native.py, heterosim/config/defaults.py). Everything else is in
pyproject.toml."""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

SHIPPED = ("ns3_modules", "workloads", "topologies")
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", ".*")


class BuildPyWithData(build_py):
    """build_py, then a copy of each shipped folder into the built package."""

    def run(self) -> None:
        super().run()
        root = Path(__file__).resolve().parent
        for name in SHIPPED:
            target = Path(self.build_lib) / "heterosim" / name
            if target.exists():
                shutil.rmtree(target)
            shutil.copytree(root / name, target, ignore=IGNORED)
            if name == "ns3_modules":  # the style file is part of the modules
                shutil.copy2(root / name / ".clang-format", target / ".clang-format")


setup(cmdclass={"build_py": BuildPyWithData})
