"""Run fuzz cases through the fork server and judge each against the promise for bad input."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from corpus import Case

FORKSERVER = Path(__file__).with_name("forkserver.py")
REPO = Path(__file__).resolve().parents[2]
MEMORY_LIMIT = 2 << 30  # RLIMIT_AS of every case: no process above 2 GiB on bad input
NOISE = ("heterosim: note:", "heterosim: warning:", "  simulated ")


@dataclass
class Outcome:
    case: Case
    status: int
    stdout: str
    stderr: str
    wall_s: float
    timed_out: bool
    problems: list[str]


class Runner:
    """One warm fork server; ``run(case, folder)`` -> Outcome."""

    def __init__(self) -> None:
        env = dict(os.environ, PYTHONPATH=f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
        self.process = subprocess.Popen(
            [sys.executable, str(FORKSERVER)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=REPO,
            env=env,
        )

    def close(self) -> None:
        if self.process.stdin:
            self.process.stdin.close()
        self.process.wait(timeout=30)

    def run(self, case: Case, folder: Path) -> Outcome:
        _materialise(case, folder)
        before = _snapshot(folder)
        request = {
            "argv": case.argv,
            "cwd": str(folder),
            "timeout_s": case.timeout_s,
            "memory_bytes": MEMORY_LIMIT,
        }
        assert self.process.stdin and self.process.stdout
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        answer = json.loads(self.process.stdout.readline())
        outcome = Outcome(
            case,
            answer["status"],
            answer["stdout"],
            answer["stderr"],
            answer["wall_s"],
            answer["timed_out"],
            [],
        )
        outcome.problems = judge(outcome, folder, before)
        return outcome


def _materialise(case: Case, folder: Path) -> None:
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    for name, content in case.files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
    for name in case.fifos:
        os.mkfifo(folder / name)
    for name in case.folders:
        (folder / name).mkdir(parents=True, exist_ok=True)


def _snapshot(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


def judge(outcome: Outcome, folder: Path, before: set[str]) -> list[str]:
    """Everything this outcome does against the promise (empty: it kept it)."""
    case, problems = outcome.case, []
    if outcome.timed_out:
        return [f"hang: killed after {case.timeout_s:.0f} s"]
    if outcome.status == 99 or "Traceback (most recent call last)" in outcome.stderr:
        problems.append("traceback")
    if outcome.status < 0:
        problems.append(f"crash: signal {-outcome.status}")
    allowed = {2} if case.strict else {0, 1, 2}
    if outcome.status not in allowed and outcome.status != 99:
        problems.append(f"exit status {outcome.status}, expected {sorted(allowed)}")
    if outcome.status == 2:
        lines = [ln for ln in outcome.stderr.splitlines() if ln.strip() and not ln.startswith(NOISE)]
        if len(lines) != 1 or ": error: " not in lines[0]:
            problems.append(f"{len(lines)} error lines: {lines[:3]}")
        if case.out and (folder / case.out).exists() and case.out not in before:
            problems.append(f"partial output left in {case.out}")
    for name, text in case.keep.items():
        path = folder / name
        if not path.is_file() or path.read_text() != text:
            problems.append(f"user file {name} changed or lost")
    stages = [p for p in _snapshot(folder) if ".heterosim-stage-" in p]
    if stages:
        problems.append(f"staging folder left: {stages[0]}")
    return problems


def run_cases(cases: list[Case], workdir: Path) -> list[Outcome]:
    """Every case in its own folder under ``workdir``, one fork server for all."""
    runner = Runner()
    try:
        return [runner.run(case, workdir / case.name) for case in cases]
    finally:
        runner.close()


def summary(outcomes: list[Outcome]) -> dict[str, int]:
    """Counts for benchmarks/README.md: cases, clean errors, clean runs, and each kind of failure."""
    counts = {
        "cases": len(outcomes),
        "exit 2, one line": 0,
        "ran cleanly (valid input)": 0,
        "tracebacks": 0,
        "crashes": 0,
        "hangs": 0,
        "other failures": 0,
    }
    for outcome in outcomes:
        text = " ".join(outcome.problems)
        if not outcome.problems:
            key = "exit 2, one line" if outcome.status == 2 else "ran cleanly (valid input)"
        elif "traceback" in text:
            key = "tracebacks"
        elif "crash" in text:
            key = "crashes"
        elif "hang" in text:
            key = "hangs"
        else:
            key = "other failures"
        counts[key] += 1
    return counts


def main() -> None:
    import argparse
    import tempfile
    import time

    from corpus import Generator

    parser = argparse.ArgumentParser(description="run the fuzz corpus by hand and print the counts")
    parser.add_argument("--seed", type=int, default=17)
    parser.add_argument("--count", type=int, default=500)
    args = parser.parse_args()
    cases = Generator(args.seed).cases(args.count)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="hsfuzz-") as workdir:
        outcomes = run_cases(cases, Path(workdir))
    for outcome in outcomes:
        if outcome.problems:
            print(
                f"FAIL {outcome.case.name}: {'; '.join(outcome.problems)}\n  argv: "
                f"{outcome.case.argv}\n  stderr: {outcome.stderr.strip()[-600:]}"
            )
    slowest = max(outcomes, key=lambda o: o.wall_s)
    print(json.dumps(summary(outcomes), indent=1))
    print(f"wall {time.monotonic() - started:.0f} s; slowest case {slowest.case.name} {slowest.wall_s:.1f} s")


if __name__ == "__main__":
    main()
