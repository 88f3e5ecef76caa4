"""Packet model vs flow (fluid) model on the same flows: makespan ratio, busiest-port
utilisation, Jain fairness, PFC pauses, drops, CNPs, per DCQCN parameter profile.

Usage: python benchmarks/bench_packet_vs_flow.py [--cases incast400,a2a] [--profiles default,...]

Profiles (every value from a cited source, docs/network_models.md §1.5-1.6):
  firmware      the packet network's default: Mellanox ConnectX firmware defaults [S4]
                (increase steps fixed at 5 / 50 Mb/s, byte counter 32767 B, timer 300 us)
  line-steps    the same with increase steps of 5 / 50 Mb/s per 25 Gb/s of each NIC's line
                rate (the HPCC simulator's run.py rule [S3]: RateAi = RateHai = 0)
  hpcc-dcqcn    the HPCC simulator's `run.py --cc dcqcn` [S3]: line-rate steps, timer-only
                increase (no byte counter), g = 1/256, MinRate 1 Gb/s; a CNP may follow every
                alpha period (S3 echoes ECN in every ACK)
  hpcc-paper    the same with S3's `dcqcn_paper` timers: alpha and decrease periods 50 us,
                increase timer 55 us (the DCQCN paper's T)
  none          no congestion control: PFC alone

Flows start together; the makespan is the last completion. Utilisation is the busiest
egress port's wire bytes over (line rate x packet makespan); Jain's index is over per-flow
goodput (bytes / FCT).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np

from heterosim.config.cluster import load_cluster, parse_cluster
from heterosim.config.experiment import NetworkConfig
from heterosim.engine import fluid, packet
from heterosim.engine.topology import Topology, build_topology

LINE_STEPS = {"Dcqcn::RateAi": "0bps", "Dcqcn::RateHai": "0bps"}
S3 = {
    **LINE_STEPS,
    "Dcqcn::ByteCounter": 0,
    "Dcqcn::G": 1 / 256,
    "Dcqcn::MinRate": "1000Mbps",
    "CnpInterval": "1us",
}
PROFILES: dict[str, tuple[str, dict]] = {
    "firmware": ("dcqcn", {}),
    "line-steps": ("dcqcn", LINE_STEPS),
    "hpcc-dcqcn": ("dcqcn", S3),
    "hpcc-paper": (
        "dcqcn",
        {
            **S3,
            "Dcqcn::AlphaUpdateInterval": "50us",
            "Dcqcn::RateDecreaseInterval": "50us",
            "Dcqcn::IncreaseTimer": "55us",
        },
    ),
    "none": ("none", {}),
}


def rail_cluster(speed: str, gpus: int = 8) -> Topology:
    """Four hosts of ``gpus`` H100s with one ``speed`` NIC per GPU, rail-optimised."""
    return build_topology(
        parse_cluster(
            {
                "host_types": {
                    "h": {
                        "gpu": "H100-SXM",
                        "gpus": gpus,
                        "fabric": "nvswitch",
                        "nics": gpus,
                        "nic_speed": speed,
                    }
                },
                "hosts": [{"type": "h", "count": 4}],
                "fabric": {"kind": "rail-optimized", "link_delay": "1us"},
            },
            "rail.yaml",
        )
    )


def two_leaves() -> Topology:
    """topologies/two_leaf_8hosts.yaml: 100G NICs, two leaves, one 400G spine."""
    return build_topology(
        parse_cluster(
            {
                "host_types": {
                    "n": {"gpu": "H100-SXM", "gpus": 1, "fabric": "pcie", "nics": 1, "nic_speed": "100Gbps"}
                },
                "hosts": [{"type": "n", "count": 8}],
                "fabric": {
                    "kind": "fat-tree",
                    "hosts_per_leaf": 4,
                    "link_delay": "1us",
                    "oversubscription": 1,
                    "spine_speed": "400Gbps",
                },
            },
            "two_leaf.yaml",
        )
    )


def all_to_all() -> tuple[Topology, list[int], list[int]]:
    topo = build_topology(load_cluster("topologies/mixed_16gpu.yaml"))
    pairs = [(s, d) for s in range(16) for d in range(16) if s // 8 != d // 8]
    return topo, [p[0] for p in pairs], [p[1] for p in pairs]


Case = tuple[str, Callable[[], tuple[Topology, list[int], list[int]]], int, int]
CASES: dict[str, Case] = {
    "p2p400": (
        "uncongested: one flow between hosts, 400G NIC",
        lambda: (rail_cluster("400Gbps"), [0], [8]),
        64 << 20,
        4096,
    ),
    "nvlink": (
        "uncongested: one flow inside an H100 host (NVLink)",
        lambda: (rail_cluster("400Gbps"), [0], [5]),
        64 << 20,
        4096,
    ),
    "incast400": (
        "3-to-1 incast on one 400G rail",
        lambda: (rail_cluster("400Gbps"), [8, 16, 24], [0] * 3),
        32 << 20,
        4096,
    ),
    "incast400long": (
        "3-to-1 incast on one 400G rail, long",
        lambda: (rail_cluster("400Gbps"), [8, 16, 24], [0] * 3),
        128 << 20,
        4096,
    ),
    "incast200": (
        "3-to-1 incast on one 200G rail",
        lambda: (rail_cluster("200Gbps"), [8, 16, 24], [0] * 3),
        32 << 20,
        4096,
    ),
    "incast100": (
        "3-to-1 incast on one 100G rail",
        lambda: (rail_cluster("100Gbps"), [8, 16, 24], [0] * 3),
        32 << 20,
        4096,
    ),
    "incast4to1": (
        "4-to-1 100G incast across a 400G spine (1 KiB MTU)",
        lambda: (two_leaves(), [0, 1, 2, 3], [4] * 4),
        16 << 20,
        1024,
    ),
    "a2a": ("all-to-all between the mixed_16gpu hosts (400G / 200G NICs)", all_to_all, 4 << 20, 4096),
}


def compare(case: Case, profile: str) -> dict[str, float]:
    """One case under one profile: packet and flow runs and the metrics of the module doc."""
    _, make, size, mtu = case
    topo, src, dst = make()
    cc, attributes = PROFILES[profile]
    network = NetworkConfig(
        cc=cc, mtu_bytes=mtu, pfc=True, buffer_bytes=32 << 20, ecmp=True, attributes=dict(attributes)
    )
    n = len(src)
    started = time.perf_counter()
    res = packet.run_flows(topo, network, src, dst, [size] * n, [0] * n, [3] * n, stop_ns=2_000_000_000)
    wall = time.perf_counter() - started
    flows = fluid.run_flows_fluid(
        topo, network, np.array(src), np.array(dst), np.full(n, size), np.zeros(n, np.int64)
    )
    fct = res["flows"]["fct_ns"].astype(float)
    makespan = float(res["flows"]["end_ns"].max())
    ports = res["ports"]
    rate = topo.link_rate_bps[ports["link"]]
    util = ports["bytes_sent"].astype(float) * 8 / (rate * makespan * 1e-9)
    goodput = size / fct
    c = res["counters"]
    return {
        "packet_ms": makespan / 1e6,
        "flow_ms": float(flows["flows"]["end_ns"].max()) / 1e6,
        "ratio": makespan / float(flows["flows"]["end_ns"].max()),
        "util": float(util.max()),
        "jain": float(goodput.sum() ** 2 / (n * (goodput**2).sum())),
        "pauses": c["pfc_pause_frames"],
        "drops": c["drops"],
        "cnps": c["cnps"],
        "wall_s": wall,
        "done": bool((res["flows"]["end_ns"] >= 0).all()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--profiles", default=",".join(PROFILES))
    args = parser.parse_args()
    print(
        "| case | size/flow | profile | packet ms | flow ms | packet/flow | busiest port | "
        "Jain | pauses | drops | CNPs |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for key in args.cases.split(","):
        case = CASES[key]
        for profile in args.profiles.split(","):
            m = compare(case, profile)
            mark = "" if m["done"] else " (unfinished)"
            print(
                f"| {case[0]} | {case[2] >> 20} MiB | {profile} | {m['packet_ms']:.3f}{mark} | "
                f"{m['flow_ms']:.3f} | {m['ratio']:.3f} | {m['util']:.0%} | {m['jain']:.3f} | "
                f"{m['pauses']} | {m['drops']} | {m['cnps']} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
