"""Folders shipped with HeteroSim: beside the package in a checkout, inside it when installed."""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1]


def shipped(name: str) -> Path:
    """``ns3_modules``, ``workloads`` or ``topologies``: the checkout's folder (next to the
    package), else the copy installed inside the package (setup.py)."""
    for base in (PACKAGE.parent, PACKAGE):
        if (base / name).is_dir():
            return base / name
    raise FileNotFoundError(f"{name}/ is neither beside nor inside {PACKAGE}")


def default_experiment() -> Path:
    """The shipped default experiment, ``workloads/default.yaml``."""
    return shipped("workloads") / "default.yaml"
