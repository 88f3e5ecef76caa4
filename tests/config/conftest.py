"""Fixtures shared by the config tests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import yaml


@pytest.fixture
def incast_scenario(tmp_path: Path) -> Callable[..., Path]:
    """A writer of ``tmp_path/scenario.yaml``: a netbench scenario of a 64 KiB incast from hosts
    0 and 1 to host 4 of ``cluster``, stopped at 1 ms, whose network is ``defaults`` updated with
    ``network``; ``write(name, cluster, defaults, network, fidelity="packet")`` returns its path."""

    def write(name: str, cluster: str, defaults: dict, network: dict, fidelity: str = "packet") -> Path:
        data = {
            "name": name,
            "cluster": cluster,
            "pattern": {"kind": "incast", "senders": [0, 1], "receiver": 4, "size": "64KiB"},
            "network": {**defaults, **network},
            "simulation": {"stop": "1ms", "fidelity": fidelity},
        }
        path = tmp_path / "scenario.yaml"
        path.write_text(yaml.safe_dump(data))
        return path

    return write
