"""Representative timing of folded collectives (``simulation.fold_timing: representative``).

A folded (type, size) is timed with every replica's communicator running it together on the
full fabric (:mod:`heterosim.simulate.fold`). On a two-tier fabric (leaf / rail switches under
spines) two communicators whose flows attach to no common leaf share no link: a path between
NICs is NIC - leaf - spine - leaf - NIC, and a leaf-spine link carries only flows that start
or end under that leaf. Communicators are therefore grouped into *components* (linked where
their flows share a leaf, or a host for flows inside one host); components whose flows are the
same up to a renaming of hosts and leaves (hosts of the same type; the same flows, dependencies
and bytes in the same order; leaves of the same links) form a *class*. Only the first component
of each class is simulated; the collective's time is the longest of those. On a rail-optimized
fabric the data-parallel groups of TP rank t all sit on rail t (8 rails: 8 link-disjoint
components of the same shape); where each group's hosts fill leaves of their own (Megatron's
order puts DP next to TP: a group of 128 on 128 consecutive hosts, 4 leaves of 32), the groups of
every pipeline stage are components of that shape too, and one group is simulated.

APPROXIMATION: components share spine switches (their shared buffer and its PFC thresholds)
though no link; a component is timed without the others' frames in those buffers. ECMP hashes
a flow's id, so the simulated component draws its own path collisions: its time is one sample
of the components' times where the full run takes the longest of all of them (benchmarks/
README.md "Simulator speed at scale" measures the agreement).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

from heterosim.engine.topology import ACCESS, NIC, Topology
from heterosim.plan.collectives.graph import CollectivePlan
from heterosim.plan.execution_plan import FLOW


@dataclass(frozen=True)
class Representatives:
    """Which communicators of one folded (type, size) are simulated."""

    timed: list[int]  # indices into the block's communicators, ascending
    components: int  # link-disjoint components of the block
    classes: int  # interchangeable sets of components (one simulated per class)


def gpu_leaves(topology: Topology) -> np.ndarray:
    """(gpus, planes) int64: the fabric switch each GPU's NIC port of each plane attaches to
    (-1: none, a host without a fabric)."""
    kind = topology.node_kind
    a, b = topology.link_a.astype(np.int64), topology.link_b.astype(np.int64)
    access = topology.link_kind == ACCESS
    switch_of = np.full(topology.num_nodes, -1, np.int64)
    for nic, other in ((a, b), (b, a)):
        m = access & (kind[nic] == NIC) & (topology.node_host[other] < 0)
        switch_of[nic[m]] = other[m]
    ports = topology.gpu_plane_nic
    if ports.size == 0:
        ports = topology.gpu_nic_node[:, None]
    return switch_of[np.asarray(ports, np.int64)]


def representatives(
    block: list[CollectivePlan], topology: Topology, gpu_host: np.ndarray, host_kind: np.ndarray
) -> Representatives:
    """The communicators of ``block`` (one (type, size) on each folded communicator) to simulate;
    ``gpu_host``: each GPU's host, ``host_kind``: a code of each host's type."""
    leaves = gpu_leaves(topology)
    n = len(block)
    comm_parts, item_parts = [], []
    for i, plan in enumerate(block):
        flows = plan.kind == FLOW
        src, dst = plan.gpu[flows].astype(np.int64), plan.dst[flows].astype(np.int64)
        inside = gpu_host[src] == gpu_host[dst]
        hosts = gpu_host[src[inside]]
        across = np.concatenate([leaves[src[~inside]].ravel(), leaves[dst[~inside]].ravel()])
        across = across[across >= 0]
        # items: fabric switches by node id, hosts after them
        items = np.unique(np.concatenate([across, topology.num_nodes + hosts]))
        comm_parts.append(np.full(len(items), i, np.int64))
        item_parts.append(items)
    comm = np.concatenate(comm_parts) if comm_parts else np.zeros(0, np.int64)
    item = np.concatenate(item_parts) if item_parts else np.zeros(0, np.int64)
    _, item_id = np.unique(item, return_inverse=True)
    m = int(item_id.max()) + 1 if item_id.size else 0
    graph = csr_matrix((np.ones(len(comm)), (comm, n + item_id)), shape=(n + m, n + m))
    _, label = connected_components(graph, directed=False)
    seen: dict[int, list[int]] = {}
    for i in range(n):
        seen.setdefault(int(label[i]), []).append(i)
    components = list(seen.values())  # each ascending, in order of their first communicator
    first_of_class: dict[bytes, list[int]] = {}
    leaf_links: dict[int, bytes] = {}
    for members in components:
        key = _signature([block[i] for i in members], leaves, gpu_host, host_kind, topology, leaf_links)
        first_of_class.setdefault(key, members)
    timed = sorted(i for members in first_of_class.values() for i in members)
    return Representatives(timed=timed, components=len(components), classes=len(first_of_class))


def _signature(
    plans: list[CollectivePlan],
    leaves: np.ndarray,
    gpu_host: np.ndarray,
    host_kind: np.ndarray,
    topology: Topology,
    leaf_links: dict[int, bytes],
) -> bytes:
    """A digest equal for components that are the same up to a renaming of their hosts and
    leaves: per communicator its tasks (kind, bytes, payload, channel, delay, dependencies) with
    each endpoint's host and leaves (both numbered in order of first use), then each host's kind
    and each leaf's links (rates, delays)."""
    digest = hashlib.blake2b(digest_size=20)
    ends = [np.concatenate([p.gpu, p.dst]).astype(np.int64) for p in plans]
    gpus = np.concatenate(ends)
    real = gpus >= 0
    safe = np.where(real, gpus, 0)
    hosts, host_order = _first_use(np.where(real, gpu_host[safe], -1))
    attach, leaf_order = _first_use(np.where(real[:, None], leaves[safe], -1).ravel())
    attach = attach.reshape(len(gpus), -1)
    at = np.concatenate([[0], np.cumsum([len(e) for e in ends])])
    for k, plan in enumerate(plans):
        rows = slice(int(at[k]), int(at[k + 1]))
        for array in (
            plan.kind,
            plan.bytes,
            plan.payload,
            plan.channel,
            plan.delay_ns,
            plan.dep_ptr,
            plan.dep_idx,
            hosts[rows],
            attach[rows],
        ):
            digest.update(np.ascontiguousarray(array, np.int64).tobytes())
            digest.update(b"|")
    digest.update(np.ascontiguousarray(host_kind[host_order], np.int64).tobytes())
    for leaf in leaf_order.tolist():
        digest.update(_leaf_links(leaf, topology, leaf_links))
    return digest.digest()


def _first_use(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``values`` (>= 0; -1: none) renumbered 0, 1, ... in order of first appearance, and the
    values in that order."""
    used, first, inverse = np.unique(values, return_index=True, return_inverse=True)
    keep = used >= 0
    used, first = used[keep], first[keep]
    order = np.argsort(first, kind="stable")
    rank = np.full(len(keep), -1, np.int64)
    rank[np.flatnonzero(keep)[order]] = np.arange(len(order))
    return rank[inverse.ravel()], used[order]


def _leaf_links(leaf: int, topology: Topology, cache: dict[int, bytes]) -> bytes:
    """A switch's links as bytes: their rates and delays, sorted."""
    if leaf not in cache:
        touch = (topology.link_a == leaf) | (topology.link_b == leaf)
        rates = np.sort(topology.link_rate_bps[touch])
        delays = np.sort(topology.link_delay_ns[touch].astype(np.float64))
        cache[leaf] = np.concatenate([rates, delays]).tobytes()
    return cache[leaf]
