"""Fidelity cross-check: the same experiments in packet and in flow fidelity, side by side.

Each (experiment, fidelity) runs ``heterosim run`` in its own process (so the packet network's
memory and time are measured alone) and the two results.json files are compared: iteration time,
exposed communication, and what only the packet model sees (PFC pause frames, ECN marks, CNPs,
drops, retransmits). The difference says where the fluid model (max-min fair rates, no queues,
no congestion control) can stand in for the packet one.

Usage::

    python benchmarks/bench_fidelity.py                 # every case below, Markdown table
    python benchmarks/bench_fidelity.py --only default,tiny-100g
    python benchmarks/bench_fidelity.py --set simulation.collective_granularity=connection

Results go to ``out/bench_fidelity/<case>-<fidelity>/`` and the table to stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CLI = "from heterosim.cli import main; raise SystemExit(main())"

# name -> (experiment file, overrides, what it exercises)
CASES: dict[str, tuple[str, list[str], str]] = {
    "tiny-100g": (
        "workloads/compare/tiny_4gpu.yaml",
        [],
        "DP all-reduce over one 100G NIC per host, 2 hosts",
    ),
    "tiny-400g": ("workloads/compare/tiny_4gpu_400g.yaml", [], "same at 400G"),
    "default": ("workloads/default.yaml", [], "GPT-3 350M TP4 PP2 DP2, H100 + A100 hosts, 16 GPUs"),
    "topology-ab-h0": (
        "workloads/examples/topology_ab.yaml",
        [],
        "DP4 x TP8 on a non-blocking rail-optimised 32-GPU slice",
    ),
    "topology-ab-h4": (
        "workloads/examples/topology_ab.yaml",
        ["cluster=../../topologies/h4_32gpu.yaml"],
        "same on 4:1 oversubscribed leaves with mixed 400G/200G NICs",
    ),
    "cc-study-h4": (
        "workloads/examples/cc_study_h4.yaml",
        [],
        "DP4 x TP8 on H4 (oversubscribed, mixed NIC speeds), DCQCN",
    ),
}


def run_one(name: str, fidelity: str, extra: list[str], out_root: Path) -> dict:
    experiment, overrides, _ = CASES[name]
    out = out_root / f"{name}-{fidelity}"
    cmd = [
        sys.executable,
        "-c",
        CLI,
        "run",
        str(REPO / experiment),
        "--out",
        str(out),
        "--no-plots",
        "--quiet",
        "--set",
        f"simulation.fidelity={fidelity}",
    ]
    for item in overrides + extra:
        cmd += ["--set", item]
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["?"]
        return {"error": tail[0], "wall_s": wall}
    res = json.loads((out / "results.json").read_text())
    return {
        "wall_s": wall,
        "iteration_s": res["iteration_time_s"],
        "exposed_comm_s": res["breakdown"]["exposed_comm_s"],
        "network": res["network"],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated case names")
    parser.add_argument("--set", action="append", default=[], help="extra override for every run")
    parser.add_argument("--out", default=str(REPO / "out" / "bench_fidelity"))
    args = parser.parse_args()
    names = [n for n in args.only.split(",") if n] or list(CASES)
    unknown = [n for n in names if n not in CASES]
    if unknown:
        print(
            f"bench_fidelity: --only: unknown case(s) {', '.join(unknown)}; known: {', '.join(CASES)}",
            file=sys.stderr,
        )
        return 2
    out_root = Path(args.out)
    rows = []
    for name in names:
        flow = run_one(name, "flow", args.set, out_root)
        packet = run_one(name, "packet", args.set, out_root)
        rows.append((name, flow, packet))
        print(
            f"# {name}: flow {flow.get('iteration_s', flow.get('error'))} / "
            f"packet {packet.get('iteration_s', packet.get('error'))}",
            file=sys.stderr,
            flush=True,
        )
    print(
        "| case | what | flow iteration ms | packet iteration ms | packet / flow | exposed comm ms "
        "flow / packet | pauses | ECN marks | CNPs | drops | wall s flow / packet |"
    )
    print("|---|---|---:|---:|---:|---|---:|---:|---:|---:|---|")
    for name, flow, packet in rows:
        what = CASES[name][2]
        if "error" in flow or "error" in packet:
            print(
                f"| {name} | {what} | {flow.get('error', '')} | {packet.get('error', '')} "
                "| - | - | - | - | - | - | - |"
            )
            continue
        net = packet["network"]
        print(
            f"| {name} | {what} | {flow['iteration_s'] * 1e3:.3f} | {packet['iteration_s'] * 1e3:.3f} "
            f"| {packet['iteration_s'] / flow['iteration_s']:.3f} "
            f"| {flow['exposed_comm_s'] * 1e3:.3f} / {packet['exposed_comm_s'] * 1e3:.3f} "
            f"| {net['pfc_pause_frames']} | {net['ecn_marks']} | {net['cnps']} | {net['drops']} "
            f"| {flow['wall_s']:.1f} / {packet['wall_s']:.1f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
