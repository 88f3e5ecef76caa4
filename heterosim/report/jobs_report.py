"""What a run of several jobs writes: results.json with a section per job beside the shared
network and simulator sections, and the usual CSVs, trace and plots of the whole run.

Per job (``jobs[j]``): its iteration time and breakdown measured from its own start (so they
read as for the job alone), throughput, its collectives (``collectives_s``: total time of its
collective instances by type), its flows and bytes, and its ranks. The shared ``network``
counters and links.csv cover every job's traffic: contention shows where it happens.
Top level: ``iteration_time_s`` is the slowest job's, ``makespan_s`` the time until every job
finished.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from heterosim import __version__
from heterosim.config.jobs import JobSpec
from heterosim.engine.faults import fault_impact, fault_records
from heterosim.plan.execution_plan import FLOW
from heterosim.report.perfetto import DEFAULT_MAX_SPANS
from heterosim.report.run_report import _write_all, announce_dropped_spans, results_dict
from heterosim.report.staging import staged_output
from heterosim.report.trims import trim_counters
from heterosim.results import JobsArtifacts, RunArtifacts
from heterosim.workload.trace import COLLECTIVE_NAMES

NS = 1e-9


def gpu_ranges(gpus: tuple[int, ...]) -> str:
    """(0, 1, 2, 5) -> "0-2,5"."""
    parts, start = [], None
    for i, g in enumerate(gpus):
        if start is None:
            start = g
        if i + 1 == len(gpus) or gpus[i + 1] != g + 1:
            parts.append(f"{start}-{g}" if g != start else f"{g}")
            start = None
    return ",".join(parts)


def collective_seconds(run: RunArtifacts) -> dict[str, float]:
    """Total time of a job's collective instances, by collective type (seconds)."""
    colls = run.tables.collectives
    out: dict[str, float] = {}
    start, end = run.engine.task_start_ns, run.engine.task_end_ns
    for i in range(len(colls.get("id", []))):
        s, e = int(start[colls["start_task"][i]]), int(end[colls["end_task"][i]])
        if e >= s >= 0:
            name = COLLECTIVE_NAMES.get(int(colls["comm_type"][i]), str(int(colls["comm_type"][i])))
            out[name] = out.get(name, 0.0) + (e - s) * NS
    return out


def _job_entry(spec: JobSpec, run: RunArtifacts, one: dict[str, Any]) -> dict[str, Any]:
    """One job's entry of ``jobs``, from its own results (``one``)."""
    start_s = spec.start_ns * NS
    return {
        "name": spec.name,
        "gpus": gpu_ranges(spec.gpus),
        "num_gpus": len(spec.gpus),
        "model": spec.experiment.model.name,
        "experiment": spec.experiment.source,
        "parallel": {
            "tp": spec.experiment.parallel.tp,
            "pp": spec.experiment.parallel.pp,
            "dp": spec.experiment.parallel.dp,
        },
        "start_s": start_s,
        "end_s": start_s + run.engine.makespan_ns * NS if run.engine.makespan_ns >= 0 else None,
        "iteration_time_s": one["iteration_time_s"],
        "iterations": one["iterations"],
        "breakdown": one["breakdown"],
        "throughput": one["throughput"],
        "collectives_s": collective_seconds(run),
        "collectives": one["collectives"],
        "network": {k: one["network"][k] for k in ("flows", "bytes", "retransmits")},
        "compute_provenance": one["compute_provenance"],
        "partition": one["partition"],
        "partial": one["sim"]["partial"],
    }


def _network_counters(art: JobsArtifacts) -> dict[str, int]:
    """The shared network's counters: flows and bytes from the merged plan, the rest from the
    engine (zero where the model does not count them)."""
    plan = art.merged.tables.plan
    flows = plan.kind == FLOW
    counters = {
        "flows": int(flows.sum()),
        "bytes": int(plan.bytes[flows].sum()),
        "drops": 0,
        "retransmits": 0,
        "pfc_pause_frames": 0,
        "ecn_marks": 0,
        "cnps": 0,
    }
    counters.update({k: int(v) for k, v in art.engine.network.items() if k in counters})
    counters.update(trim_counters(art.engine.network, art.engine.links, art.topology))  # network.trimming
    return counters


