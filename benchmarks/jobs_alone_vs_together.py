"""Each job of a several-jobs experiment alone on the cluster, then all of them together.

    python3 benchmarks/jobs_alone_vs_together.py workloads/examples/two_jobs_h4.yaml [--fidelity flow]
        [--set KEY=VALUE ...] [--out DIR]

Prints, per job, its iteration time alone and together and the slowdown sharing the fabric
causes it, plus the busiest fabric links of the shared run (where the jobs meet). With --out,
each run's full outputs go to DIR/together and DIR/alone-<job>.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from heterosim.config.jobs import JobsExperiment, load_any_experiment, solo_experiment
from heterosim.errors import UserError
from heterosim.report.jobs_report import jobs_results_dict, write_jobs_outputs
from heterosim.simulate import run_jobs


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("experiment")
    parser.add_argument("--fidelity", choices=("packet", "flow"))
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    parser.add_argument("--out", help="write each run's outputs under this folder")
    args = parser.parse_args()
    overrides = list(args.overrides) + ([f"simulation.fidelity={args.fidelity}"] if args.fidelity else [])
    experiment = load_any_experiment(args.experiment, overrides)
    if not isinstance(experiment, JobsExperiment):
        raise UserError(f"{args.experiment}: not an experiment of several jobs (no jobs:)")
    runs = {"together": experiment}
    for j, job in enumerate(experiment.jobs):
        runs[f"alone-{job.name}"] = solo_experiment(experiment, j)
    results = {}
    for label, exp in runs.items():
        started = time.perf_counter()
        art = run_jobs(exp)
        results[label] = jobs_results_dict(art)
        if args.out:
            write_jobs_outputs(art, Path(args.out) / label, results[label], plots=False)
        wall = time.perf_counter() - started
        print(f"{label}: {wall:.1f} s wall, {results[label]['sim']['events']} events", file=sys.stderr)
    together = results["together"]
    print(f"{experiment.name}, {experiment.simulation.fidelity} fidelity, seed {experiment.simulation.seed}")
    print(
        f"{'job':<12} {'GPUs':<24} {'alone (ms)':>11} {'together (ms)':>14} {'slowdown':>9} "
        f"{'bytes alone = together':>23}"
    )
    for j, job in enumerate(experiment.jobs):
        alone = results[f"alone-{job.name}"]["jobs"][0]
        shared = together["jobs"][j]
        same = alone["network"]["bytes"] == shared["network"]["bytes"]
        ratio = shared["iteration_time_s"] / alone["iteration_time_s"]
        print(
            f"{job.name:<12} {shared['gpus']:<24} {alone['iteration_time_s'] * 1e3:11.3f} "
            f"{shared['iteration_time_s'] * 1e3:14.3f} {ratio:9.3f} {str(same):>23}"
        )
    net = together["network"]
    print(
        f"together: {net['flows']} flows, {net['bytes'] / 2**30:.3f} GiB, drops {net['drops']}, "
        f"pauses {net['pfc_pause_frames']}, ECN marks {net['ecn_marks']}, CNPs {net['cnps']}; "
        f"all jobs done at {together['makespan_s'] * 1e3:.3f} ms"
    )
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
