"""The plan search (``heterosim plan``) end to end: enumerate, prune, pre-rank, simulate in
parallel, rank, verify. Candidates, pruning and ranking are :mod:`.candidates`, :mod:`.prune` and
:mod:`.rank`; this module drives them with the experiment's workload
(:func:`generate_experiment_workload`) and runs the simulations through the sweep executors.

Output folder::

    search.json      the search as run: experiment, overrides, settings, candidate ids
    results.jsonl    one record per finished simulation (the sweep store: appended, fsync'd;
                     ``--resume`` skips what it holds)
    results.json     every candidate (simulated with its time, breakdown and "why"; pruned with
                     the reason; or left out by the pre-rank), the ranking, the best and the
                     default, and the ``network`` / ``sim`` sections
    best_plan.yaml   the best candidate as an experiment file (``heterosim run best_plan.yaml``)

Simulations run through the sweep executors (local process pool or Ray), each candidate a
:class:`~heterosim.sweep.task.RunTask` carrying its experiment with the cluster inlined.
"""

from __future__ import annotations

import copy
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from heterosim import __version__
from heterosim.config.experiment import parse_experiment
from heterosim.config.network_model import FLUID, PACKET
from heterosim.errors import UserError
from heterosim.interrupts import sigterm_as_interrupt
from heterosim.report.staging import check_output_folder, mark_output_folder, write_json_atomically
from heterosim.report.task_progress import TaskProgress
from heterosim.search.candidates import DEFAULT_MICRO_BATCHES, Candidate, enumerate_candidates
from heterosim.search.prune import Assessment, assess
from heterosim.search.rank import analytic_estimate, order, select, why
from heterosim.simulate.experiment import experiment_compute_model, generate_experiment_workload
from heterosim.sweep.local import default_workers
from heterosim.sweep.runner import EXECUTORS
from heterosim.sweep.store import ResultStore, check_run_record, read_manifest
from heterosim.sweep.task import OK, RunTask, prepare_task

LogFn = Callable[[str], None]
DEFAULT_MAX_CANDIDATES = 16
GIB = 1 << 30


@dataclass(frozen=True)
class PlanSearchSettings:
    """How to search (the ``heterosim plan`` options)."""

    max_candidates: int = DEFAULT_MAX_CANDIDATES
    micro_batches: tuple[int, ...] = DEFAULT_MICRO_BATCHES
    top: int = 5
    verify: int = 0
    granularity: str | None = None  # simulation.collective_granularity for the flow runs
    workers: int | None = None
    executor: str = "local"
    address: str | None = None
    resume: bool = False

    def check(self) -> None:
        if self.max_candidates < 1:
            raise UserError(f"--max-candidates {self.max_candidates}: expected at least 1")
        if self.top < 1:
            raise UserError(f"--top {self.top}: expected at least 1")
        if self.verify < 0:
            raise UserError(f"--verify {self.verify}: expected 0 or more")
        if self.workers is not None and self.workers < 1:
            raise UserError(f"--workers {self.workers}: expected a positive integer")
        if not self.micro_batches or min(self.micro_batches) < 1:
            raise UserError(f"--micro-batches {self.micro_batches}: expected positive integers")
        if self.executor not in EXECUTORS:
            raise UserError(f"--executor {self.executor}: expected one of {', '.join(EXECUTORS)}")


@dataclass
class PlanSearchResult:
    """What a plan search (:func:`search_plans`) wrote and found."""

    results: dict[str, Any]  # results.json: every candidate, the ranking, best, default, sim
    out_dir: Any  # pathlib.Path of the output folder
    best_plan: Any  # pathlib.Path of best_plan.yaml, or None when nothing was simulated


def _run_data(
    candidate: Candidate, base: dict[str, Any], fidelity: str, granularity: str | None
) -> dict[str, Any]:
    data = candidate.experiment_data(base)
    sim = dict(data.get("simulation") or {})
    sim["fidelity"] = fidelity
    sim["sample_interval"] = "0s"  # no time series: only the iteration and its breakdown
    if granularity:
        sim["collective_granularity"] = granularity
    data["simulation"] = sim
    return data


def _compact(record: dict[str, Any]) -> dict[str, Any]:
    """The store record of a run: its status and the parts of results.json a ranking needs."""
    results = record.pop("results", None) or {}
    record.pop("traceback", None)
    if results:
        record["iteration_time_s"] = results.get("iteration_time_s")
        record["breakdown"] = results.get("breakdown")
        record["network"] = results.get("network")
        record["sim"] = results.get("sim")
        record["partition"] = results.get("partition")
    return record


