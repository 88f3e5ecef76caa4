"""Shared fixtures of the simulate tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import yaml


@pytest.fixture
def write_experiment(tmp_path) -> Callable[..., str]:
    """Writer of an experiment dict to ``tmp_path/exp.yaml`` with keys replaced, e.g.
    ``write(data, parallel__dp=2)`` (``section__key=value``); returns the path."""

    def write(data: dict[str, Any], **sets: Any) -> str:
        data = yaml.safe_load(yaml.safe_dump(data))
        for key, value in sets.items():
            section, name = key.split("__")
            data[section][name] = value
        path = tmp_path / "exp.yaml"
        path.write_text(yaml.safe_dump(data))
        return str(path)

    return write
