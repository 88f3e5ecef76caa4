"""Simulator speed at scale: wall time, CPU time, events/s and peak memory of ``heterosim run``.

Each case runs in a fresh process under an address-space limit (``--mem-gb``, default 9) so that
a case too big for the machine fails on its own instead of starving other jobs; such a case is
reported as ``memory limit`` with the plan size reached so far. Stages are those of
:func:`heterosim.simulate.run_experiment` and the run report:

* workload + plan (``prepare_run``: traces, compute timing, collective decomposition, plan arrays;
  wall time split as ``prepare_run`` records it, CPU time for both together);
* engine (``execute_plan``: the C++ plan executor on the fluid or packet network);
* report (``results_dict`` + ``write_run_outputs`` without plots).

Usage::

    python benchmarks/bench_scale.py                      # the table of benchmarks/README.md
    python benchmarks/bench_scale.py --only gpus          # one group: experiments|gpus|bytes|ring|events
    python benchmarks/bench_scale.py --case workloads/simai/gpt3_175b_tp8_pp8.yaml \\
        --set training.global_batch=16 --fidelity flow   # one experiment
    python benchmarks/bench_scale.py --only gpus --granularity connection   # coarser collectives
    python benchmarks/bench_scale.py --only granularity   # chunk vs connection at 128-1024 GPUs
    python benchmarks/bench_scale.py --only published --mem-gb 16   # Llama 3 405B / 175B up to 16,384 GPUs
    python benchmarks/bench_scale.py --only published-packet --as-run --mem-gb 16 \
        --set simulation.packet_acceleration=fast+memo
    python benchmarks/bench_scale.py --only published-folded --mem-gb 16   # one replica, DP folded
    python benchmarks/bench_scale.py --only published-folded-packet --as-run --mem-gb 16   # the same, packet

``--granularity`` sets ``simulation.collective_granularity`` for every case that does not set it
itself (default: the experiment's, i.e. chunk).

The machine is shared: CPU seconds are the fairer figure, wall seconds are what a user waits.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SIMAI = REPO / "workloads" / "simai"


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _cluster_file(gpus: int, folder: Path) -> Path:
    """The H0 preset (DGX-H100-like hosts, 8 x 400G rails, non-blocking) with gpus / 8 hosts."""
    hosts = max(1, gpus // 8)
    path = folder / f"h0_{gpus}gpu.yaml"
    path.write_text(
        f"name: h0-{gpus}gpu\n"
        "host_types:\n"
        "  h100: {gpu: H100-SXM, gpus: 8, fabric: nvswitch, nics: 8, nic_speed: 400Gbps}\n"
        f"hosts:\n  - {{type: h100, count: {hosts}}}\n"
        "fabric: {kind: rail-optimized, link_delay: 1us, oversubscription: 1, "
        f"spine_speed: 400Gbps, hosts_per_leaf: {min(hosts, 32)}}}\n"
    )
    return path


def run_case(
    experiment: str, overrides: list[str], fidelity: str, cluster_gpus: int = 0, as_run: bool = False
) -> dict:
    """One experiment in this process: stage times, events, plan size, peak RSS."""
    from heterosim.config.experiment import load_experiment
    from heterosim.engine import native
    from heterosim.engine.executor import engine_config, execute_plan
    from heterosim.plan.execution_plan import FLOW
    from heterosim.report.run_report import results_dict, write_run_outputs
    from heterosim.simulate import RunArtifacts, prepare_run

    native.load()
    with tempfile.TemporaryDirectory() as tmp:
        extra = [f"cluster={_cluster_file(cluster_gpus, Path(tmp))}"] if cluster_gpus else []
        exp = load_experiment(REPO / experiment, [*overrides, *extra, f"simulation.fidelity={fidelity}"])
        row: dict = {
            "experiment": experiment,
            "overrides": overrides,
            "fidelity": fidelity,
            "gpus": exp.cluster.world_size,
            "cluster": exp.cluster.name,
            "granularity": exp.simulation.collective_granularity,
        }
        c0 = time.process_time()
        prepared = prepare_run(exp)
        plan, topology, stage = prepared.tables.plan, prepared.topology, prepared.stage_wall_s
        flows = plan.kind == FLOW
        row.update(
            workload_wall_s=stage["workload_s"],
            plan_wall_s=stage["plan_s"],
            build_cpu_s=time.process_time() - c0,
            tasks=len(plan),
            flows=int(flows.sum()),
            flow_bytes=int(plan.bytes[flows].sum()),
            rss_after_plan_mb=_rss_mb(),
        )
        print(json.dumps({"progress": row}), flush=True)
        c1 = time.process_time()
        simulation = engine_config(fidelity=fidelity, seed=exp.simulation.seed)
        if as_run:  # the experiment's simulation settings (sampling included), as heterosim run
            simulation = exp.simulation
        engine = execute_plan(plan, topology, exp.network, simulation)
        row.update(
            engine_wall_s=engine.wall_s,
            engine_cpu_s=time.process_time() - c1,
            events=engine.events,
            simulated_s=engine.makespan_ns * 1e-9,
            rss_after_engine_mb=_rss_mb(),
        )
        stage["engine_s"] = engine.wall_s
        c2 = time.process_time()
        t2 = time.perf_counter()
        artifacts = RunArtifacts.from_prepared(exp, prepared, engine)
        results = results_dict(artifacts)
        write_run_outputs(artifacts, Path(tmp) / "out", results, plots=False)
        row.update(
            report_wall_s=time.perf_counter() - t2,
            report_cpu_s=time.process_time() - c2,
            peak_rss_mb=_rss_mb(),
            iteration_s=results["iteration_time_s"],
        )
    return row


def run_ring(gpus: int, size_bytes: int) -> dict:
    """Plain 1-channel ring all-reduce through the fluid model (bench_flow_model's plan)."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    from bench_flow_model import NETWORK, ring_allreduce_plan

    from heterosim.config.cluster import load_cluster
    from heterosim.engine import native
    from heterosim.engine.executor import engine_config, execute_plan
    from heterosim.engine.topology import build_topology

    native.load()
    with tempfile.TemporaryDirectory() as tmp:
        topo = build_topology(load_cluster(_cluster_file(gpus, Path(tmp))))
    plan = ring_allreduce_plan(gpus, size_bytes, 1)
    c0 = time.process_time()
    result = execute_plan(plan, topo, NETWORK, engine_config("flow"))
    return {
        "experiment": f"ring all-reduce {size_bytes >> 20} MiB",
        "gpus": gpus,
        "fidelity": "flow",
        "tasks": len(plan),
        "flows": len(plan),
        "flow_bytes": int(plan.bytes.sum()),
        "engine_wall_s": result.wall_s,
        "engine_cpu_s": time.process_time() - c0,
        "events": result.events,
        "simulated_s": result.makespan_ns * 1e-9,
        "peak_rss_mb": _rss_mb(),
    }


def run_events(n_events: int) -> dict:
    """ns-3's own event rate (bare Schedule loop) and the packet model's, in one process."""
    import numpy as np

    from heterosim.engine import native

    gbl = native.load()
    import cppyy

    cppyy.include(str(REPO / "benchmarks" / "scheduler_benchmark.cc"))  # not in the library
    rows = {}
    for in_flight in (64, 4096):
        wall, cpu = np.zeros(1), np.zeros(1)
        ran = int(gbl.ns3.RunSchedulerBenchmark(n_events, in_flight, wall, cpu))
        rows[f"bare_{in_flight}"] = {"events": ran, "wall_s": float(wall[0]), "cpu_s": float(cpu[0])}
    out = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "bench_packet.py"), "--size", "16MiB"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return {"experiment": "event rates", "bare": rows, "packet_incast": out.strip()}


