"""``heterosim validate`` on a two-case file: table, results.json and parity.png."""

from __future__ import annotations

import json

import pytest
import yaml

from heterosim.cli import main

CLUSTER = {
    "name": "h100x4",
    "host_types": {"h": {"gpu": "H100-SXM", "gpus": 4, "nics": 4, "nic_speed": "400Gbps"}},
    "hosts": [{"type": "h", "count": 2}],
}
CASES = [
    {
        "id": "tiny-e2e",
        "group": "g1",
        "kind": "iteration_time",
        "source": "made up for the test",
        "compare": {"quantity": "iteration_time_s"},
        "measured": {"iteration_time_s": 0.01},
        "assumed": {"training.dtype": {"value": "bf16", "why": "test"}},
        "flags": ["DER"],
        "experiment": {
            "model": {"arch": "gpt", "hidden": 256, "layers": 2, "heads": 4, "vocab": 4096, "seq": 256},
            "training": {"global_batch": 4, "micro_batch": 1, "seq_len": 256},
            "parallel": {"tp": 2, "pp": 2, "dp": 2},
            "cluster": CLUSTER,
        },
    },
    {
        "id": "tiny-busbw",
        "group": "nccl-tests",
        "kind": "collective_busbw",
        "source": "made up",
        "measured": {"busbw_GBps": 150.0},
        "flags": ["SUSPECT"],
        "ci": True,
        "compare": {"quantity": "busbw_GBps"},
        "cluster": CLUSTER,
        "collective": {"op": "allreduce", "size": "16MiB", "ranks": 8, "algorithm": "ring"},
    },
]