def _check_out(
    out_dir: Path, store: ResultStore, source: str, overrides: list[str], settings: PlanSearchSettings
) -> None:
    if out_dir.exists() and not out_dir.is_dir():
        raise UserError(f"--out {out_dir}: exists and is not a folder")
    if not store.exists():
        return
    if not settings.resume:
        raise UserError(
            f"--out {out_dir}: already holds a plan search; pass --resume to continue "
            "it, or choose another --out"
        )
    previous = read_manifest(
        out_dir / "search.json", {"experiment": str, "overrides": list, "settings": dict}
    )
    if previous is not None:
        if previous.get("experiment") != source or previous.get("overrides") != overrides:
            raise UserError(
                f"--resume: {out_dir} holds a search of {previous.get('experiment')} "
                f"with --set {previous.get('overrides')}; choose another --out"
            )
        before = (previous.get("settings") or {}).get("granularity")
        if before != settings.granularity:
            raise UserError(
                f"--resume: {out_dir} holds runs with --granularity {before}, not "
                f"{settings.granularity}; choose another --out"
            )


def _execute(
    tasks: list[RunTask], finish: Callable[[RunTask, dict[str, Any]], None], settings: PlanSearchSettings
) -> None:
    if not tasks:
        return
    with sigterm_as_interrupt():  # SIGTERM stops the workers as Ctrl-C does; --resume continues
        if settings.executor == "ray":
            from heterosim.sweep.ray_executor import run_ray

            run_ray(tasks, finish, address=settings.address)
        else:
            from heterosim.sweep.local import run_local

            run_local(tasks, finish, workers=settings.workers)


def _row(a: Assessment, estimate: float | None, chosen: bool) -> dict[str, Any]:
    c = a.candidate
    row: dict[str, Any] = {
        "id": c.id,
        "label": c.label,
        "kind": c.kind,
        "default": c.default,
        "parallel": c.parallel,
        "micro_batch": c.micro_batch,
        "status": "pruned" if not a.ok else ("pending" if chosen else "not_simulated"),
        "pruned": a.pruned,
        "reason": a.reason or None,
        "estimate_s": estimate,
        "memory_gib": {g: round(b / GIB, 3) for g, b in sorted(a.memory_bytes.items())},
        "capacity_gib": (
            {g: round(a.experiment.cluster.gpu_spec(g).memory_bytes / GIB, 3) for g in sorted(a.memory_bytes)}
            if a.experiment
            else {}
        ),
    }
    if a.ok and not chosen:
        row["reason"] = "pre-ranked out: analytic estimate not among the best --max-candidates"
    if a.workload is not None:
        part = a.workload.partition
        row["stage_layers"] = [sum(len(r) for r in part.stage_layers(s)) for s in range(part.pp)]
        row["replica_micro_batches"] = list(part.replica_micro_batches)
    return row


def search_plans(
    experiment_path: str | Path,
    overrides: list[str],
    out_dir: str | Path,
    settings: PlanSearchSettings,
    log: LogFn | None = None,
) -> PlanSearchResult:
    """Search plans for the experiment; write the outputs (module docstring); return them."""
    settings.check()
    if settings.executor == "ray":
        from heterosim.sweep.ray_executor import import_ray

        import_ray()  # fail before any work if the extra is missing
    started = time.perf_counter()
    search = _Search(
        Path(experiment_path), list(overrides), Path(out_dir), settings, log or (lambda _m: None)
    )
    search.assess()
    search.open_output()
    search.simulate_chosen()
    rows, ranked = search.rank()
    search.verify(ranked)
    results = _results(
        search.exp,
        search.path,
        overrides,
        settings,
        search.candidates,
        rows,
        ranked,
        time.perf_counter() - started,
    )
    write_json_atomically(search.out_dir / "results.json", results)
    best_plan = search.write_best_plan(ranked)
    return PlanSearchResult(results=results, out_dir=search.out_dir, best_plan=best_plan)


