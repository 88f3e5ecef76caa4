"""``heterosim validate --db``: a user's operation database times the cases' compute, as
``heterosim run --db`` does; a busbw case of size 0 is refused when the file is read."""

from __future__ import annotations

import copy
import json

import pytest
import yaml

from heterosim.cli import main
from heterosim.plan.compute.database import Measurement, OpDatabase

CLUSTER = {
    "name": "h100x4",
    "host_types": {"h": {"gpu": "H100-SXM", "gpus": 4, "nics": 4, "nic_speed": "400Gbps"}},
    "hosts": [{"type": "h", "count": 2}],
}
E2E = {
    "id": "tiny-e2e",
    "group": "g1",
    "kind": "iteration_time",
    "source": "made up for the test",
    "compare": {"quantity": "iteration_time_s"},
    "measured": {"iteration_time_s": 0.01},
    "experiment": {
        "model": {"arch": "gpt", "hidden": 256, "layers": 2, "heads": 4, "vocab": 4096, "seq": 256},
        "training": {"global_batch": 4, "micro_batch": 1, "seq_len": 256},
        "parallel": {"tp": 2, "pp": 2, "dp": 2},
        "cluster": CLUSTER,
    },
}
BUSBW = {
    "id": "tiny-busbw",
    "group": "nccl-tests",
    "kind": "collective_busbw",
    "source": "made up",
    "measured": {"busbw_GBps": 150.0},
    "compare": {"quantity": "busbw_GBps"},
    "cluster": CLUSTER,
    "collective": {"op": "allreduce", "size": "16MiB", "ranks": 8, "algorithm": "ring"},
}


def cases_file(tmp_path, *cases):
    path = tmp_path / "cases.yaml"
    path.write_text(yaml.safe_dump({"cases": list(cases)}))
    return path


def slow_gemm_database(path):
    """H100 bf16 GEMMs at 20 % of the dense peak plus a 10 us launch: far slower than the
    roofline, so a run that reads the database takes longer."""
    db = OpDatabase(path, create=True)
    db.add(
        Measurement(
            "H100-SXM",
            "gemm",
            "bf16",
            "fwd",
            (size, size, size, 1),
            (0, 0),
            2 * size**3,
            6 * size * size,
            10_000 + 2 * size**3 / (0.2 * 989e12) * 1e9,
            "profiler",
        )
        for size in (128, 256, 1024, 4096)
    )
    db.close()
    return path


@pytest.mark.ns3
def test_db_times_the_compute_of_end_to_end_cases(tmp_path, capsys, native_lib):
    path = cases_file(tmp_path, E2E)
    database = slow_gemm_database(tmp_path / "h100.db")
    docs = {}
    for name, extra in (("shipped", []), ("db", ["--db", str(database)])):
        out = tmp_path / name
        assert main(["validate", str(path), "--quiet", "--out", str(out), *extra]) == 0
        docs[name] = json.loads((out / "results.json").read_text())
    capsys.readouterr()
    assert docs["db"]["databases"] == [str(database)] and docs["shipped"]["databases"] == []
    compute = {name: doc["cases"][0]["budget"]["compute_s"] for name, doc in docs.items()}
    assert compute["db"] > compute["shipped"]
    assert docs["db"]["cases"][0]["predicted"] > docs["shipped"]["cases"][0]["predicted"]


def test_missing_db_is_one_line_exit_2_before_any_case(tmp_path, capsys):
    path = cases_file(tmp_path, E2E)
    out = tmp_path / "out"
    assert main(["validate", str(path), "--out", str(out), "--db", str(tmp_path / "nope.db")]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and "nope.db: no such operation database" in err[0]
    assert "tiny-e2e" not in captured.out and not out.exists()


@pytest.mark.parametrize("size", [0, "0B", "0KiB"])
def test_busbw_case_of_size_0_is_one_line_naming_case_and_key(tmp_path, capsys, size):
    case = copy.deepcopy(BUSBW)
    case["collective"]["size"] = size
    path = cases_file(tmp_path, E2E, case)
    assert main(["validate", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert "cases[1] (tiny-busbw).collective.size" in err[0] and "expected a size >= 1" in err[0]
    assert not (tmp_path / "out").exists()
