"""Files shipped with the package: the default experiment and its cluster."""

from __future__ import annotations

from pathlib import Path


def default_experiment() -> Path:
    """workloads/default.yaml of the checkout (or the copy installed with the package)."""
    here = Path(__file__).resolve().parents[2] / "workloads" / "default.yaml"
    return here