def jobs_results_dict(art: JobsArtifacts) -> dict[str, Any]:
    """results.json content of a run of several jobs."""
    exp, engine = art.experiment, art.engine
    jobs, ranks = [], []
    for j, (spec, run) in enumerate(zip(exp.jobs, art.jobs)):
        one = results_dict(run)
        offset = int(art.merged.rank_offset[j])
        for row in one["ranks"]:
            ranks.append({**row, "rank": row["rank"] + offset, "job": spec.name, "job_rank": row["rank"]})
        jobs.append(_job_entry(spec, run, one))
    plan = art.merged.tables.plan
    out: dict[str, Any] = {
        "iteration_time_s": max(
            (j["iteration_time_s"] for j in jobs if j["iteration_time_s"] is not None), default=None
        ),
        "makespan_s": engine.makespan_ns * NS,
        "definition": "iteration_time_s: the slowest job's iteration time (from its own start); "
        "makespan_s: until every job finished",
        "jobs": jobs,
        "ranks": ranks,
        "network": _network_counters(art),
        "sim": {
            "fidelity": engine.fidelity,
            "wall_s": engine.wall_s,
            "events": int(engine.events),
            "version": __version__,
            "seed": exp.simulation.seed,
            "partial": bool(engine.partial),
            "error": engine.error,
            "tasks": int(len(plan)),
            "stage_wall_s": art.stage_wall_s,
        },
        "experiment": {"name": exp.name, "source": exp.source, "resolved": exp.resolved},
    }
    if art.faults is not None:
        out["faults"] = fault_records(
            art.faults,
            engine.fault_counts,
            engine.fidelity,
            plan,
            engine.task_start_ns,
            engine.task_end_ns,
            engine.makespan_ns,
            engine.links,
        )
    if art.baseline is not None:
        out["fault_impact"] = fault_impact(
            engine, art.baseline, art.merged.tables.collectives, COLLECTIVE_NAMES
        )
    return out


def write_jobs_outputs(
    art: JobsArtifacts,
    out_dir: Path,
    results: dict[str, Any] | None = None,
    plots: bool = True,
    trace_max_spans: int | None = DEFAULT_MAX_SPANS,
) -> dict[str, Any]:
    """Write every output of a several-jobs run into ``out_dir`` (atomically)."""
    results = results if results is not None else jobs_results_dict(art)
    with staged_output(Path(out_dir)) as staging:
        _write_all(art, staging, results, plots, trace_max_spans)
    announce_dropped_spans(Path(out_dir), results)
    return results


def job_summary_lines(results: dict[str, Any]) -> list[str]:
    """One line per job for the terminal."""
    lines = []
    for job in results["jobs"]:
        b = job["breakdown"]
        head = f"job {job['name']:<16} GPUs {job['gpus']:<8} start {job['start_s'] * 1e3:7.3f} ms  "
        if job["iteration_time_s"] is None:  # stopped (--until, a signal) before the job finished
            started = job["end_s"] is not None
            lines.append(head + ("unfinished" if started else "not started") + " when the run stopped")
            continue
        lines.append(
            head + f"iteration {job['iteration_time_s'] * 1e3:9.3f} ms  "
            f"(compute {b['compute_s'] * 1e3:.3f}, exposed comm {b['exposed_comm_s'] * 1e3:.3f}, "
            f"bubble {b['bubble_s'] * 1e3:.3f} ms)"
        )
    return lines


def any_results_dict(artifacts: RunArtifacts | JobsArtifacts) -> dict[str, Any]:
    """results.json of a one-job run or of a several-jobs run."""
    if isinstance(artifacts, JobsArtifacts):
        return jobs_results_dict(artifacts)
    return results_dict(artifacts)


def write_any_outputs(
    artifacts: RunArtifacts | JobsArtifacts,
    out_dir: Path,
    results: dict[str, Any] | None = None,
    plots: bool = True,
    trace_max_spans: int | None = DEFAULT_MAX_SPANS,
) -> dict[str, Any]:
    """Every output of a one-job run or of a several-jobs run (``trace_max_spans``: the cap on
    trace.json spans, None or 0 for none)."""
    from heterosim.report.run_report import write_run_outputs  # noqa: PLC0415

    if isinstance(artifacts, JobsArtifacts):
        return write_jobs_outputs(artifacts, out_dir, results, plots, trace_max_spans)
    return write_run_outputs(artifacts, out_dir, results, plots, trace_max_spans)
