"""heterosim sweep: a 2x2 grid, resume after a crash repeats nothing, failures are recorded."""

from __future__ import annotations

import csv
import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from heterosim.cli import main
from heterosim.errors import UserError
from heterosim.sweep.grid import load_sweep, variant_id
from heterosim.sweep.store import ResultStore
from heterosim.sweep.task import RunTask, execute_task, prepare_task

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "workloads" / "compare" / "tiny_4gpu.yaml"
NIC_KEY = "cluster.host_types.h100.nic_speed"


def _write_sweep(folder: Path, grid: dict, **extra) -> Path:
    path = folder / "sweep.yaml"
    path.write_text(
        yaml.safe_dump({"experiment": str(TINY), "fidelity": "flow", "grid": grid, **extra}, sort_keys=False)
    )
    return path


def _store(out: Path) -> list[dict]:
    return ResultStore(out / "results.jsonl").records()


@pytest.fixture(scope="module")
def grid_sweep(tmp_path_factory) -> tuple[Path, Path]:
    """A 2x2 sweep (NIC speed x seed) run through the CLI with two local workers."""
    folder = tmp_path_factory.mktemp("sweep")
    path = _write_sweep(
        folder,
        {NIC_KEY: ["100Gbps", "400Gbps"], "simulation.seed": [1, 2]},
        metrics=["iteration_time_s", "breakdown.exposed_comm_s"],
    )
    out = folder / "out"
    assert main(["sweep", str(path), "--out", str(out), "--workers", "2", "--quiet"]) == 0
    return path, out


