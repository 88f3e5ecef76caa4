"""NCCL's socket transport (``transport: socket``): packet (ns-3 TCP) vs flow (fluid) envelope,
and the packet all-reduce against ns-3's own bulk TCP flow.

Usage: python benchmarks/bench_socket_transport.py [--cases allreduce,sizes,incast,split]

Cases
  allreduce  2-host all-reduce (one GPU and one NIC per host, one switch) at 10/25/100 Gb/s:
             bus bandwidth at packet and flow fidelity, and the goodput of one ns-3
             BulkSendApplication flow over ns-3's PointToPoint devices through one router at the
             same rate and delay (TcpBulkReference), scaled from PPP to Ethernet framing, one way
             and both ways at once (the all-reduce's load).
  sizes      the same all-reduce at 25 Gb/s over 1 MiB .. 256 MiB (where handshake and slow start
             matter).
  incast     mixed RDMA + TCP incast (topologies/star_rdma_socket_8hosts.yaml shape): two RDMA and
             two socket senders of 16 MiB into one RDMA host, 16 MiB and 2 MiB switch buffers;
             per-flow FCT at packet and flow fidelity.
  split      one 64 MiB message at 25 Gb/s with NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD =
             0x1 (default), 1x4, 2x8 (AWS): FCT and TCP counters (the fluid model has one flow
             per connection whatever the sockets).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from heterosim.config.cluster import parse_cluster
from heterosim.config.experiment import NetworkConfig
from heterosim.engine import fluid, native, packet
from heterosim.engine.topology import build_topology
from heterosim.simulate import CollectiveSpec, engine_config, simulate_collective


def cluster(speed: str, transports: tuple[str, ...] = ("socket", "socket")):
    types = {
        f"t{i}": {
            "gpu": "H100-SXM",
            "gpus": 1,
            "fabric": "pcie",
            "nics": 1,
            "nic_speed": speed,
            "transport": t,
        }
        for i, t in enumerate(transports)
    }
    return parse_cluster(
        {
            "host_types": types,
            "hosts": [{"type": f"t{i}", "count": 1} for i in range(len(transports))],
            "fabric": {"kind": "fat-tree", "hosts_per_leaf": 8, "link_delay": "1us"},
        },
        "bench.yaml",
    )


def network(buffer: int = 16 << 20, **attributes) -> NetworkConfig:
    return NetworkConfig(
        cc="dcqcn", mtu_bytes=4096, pfc=True, buffer_bytes=buffer, ecmp=True, attributes=attributes
    )


def reference_gbps(speed: str, size: int, bidirectional: bool = False) -> tuple[float, int]:
    ns3 = native.load().ns3
    ref = ns3.CreateObject[ns3.TcpBulkReference]()
    ref.SetAttribute("DataRate", ns3.DataRateValue(ns3.DataRate(speed)))
    ref.SetAttribute("Bytes", ns3.UintegerValue(size))
    ref.SetAttribute("Bidirectional", ns3.BooleanValue(bidirectional))
    ref.Run()
    return float(ref.GetGoodputBps() * ref.GetFramingRatio()) / 1e9, int(ref.GetRetransmits())


def allreduce_row(speed: str, size: int) -> None:
    cl = cluster(speed)
    started = time.perf_counter()
    pkt = simulate_collective(cl, CollectiveSpec("allreduce", (0, 1)), size, engine_config(fidelity="packet"))
    wall_p = time.perf_counter() - started
    started = time.perf_counter()
    flw = simulate_collective(cl, CollectiveSpec("allreduce", (0, 1)), size, engine_config(fidelity="flow"))
    wall_f = time.perf_counter() - started
    ref, _ = reference_gbps(speed, size)
    both, ref_retx = reference_gbps(speed, size, bidirectional=True)
    p, f = pkt.busbw_GBps * 8, flw.busbw_GBps * 8
    tcp = pkt.tcp
    print(
        f"{speed:>8} {size >> 20:>5} MiB  packet {p:8.3f}  flow {f:8.3f}  ref 1-way {ref:8.3f}  "
        f"2-way {both:8.3f}  packet/2-way {p / both:6.3f}  flow/packet {f / p:6.3f}  "
        f"retx {tcp['retransmits']:>4}  "
        f"max cwnd {tcp['max_cwnd_bytes']:>8}  ref retx {ref_retx:>3}  "
        f"wall {wall_p:5.1f} / {wall_f:4.2f} s",
        flush=True,
    )


def incast(buffer: int) -> None:
    topo = build_topology(cluster("100Gbps", ("rdma", "rdma", "rdma", "rdma", "socket", "socket")))
    size = 16 << 20
    src, dst = [0, 1, 4, 5], [2, 2, 2, 2]
    started = time.perf_counter()
    pkt = packet.run_flows(topo, network(buffer), src, dst, [size] * 4, [0] * 4, stop_ns=2_000_000_000)
    wall = time.perf_counter() - started
    flw = fluid.run_flows_fluid(topo, network(buffer), src, dst, [size] * 4, [0] * 4)
    fp = np.asarray(pkt["flows"]["fct_ns"], float)
    ff = np.asarray(flw["flows"]["end_ns"], float)
    tcp = pkt["tcp"]["summary"]
    kinds = ["rdma", "rdma", "tcp", "tcp"]
    cells = "  ".join(f"{k} {a / 1e3:7.1f}/{b / 1e3:7.1f}" for k, a, b in zip(kinds, fp, ff))
    print(
        f"buffer {buffer >> 20:>2} MiB  fct us packet/flow: {cells}  makespan flow/packet "
        f"{ff.max() / fp.max():6.3f}  tcp retx {tcp['retransmits']}  drops {pkt['counters']['drops']}  "
        f"pauses {pkt['counters']['pfc_pause_frames']}  wall {wall:4.1f} s",
        flush=True,
    )


def split(nthreads: int, nsocks: int) -> None:
    topo = build_topology(cluster("25Gbps"))
    size = 64 << 20
    attrs = {"SocketTransport::SocketNthreads": nthreads, "SocketTransport::NsocksPerThread": nsocks}
    started = time.perf_counter()
    pkt = packet.run_flows(topo, network(**attrs), [0], [1], [size], [0], stop_ns=2_000_000_000)
    wall = time.perf_counter() - started
    flw = fluid.run_flows_fluid(topo, network(**attrs), [0], [1], [size], [0])
    p, f = int(pkt["flows"]["fct_ns"][0]), int(flw["flows"]["end_ns"][0])
    tcp = pkt["tcp"]["summary"]
    print(
        f"{nthreads} x {nsocks}: sockets {tcp['streams']:>2}  fct packet {p / 1e3:8.1f} us  flow "
        f"{f / 1e3:8.1f} us  flow/packet {f / p:6.3f}  goodput {size * 8 / p:6.2f} Gb/s  retx "
        f"{tcp['retransmits']}  max cwnd {tcp['max_cwnd_bytes']}  wall {wall:4.1f} s",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="allreduce,sizes,incast,split")
    cases = parser.parse_args().cases.split(",")
    if "allreduce" in cases:
        print("# 2-host all-reduce, bus bandwidth Gb/s")
        for speed, size in (
            ("10Gbps", 16 << 20),
            ("25Gbps", 32 << 20),
            ("100Gbps", 64 << 20),
            ("100Gbps", 256 << 20),
        ):
            allreduce_row(speed, size)
    if "sizes" in cases:
        print("# 2-host all-reduce at 25 Gb/s over sizes")
        for size in (1 << 20, 4 << 20, 16 << 20, 64 << 20, 256 << 20):
            allreduce_row("25Gbps", size)
    if "incast" in cases:
        print("# mixed RDMA + TCP incast, 4 x 16 MiB into one 100G RDMA host")
        for buffer in (16 << 20, 2 << 20):
            incast(buffer)
    if "split" in cases:
        print("# one 64 MiB message at 25 Gb/s, NCCL socket threads x sockets per thread")
        for nthreads, nsocks in ((0, 1), (1, 4), (2, 8)):
            split(nthreads, nsocks)


if __name__ == "__main__":
    main()