CASES = {
    "experiments": [
        ("workloads/simai/gpt3_13b_tp2.yaml", [], "flow", 0),
        ("workloads/simai/gpt3_13b_tp2.yaml", ["cluster=../../topologies/h2_128gpu.yaml"], "flow", 0),
        ("workloads/simai/gpt3_175b_tp8_pp8.yaml", [], "flow", 0),
        ("workloads/simai/gpt3_175b_tp8_pp8.yaml", ["cluster=../../topologies/h2_128gpu.yaml"], "flow", 0),
        ("workloads/simai/gpt3_175b_tp8_pp8.yaml", [], "packet", 0),
        (
            "workloads/simai/gpt3_175b_tp8_pp8.yaml",
            ["cluster=../../topologies/h0_1024gpu.yaml", "parallel.dp=16", "training.global_batch=32"],
            "flow",
            0,
        ),
    ],
    # GPT-3 175B TP8 PP8, two micro-batches per replica, DP = GPUs / 64 (16 GPUs: TP8 PP2, which does
    # not fit in memory: the check only warns, since speed, not feasibility, is measured here)
    "gpus": [
        (
            "workloads/simai/gpt3_175b_tp8_pp8.yaml",
            [
                f"parallel.pp={max(1, min(8, g // 8))}",
                f"parallel.dp={max(1, g // 64)}",
                f"training.global_batch={2 * max(1, g // 64)}",
                "simulation.memory_check=warn",
            ],
            "flow",
            g,
        )
        for g in (16, 64, 128, 512, 1024)
    ],
    # bytes simulated: GPT-3 175B on H0 128 with more micro-batches (pipeline traffic grows)
    "bytes": [
        ("workloads/simai/gpt3_175b_tp8_pp8.yaml", [f"training.global_batch={b}"], "flow", 0)
        for b in (4, 16, 64)
    ],
    # simulation.collective_granularity: chunk vs connection (README "Simulator speed at scale")
    "granularity": [
        ("workloads/simai/gpt3_175b_tp8_pp8.yaml", [f"simulation.collective_granularity={g}"], "flow", 0)
        for g in ("chunk", "connection")
    ]
    + [
        ("workloads/simai/gpt3_13b_tp2.yaml", [*c, "simulation.collective_granularity=connection"], "flow", 0)
        for c in ([], ["cluster=../../topologies/h2_128gpu.yaml"])
    ]
    + [
        (
            "workloads/simai/gpt3_175b_tp8_pp8.yaml",
            [
                "cluster=../../topologies/h0_1024gpu.yaml",
                "parallel.dp=16",
                "training.global_batch=32",
                "simulation.collective_granularity=connection",
            ],
            "flow",
            0,
        )
    ],
}


