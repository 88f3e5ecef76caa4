"""Phase-sensitive incasts: the accelerated packet modes against the exact run's own spread.

Under DCQCN an incast's outcome depends on the packet phase at the moment a flow joins: moving
one start by a few tens of nanoseconds changes the exact run's marks and completion times by
tens of percent. A single pair of runs therefore cannot show whether a mode agrees with the
exact simulation there. This script runs each scenario under a set of start perturbations
(``--shifts``, nanoseconds added to the joining flow's start) in the exact mode and in each
accelerated mode, and compares the distributions: mean and standard deviation of ECN marks,
CNPs, PFC pauses, the makespan and the largest flow completion time, and the difference of the
means relative to the exact mean with the exact run's own coefficient of variation beside it.

Scenarios:

- ``joining-incast``: the fast-forward test's case (one 100G leaf, five flows, 3 -> 0 joins
  1 -> 0 at 1 ms; ``tests/engine/test_packet_fast_forward.py``), the shift on 3 -> 0.
- ``dcqcn-convergence``: ``workloads/netbench/dcqcn_convergence.yaml`` (four flows join one
  100G port 1 ms apart), the shift on the stagger.

Usage::

    python benchmarks/bench_acceleration_spread.py [--modes fast,fast+memo] [--shifts -90,-37,0,37,90]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from heterosim.config.cluster import parse_cluster  # noqa: E402
from heterosim.config.experiment import NetworkConfig  # noqa: E402
from heterosim.config.scenario import load_scenario  # noqa: E402
from heterosim.engine import packet  # noqa: E402
from heterosim.engine.topology import build_topology  # noqa: E402

MIB = 1 << 20
DEFAULT_SHIFTS = ",".join(str(s) for s in range(-503, 500, 21))  # 48 shifts, +-0.5 us
METRICS = ("ecn_marks", "cnps", "pfc_pause_frames", "makespan_us", "max_fct_us")


def _summary(result: dict) -> dict[str, float]:
    fct = np.asarray(result["flows"]["fct_ns"], dtype=float)
    return {
        "ecn_marks": float(result["counters"]["ecn_marks"]),
        "cnps": float(result["counters"]["cnps"]),
        "pfc_pause_frames": float(result["counters"]["pfc_pause_frames"]),
        "makespan_us": result["sim_end_ns"] / 1e3,
        "max_fct_us": float(fct.max()) / 1e3,
    }


def joining_incast(mode: str, shift_ns: int) -> dict[str, float]:
    topology = build_topology(
        parse_cluster(
            {
                "host_types": {
                    "n": {"gpu": "H100-SXM", "gpus": 1, "fabric": "pcie", "nics": 1, "nic_speed": "100Gbps"}
                },
                "hosts": [{"type": "n", "count": 6}],
                "fabric": {"kind": "fat-tree", "hosts_per_leaf": 6, "link_delay": "1us"},
            },
            "leaf.yaml",
        )
    )
    network = NetworkConfig(
        cc="dcqcn", mtu_bytes=4096, pfc=True, buffer_bytes=32 << 20, ecmp=True, attributes={}
    )
    start = [0, 100_000, 300_000, 200_000, 1_000_000 + shift_ns]
    result = packet.run_flows(
        topology,
        network,
        [0, 2, 1, 0, 3],
        [1, 3, 0, 4, 0],
        [32 * MIB, 16 * MIB, 24 * MIB, 12 * MIB, 4 * MIB],
        start,
        stop_ns=200_000_000,
        acceleration=mode,
    )
    return _summary(result)


def dcqcn_convergence(mode: str, shift_ns: int) -> dict[str, float]:
    scenario = load_scenario(REPO / "workloads/netbench/dcqcn_convergence.yaml")
    topology = build_topology(scenario.cluster)
    stagger = 1_000_000 + shift_ns
    n = 4
    result = packet.run_flows(
        topology,
        scenario.network,
        list(range(n)),
        [4] * n,
        [32 * MIB] * n,
        [i * stagger for i in range(n)],
        stop_ns=40_000_000,
        acceleration=mode,
    )
    return _summary(result)


SCENARIOS: dict[str, Callable[[str, int], dict[str, float]]] = {
    "joining-incast": joining_incast,
    "dcqcn-convergence": dcqcn_convergence,
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modes", default="fast,fast+memo")
    parser.add_argument("--shifts", default=DEFAULT_SHIFTS, help="start shifts in ns, comma-separated")
    parser.add_argument("--only", default="", help="comma-separated scenario names")
    args = parser.parse_args()
    shifts = [int(s) for s in args.shifts.split(",")]
    names = [n for n in args.only.split(",") if n] or list(SCENARIOS)
    modes = ["exact", *[m for m in args.modes.split(",") if m]]
    print(
        f"{len(shifts)} start shifts ({min(shifts)}..{max(shifts)} ns) per scenario and mode; "
        "mean (coefficient of variation); vs exact: difference of the means / exact mean "
        "+- its standard error"
    )
    print("| scenario | mode | " + " | ".join(METRICS) + " |")
    print("|---|---|" + "---:|" * len(METRICS))
    for name in names:
        exact_mean: dict[str, float] = {}
        exact_sd: dict[str, float] = {}
        for mode in modes:
            rows = [SCENARIOS[name](mode, s) for s in shifts]
            cells = []
            for metric in METRICS:
                values = np.array([r[metric] for r in rows])
                mean, sd = values.mean(), values.std(ddof=1)
                cv = sd / max(mean, 1e-12)
                if mode == "exact":
                    exact_mean[metric], exact_sd[metric] = mean, sd
                    cells.append(f"{mean:,.1f} ({cv * 100:.1f} %)")
                    continue
                if not exact_mean[metric]:
                    cells.append(f"{mean:,.1f} ({cv * 100:.1f} %), {'+0.0' if not mean else 'inf'} %")
                    continue
                diff = mean / exact_mean[metric] - 1
                # standard error of the difference of the two means, relative to the exact mean
                se = np.hypot(sd, exact_sd[metric]) / np.sqrt(len(shifts)) / exact_mean[metric]
                cells.append(f"{mean:,.1f} ({cv * 100:.1f} %), {diff * 100:+.1f} +- {se * 100:.1f} %")
            print(f"| {name} | {mode} | " + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
