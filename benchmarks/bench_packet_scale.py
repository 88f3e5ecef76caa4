"""Packet network speed on a 1,024-GPU fabric: events per CPU-second of a data-parallel shift.

Usage: python benchmarks/bench_packet_scale.py [--size 4MiB] [--shift 64] [--scheduler NAME]

Every GPU of topologies/h0_1024gpu.yaml sends ``--size`` to the GPU ``--shift`` ahead (64: the
next data-parallel replica of a TP8 PP8 layout, the traffic pattern of the 1,024-GPU GPT-3 175B
run), all starting at 0, DCQCN with PFC, 4 KiB MTU. CPU time covers building the network, the
run and copying the statistics out (``--size 64KiB`` measures the fixed part, ~1.4 CPU-s).
``--scheduler ns3::MapScheduler`` runs with ns-3's default event queue instead of the project's
(``heterosim.engine.native.EVENT_SCHEDULER``); the finish times must not change.
"""

from __future__ import annotations

import argparse
import hashlib
import time
from pathlib import Path

import numpy as np

from heterosim.config.cluster import load_cluster
from heterosim.config.experiment import NetworkConfig
from heterosim.engine import native, packet
from heterosim.engine.topology import build_topology
from heterosim.units import parse_size

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="4MiB", help="bytes per GPU")
    parser.add_argument("--shift", type=int, default=64, help="destination = (GPU + shift) mod 1024")
    parser.add_argument("--scheduler", default=None, help="ns-3 scheduler type (default: the project's)")
    args = parser.parse_args()

    gbl = native.load()
    if args.scheduler:
        import cppyy  # noqa: PLC0415 - the GlobalValue headers, loaded only for this option

        cppyy.include("ns3/global-value.h")
        cppyy.include("ns3/string.h")
        gbl.ns3.GlobalValue.Bind("SchedulerType", gbl.ns3.StringValue(args.scheduler))
    topo = build_topology(load_cluster(REPO / "topologies" / "h0_1024gpu.yaml"))
    gpus = len(topo.gpu_node)
    src = np.arange(gpus)
    dst = (src + args.shift) % gpus
    size = parse_size(args.size)
    network = NetworkConfig(cc="dcqcn", mtu_bytes=4096, pfc=True, buffer_bytes=32 << 20, ecmp=True)
    cpu = time.process_time()
    res = packet.run_flows(topo, network, src, dst, [size] * gpus, [0] * gpus, stop_ns=10**10)
    cpu = time.process_time() - cpu
    end = res["flows"]["end_ns"]
    digest = hashlib.sha256(end.tobytes()).hexdigest()[:12]
    events = res["events"]
    print(
        f"{gpus} flows of {args.size}, shift {args.shift}; scheduler "
        f"{args.scheduler or native.EVENT_SCHEDULER}"
    )
    print(f"simulated {res['sim_end_ns'] / 1e3:.1f} us; {events:,} events; finish-time digest {digest}")
    print(
        f"build + run + stats {cpu:.2f} CPU-s; {events / cpu / 1e6:.2f} M events per CPU-s "
        f"(build included; see --size 64KiB for the fixed part)"
    )


if __name__ == "__main__":
    main()