@pytest.mark.ns3
def test_validate_writes_results_and_parity(tmp_path, capsys, native_lib):
    path = tmp_path / "cases.yaml"
    path.write_text(yaml.safe_dump({"cases": CASES}))
    out = tmp_path / "out"
    assert main(["validate", str(path), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "tiny-e2e" in text and "tiny-busbw" in text and "MAPE" in text
    doc = json.loads((out / "results.json").read_text())
    assert (out / "parity.png").stat().st_size > 1000
    rows = {r["id"]: r for r in doc["cases"]}
    for row in rows.values():
        for key in (
            "id",
            "group",
            "kind",
            "measured",
            "predicted",
            "error_pct",
            "assumptions",
            "flags",
            "calibration",
        ):
            assert key in row
        assert row["error_pct"] == pytest.approx(100 * (row["predicted"] - row["measured"]) / row["measured"])
    assert rows["tiny-e2e"]["assumptions"]["training.dtype"]["value"] == "bf16"
    # the SUSPECT case is reported apart, never in the group's main MAPE
    assert doc["groups"]["nccl-tests"]["main_n"] == 0
    assert doc["groups"]["nccl-tests"]["flagged_n"] == 1
    assert doc["groups"]["g1"]["main_mape_pct"] == pytest.approx(abs(rows["tiny-e2e"]["error_pct"]))


@pytest.mark.ns3
def test_ci_and_max_gpus_selection(tmp_path, capsys, native_lib):
    path = tmp_path / "cases.yaml"
    path.write_text(yaml.safe_dump({"cases": CASES}))
    assert main(["validate", str(path), "--ci", "--out", str(tmp_path / "o")]) == 0
    doc = json.loads((tmp_path / "o" / "results.json").read_text())
    assert [r["id"] for r in doc["cases"]] == ["tiny-busbw"]
    assert main(["validate", str(path), "--max-gpus", "4", "--out", str(tmp_path / "p")]) == 2
    assert "no case left" in capsys.readouterr().err


def test_bad_cases_file_exits_2_with_one_line(tmp_path, capsys):
    path = tmp_path / "cases.yaml"
    path.write_text(yaml.safe_dump({"cases": [{"id": "x", "kind": "iteration_time"}]}))
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "cases[0] (x)" in err


@pytest.mark.parametrize(
    "change, key, fragment",
    [
        ({"op": "allreduse"}, "collective.op", "unknown collective 'allreduse'"),
        ({"ranks": 64}, "collective.ranks", "64 ranks; the case's cluster has 8 GPUs"),
        ({"size": "2TiB"}, "collective.size", "expected a size <="),
    ],
)
def test_an_invalid_collective_case_is_one_line_naming_case_and_key(tmp_path, capsys, change, key, fragment):
    case = {**CASES[1], "collective": {**CASES[1]["collective"], **change}}
    path = tmp_path / "cases.yaml"
    path.write_text(yaml.safe_dump({"cases": [CASES[0], case]}))
    assert main(["validate", str(path), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{path}: cases[1] (tiny-busbw)" in err[0], err
    assert key in err[0] and fragment in err[0] and not (tmp_path / "o").exists()


def test_an_invalid_inline_cluster_is_refused_when_the_file_is_read(tmp_path, capsys):
    cluster = {**CLUSTER, "hosts": [{"type": "h", "count": -1}]}
    path = tmp_path / "cases.yaml"
    path.write_text(yaml.safe_dump({"cases": [{**CASES[1], "cluster": cluster}]}))
    assert main(["validate", str(path), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cases[0] (tiny-busbw).cluster: hosts[0].count" in err[0], err


def test_invalid_input_found_while_predicting_is_exit_2_naming_the_case(tmp_path, capsys, monkeypatch):
    """A UserError raised by a case's run is bad input (exit 2, one line, no outputs), not a
    failed prediction (exit 1)."""
    import heterosim.validate.runner as runner
    from heterosim.errors import UserError

    path = tmp_path / "cases.yaml"
    path.write_text(yaml.safe_dump({"cases": CASES}))

    def predict(case, *args):
        raise UserError("simulation.sample_interval 10us: too many samples")

    monkeypatch.setattr(runner, "predict", predict)
    assert main(["validate", str(path), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"heterosim validate: error: {path}: cases[0] (tiny-e2e): simulation.sample_interval 10us: "
        "too many samples"
    ]
    assert not (tmp_path / "o").exists()


class BadAlloc(Exception):
    """Stands for cppyy's ``std.bad_alloc`` (a C++ allocation failure surfacing in Python)."""

    def __str__(self) -> str:
        return "bool ns3::PlanExecutor::Start() =>\n    bad_alloc: std::bad_alloc"


def test_a_case_out_of_memory_is_reported_failed_and_the_rest_run(tmp_path, capsys, monkeypatch):
    import heterosim.validate.runner as validate_cmd

    path = tmp_path / "cases.yaml"
    path.write_text(yaml.safe_dump({"cases": CASES}))

    def predict(case, *args):
        raise BadAlloc() if case.id == "tiny-e2e" else MemoryError()

    monkeypatch.setattr(validate_cmd, "predict", predict)
    assert main(["validate", str(path), "--out", str(tmp_path / "o")]) == 1
    out = capsys.readouterr().out
    assert "tiny-e2e" in out and "FAILED: out of memory" in out and "Traceback" not in out
    rows = json.loads((tmp_path / "o" / "results.json").read_text())["cases"]
    assert [r["error"].startswith("out of memory") for r in rows] == [True, True]


def test_out_of_memory_in_a_run_is_one_line(tmp_path, capsys, monkeypatch):
    import heterosim.simulate as simulate

    def run_experiment(*args, **kwargs):
        raise BadAlloc()

    monkeypatch.setattr(simulate, "run_for_reports", run_experiment)
    code = main(["run", "--no-plots", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 1
    assert err.strip().splitlines()[-1].startswith("heterosim run: error: out of memory")
    assert "Traceback" not in err and not (tmp_path / "o").exists()
    # any other exception is a bug and keeps its traceback
    monkeypatch.setattr(simulate, "run_for_reports", lambda *a, **k: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        main(["run", "--no-plots", "--out", str(tmp_path / "p")])


@pytest.mark.ns3
def test_queue_pairs_option_is_applied_and_recorded(tmp_path, capsys, native_lib):
    path = tmp_path / "cases.yaml"
    path.write_text(yaml.safe_dump({"cases": CASES}))
    assert main(["validate", str(path), "--queue-pairs", "flow", "--out", str(tmp_path / "o")]) == 0
    doc = json.loads((tmp_path / "o" / "results.json").read_text())
    assert doc["queue_pairs"] == "flow"
    assert {r["details"]["queue_pairs"] for r in doc["cases"]} == {"flow"}
    with pytest.raises(SystemExit) as exit_info:
        main(["validate", str(path), "--queue-pairs", "chunk"])
    assert exit_info.value.code == 2


@pytest.mark.ns3
def test_packet_acceleration_option_is_applied_and_agrees_with_exact(tmp_path, capsys, native_lib):
    path = tmp_path / "cases.yaml"
    path.write_text(yaml.safe_dump({"cases": CASES}))
    predicted = {}
    for mode in ("exact", "fast+memo"):
        out = tmp_path / mode.replace("+", "-")
        args = ["validate", str(path), "--fidelity", "packet", "--intra-host", "flow"]
        assert (
            main([*args, "--granularity", "connection", "--packet-acceleration", mode, "--out", str(out)])
            == 0
        )
        doc = json.loads((out / "results.json").read_text())
        assert doc["packet_acceleration"] == mode
        rows = {r["id"]: r for r in doc["cases"]}
        assert rows["tiny-e2e"]["details"]["packet_acceleration"]["mode"] == mode
        predicted[mode] = {k: r["predicted"] for k, r in rows.items()}
    for case_id, value in predicted["exact"].items():  # the 1 % bar on every case
        assert predicted["fast+memo"][case_id] == pytest.approx(value, rel=0.01), case_id
    with pytest.raises(SystemExit) as exit_info:
        main(["validate", str(path), "--packet-acceleration", "turbo"])
    assert exit_info.value.code == 2
    assert main(["validate", str(path), "--packet-acceleration", "fast", "--out", str(tmp_path / "f")]) == 2
    assert "--packet-acceleration: needs --fidelity packet" in capsys.readouterr().err
