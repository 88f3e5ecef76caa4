"""heterosim run --db: a profiled operation database replaces the roofline for what it covers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from heterosim.cli import main
from heterosim.plan.compute.database import Measurement, OpDatabase

TINY = Path(__file__).resolve().parents[1] / "data" / "tiny_experiment.yaml"


def test_missing_database_is_one_line_exit_2(tmp_path, capsys):
    code = main(
        ["run", str(TINY), "--out", str(tmp_path / "x"), "--quiet", "--db", str(tmp_path / "nope.db")]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "nope.db" in err[0]


@pytest.mark.ns3
def test_profiled_gemms_replace_the_envelope_roofline(tmp_path, capsys):
    """H100 GEMMs measured at 30 % of the bf16 peak plus a 4 us launch (slower than the
    envelope-bounded curve): the run uses them (more compute time), and the H100 loses its
    envelope note."""
    path = tmp_path / "h100.db"
    db = OpDatabase(path, create=True)
    db.add(
        Measurement(
            "H100-SXM",
            "gemm",
            "bf16",
            "fwd",
            (s, s, s, 1),
            (0, 0),
            2 * s**3,
            6 * s * s,
            4000 + 2 * s**3 / (0.3 * 989e12) * 1e9,
            "profiler",
        )
        for s in (256, 1024, 4096)
    )
    db.close()
    runs = {}
    for name, extra in (("plain", []), ("db", ["--db", str(path)])):
        out = tmp_path / name
        assert (
            main(["run", str(TINY), "--out", str(out), "--quiet", "--no-plots", "--fidelity", "flow", *extra])
            == 0
        )
        runs[name] = json.loads((out / "results.json").read_text())
        runs[name + "_err"] = capsys.readouterr().err
    assert runs["db"]["breakdown"]["compute_s"] > runs["plain"]["breakdown"]["compute_s"]
    assert "H100-SXM: GEMMs timed by the roofline" not in runs["db_err"]
