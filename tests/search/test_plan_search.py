"""heterosim plan end to end on a tiny two-type cluster: ranking by simulated time, the best plan
never slower than the default, a best plan known by construction, resume, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from heterosim.cli import main
from heterosim.sweep.store import ResultStore

from .test_candidates import FAST_SLOW, write

pytestmark = pytest.mark.ns3
ARGS = ["--max-candidates", "5", "--micro-batches", "1,2", "--workers", "2", "--quiet"]


@pytest.fixture(scope="module")
def searched(tmp_path_factory) -> tuple[Path, Path, dict]:
    folder = tmp_path_factory.mktemp("plan")
    path = write(folder, FAST_SLOW)
    out = folder / "out"
    assert main(["plan", str(path), "--out", str(out), *ARGS]) == 0
    return path, out, json.loads((out / "results.json").read_text())


def test_every_candidate_is_reported_with_a_status(searched) -> None:
    _, out, results = searched
    rows = results["candidates"]
    assert results["search"]["candidates"] == len(rows)
    assert {r["status"] for r in rows} <= {"simulated", "pruned", "not_simulated"}
    simulated = [r for r in rows if r["status"] == "simulated"]
    assert len(simulated) == 5
    for r in rows:
        if r["status"] != "simulated":
            assert r["reason"], "a candidate not simulated says why"
    assert results["sim"]["fidelity"] == "flow" and results["sim"]["runs"] == 5
    assert results["network"]["flows"] > 0
    assert (out / "best_plan.yaml").is_file()


def test_ranking_is_by_simulated_time(searched) -> None:
    _, _, results = searched
    rows = {r["id"]: r for r in results["candidates"]}
    ranked = [rows[i] for i in results["ranking"]]
    times = [r["iteration_time_s"] for r in ranked]
    assert times == sorted(times)
    assert [r["rank"] for r in ranked] == list(range(1, len(ranked) + 1))
    assert results["iteration_time_s"] == times[0] and results["best"] == ranked[0]["id"]
    for r in ranked:  # the why matches the breakdown's largest term
        b = r["breakdown"]
        assert (
            abs(b["compute_s"] + b["exposed_comm_s"] + b["bubble_s"] - r["iteration_time_s"])
            < 1e-6 * r["iteration_time_s"] + 1e-9
        )
        assert r["why"]


def test_best_is_never_slower_than_the_default_and_unloads_the_slow_gpus(searched) -> None:
    _, _, results = searched
    rows = {r["id"]: r for r in results["candidates"]}
    default, best = rows[results["default"]], rows[results["best"]]
    assert default["status"] == "simulated"
    assert best["iteration_time_s"] <= default["iteration_time_s"]
    # By construction: the default gives the T4 stage (about 15x slower than the H100s in fp16)
    # half the layers; moving layers or micro-batches off the T4s must win clearly.
    assert best["iteration_time_s"] < 0.7 * default["iteration_time_s"]
    assert default["stage_layers"] == [4, 4]
    assert _slow_share(default) == pytest.approx(0.5)
    assert _slow_share(best) <= 0.25, "the best plan gives the T4s at most a quarter of the work"


def _slow_share(row: dict) -> float:
    """Share of layer x sequence work on the T4s (GPUs 2-3), from the plan as it ran."""
    layers, batches = row["stage_layers"], row["replica_micro_batches"]
    work = {"slow": 0.0, "fast": 0.0}
    par = row["parallel"]
    if "stages" in par:  # replica j of every stage on its own GPU type
        for s, stage in enumerate(par["stages"]):
            for j, rep in enumerate(stage["replicas"]):
                kind = "slow" if rep["gpu"].startswith("T4") else "fast"
                work[kind] += layers[s] * batches[j] * row["micro_batch"]
    else:  # rank order tp-dp-pp, rank r on GPU r
        tp, dp = par["tp"], par["dp"]
        for rank in range(4):
            stage, replica = rank // (tp * dp), (rank // tp) % dp
            kind = "slow" if rank >= 2 else "fast"
            work[kind] += layers[stage] * batches[replica] * row["micro_batch"] / tp
    return work["slow"] / (work["slow"] + work["fast"])


def test_resume_runs_only_what_is_missing(searched, tmp_path) -> None:
    path, out, results = searched
    copy_out = tmp_path / "out"
    copy_out.mkdir()
    lines = (out / "results.jsonl").read_text().splitlines()
    (copy_out / "results.jsonl").write_text("\n".join(lines[:-1]) + "\n")  # lose the last run
    (copy_out / "search.json").write_text((out / "search.json").read_text())
    assert main(["plan", str(path), "--out", str(copy_out), *ARGS]) == 2  # needs --resume
    assert (
        main(["plan", str(path), "--out", str(copy_out), "--resume", "--granularity", "connection", *ARGS])
        == 2
    )  # runs of another granularity are not reused
    assert main(["plan", str(path), "--out", str(copy_out), "--resume", *ARGS]) == 0
    records = ResultStore(copy_out / "results.jsonl").records()
    assert len(records) == len(lines)  # exactly the lost run ran again
    again = json.loads((copy_out / "results.json").read_text())
    assert again["ranking"] == results["ranking"]
    assert [r.get("iteration_time_s") for r in again["candidates"]] == [
        r.get("iteration_time_s") for r in results["candidates"]
    ]  # deterministic


def _damaged_copy(out: Path, tmp_path: Path, manifest: bytes | None, edit) -> Path:
    copy_out = tmp_path / "out"
    copy_out.mkdir()
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    ok = next(i for i, r in enumerate(records) if r.get("status") == "ok")
    records[ok] = edit(records[ok])
    (copy_out / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (copy_out / "search.json").write_bytes(manifest or (out / "search.json").read_bytes())
    return copy_out


@pytest.mark.parametrize(
    ("manifest", "edit", "needle"),
    [
        (b"\x00\xff\xfe binary", None, "search.json: not a text file"),
        (b"[1, 2]", None, "search.json: expected a JSON object, got list"),
        (b'{"settings": [1]}', None, "search.json: settings: expected a dict, got list"),
        (None, lambda r: {**r, "iteration_time_s": "fast"}, "iteration_time_s: expected a number > 0"),
        (None, lambda r: {**r, "iteration_time_s": -1.0}, "iteration_time_s: expected a number > 0"),
        (None, lambda r: {**r, "breakdown": "all compute"}, "breakdown: expected a mapping"),
        (None, lambda r: {"id": r["id"], "status": "ok"}, "iteration_time_s: expected a number > 0"),
    ],
)
def test_resume_on_damaged_state_is_one_line_and_never_ranks(
    searched, tmp_path, capsys, manifest, edit, needle
) -> None:
    path, out, _ = searched
    copy_out = _damaged_copy(out, tmp_path, manifest, edit or (lambda r: r))
    capsys.readouterr()
    assert main(["plan", str(path), "--out", str(copy_out), "--resume", *ARGS]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0] and str(copy_out) in err[0], err
    assert not (copy_out / "results.json").exists()


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["plan", "missing.yaml"], "missing.yaml: file not found"),
        (["plan", "EXP", "--max-candidates", "0"], "--max-candidates 0"),
        (["plan", "EXP", "--verify", "-1"], "--verify -1"),
        (["plan", "EXP", "--set", "parallel.tp=3"], "parallel"),
        (["plan", "EXP", "--set", "training.global_batch=0"], "training.global_batch"),
        (["plan", "EXP", "--address", "h:1"], "--address"),
    ],
)
def test_bad_input_is_one_line_exit_2(argv, needle, tmp_path, capsys) -> None:
    path = write(tmp_path, FAST_SLOW)
    argv = [str(path) if a == "EXP" else a for a in argv]
    assert main([*argv, "--out", str(tmp_path / "o"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("heterosim plan: error:") and needle in err[0]
    assert not (tmp_path / "o" / "results.json").exists()
