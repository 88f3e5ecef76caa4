"""Fixtures of the engine tests."""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from heterosim.config.cluster import load_cluster
from heterosim.config.experiment import NetworkConfig
from heterosim.engine.fluid import create_fluid_network, reset_simulator
from heterosim.engine.topology import Topology, build_topology, to_native

TOPOLOGIES = Path(__file__).resolve().parents[2] / "topologies"


@pytest.fixture
def fake_cxx(tmp_path: Path) -> Path:
    """A stand-in C++ compiler that only writes its ``-o`` file, so a build test compiles nothing."""
    compiler = tmp_path / "fake-cxx"
    compiler.write_text(
        textwrap.dedent("""\
        #!/bin/sh
        out=""; prev=""
        for a in "$@"; do [ "$prev" = "-o" ] && out="$a"; prev="$a"; done
        [ -n "$out" ] && : > "$out"
        echo "fake-cxx 1.0"
        """)
    )
    compiler.chmod(0o755)
    return compiler


@pytest.fixture(scope="session")
def fluid_network() -> NetworkConfig:
    """The fluid model tests' network: DCQCN, 4 KiB MTU, PFC, 32 MiB buffers, ECMP."""
    return NetworkConfig(cc="dcqcn", mtu_bytes=4096, pfc=True, buffer_bytes=32 << 20, ecmp=True)


@pytest.fixture(scope="session")
def shipped_topology() -> Callable[[str], Topology]:
    """The topology of a cluster file of topologies/, by file name."""

    def build(name: str) -> Topology:
        return build_topology(load_cluster(TOPOLOGIES / name))

    return build


@pytest.fixture(scope="session")
def path_latency_ns(fluid_network) -> Callable[[Topology, Sequence[int], int], int]:
    """The fluid model's fixed latency of a flow of ``size`` bytes over ``links``: propagation +
    store-and-forward of one packet (``fluid_network``'s MTU) per hop, less the serialization at
    the slowest hop."""

    def latency(topo: Topology, links: Sequence[int], size: int) -> int:
        packet = float(min(fluid_network.mtu_bytes, size))
        per_hop = [packet * 8e9 / float(topo.link_rate_bps[k]) for k in links]
        return int(sum(int(topo.link_delay_ns[k]) for k in links)) + round(sum(per_hop) - max(per_hop))

    return latency


@pytest.fixture(scope="session")
def random_flows() -> Callable[[int, int], tuple[np.ndarray, ...]]:
    """``n`` flows between distinct GPUs of ``0..gpus-1`` (seed 7): src, dst, sizes log-uniform
    in 4 KiB - 8 MiB, start times ascending in the first 2 ms."""

    def flows(gpus: int, n: int) -> tuple[np.ndarray, ...]:
        rng = np.random.default_rng(7)
        src = rng.integers(0, gpus, n)
        dst = (src + rng.integers(1, gpus, n)) % gpus
        size = np.exp(rng.uniform(np.log(4 << 10), np.log(8 << 20), n)).astype(np.int64)
        start = np.sort(rng.integers(0, 2_000_000, n))
        return src, dst, size, start

    return flows


@pytest.fixture
def start_fluid_flows(native_lib) -> Callable[..., Any]:
    """A fresh fluid network on ``topo`` with flows ``i`` = ``src[i]`` -> ``dst[i]`` of
    ``size_bytes`` each scheduled at time 0 (the simulator reset first); the caller runs it."""

    def start(
        topo: Topology, network: NetworkConfig, seed: int, src: np.ndarray, dst: np.ndarray, size_bytes: int
    ) -> Any:
        reset_simulator(native_lib)
        net = create_fluid_network(native_lib, to_native(topo, native_lib), network, seed)
        n = len(src)
        ids = np.arange(n, dtype=np.uint32)
        net.ScheduleFlows(
            n, ids, src, dst, np.full(n, size_bytes, np.uint64), np.zeros(n, np.int64), np.zeros(n, np.uint8)
        )
        return net

    return start