@pytest.mark.ns3
def test_sweep_runs_2x2_grid(grid_sweep) -> None:
    path, out = grid_sweep
    records = _store(out)
    variants = load_sweep(path).variants()
    assert len(records) == 4 and {r["id"] for r in records} == {v.id for v in variants}
    assert all(r["status"] == "ok" for r in records)
    by_nic: dict[str, list[dict]] = {}
    for record in records:
        results = json.loads((out / record["results_path"]).read_text())
        assert results["iteration_time_s"] == record["metrics"]["iteration_time_s"]
        assert f'{NIC_KEY}="{record["point"][NIC_KEY]}"' in results["experiment"]["overrides"]
        assert results["sim"]["seed"] == record["point"]["simulation.seed"]
        assert results["sim"]["fidelity"] == "flow"
        by_nic.setdefault(record["point"][NIC_KEY], []).append(record["metrics"])
    slow, fast = by_nic["100Gbps"], by_nic["400Gbps"]
    # NIC speed changes communication only: same compute and bytes, shorter iteration
    assert {m["breakdown.compute_s"] for m in slow + fast} == {slow[0]["breakdown.compute_s"]}
    assert {m["network.bytes"] for m in slow + fast} == {slow[0]["network.bytes"]}
    assert max(m["iteration_time_s"] for m in fast) < min(m["iteration_time_s"] for m in slow)

    with (out / "summary.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert [r["id"] for r in rows] == [v.id for v in variants]  # grid order
    assert {r["status"] for r in rows} == {"ok"} and rows[0][NIC_KEY] == "100Gbps"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == {"ok": 4}
    groups = {g["params"][NIC_KEY]: g for g in summary["groups"]}
    for nic, metrics in by_nic.items():
        stats = groups[nic]["stats"]["iteration_time_s"]
        values = [m["iteration_time_s"] for m in metrics]
        assert groups[nic]["ok"] == 2 and stats["mean"] == pytest.approx(sum(values) / 2)
        assert stats["min"] == min(values) and stats["max"] == max(values)
    for name in summary["plots"]:
        assert (out / name).read_bytes()[:4] == b"\x89PNG"
    assert len(summary["plots"]) == 2  # two metrics vs the one non-seed parameter


@pytest.mark.ns3
def test_resume_after_crash_repeats_nothing(grid_sweep, tmp_path: Path, capsys) -> None:
    """A store cut short mid-line (a crash) resumes by running exactly the missing variants."""
    path, finished = grid_sweep
    out = tmp_path / "out"
    shutil.copytree(finished, out)
    lines = (out / "results.jsonl").read_text().splitlines(keepends=True)
    kept, lost = lines[:2], lines[2:]
    (out / "results.jsonl").write_text("".join(kept) + lost[0][: len(lost[0]) // 2])  # died mid-write
    lost_ids = {json.loads(line)["id"] for line in lost}

    assert main(["sweep", str(path), "--out", str(out), "--quiet"]) == 2  # no --resume: refuses
    assert "--resume" in capsys.readouterr().err
    assert main(["sweep", str(path), "--out", str(out), "--resume", "--workers", "1", "--quiet"]) == 0
    text = (out / "results.jsonl").read_text()
    assert text.startswith("".join(kept))  # nothing already done was rewritten
    records = _store(out)
    assert [r["id"] for r in records[:2]] == [json.loads(line)["id"] for line in kept]
    assert {r["id"] for r in records[2:]} == lost_ids and len(records) == 4  # each missing one once
    store = ResultStore(out / "results.jsonl")
    store.records()
    assert store.malformed_lines == 1  # the torn line, skipped

    assert main(["sweep", str(path), "--out", str(out), "--resume", "--quiet"]) == 0
    assert len(_store(out)) == 4  # a complete sweep resumes to nothing


@pytest.mark.ns3
@pytest.mark.slow
def test_ctrl_c_keeps_finished_runs_and_resume_runs_only_the_rest(tmp_path: Path) -> None:
    """SIGINT to a running sweep: exit 130, finished runs stay in the store, the rest are pending."""
    path = tmp_path / "sweep.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "experiment": str(REPO / "tests" / "data" / "tiny_experiment.yaml"),
                "fidelity": "flow",
                "grid": {"simulation.seed": [1, 2]},
            }
        )
    )
    out = tmp_path / "out"
    store = out / "results.jsonl"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "heterosim.cli",
            "sweep",
            str(path),
            "--workers",
            "1",
            "--out",
            str(out),
            "--no-plots",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    deadline = time.monotonic() + 300
    while not (store.exists() and store.stat().st_size) and proc.poll() is None:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    output, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, output
    assert "interrupted" in output and "Traceback" not in output
    before = _store(out)
    assert len(before) == 1 and before[0]["status"] == "ok"
    with (out / "summary.csv").open() as handle:
        statuses = [row["status"] for row in csv.DictReader(handle)]
    assert statuses == ["ok", "pending"]

    assert main(["sweep", str(path), "--out", str(out), "--resume", "--quiet", "--no-plots"]) == 0
    after = _store(out)
    assert after[: len(before)] == before  # nothing rewritten
    assert len(after) == 2 and len({r["id"] for r in after}) == 2  # the missing run, once


