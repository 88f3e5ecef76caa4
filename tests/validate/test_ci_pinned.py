"""The CI subset's predictions and event counts, pinned: a refactor must leave them unchanged.

A change that moves them on purpose (a model change) re-pins them with
``python3 tests/validate/test_ci_pinned.py --write`` and says why in its commit.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PINNED = ROOT / "tests" / "data" / "ci_predictions.json"
CASES = ROOT / "validation" / "cases.yaml"


def ci_predictions(out: Path) -> dict[str, dict[str, float]]:
    """Each CI case's predicted value and ns-3 event count, from ``heterosim validate --ci``."""
    from heterosim.cli import main

    assert main(["validate", str(CASES), "--ci", "--out", str(out), "--quiet"]) == 0
    cases = json.loads((out / "results.json").read_text())["cases"]
    return {
        c["id"]: {"predicted": c["predicted"], "events": c.get("details", {}).get("events")} for c in cases
    }


def test_ci_subset_predictions_are_unchanged(tmp_path, native_lib):
    pinned = json.loads(PINNED.read_text())
    now = ci_predictions(tmp_path / "ci")
    assert sorted(now) == sorted(pinned), "the CI subset changed: re-pin (module docstring)"
    for case, values in pinned.items():
        assert now[case]["events"] == values["events"], case
        assert now[case]["predicted"] == pytest.approx(values["predicted"], rel=1e-9), case


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        PINNED.write_text(json.dumps(ci_predictions(Path(folder)), indent=1, sort_keys=True) + "\n")
    print(f"wrote {PINNED}")
