"""One collective on a cluster's network, nccl-tests style: decompose as NCCL would, simulate.

``heterosim collective`` and ``validate``'s collective_busbw cases call these. Bandwidths follow
nccl-tests: algbw = S / t (GB/s), busbw = algbw x 2(n-1)/n for all-reduce, (n-1)/n for
all-gather, reduce-scatter, all-to-all, gather and scatter, 1 for broadcast, reduce and
send/recv (docs/network_models.md, "Bus bandwidth").
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from heterosim.config.cluster import ClusterConfig
from heterosim.config.experiment import NetworkConfig, SimulationConfig, default_network
from heterosim.engine.executor import execute_plan
from heterosim.engine.topology import Topology, build_topology
from heterosim.plan.collectives import CollectivePlan, decompose_collective
from heterosim.plan.collectives.common import bus_factor, collective_name
from heterosim.results import CollectiveResult, CollectiveSpec


def decompose_spec(cluster: ClusterConfig, spec: CollectiveSpec, size_bytes: int) -> CollectivePlan:
    """The collective's flows and dependencies as NCCL would run them (no simulation)."""
    return decompose_collective(
        collective_name(spec.op),
        size_bytes,
        list(spec.ranks),
        cluster,
        algorithm=spec.algorithm,
        protocol=spec.protocol,
        channels=spec.channels,
        root=spec.root,
        granularity=spec.granularity,
    )


def simulate_collective(
    cluster: ClusterConfig,
    spec: CollectiveSpec,
    size_bytes: int,
    simulation: SimulationConfig,
    *,
    network: NetworkConfig | None = None,
    topology: Topology | None = None,
) -> CollectiveResult:
    """Decompose and simulate one collective of ``size_bytes`` (nccl-tests size).

    ``simulation`` gives fidelity, seed, intra-host model and queue pairs (``engine_config``
    builds one); ``network`` defaults to an experiment's default network; pass
    ``topology`` to reuse one built for ``cluster``.
    """
    name = collective_name(spec.op)
    plan = decompose_spec(cluster, spec, size_bytes)
    topology = topology if topology is not None else build_topology(cluster)
    network = network if network is not None else default_network()
    engine = execute_plan(plan.to_execution_plan(cluster.world_size), topology, network, simulation)
    time_s = engine.makespan_ns * 1e-9
    algbw = size_bytes / time_s / 1e9 if time_s > 0 else 0.0
    return CollectiveResult(
        op=name,
        size_bytes=int(size_bytes),
        time_s=time_s,
        algbw_GBps=algbw,
        busbw_GBps=algbw * bus_factor(name, len(spec.ranks)),
        algorithm=plan.algorithm,
        protocol=plan.protocol,
        channels=plan.channels,
        flows=plan.num_flows,
        predicted_time_s=plan.predicted_ns * 1e-9,
        fidelity=engine.fidelity,
        network=engine.network,
        tcp=dict(engine.tcp["summary"]) if engine.tcp else None,
        sim={
            "fidelity": engine.fidelity,
            "wall_s": engine.wall_s,
            "events": int(engine.events),
            **({"packet_acceleration": engine.fast_forward} if engine.fast_forward else {}),
        },
    )


def simulate_collective_sizes(
    cluster: ClusterConfig,
    spec: CollectiveSpec,
    sizes: Iterable[int],
    simulation: SimulationConfig,
    *,
    network: NetworkConfig | None = None,
) -> Iterator[CollectiveResult]:
    """:func:`simulate_collective` for each size in turn, on one topology (yielded as they finish)."""
    topology = build_topology(cluster)
    network = network if network is not None else default_network()
    for size in sizes:
        yield simulate_collective(cluster, spec, size, simulation, network=network, topology=topology)
