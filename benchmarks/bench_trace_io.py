"""Chakra ET write/read throughput on a synthetic trace (nodes per second).

usage: python benchmarks/bench_trace_io.py [--nodes 1000000] [--repeat 2]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from heterosim.workload.chakra import read_trace, traces_equal, write_trace
from heterosim.workload.chakra.synthetic import synthetic_trace


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    trace = synthetic_trace(args.nodes)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.3.et"
        write_s = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            write_trace(trace, path)
            write_s.append(time.perf_counter() - start)
        size = path.stat().st_size
        read_s = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            back = read_trace(path)
            read_s.append(time.perf_counter() - start)
        assert traces_equal(trace, back), "round trip changed the trace"
    w, r = min(write_s), min(read_s)
    print(f"nodes {args.nodes}  file {size / 1e6:.1f} MB ({size / args.nodes:.0f} B/node)")
    print(f"write {w:.2f} s  {args.nodes / w:,.0f} nodes/s")
    print(f"read  {r:.2f} s  {args.nodes / r:,.0f} nodes/s")


if __name__ == "__main__":
    main()