# The published large runs (workloads/examples/llama3_405b_16k.yaml: Llama 3 405B, TP 8 PP 16, 16
# micro-batches per replica, 8K sequence; megascale_175b_12k.yaml: 175B, TP 8 PP 8, 32 micro-batches
# per replica, 2K sequence) and their slices: the same replica (every stage, every micro-batch) on
# fewer data-parallel replicas of an H0 cluster of that size. Flow fidelity, connection
# granularity (the files' setting).
LLAMA405 = "workloads/examples/llama3_405b_16k.yaml"
MEGASCALE = "workloads/examples/megascale_175b_12k.yaml"


def _slice(
    experiment: str, replica_gpus: int, micro_batches: int, gpus: int, fidelity: str = "flow"
) -> tuple:
    dp = gpus // replica_gpus
    return (experiment, [f"parallel.dp={dp}", f"training.global_batch={dp * micro_batches}"], fidelity, gpus)


CASES["published"] = [
    *(_slice(LLAMA405, 128, 16, g) for g in (1024, 2048, 4096, 8192, 16384)),
    *(_slice(MEGASCALE, 64, 32, g) for g in (768, 1536, 3072, 6144, 12288)),
]
# The same with simulation.replicas=fold (heterosim/plan/fold.py): one replica simulated, its
# data-parallel collectives timed on the full fabric; the slices' full runs above are the check
CASES["published-folded"] = [(e, [*o, "simulation.replicas=fold"], f, g) for e, o, f, g in CASES["published"]]
# Packet fidelity, folded (run with --as-run): the folded collectives timed on one of each set of
# interchangeable groups (simulation.fold_timing=representative, heterosim/simulate/fold_symmetry.py);
# 256 MiB switch buffers (the 32 MiB default leaves no shared buffer at the 384- and 512-port
# spines once PFC headroom and per-port reserves are set aside), NVLink at flow level, no sampling
PACKET_FOLDED = [
    "simulation.replicas=fold",
    "simulation.fold_timing=representative",
    "simulation.packet_acceleration=fast+memo",
    "simulation.intra_host=flow",
    "simulation.sample_interval=0us",
    "network.buffer=256MiB",
]
CASES["published-folded-packet"] = [
    (e, [*o, *PACKET_FOLDED], f, g)
    for e, o, f, g in (
        *(_slice(LLAMA405, 128, 16, g, "packet") for g in (1024, 2048, 4096, 16384)),
        *(_slice(MEGASCALE, 64, 32, g, "packet") for g in (768, 1536, 12288)),
    )
]
# Packet slices (run with --as-run --set simulation.packet_acceleration=exact|fast|fast+memo): one
# Llama 3 405B pipeline replica (128 GPUs), two and eight, NVLink at flow level, no link sampling (the
# benchmarks/README.md rows; their agreement: heterosim run + compare_packet_runs.py).
CASES["published-packet"] = [
    (e, [*o, "simulation.intra_host=flow", "simulation.sample_interval=0us"], f, g)
    for e, o, f, g in (_slice(LLAMA405, 128, 16, g, "packet") for g in (128, 256, 1024))
]


def _child(args: argparse.Namespace) -> None:
    if args.mem_gb > 0:
        limit = int(args.mem_gb * (1 << 30))
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    spec = json.loads(args.child)
    kind = spec.pop("kind")
    try:
        row = {"case": run_case, "ring": run_ring, "events": run_events}[kind](**spec)
    except MemoryError:
        row = {"error": f"memory limit ({args.mem_gb} GB address space)"}
    print(json.dumps({"result": row}), flush=True)