class _Search:
    """One plan search's state, step by step: assess the candidates, open the output folder,
    simulate the chosen ones in flow fidelity, rank them, verify the best at packet fidelity."""

    def __init__(
        self, path: Path, overrides: list[str], out_dir: Path, settings: PlanSearchSettings, log: LogFn
    ) -> None:
        self.path, self.overrides, self.out_dir, self.settings, self.log = (
            path,
            overrides,
            out_dir,
            settings,
            log,
        )
        base_task = prepare_task(path, overrides, task_id="base", label="base")
        self.base = base_task.data
        self.exp = parse_experiment(copy.deepcopy(self.base), str(path), base_dir=path.parent)
        self.store = ResultStore(out_dir / "results.jsonl")
        _check_out(out_dir, self.store, str(path), list(overrides), settings)
        self.done: dict[str, dict[str, Any]] = {}  # run id -> its finished record (--resume)
        self.shown: list[TaskProgress] = []  # progress of each simulation round
        self.parallel = 0  # workers shown in the progress lines

    def assess(self) -> None:
        """Enumerate, prune and pre-rank the candidates; choose the ones to simulate."""
        exp, settings = self.exp, self.settings
        self.candidates = enumerate_candidates(exp, dict(self.base["parallel"]), settings.micro_batches)
        compute = experiment_compute_model(exp)

        def workload_fn(experiment: Any) -> Any:
            return generate_experiment_workload(experiment, compute)

        base, source, folder = self.base, str(self.path), self.path.parent
        self.assessments = [assess(c, base, source, folder, workload_fn) for c in self.candidates]
        self.estimates = {a.candidate.id: analytic_estimate(a) for a in self.assessments if a.ok}
        self.chosen = select(self.assessments, self.estimates, settings.max_candidates)
        self.by_id = {a.candidate.id: a for a in self.assessments}
        pruned = sum(1 for a in self.assessments if not a.ok)
        self.log(
            f"heterosim plan: {exp.name}: {len(self.candidates)} candidates on {exp.cluster.world_size} "
            f"GPUs ({exp.cluster.name}); {pruned} pruned, {len(self.chosen)} to simulate in flow fidelity"
        )

    def open_output(self) -> None:
        """Create (or reopen, with --resume) the output folder; write search.json; read what
        earlier runs of this search finished."""
        out_dir = self.out_dir
        if not (out_dir / "results.jsonl").is_file():  # a new search: never into a user's folder
            check_output_folder(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        mark_output_folder(out_dir)
        write_json_atomically(
            out_dir / "search.json",
            {
                "experiment": str(self.path),
                "overrides": list(self.overrides),
                "settings": self.settings.__dict__,
                "candidates": [{"id": c.id, "label": c.label} for c in self.candidates],
            },
        )
        self.done = {k: v for k, v in self.store.latest().items() if v.get("status") == OK}
        for record in self.done.values():  # a damaged record stops the search before it can rank
            check_run_record(record, self.store.path)

    def _finish(self, task: RunTask, record: dict[str, Any]) -> None:
        record = _compact(record)
        self.store.append(record)
        done_now = record.get("iteration_time_s")
        detail = f"{done_now * 1e3:.3f} ms" if done_now is not None else record.get("error")
        self.shown[-1].done(f"{record['status']:<7} {task.label}", detail or "", record.get("run_wall_s"))

    def _tasks(self, ids: list[str], fidelity: str, suffix: str) -> list[RunTask]:
        """The runs of candidates ``ids`` at ``fidelity`` not finished before."""
        out = []
        for cid in ids:
            if cid + suffix in self.done:
                continue
            cand = self.by_id[cid].candidate
            data = _run_data(cand, self.base, fidelity, self.settings.granularity)
            label = f"{cand.label} ({fidelity})"
            out.append(RunTask(id=cid + suffix, label=label, source=str(self.path), data=data))
        return out

    def simulate_chosen(self) -> None:
        """Simulate the chosen candidates in flow fidelity."""
        settings = self.settings
        flow_tasks = self._tasks([a.candidate.id for a in self.chosen], FLUID.name, "")
        chosen = len(self.chosen)
        if chosen - len(flow_tasks):
            self.log(f"{chosen - len(flow_tasks)} of {chosen} already simulated; running {len(flow_tasks)}")
        local = settings.executor == "local"
        self.parallel = (settings.workers or default_workers()) if local else len(flow_tasks)
        self.shown.append(TaskProgress("plan", len(flow_tasks), workers=self.parallel, emit=self.log))
        _execute(flow_tasks, self._finish, settings)

    def rank(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """Every candidate's row (simulated ones with their results), and the ranked ones."""
        records = self.store.latest()
        chosen_ids = {a.candidate.id for a in self.chosen}
        rows = [
            _row(a, self.estimates.get(a.candidate.id), a.candidate.id in chosen_ids)
            for a in self.assessments
        ]
        for row in rows:
            rec = records.get(row["id"])
            if row["status"] != "pending":
                continue
            if rec is None or rec.get("status") != OK:
                row["status"] = "error"
                row["reason"] = (rec or {}).get("error") or "not run"
                continue
            row.update(
                status="simulated",
                iteration_time_s=rec["iteration_time_s"],
                breakdown=rec["breakdown"],
                network=rec["network"],
                sim=rec["sim"],
                why=why(rec["breakdown"], rec["iteration_time_s"]),
            )
        ranked = order(rows)
        for i, row in enumerate(ranked):
            row["rank"] = i + 1
        return rows, ranked

    def verify(self, ranked: list[dict[str, Any]]) -> None:
        """Simulate the best ``settings.verify`` at packet fidelity; add them to their rows."""
        best = ranked[: self.settings.verify]
        if not best:
            return
        self.log(f"verifying the best {len(best)} at packet fidelity")
        verify_tasks = self._tasks([r["id"] for r in best], PACKET.name, "-packet")
        self.shown.append(TaskProgress("plan", len(verify_tasks), workers=self.parallel, emit=self.log))
        _execute(verify_tasks, self._finish, self.settings)
        records = self.store.latest()
        for row in best:
            rec = records.get(row["id"] + "-packet")
            if rec and rec.get("status") == OK:
                row["packet"] = {
                    "iteration_time_s": rec["iteration_time_s"],
                    "breakdown": rec["breakdown"],
                    "network": rec["network"],
                    "sim": rec["sim"],
                }
            else:
                row["packet"] = {"error": (rec or {}).get("error") or "not run"}

    def write_best_plan(self, ranked: list[dict[str, Any]]) -> Path | None:
        """best_plan.yaml: the best candidate as an experiment file (None: nothing ranked)."""
        if not ranked:
            return None
        best = self.by_id[ranked[0]["id"]].candidate
        plan_data = best.experiment_data(self.base)
        plan_data["name"] = f"{self.exp.name}-best"
        best_plan = self.out_dir / "best_plan.yaml"
        staged = self.out_dir / ".best_plan.yaml.tmp"
        staged.write_text(yaml.safe_dump(plan_data, sort_keys=False))
        os.replace(staged, best_plan)
        return best_plan


def _results(
    exp: Any,
    path: Path,
    overrides: list[str],
    settings: PlanSearchSettings,
    candidates: list[Candidate],
    rows: list[dict[str, Any]],
    ranked: list[dict[str, Any]],
    wall_s: float,
) -> dict[str, Any]:
    default = next(r for r in rows if r["default"])
    best = ranked[0] if ranked else None
    simulated = [r for r in rows if r["status"] == "simulated"]
    status: dict[str, int] = {}
    pruned: dict[str, int] = {}
    for r in rows:
        status[r["status"]] = status.get(r["status"], 0) + 1
        if r["pruned"]:
            pruned[r["pruned"]] = pruned.get(r["pruned"], 0) + 1
    network: dict[str, float] = {}
    for r in simulated:
        for k, v in (r.get("network") or {}).items():
            if isinstance(v, (int, float)):
                network[k] = network.get(k, 0) + v
    sim = {
        "fidelity": FLUID.name,
        "version": __version__,
        "runs": len(simulated),
        "wall_s": sum(float((r.get("sim") or {}).get("wall_s") or 0.0) for r in simulated),
        "events": sum(int((r.get("sim") or {}).get("events") or 0) for r in simulated),
        "search_wall_s": wall_s,
    }
    return {
        "search": {
            "experiment": str(path),
            "overrides": list(overrides),
            "model": exp.model.name,
            "cluster": exp.cluster.name,
            "world_size": exp.cluster.world_size,
            "global_batch": exp.training.global_batch,
            "max_candidates": settings.max_candidates,
            "micro_batches": list(settings.micro_batches),
            "granularity": settings.granularity or exp.simulation.collective_granularity,
            "candidates": len(candidates),
            "status": status,
            "pruned": pruned,
        },
        "iteration_time_s": best["iteration_time_s"] if best else None,
        "best": best["id"] if best else None,
        "default": default["id"],
        "ranking": [r["id"] for r in ranked],
        "candidates": rows,
        "network": network,  # summed over the flow runs
        "sim": sim,
    }
