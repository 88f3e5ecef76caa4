"""Packet network speed: packet-hops per wall-second and wall time of a 16-host incast.

Usage: python benchmarks/bench_packet.py [--hosts 16] [--size 4MiB] [--cc dcqcn] [--mtu 1KiB]

A packet-hop is one frame (data, ACK, NACK, CNP or PFC) serialised onto one link direction,
counted by the devices. Wall and CPU time cover Simulator::Run only (building the network and
copying the statistics are reported separately); on a shared machine the CPU time of the process
is the fairer one-core figure.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from heterosim.config.cluster import parse_cluster
from heterosim.config.experiment import NetworkConfig
from heterosim.engine import native, packet
from heterosim.engine.topology import build_topology, to_native
from heterosim.units import parse_size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=16)
    parser.add_argument("--size", default="4MiB", help="bytes per sender")
    parser.add_argument("--cc", default="dcqcn")
    parser.add_argument("--mtu", default="1KiB")
    parser.add_argument("--speed", default="100Gbps")
    args = parser.parse_args()

    hosts = args.hosts
    topo = build_topology(
        parse_cluster(
            {
                "host_types": {
                    "n": {"gpu": "H100-SXM", "gpus": 1, "fabric": "pcie", "nics": 1, "nic_speed": args.speed}
                },
                "hosts": [{"type": "n", "count": hosts}],
                "fabric": {"kind": "fat-tree", "hosts_per_leaf": hosts, "link_delay": "1us"},
            },
            "bench.yaml",
        )
    )
    size = parse_size(args.size)
    network = NetworkConfig(
        cc=args.cc, mtu_bytes=parse_size(args.mtu), pfc=True, buffer_bytes=32 << 20, ecmp=True
    )
    gbl = native.load()
    ns3 = gbl.ns3
    ns3.Simulator.Destroy()
    t0 = time.perf_counter()
    desc = to_native(topo, gbl)
    net = packet.create_packet_network(gbl, desc, network, seed=1)
    n = hosts - 1
    ids = np.arange(n, dtype=np.uint32)
    net.ScheduleFlows(
        n,
        ids,
        np.arange(n, dtype=np.uint32) + 1,
        np.zeros(n, np.uint32),
        np.full(n, size, np.uint64),
        np.zeros(n, np.int64),
        np.full(n, 3, np.uint8),
    )
    net.SetStopAfterFlows(n)
    t1 = time.perf_counter()
    c1 = time.process_time()
    ns3.Simulator.Run()
    c2 = time.process_time()
    t2 = time.perf_counter()
    sim_ns = int(ns3.Simulator.Now().GetNanoSeconds())
    stats = packet.collect_packet_stats(net)
    t3 = time.perf_counter()
    hops = stats["counters"]["frames"]
    run_s = t2 - t1
    print(
        f"{n}-to-1 incast, {hosts} hosts, {args.size} per sender, {args.speed}, mtu {args.mtu}, cc {args.cc}"
    )
    print(f"simulated {sim_ns / 1e6:.3f} ms; {hops} packet-hops; {stats['events']} events")
    cpu_s = c2 - c1
    print(f"build {t1 - t0:.3f} s, run {run_s:.3f} s wall / {cpu_s:.3f} s CPU, stats {t3 - t2:.3f} s")
    print(
        f"wall: {hops / run_s / 1e6:.2f} M packet-hops/s, {stats['events'] / run_s / 1e6:.2f} "
        f"M events/s; CPU: {hops / cpu_s / 1e6:.2f} M packet-hops/s"
    )
    c = stats["counters"]
    print(f"drops {c['drops']}, pauses {c['pfc_pause_frames']}, marks {c['ecn_marks']}, cnps {c['cnps']}")
    net.Dispose()
    ns3.Simulator.Destroy()


if __name__ == "__main__":
    main()
