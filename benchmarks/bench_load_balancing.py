"""Load balancing and reordering-tolerant transport: FCT slowdowns on the leaf-to-leaf permutation.

Usage: python benchmarks/bench_load_balancing.py [--seeds 1,2,3] [--fidelity packet|flow|both] [--only TEXT]

Runs workloads/netbench/lb_*_permutation.yaml (8 flows of 8 MiB, two leaves joined by four
100 Gb/s spines, DCQCN, PFC on) under each load-balancing mode and the same permutation with the
Ultra Ethernet transport over ECMP switches (uet_permutation.yaml: NSCC, PFC off); the 4-to-1
incast with RoCE + DCQCN + PFC (pfc_on_small_buffer.yaml with cc dcqcn) and on a lossy fabric
under go-back-N, IRN and UET + NSCC (pfc_off_small_buffer.yaml, irn_lossy_incast.yaml,
uet_lossy_incast.yaml); the incast shares one 100 Gb/s link, so its slowdowns are 4 at best.
UET with packet trimming (network.trimming: true) runs the permutation and the incast, the
latter also with a 100 KB buffer (below four initial NSCC windows) with and without trimming,
and both with UET's receiver credits instead of NSCC (network.cc: rccc). q KB: the time-weighted
mean data queue of the busiest port.
A flow's slowdown is its
FCT over its ideal one: its bytes in frames (1 KiB payload + 82 B) at the 100 Gb/s line rate,
which is what a max-min share over all four equal-cost paths gives every flow of the
permutation. Packet fidelity, every frame simulated; ``--fidelity flow`` runs the fluid model
instead (spraying and UET split every flow evenly over the four spines; the variants it refuses,
adaptive routing, flowlets and spraying over go-back-N, print its one-line refusal), ``both``
prints the two side by side.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from heterosim.config.scenario import load_scenario
from heterosim.errors import UserError
from heterosim.simulate.flowset import simulate_flow_set

NETBENCH = Path(__file__).resolve().parents[1] / "workloads" / "netbench"
LINE_RATE_BPS = 100e9
FRAME_OVERHEAD_BYTES = 82  # RoCEv2 headers + preamble/IFG per data packet (rdma-nic.h)
MTU_BYTES = 1024
SPRAY_TOLERANT = ["network.attributes.RdmaNic::SackReorderThreshold=512"]
TRIMMING = "network.trimming=true"
SMALL_BUFFER = ["network.buffer=100KB"]  # below four initial NSCC windows: the incast overflows
VARIANTS = (
    ("ecmp", "lb_ecmp_permutation.yaml", []),
    ("flowlet", "lb_flowlet_permutation.yaml", []),
    ("adaptive_flowlet", "lb_adaptive_permutation.yaml", ["network.load_balancing=adaptive_flowlet"]),
    ("adaptive", "lb_adaptive_permutation.yaml", []),
    ("spray (irn, reorder threshold 3)", "lb_spray_permutation.yaml", []),
    ("spray (irn, threshold 512)", "lb_spray_permutation.yaml", SPRAY_TOLERANT),
    (
        "spray_rr (irn, threshold 512)",
        "lb_spray_permutation.yaml",
        [*SPRAY_TOLERANT, "network.load_balancing=spray_rr"],
    ),
    (
        "spray over go-back-N",
        "lb_spray_permutation.yaml",
        ["network.transport=roce", "network.accept_reordering=true"],
    ),
    ("uet + nscc, ecmp switches, no pfc", "uet_permutation.yaml", []),
    ("uet + nscc + trimming", "uet_permutation.yaml", [TRIMMING]),
    ("uet + rccc", "uet_permutation.yaml", ["network.cc=rccc"]),
    ("incast, roce + dcqcn + pfc", "pfc_on_small_buffer.yaml", ["network.cc=dcqcn"]),
    ("lossy incast, go-back-N", "pfc_off_small_buffer.yaml", []),
    ("lossy incast, irn", "irn_lossy_incast.yaml", []),
    ("lossy incast, uet + nscc", "uet_lossy_incast.yaml", []),
    ("lossy incast, uet, 100 KB buffer", "uet_lossy_incast.yaml", SMALL_BUFFER),
    ("lossy incast, uet, 100 KB, trimming", "uet_lossy_incast.yaml", [*SMALL_BUFFER, TRIMMING]),
    ("lossy incast, uet + rccc", "uet_lossy_incast.yaml", ["network.cc=rccc"]),
)


def run(name: str, overrides: list[str], seed: int, fidelity: str = "packet") -> dict[str, float]:
    """One scenario run: FCT slowdowns and reordering counters (0 at flow fidelity)."""
    scenario = load_scenario(
        NETBENCH / name,
        [
            *overrides,
            f"simulation.seed={seed}",
            "simulation.sample_interval=0us",
            f"simulation.fidelity={fidelity}",
        ],
    )
    started = time.perf_counter()
    raw = simulate_flow_set(scenario).raw
    wall = time.perf_counter() - started
    flows = raw["flows"]
    counters = raw.get("counters", {})
    ports = raw.get("ports")
    queue_kb = 0.0  # flow fidelity has no queues
    if ports is not None and len(ports["bytes_sent"]):
        queue_kb = float(ports["mean_queue_bytes"][int(np.argmax(ports["bytes_sent"]))]) / 1e3
    size = np.asarray(flows["bytes"], np.float64)
    ideal_ns = size * (MTU_BYTES + FRAME_OVERHEAD_BYTES) / MTU_BYTES * 8 / LINE_RATE_BPS * 1e9
    slowdown = np.asarray(flows["fct_ns"], np.float64) / ideal_ns
    zero = np.zeros(len(size))
    return {
        "mean": float(slowdown.mean()),
        "max": float(slowdown.max()),
        "retx": float(np.sum(flows.get("retransmits", zero))),
        "drops": float(counters.get("drops", 0)),
        "trims": float(counters.get("trims", 0)),
        "timeouts": float(counters.get("timeouts", 0)),
        "ooo": float(np.mean(flows.get("out_of_order", zero))),
        "depth": float(np.max(flows.get("max_reorder_depth", zero))),
        "queue_kb": queue_kb,
        "wall": wall,
    }


def compare(seeds: list[int]) -> None:
    """Packet against flow fidelity, mean and max slowdown per variant (seed average)."""
    print(f"{'variant':34} {'packet mean':>11} {'max':>6}   {'flow mean':>9} {'max':>6}")
    for label, name, overrides in VARIANTS:
        cells = []
        for fidelity in ("packet", "flow"):
            try:
                rows = [run(name, overrides, seed, fidelity) for seed in seeds]
            except UserError as error:
                cells.append(f"refused ({str(error).split(': ', 2)[1]})")
                continue
            cells.append(
                f"{np.mean([r['mean'] for r in rows]):>11.2f} {np.mean([r['max'] for r in rows]):6.2f}"
            )
        print(f"{label:34} {cells[0]:>18}   {cells[1]}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="1", help="comma-separated seeds (ECMP hashes, spraying draws)")
    parser.add_argument("--fidelity", choices=("packet", "flow", "both"), default="packet")
    parser.add_argument("--only", default="", help="run only the variants whose label contains this text")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    if args.fidelity == "both":
        compare(seeds)
        return
    print(
        f"{'variant':36} {'slowdown mean':>13} {'max':>6} {'retx':>7} {'drops':>6} {'trims':>6} "
        f"{'rto':>4} {'ooo/flow':>9} {'depth':>6} {'q KB':>6} {'wall s':>7}"
    )
    for label, name, overrides in (v for v in VARIANTS if args.only in v[0]):
        try:
            rows = [run(name, overrides, seed, args.fidelity) for seed in seeds]
        except UserError as error:
            print(f"{label:34} refused: {error}")
            continue
        avg = {key: float(np.mean([r[key] for r in rows])) for key in rows[0]}
        print(
            f"{label:36} {avg['mean']:13.2f} {avg['max']:6.2f} {avg['retx']:7.0f} {avg['drops']:6.0f} "
            f"{avg['trims']:6.0f} {avg['timeouts']:4.0f} {avg['ooo']:9.0f} {avg['depth']:6.0f} "
            f"{avg['queue_kb']:6.1f} {avg['wall']:7.2f}"
        )


if __name__ == "__main__":
    main()