@pytest.mark.ns3
def test_failing_variants_are_recorded_and_others_complete(tmp_path: Path, capsys) -> None:
    path = _write_sweep(tmp_path, {"parallel.dp": [2, 3], "network.cc": ["dcqcn", "nosuchcc"]})
    out = tmp_path / "out"
    assert main(["sweep", str(path), "--out", str(out), "--quiet", "--no-plots"]) == 1
    records = {(r["point"]["parallel.dp"], r["point"]["network.cc"]): r for r in _store(out)}
    assert len(records) == 4
    assert records[(2, "dcqcn")]["status"] == "ok"
    assert records[(2, "dcqcn")]["metrics"]["iteration_time_s"] > 0
    assert "tp*pp*dp" in records[(3, "dcqcn")]["error"]
    assert "network.cc" in records[(2, "nosuchcc")]["error"]
    for key in ((3, "dcqcn"), (2, "nosuchcc"), (3, "nosuchcc")):
        assert records[key]["status"] == "error" and "\n" not in records[key]["error"]
    # only the variant that ran has a folder: a failed one leaves no partial output
    assert [p.name for p in (out / "runs").iterdir()] == [records[(2, "dcqcn")]["id"]]
    assert [p.name for p in (out / "runs" / records[(2, "dcqcn")]["id"]).iterdir()] == ["results.json"]
    printed = capsys.readouterr().out
    assert "1 ok" in printed and "3 error" in printed and "tp*pp*dp" in printed
    with (out / "summary.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert sorted(r["status"] for r in rows) == ["error", "error", "error", "ok"]


def test_worker_errors_become_records(monkeypatch) -> None:
    """An exception inside a worker run is returned as an error record, never raised."""
    record = execute_task(RunTask(id="x", label="bad", source=str(TINY), data={"model": "gpt3-13b"}))
    assert record["status"] == "error" and "training" in record["error"] and "traceback" not in record

    def explode(*args, **kwargs):
        raise RuntimeError("engine exploded\nsecond line")

    monkeypatch.setattr("heterosim.simulate.run_any", explode)
    task = prepare_task(TINY, ["network.cc=hpcc"], task_id="y", label="boom")
    record = execute_task(task)
    assert record["status"] == "error" and record["error"] == "RuntimeError: engine exploded"
    assert "explode" in record["traceback"] and record["id"] == "y"


def test_variant_identity() -> None:
    assert variant_id({"a": 1, "b": "x"}) == variant_id({"b": "x", "a": 1})
    assert variant_id({"a": 1}) != variant_id({"a": 2}) != variant_id({"a": "1"})


def test_store_skips_torn_line_and_appends_on_a_new_line(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "r.jsonl")
    store.append({"id": "a", "status": "ok"})
    with store.path.open("a") as handle:
        handle.write('{"id": "b", "sta')
    store.append({"id": "c", "status": "error"})
    store.append({"id": "a", "status": "error"})
    assert [r["id"] for r in store.records()] == ["a", "c", "a"] and store.malformed_lines == 1
    assert store.latest()["a"]["status"] == "error"


@pytest.mark.parametrize(
    "content, message",
    [
        ({"grid": {"network.cc": ["dcqcn"]}}, "experiment: missing"),
        (
            {"experiment": "nope.yaml", "grid": {"network.cc": ["dcqcn"]}},
            "experiment: nope.yaml: file not found",
        ),
        ({"experiment": str(TINY)}, "grid: expected a non-empty mapping"),
        ({"experiment": str(TINY), "grid": {"network.cc": "dcqcn"}}, "grid.network.cc: expected a non-empty"),
        ({"experiment": str(TINY), "grid": {"network.cc": []}}, "grid.network.cc: expected a non-empty list"),
        (
            {"experiment": str(TINY), "grid": {"network.cc": ["a", "a"]}},
            "grid.network.cc: value 'a' is listed",
        ),
        (
            {"experiment": str(TINY), "grid": {"netwrk.cc": ["a"]}},
            "grid.netwrk.cc: unknown experiment section",
        ),
        ({"experiment": str(TINY), "grid": {"network..cc": ["a"]}}, "expected a dotted experiment key"),
        (
            {"experiment": str(TINY), "grid": {"cluster": ["missing.yaml"]}},
            "grid.cluster: missing.yaml: file",
        ),
        ({"experiment": str(TINY), "grid": {"a.b": [1]}, "fidelity": "fast"}, "fidelity: expected one of"),
        (
            {"experiment": str(TINY), "grid": {"network.cc": ["x"]}, "workers": 0},
            "workers: expected a positive",
        ),
        ({"experiment": str(TINY), "grid": {"network.cc": ["x"]}, "set": {"network.cc": "y"}}, "also given"),
        ({"experiment": str(TINY), "grid": {"network.cc": ["x"]}, "metrics": ["foo"]}, "metrics: 'foo'"),
        ({"experiment": str(TINY), "grid": {"network.cc": ["x"]}, "gird": 1}, "gird: unknown key"),
    ],
)
def test_sweep_file_errors_name_file_and_key(tmp_path: Path, content: dict, message: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(content))
    with pytest.raises(UserError) as info:
        load_sweep(path)
    text = str(info.value)
    assert text.startswith(str(path)) and message in text and "\n" not in text


def test_sweep_cli_bad_file_exits_2(tmp_path: Path, capsys) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("experiment: [1\n")
    assert main(["sweep", str(path), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "invalid YAML" in err[0]


JOBS = REPO / "workloads" / "examples" / "two_jobs_h4.yaml"


@pytest.mark.parametrize(
    "where, key, message",
    [
        ("grid", "training.micro_batch", "two_jobs_h4.yaml: training: unknown key"),
        ("grid", "jobs.5.start", "5: expected an index 0..1 of the list"),
        ("grid", "jobs.0.bogus", "jobs[0].bogus: unknown key"),
        ("grid", "jobs.0.experiment.training.bogus", "jobs[0]: experiment: training.bogus: unknown key"),
        ("grid", "network.cc.x", "cc in"),
        ("set", "network.bogus", "network.bogus: unknown key"),
    ],
)
def test_a_key_no_variant_can_take_is_a_malformed_sweep(
    tmp_path: Path, capsys, where: str, key: str, message: str
) -> None:
    """A sweep over a several-jobs file whose grid (or set) key fits no variant: exit 2, one line
    naming the sweep file and the key, before any variant runs or any output is written."""
    extra: dict = {"grid": {key: [1, 2]}}
    if where == "set":
        extra = {"set": {key: 1}, "grid": {"simulation.seed": [1, 2]}}
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump({"experiment": str(JOBS), "fidelity": "flow", **extra}))
    out = tmp_path / "out"
    assert main(["sweep", str(path), "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"heterosim sweep: error: {path}: {where}.{key}: ")
    assert message in err[0]
    assert not out.exists()


def test_bad_values_of_a_valid_key_stay_errors_of_their_variants(tmp_path: Path) -> None:
    from heterosim.sweep.runner import check_sweep_keys

    grid = {"jobs.0.experiment.training.micro_batch": [3, 1], "jobs.1.start": ["-1ms", "1ms"]}
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump({"experiment": str(JOBS), "grid": grid, "set": {"network.cc": "nope"}}))
    check_sweep_keys(load_sweep(path))  # values only: each variant records its own error


def test_cluster_values_resolve_relative_to_sweep_file() -> None:
    spec = load_sweep(REPO / "workloads" / "sweeps" / "cc_h4.yaml")
    variants = spec.variants()
    assert len(variants) == 12 and len({v.id for v in variants}) == 12
    strings = variants[0].override_strings(spec.base_dir)
    cluster = json.loads(strings[0].split("=", 1)[1])
    assert Path(cluster) == (REPO / "topologies" / "h0_128gpu.yaml").resolve()
    assert strings[-1] == 'simulation.fidelity="packet"'


def test_ray_missing_is_a_clear_error(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    path = _write_sweep(tmp_path, {"simulation.seed": [1]})
    assert main(["sweep", str(path), "--executor", "ray", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "ray package is not installed" in err[0] and ".[ray]" in err[0]
    assert not (tmp_path / "o").exists()  # failed before any work


@pytest.mark.ns3
@pytest.mark.slow
def test_ray_executor_runs_a_sweep(tmp_path: Path) -> None:
    ray = pytest.importorskip("ray")
    from heterosim.sweep.runner import run_sweep

    path = _write_sweep(tmp_path, {NIC_KEY: ["100Gbps", "400Gbps"]})
    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR")
    try:
        outcome = run_sweep(load_sweep(path), tmp_path / "out", executor="ray", plots=False)
    finally:
        ray.shutdown()
    records = _store(tmp_path / "out")
    assert len(outcome.ran) == 2 and {r["status"] for r in records} == {"ok"}
    times = {r["point"][NIC_KEY]: r["metrics"]["iteration_time_s"] for r in records}
    assert times["400Gbps"] < times["100Gbps"]
