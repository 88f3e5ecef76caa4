"""Options and sweep keys of the newer surfaces refuse values that cannot mean anything:
one line naming the option or the file and key, exit status 2, nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from heterosim.cli import main

REPO = Path(__file__).resolve().parents[2]


def _one_error(capsys, *fragments: str) -> None:
    err = [ln for ln in capsys.readouterr().err.strip().splitlines() if "note:" not in ln]
    assert len(err) == 1, err
    for fragment in fragments:
        assert fragment in err[0], err[0]


@pytest.mark.parametrize("value", ["inf", "nan", "0", "-5"])
def test_validate_fail_above_must_be_finite_and_positive(tmp_path, capsys, value):
    out = tmp_path / "out"
    argv = ["validate", str(REPO / "validation" / "cases.yaml"), "--fail-above", value]
    assert main([*argv, "--out", str(out)]) == 2
    _one_error(capsys, "--fail-above", "expected a finite positive percentage")
    assert not out.exists()


@pytest.mark.parametrize("metric", ["jobs..x", "breakdown.", ".x", "network. .drops"])
def test_sweep_metric_with_an_empty_part(tmp_path, capsys, metric):
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(
        yaml.safe_dump(
            {
                "name": "m",
                "experiment": str(REPO / "tests" / "data" / "tiny_experiment.yaml"),
                "grid": {"simulation.seed": [1, 2]},
                "metrics": [metric],
            }
        )
    )
    out = tmp_path / "out"
    assert main(["sweep", str(sweep), "--out", str(out), "--quiet"]) == 2
    _one_error(capsys, f"{sweep}: metrics: {metric!r}")
    assert not out.exists()


def test_compare_with_a_side_failing_at_run_time_leaves_no_outputs(tmp_path, capsys):
    """Side B's fault names a link the topology does not have (found once its topology is
    built): side A has run by then, and its outputs must not be left behind."""
    out = tmp_path / "out"
    argv = [
        "compare",
        str(REPO / "tests" / "data" / "tiny_experiment.yaml"),
        "--variant",
        "a:simulation.seed=1",
    ]
    argv += ["--variant", "b:faults=[{at: 0ms, link: h0.nic0-leaf9, rate: 10Gbps}]", "--out", str(out)]
    assert main([*argv, "--no-plots", "--quiet"]) == 2
    _one_error(capsys, "side B (b) failed", "faults[0]: link")
    assert not out.exists()