def _spawn(spec: dict, mem_gb: float) -> dict:
    cmd = [sys.executable, __file__, "--child", json.dumps(spec), "--mem-gb", str(mem_gb)]
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    row: dict = {}
    for line in proc.stdout.splitlines():
        if line.startswith("{"):
            message = json.loads(line)
            row.update(message.get("progress", {}))
            row.update(message.get("result", {}))
    if proc.returncode != 0 and "error" not in row:
        tail = (proc.stderr.strip().splitlines() or ["?"])[-1]
        row["error"] = f"exit {proc.returncode}: {tail[:160]}"
    return {**spec, **row}


def _print(row: dict) -> None:
    if row.get("experiment") == "event rates":
        for name, r in row["bare"].items():
            print(
                f"ns-3 bare Schedule loop ({name}): {r['events'] / r['wall_s'] / 1e6:.2f} M events/s wall, "
                f"{r['events'] / max(r['cpu_s'], 1e-9) / 1e6:.2f} M events/s CPU"
            )
        print(row["packet_incast"])
        return
    name = Path(str(row.get("experiment", ""))).stem
    sets = " ".join(row.get("overrides", []) or [])
    cells = [
        f"{name} {sets}".strip(),
        str(row.get("gpus", "")),
        row.get("fidelity", ""),
        row.get("granularity", "-"),
        f"{row.get('tasks', 0):,}",
        f"{row.get('flows', 0):,}",
        f"{row.get('flow_bytes', 0) / 2**30:,.1f}",
    ]
    for key in (
        "workload_wall_s",
        "plan_wall_s",
        "build_cpu_s",
        "engine_wall_s",
        "engine_cpu_s",
        "report_wall_s",
    ):
        cells.append(f"{row[key]:.1f}" if key in row else "-")
    events = row.get("events")
    cells.append(f"{events:,}" if events else "-")
    cells.append(f"{events / row['engine_cpu_s'] / 1e6:.2f}" if events and row.get("engine_cpu_s") else "-")
    cells.append(f"{row['simulated_s'] * 1e3:.1f}" if "simulated_s" in row else "-")
    cells.append(f"{row.get('peak_rss_mb', row.get('rss_after_plan_mb', 0)):.0f}")
    cells.append(row.get("error", ""))
    print("| " + " | ".join(cells) + " |", flush=True)


HEADER = (
    "| case | GPUs | fidelity | granularity | tasks | flows | GiB moved | workload s | plan s "
    "| build CPU s | engine s | engine CPU s | report s | events | M events/CPU-s | simulated ms "
    "| peak RSS MB | note |"
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=[*CASES, "ring", "events"], action="append")
    parser.add_argument("--case", help="one experiment YAML (path relative to the repository)")
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    parser.add_argument("--fidelity", default="flow", choices=("flow", "packet"))
    parser.add_argument("--gpus", type=int, default=0, help="with --case: an H0 cluster of this size")
    parser.add_argument(
        "--granularity",
        choices=("chunk", "step", "connection"),
        help="simulation.collective_granularity for cases that do not set it",
    )
    parser.add_argument("--mem-gb", type=float, default=9.0, help="address-space limit per case")
    parser.add_argument(
        "--as-run",
        action="store_true",
        help="run the engine with the experiment's simulation settings (link and queue sampling "
        "every simulation.sample_interval), as heterosim run does; default: no sampling",
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args)
        return
    if args.case:
        specs = [
            {
                "kind": "case",
                "experiment": args.case,
                "overrides": args.overrides,
                "fidelity": args.fidelity,
                "cluster_gpus": args.gpus,
                "as_run": args.as_run,
            }
        ]
    else:
        default = [g for g in CASES if not g.startswith("published")]
        groups = args.only or [*default, "ring", "events"]
        specs = []
        for group in groups:
            if group == "ring":
                specs += [{"kind": "ring", "gpus": g, "size_bytes": 1 << 30} for g in (128, 1024)]
            elif group == "events":
                specs.append({"kind": "events", "n_events": 5_000_000})
            else:
                specs += [
                    {
                        "kind": "case",
                        "experiment": e,
                        "overrides": [*o, *args.overrides],
                        "fidelity": f,
                        "cluster_gpus": g,
                        "as_run": args.as_run,
                    }
                    for e, o, f, g in CASES[group]
                ]
    if args.granularity:
        for spec in specs:
            sets = spec.get("overrides")
            if sets is not None and not any(o.startswith("simulation.collective_granularity=") for o in sets):
                spec["overrides"] = [*sets, f"simulation.collective_granularity={args.granularity}"]
    print(HEADER)
    print("|" + "---|" * (HEADER.count("|") - 1))
    for spec in specs:
        _print(_spawn(spec, args.mem_gb))


if __name__ == "__main__":
    main()
