"""Accelerated packet modes against the exact packet run, on the fidelity cross-check set.

Each (case, mode) runs ``heterosim run`` at packet fidelity in its own process with
``simulation.packet_acceleration`` set to the mode, and every accelerated run is held against
the exact one by the bar of ``compare_packet_runs.py``: iteration time within 1 %, every
collective's duration within 3 %, flow completion time p50/p99 within 5 %, ECN marks and PFC
pause frames within 10 %. CPU seconds are the child process's user + system time.

Usage::

    python benchmarks/bench_packet_acceleration.py                      # every case, every mode
    python benchmarks/bench_packet_acceleration.py --only cc-study-h4 --modes fast
    python benchmarks/bench_packet_acceleration.py --set simulation.collective_granularity=connection

Results go to ``out/bench_packet_acceleration/<case>-<mode>/`` and the table to stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

from bench_fidelity import CASES, CLI, REPO
from compare_packet_runs import compare

MODES = ("exact", "fast", "memo", "fast+memo")


def _child_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_case(name: str, mode: str, extra: list[str], out_root: Path) -> dict:
    """Run one case at packet fidelity in ``mode``; its folder, wall and CPU seconds, or an error."""
    experiment, overrides, _ = CASES[name]
    out = out_root / f"{name}-{mode.replace('+', '-')}"
    cmd = [sys.executable, "-c", CLI, "run", str(REPO / experiment), "--out", str(out)]
    cmd += ["--no-plots", "--quiet", "--set", "simulation.fidelity=packet"]
    cmd += ["--set", f"simulation.packet_acceleration={mode}"]
    for item in overrides + extra:
        cmd += ["--set", item]
    cpu0, start = _child_cpu_s(), time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    wall, cpu = time.perf_counter() - start, _child_cpu_s() - cpu0
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["?"]
        return {"error": tail[0]}
    accel = json.loads((out / "results.json").read_text())["sim"].get("packet_acceleration", {})
    return {"dir": out, "wall_s": wall, "cpu_s": cpu, "accel": accel}


def _rel(other: float, exact: float) -> float:
    return 0.0 if other == exact else (other / exact - 1 if exact else float("inf"))


def verdict(c: dict[str, float]) -> str:
    """Which of the issue's bars an accelerated run misses ('meets the bar' when none)."""
    missed = []
    if abs(c["iteration_rel"]) > 0.01:
        missed.append("iteration")
    if c["collectives_over_3pct"] > 0:
        missed.append(f"{c['collectives_over_3pct']:.0f} collectives")
    if max(abs(c["fct_p50_rel"]), abs(c["fct_p99_rel"])) > 0.05:
        missed.append("FCT")
    if abs(_rel(c["ecn_marks_other"], c["ecn_marks_exact"])) > 0.10:
        missed.append("marks")
    if abs(_rel(c["pfc_pause_frames_other"], c["pfc_pause_frames_exact"])) > 0.10:
        missed.append("pauses")
    return "meets the bar" if not missed else "misses: " + ", ".join(missed)


def _accel_summary(accel: dict) -> str:
    parts = []
    if "time_share" in accel:
        parts.append(f"{accel['time_share'] * 100:.1f} % of time skipped ({accel.get('episodes', 0)} skips)")
    memo = accel.get("memo") or {}
    if memo:
        parts.append(f"memo {memo.get('hits', 0)}/{memo.get('lookups', 0)}")
    return ", ".join(parts) or "-"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated case names")
    parser.add_argument("--modes", default=",".join(MODES[1:]), help="accelerated modes to run")
    parser.add_argument("--set", action="append", default=[], help="extra override for every run")
    parser.add_argument("--out", default=str(REPO / "out" / "bench_packet_acceleration"))
    args = parser.parse_args()
    names = [n for n in args.only.split(",") if n] or list(CASES)
    modes = [m for m in args.modes.split(",") if m]
    bad = [n for n in names if n not in CASES] + [m for m in modes if m not in MODES[1:]]
    if bad:
        print(f"bench_packet_acceleration: unknown case or mode: {', '.join(bad)}", file=sys.stderr)
        return 2
    out_root = Path(args.out)
    print(
        "| case | mode | iteration ms | vs exact | collectives over 3 % (largest) | FCT p50 / p99 "
        "| ECN marks | PFC pauses | events | CPU s | acceleration | verdict |"
    )
    print("|---|---|---:|---:|---|---|---:|---:|---:|---:|---|---|")
    for name in names:
        exact = run_case(name, "exact", args.set, out_root)
        if "error" in exact:
            print(f"| {name} | exact | {exact['error']} | | | | | | | | | |", flush=True)
            continue
        for mode in ["exact", *modes]:
            run = exact if mode == "exact" else run_case(name, mode, args.set, out_root)
            if "error" in run:
                print(f"| {name} | {mode} | {run['error']} | | | | | | | | | |", flush=True)
                continue
            c = compare(exact["dir"], run["dir"])
            print(
                f"| {name} | {mode} | {c['iteration_other_ms']:.3f} | {c['iteration_rel'] * 100:+.3f} % "
                f"| {c['collectives_over_3pct']:.0f} of {c['collectives']:.0f} "
                f"({c['collective_max_rel'] * 100:.2f} %) "
                f"| {c['fct_p50_rel'] * 100:+.2f} / {c['fct_p99_rel'] * 100:+.2f} % "
                f"| {c['ecn_marks_other']:,.0f} | {c['pfc_pause_frames_other']:,.0f} "
                f"| {c['events_other']:,.0f} | {run['cpu_s']:.1f} | {_accel_summary(run['accel'])} "
                f"| {'reference' if mode == 'exact' else verdict(c)} |",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
