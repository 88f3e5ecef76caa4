"""Cluster -> network graph: nodes (GPUs, NVSwitches, PCIe switches, NICs, fabric switches), full
duplex links with per-direction rate and delay, and ECMP next-hop tables.

Both network models (packet and flow) are built from the same :class:`Topology`, so they see the
same links and routes.

Inside a host
    * ``nvswitch`` hosts: every GPU has an NVLink link to one non-blocking NVSwitch node at the GPU's
      NVLink bandwidth (per direction) times the host type's ``nvlink_efficiency`` (NCCL's own
      effective per-link constants by default, see heterosim.config.cluster.NVLINK_EFFICIENCY).
      The NVSwitch traversal latency (``fabric.nvlink_delay``) is split over the two links.
    * GPUs and NICs sit behind PCIe switches (GPUDirect RDMA): NIC ``j`` is on PCIe switch
      ``j * pcie_switches // nics`` and GPU ``g`` on the switch of its NIC; PCIe switches join at a
      root complex node (their shared upstream bandwidth is the x16 link to the root).
    * On ``pcie`` hosts intra-host GPU traffic crosses PCIe switches (and the root between switches).

Between hosts
    * ``rail-optimized``: NIC ``j`` of every host in a group of ``fabric.hosts_per_leaf`` hosts
      connects to rail switch ``(group, j)``; every rail switch connects to the spines.
    * ``fat-tree`` (two-tier leaf-spine): all NICs of ``hosts_per_leaf`` hosts connect to one leaf;
      leaves connect to the spines.
    * ``rail-only`` (Wang et al., arXiv:2307.12169): rail switches as in ``rail-optimized``, but
      no spine joins different rails; the rail switches of one rail in different host groups
      join through that rail's own spines. GPUs on different rails of different hosts reach
      each other only through a host's NVLink (see Routing).
    * Uplinks: a leaf with downlink capacity ``D`` gets ``ceil(D / (oversubscription * spine_speed))``
      uplinks at ``spine_speed``, to spines ``0, 1, ...``; the spine count is the largest of these.
    * Planes (``fabric.planes`` P > 1): the fabric above is built P times, once per plane, over
      the NIC ports of that plane (port ``j`` of a host on plane ``j % P``, rail ``j // P``); the
      planes share no switch, so a port's traffic stays in its plane. Switch names carry the plane
      (``p1.rail0.g0``). A GPU has one port per plane (:attr:`Topology.gpu_plane_nic`).

Zones
    A cluster with ``zones:`` gets one such fabric per zone (and per plane; switch names start
    with the zone, ``us-east-1a.p1.spine0``); each ``zone_links`` entry joins the two zones' top
    switches (first spine, or the only leaf) with a link whose delay is its one-way latency. On a
    multi-plane fabric it joins every plane's top switches, on a rail-only fabric every rail's
    (rails both zones have); these links share the entry's bandwidth evenly.

Routing
    A flow from GPU ``a`` to GPU ``b`` on the same host follows the cheapest host-internal path
    (cost = sum of 1/rate, GPUs never transit: NVLink beats PCIe where both exist). Across hosts it
    goes ``a -> NIC(a)`` inside the host, ``NIC(a) -> NIC(b)`` through the fabric on shortest paths
    by hop count with ECMP over equal-cost next hops, then ``NIC(b) -> b``. :class:`Topology`
    carries next-hop tables for both parts. On a multi-plane fabric both NICs are the GPUs'
    ports on the flow's plane (the plan's choice, :mod:`heterosim.plan.collectives.planes`; a
    flow without one hashes to a plane). When the fabric has no route from ``NIC(a)`` to
    ``NIC(b)`` (rail-only, different rails) the flow first goes to the first GPU of ``a``'s host
    whose port reaches ``NIC(b)`` - over NVLink on NVSwitch hosts - and leaves through that
    GPU's port: NCCL's PXN (``NCCL_PXN_DISABLE=0``, src/transport/net.cc; the rail-only paper's
    forwarding through the high-bandwidth domain).
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components, shortest_path

from heterosim.config.cluster import ClusterConfig, HostType
from heterosim.errors import UserError
from heterosim.plan import host_paths

GPU, NVSWITCH, PCIE_SWITCH, PCIE_ROOT, NIC, LEAF, SPINE = range(7)
PLANE_HOP = 1000  # the ECMP "hop" salting a plane choice by hash (TopologyDescription::PLANE_HOP)
NODE_KIND_NAMES = ("gpu", "nvswitch", "pcie-switch", "pcie-root", "nic", "leaf", "spine")
NVLINK, PCIE, ACCESS, FABRIC = range(4)
LINK_KIND_NAMES = ("nvlink", "pcie", "access", "fabric")


@dataclass
class Topology:
    """The network graph and its routes. Links are full duplex: ``link_rate_bps`` is per direction.

    Next hops are CSR tables keyed by (node, destination): entry ``e`` says that from
    ``route_node[e]`` towards ``route_dst[e]`` the packet may take any of the links
    ``route_link[route_ptr[e]:route_ptr[e+1]]`` (ECMP set). Fabric entries exist for every
    fabric switch and NIC towards every NIC; host entries for every host-internal node towards
    every GPU and NIC of the same host.
    """

    node_kind: np.ndarray  # uint8
    node_host: np.ndarray  # int32, -1 for fabric switches
    node_name: list[str]
    link_a: np.ndarray  # int32
    link_b: np.ndarray  # int32
    link_rate_bps: np.ndarray  # float64, per direction
    link_delay_ns: np.ndarray  # int64
    link_kind: np.ndarray  # uint8
    gpu_node: np.ndarray  # int32, node of every global GPU
    gpu_nic_node: np.ndarray  # int32, NIC node used by every global GPU
    route_node: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))
    route_dst: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))
    route_ptr: np.ndarray = field(default_factory=lambda: np.zeros(1, np.int64))
    route_link: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))
    host_socket: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint8))  # 1: socket host
    # routes use a one-way link only from link_a to link_b (hosts without PCIe P2P; Python-side only)
    link_oneway: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))
    planes: int = 1
    gpu_plane_nic: np.ndarray = field(default_factory=lambda: np.zeros((0, 1), np.int32))  # (gpus, planes)
    node_plane: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int8))  # -1: inside a host

    @property
    def num_nodes(self) -> int:
        return int(self.node_kind.shape[0])

    @property
    def num_links(self) -> int:
        return int(self.link_a.shape[0])

    def other_end(self, link: int, node: int) -> int:
        a, b = int(self.link_a[link]), int(self.link_b[link])
        return b if node == a else a

    def next_hops(self, node: int, dst: int) -> list[int]:
        """ECMP link set from ``node`` towards ``dst`` (empty if no entry)."""
        key = self._route_index().get((node, dst))
        if key is None:
            return []
        return [int(x) for x in self.route_link[self.route_ptr[key] : self.route_ptr[key + 1]]]

    def _route_index(self) -> dict[tuple[int, int], int]:
        cached = getattr(self, "_route_cache", None)
        if cached is None:
            cached = {(int(n), int(d)): i for i, (n, d) in enumerate(zip(self.route_node, self.route_dst))}
            object.__setattr__(self, "_route_cache", cached)
        return cached

    def path_links(self, src_gpu: int, dst_gpu: int, flow_hash: int = 0, plane: int = -1) -> list[int]:
        """Links of one path from GPU to GPU, choosing among ECMP next hops by ``flow_hash``.

        ``plane`` (multi-plane fabrics): the plane of the flow, -1 to pick it by hash.
        A reference implementation for tests and small tools; the C++ models route on their own
        copy of the same tables.
        """
        src, dst = int(self.gpu_node[src_gpu]), int(self.gpu_node[dst_gpu])
        if src == dst:
            return []
        if self.node_host[src] == self.node_host[dst]:
            return self._walk(src, dst, flow_hash)
        proxy, nic_a, nic_b = self.flow_nics(src_gpu, dst_gpu, flow_hash, plane)
        via = int(self.gpu_node[proxy])
        return (
            (self._walk(src, via, flow_hash) if via != src else [])
            + self._walk(via, nic_a, flow_hash)
            + self._walk(nic_a, nic_b, flow_hash)
            + self._walk(nic_b, dst, flow_hash)
        )

    def flow_nics(
        self, src_gpu: int, dst_gpu: int, flow_hash: int = 0, plane: int = -1
    ) -> tuple[int, int, int]:
        """(GPU whose port the flow leaves by, source port node, destination port node) of a flow
        between hosts: the GPUs' ports on the flow's plane, or PXN through a GPU of the source
        host whose port reaches the destination port (see the module docstring)."""
        p = plane % self.planes if plane >= 0 else ecmp_index(flow_hash, PLANE_HOP, self.planes)
        nic_a, nic_b = int(self.gpu_plane_nic[src_gpu, p]), int(self.gpu_plane_nic[dst_gpu, p])
        if self.next_hops(nic_a, nic_b):
            return src_gpu, nic_a, nic_b
        host = self.node_host[self.gpu_node[src_gpu]]
        for gpu in np.flatnonzero(self.node_host[self.gpu_node] == host):
            nic = int(self.gpu_plane_nic[gpu, p])
            if self.next_hops(nic, nic_b):
                return int(gpu), nic, nic_b
        return src_gpu, nic_a, nic_b

    def _walk(self, node: int, dst: int, flow_hash: int) -> list[int]:
        links: list[int] = []
        hop = 0
        while node != dst:
            options = self.next_hops(node, dst)
            if not options:
                raise UserError(f"topology: no route from {self.node_name[node]} to {self.node_name[dst]}")
            link = options[ecmp_index(flow_hash, hop, len(options))]
            links.append(link)
            node = self.other_end(link, node)
            hop += 1
            if hop > self.num_nodes:
                raise UserError("topology: routing loop")
        return links


def to_native(topo: Topology, gbl) -> object:
    """Fill an ``ns3::TopologyDescription`` (from ``native.load()``) with this topology."""
    desc = gbl.ns3.CreateObject[gbl.ns3.TopologyDescription]()
    arrays = _native_arrays(topo)
    desc.SetNodes(topo.num_nodes, arrays["kind"], arrays["host"])
    desc.SetLinks(topo.num_links, arrays["a"], arrays["b"], arrays["rate"], arrays["delay"], arrays["lkind"])
    desc.SetGpus(len(topo.gpu_node), arrays["gpu"], arrays["nic"])
    if topo.planes > 1:
        desc.SetGpuPlanes(topo.planes, np.ascontiguousarray(topo.gpu_plane_nic, np.int32).reshape(-1))
    desc.SetRoutes(len(topo.route_node), arrays["rnode"], arrays["rdst"], arrays["rptr"], arrays["rlink"])
    if topo.host_socket.any():
        desc.SetHostTransports(len(topo.host_socket), np.ascontiguousarray(topo.host_socket, np.uint8))
    return desc


def _native_arrays(topo: Topology) -> dict[str, np.ndarray]:
    c = np.ascontiguousarray
    return {
        "kind": c(topo.node_kind, np.uint8),
        "host": c(topo.node_host, np.int32),
        "a": c(topo.link_a, np.int32),
        "b": c(topo.link_b, np.int32),
        "rate": c(topo.link_rate_bps, np.float64),
        "delay": c(topo.link_delay_ns, np.int64),
        "lkind": c(topo.link_kind, np.uint8),
        "gpu": c(topo.gpu_node, np.int32),
        "nic": c(topo.gpu_nic_node, np.int32),
        "rnode": c(topo.route_node, np.int32),
        "rdst": c(topo.route_dst, np.int32),
        "rptr": c(topo.route_ptr, np.int64),
        "rlink": c(topo.route_link, np.int32),
    }


def ecmp_index(flow_hash: int, hop: int, choices: int) -> int:
    """Deterministic ECMP choice: mixes the flow hash with the hop number (same in C++)."""
    x = (flow_hash * 0x9E3779B1 + hop * 0x85EBCA77 + 0x165667B1) & 0xFFFFFFFF
    x ^= x >> 15
    x = (x * 0x2C1B3C6D) & 0xFFFFFFFF
    x ^= x >> 12
    return x % choices


class _Builder:
    def __init__(self) -> None:
        self.kind: list[int] = []
        self.host: list[int] = []
        self.name: list[str] = []
        self.plane: list[int] = []
        self.links: list[tuple[int, int, float, int, int]] = []
        self.oneway: list[bool] = []  # routes may use the link from a to b only

    def node(self, kind: int, host: int, name: str, plane: int = -1) -> int:
        self.kind.append(kind)
        self.host.append(host)
        self.name.append(name)
        self.plane.append(plane)
        return len(self.kind) - 1

    def link(self, a: int, b: int, rate_bps: float, delay_ns: int, kind: int, oneway: bool = False) -> None:
        self.links.append((a, b, float(rate_bps), int(delay_ns), kind))
        self.oneway.append(oneway)


def build_topology(cluster: ClusterConfig, gpu_pairs: np.ndarray | None = None) -> Topology:
    """The network graph and routes of ``cluster``.

    ``gpu_pairs`` ((k, 2) source and destination GPUs): fabric routes only between the hosts of
    those pairs, both ways, from the nodes on a shortest path (the same next hops as the full
    table, for every flow between those pairs; a flow between other GPUs has no route). At tens
    of thousands of GPUs the full table (every fabric node to every port) does not fit in memory.
    """
    builder = _Builder()
    fabric = cluster.fabric
    gpu_node: list[int] = []
    gpu_nic_node: list[int] = []
    gpu_plane_nic: list[list[int]] = []
    host_nics: list[list[int]] = []
    planes = fabric.planes
    for host in range(cluster.num_hosts):
        htype = cluster.host(host)
        gpus, nics = _build_host(builder, host, htype, fabric.pcie_delay_ns, fabric.nvlink_delay_ns, planes)
        gpu_node += gpus
        gpu_nic_node += [nics[htype.gpu_nic[g]] for g in range(htype.gpus)]
        first = [htype.gpu_nic[g] // planes * planes for g in range(htype.gpus)]
        gpu_plane_nic += [[nics[j + p] for p in range(planes)] for j in first]
        host_nics.append(nics)

    leaves = _build_zones(builder, cluster, host_nics)
    if not leaves:
        raise UserError(f"{cluster.source}: fabric: no switches were built")
    topo = Topology(
        node_kind=np.array(builder.kind, dtype=np.uint8),
        node_host=np.array(builder.host, dtype=np.int32),
        node_name=builder.name,
        link_a=np.array([x[0] for x in builder.links], dtype=np.int32),
        link_b=np.array([x[1] for x in builder.links], dtype=np.int32),
        link_rate_bps=np.array([x[2] for x in builder.links], dtype=np.float64),
        link_delay_ns=np.array([x[3] for x in builder.links], dtype=np.int64),
        link_kind=np.array([x[4] for x in builder.links], dtype=np.uint8),
        gpu_node=np.array(gpu_node, dtype=np.int32),
        gpu_nic_node=np.array(gpu_nic_node, dtype=np.int32),
        host_socket=np.ascontiguousarray(cluster.host_socket, dtype=np.uint8),
        link_oneway=np.array(builder.oneway, dtype=bool),
        planes=planes,
        gpu_plane_nic=np.array(gpu_plane_nic, dtype=np.int32).reshape(-1, planes),
        node_plane=np.array(builder.plane, dtype=np.int8),
    )
    _check_connected(topo, cluster.source)
    _compute_routes(topo, cluster, _port_pairs(topo, gpu_pairs) if gpu_pairs is not None else None)
    return topo


def _port_pairs(topo: Topology, gpu_pairs: np.ndarray) -> np.ndarray:
    """(source port, destination port) node pairs of GPU pairs between hosts, both ways (the
    packet network's acknowledgements and CNPs go back): every port of the source's host (PXN
    may leave by another GPU's port) to each of the destination's ports."""
    pairs = np.asarray(gpu_pairs, np.int64).reshape(-1, 2)
    pairs = np.unique(np.concatenate([pairs, pairs[:, ::-1]]), axis=0)
    host = topo.node_host[topo.gpu_node]
    pairs = pairs[host[pairs[:, 0]] != host[pairs[:, 1]]]
    host_pairs = np.unique(np.stack([host[pairs[:, 0]], pairs[:, 1]], axis=1), axis=0)
    ports = topo.gpu_plane_nic  # (gpus, planes)
    nic_host = topo.node_host[ports.reshape(-1)]
    order = np.argsort(nic_host, kind="stable")
    host_ports = ports.reshape(-1)[order]
    bounds = np.searchsorted(nic_host[order], np.arange(int(host.max()) + 2))
    src_blocks, dst_blocks = [], []
    for h, dst_gpu in host_pairs.tolist():
        src = np.unique(host_ports[bounds[h] : bounds[h + 1]])
        dst = ports[dst_gpu]
        src_blocks.append(np.repeat(src, dst.size))
        dst_blocks.append(np.tile(dst, src.size))
    if not src_blocks:
        return np.zeros((0, 2), np.int64)
    return np.unique(np.stack([np.concatenate(src_blocks), np.concatenate(dst_blocks)], axis=1), axis=0)


def _build_host(
    builder: _Builder, host: int, htype: HostType, pcie_delay: int, nvlink_delay: int, planes: int
) -> tuple[list[int], list[int]]:
    """Nodes and links of one host; returns its GPU and NIC nodes (module notes; NIC ``j`` is
    on plane ``j % planes``)."""
    gpus = [builder.node(GPU, host, f"h{host}.gpu{g}") for g in range(htype.gpus)]
    nics = [builder.node(NIC, host, f"h{host}.nic{j}", j % planes) for j in range(htype.nics)]
    rate = htype.pcie_bps
    nic_switch = [j * htype.pcie_switches // htype.nics for j in range(htype.nics)]
    gpu_switch = [host_paths.switch_of_gpu(htype, g) for g in range(htype.gpus)]
    socket_of = [host_paths.socket_of_switch(htype, k) for k in range(htype.pcie_switches)]
    split = host_paths.uses_host_memory(htype)
    roots: list[int] = []
    if htype.pcie_switches > 1 or htype.sockets > 1 or split:
        roots = [builder.node(PCIE_ROOT, host, f"h{host}.cpu{s}") for s in range(htype.sockets)]
        for a in range(len(roots)):
            for b in range(a + 1, len(roots)):
                builder.link(roots[a], roots[b], htype.socket_link_bps, pcie_delay, PCIE)
    if split:
        # No PCIe P2P: every copy goes up to the CPU and down again (NCCL's SHM through host memory).
        # Each PCIe switch is an upward and a downward node; links are used in one direction only.
        up = [builder.node(PCIE_SWITCH, host, f"h{host}.pcie{k}.up") for k in range(htype.pcie_switches)]
        down = [builder.node(PCIE_SWITCH, host, f"h{host}.pcie{k}.down") for k in range(htype.pcie_switches)]
        drain = list(roots)
        if htype.memory_bps > 0:  # each byte is written to DRAM and read back: half the bandwidth
            drain = [builder.node(PCIE_ROOT, host, f"h{host}.mem{s}") for s in range(htype.sockets)]
            for s, mem in enumerate(drain):
                builder.link(roots[s], mem, htype.memory_bps / 2, 0, PCIE, oneway=True)
        for k in range(htype.pcie_switches):
            builder.link(up[k], roots[socket_of[k]], rate, pcie_delay, PCIE, oneway=True)
            builder.link(drain[socket_of[k]], down[k], rate, pcie_delay, PCIE, oneway=True)
        for node, k in [*zip(gpus, gpu_switch), *zip(nics, nic_switch)]:
            builder.link(node, up[k], rate, pcie_delay, PCIE, oneway=True)
            builder.link(down[k], node, rate, pcie_delay, PCIE, oneway=True)
        _bridges(builder, htype, gpus, nvlink_delay)
        return gpus, nics
    switches = [builder.node(PCIE_SWITCH, host, f"h{host}.pcie{k}") for k in range(htype.pcie_switches)]
    for k, sw in enumerate(switches):
        if roots:
            builder.link(sw, roots[socket_of[k]], rate, pcie_delay, PCIE)
    for j, nic in enumerate(nics):
        builder.link(nic, switches[nic_switch[j]], rate, pcie_delay, PCIE)
    for g, node in enumerate(gpus):
        builder.link(node, switches[gpu_switch[g]], rate, pcie_delay, PCIE)
    if htype.fabric == "nvswitch":
        nvswitch = builder.node(NVSWITCH, host, f"h{host}.nvswitch")
        for node in gpus:
            builder.link(node, nvswitch, htype.nvlink_effective_bps, nvlink_delay // 2, NVLINK)
    _bridges(builder, htype, gpus, nvlink_delay)
    return gpus, nics


def _bridges(builder: _Builder, htype: HostType, gpus: list[int], nvlink_delay: int) -> None:
    """2-way NVLink bridges between GPUs 0-1, 2-3, ... (``nvlink_bridges``)."""
    if htype.nvlink_bridges:
        for a in range(0, len(gpus) - 1, 2):
            builder.link(gpus[a], gpus[a + 1], htype.nvlink_effective_bps, nvlink_delay, NVLINK)


def _build_zones(builder: _Builder, cluster: ClusterConfig, host_nics: list[list[int]]) -> list[int]:
    """One fabric per zone (the whole cluster when it names none), each built per plane; a zone
    link joins the two zones' top switches of every plane (and, rail-only, of every rail both
    zones have), its bandwidth shared evenly by these links."""
    if not cluster.zones:
        return _build_fabric(builder, cluster, host_nics, list(range(cluster.num_hosts)), "")[0]
    leaves: list[int] = []
    gateways: dict[int, dict[tuple[int, int], int]] = {}
    for z, name in enumerate(cluster.zones):
        hosts = [h for h in range(cluster.num_hosts) if cluster.zone_of_host[h] == z]
        if hosts:
            zone_leaves, tops = _build_fabric(builder, cluster, host_nics, hosts, f"{name}.")
            leaves += zone_leaves
            gateways[z] = tops
    for link in cluster.zone_links:
        if link.a in gateways and link.b in gateways:
            shared = sorted(gateways[link.a].keys() & gateways[link.b].keys())
            for key in shared:
                a, b = gateways[link.a][key], gateways[link.b][key]
                builder.link(a, b, link.bandwidth_bps / len(shared), link.latency_ns, FABRIC)
    return leaves


def _build_fabric(
    builder: _Builder, cluster: ClusterConfig, host_nics: list[list[int]], members: list[int], prefix: str
) -> tuple[list[int], dict[tuple[int, int], int]]:
    """Every plane's switches and links over hosts ``members``; returns all leaves (rail switches)
    and the top switch of every (plane, rail) (rail -1 unless rail-only)."""
    planes = cluster.fabric.planes
    leaves: list[int] = []
    tops: dict[tuple[int, int], int] = {}
    for plane in range(planes):
        ports = [nics[plane::planes] for nics in host_nics]  # port j on plane j % planes
        plane_prefix = f"{prefix}p{plane}." if planes > 1 else prefix
        plane_leaves, plane_tops = _build_plane(builder, cluster, ports, members, plane, plane_prefix)
        leaves += plane_leaves
        tops.update({(plane, rail): node for rail, node in plane_tops.items()})
    return leaves, tops


def _build_plane(
    builder: _Builder,
    cluster: ClusterConfig,
    host_nics: list[list[int]],
    members: list[int],
    plane: int,
    prefix: str,
) -> tuple[list[int], dict[int, int]]:
    """One plane's leaves and spines over hosts ``members``; returns the leaves and the top
    switch of every rail (rail-only) or of the whole plane (key -1): its first spine or only leaf."""
    fabric = cluster.fabric
    per_leaf = fabric.hosts_per_leaf
    groups = [members[start : start + per_leaf] for start in range(0, len(members), per_leaf)]
    leaves: list[int] = []
    leaf_down_bps: list[float] = []
    leaf_rail: list[int] = []
    for gi, hosts in enumerate(groups):
        if fabric.kind in ("rail-optimized", "rail-only"):
            rails = max(len(host_nics[h]) for h in hosts)
            for rail in range(rails):
                leaf = builder.node(LEAF, -1, f"{prefix}rail{rail}.g{gi}", plane)
                down = 0.0
                for h in hosts:
                    if rail < len(host_nics[h]):
                        speed = cluster.host(h).nic_speed_bps
                        builder.link(host_nics[h][rail], leaf, speed, fabric.link_delay_ns, ACCESS)
                        down += speed
                leaves.append(leaf)
                leaf_down_bps.append(down)
                leaf_rail.append(rail)
        else:
            leaf = builder.node(LEAF, -1, f"{prefix}leaf{gi}", plane)
            down = 0.0
            for h in hosts:
                speed = cluster.host(h).nic_speed_bps
                for nic in host_nics[h]:
                    builder.link(nic, leaf, speed, fabric.link_delay_ns, ACCESS)
                    down += speed
            leaves.append(leaf)
            leaf_down_bps.append(down)
            leaf_rail.append(0)
    if len(groups) == 1 and fabric.kind == "rail-only":
        return leaves, dict(zip(leaf_rail, leaves))  # one rail switch per rail, nothing above it
    if len(leaves) == 1:
        return leaves, {-1: leaves[0]}
    uplinks = [
        max(1, math.ceil(down / (fabric.oversubscription * fabric.spine_speed_bps) - 1e-9))
        for down in leaf_down_bps
    ]
    if fabric.kind == "rail-only":  # each rail its own spines: no path between rails
        tops: dict[int, int] = {}
        for rail in sorted(set(leaf_rail)):
            mine = [i for i, r in enumerate(leaf_rail) if r == rail]
            spines = [
                builder.node(SPINE, -1, f"{prefix}rail{rail}.spine{s}", plane)
                for s in range(max(uplinks[i] for i in mine))
            ]
            for i in mine:
                for s in range(uplinks[i]):
                    builder.link(leaves[i], spines[s], fabric.spine_speed_bps, fabric.link_delay_ns, FABRIC)
            tops[rail] = spines[0]
        return leaves, tops
    spines = [builder.node(SPINE, -1, f"{prefix}spine{s}", plane) for s in range(max(uplinks))]
    for leaf, count in zip(leaves, uplinks):
        for s in range(count):
            builder.link(leaf, spines[s], fabric.spine_speed_bps, fabric.link_delay_ns, FABRIC)
    return leaves, {-1: spines[0]}


def _check_connected(topo: Topology, source: str) -> None:
    n = topo.num_nodes
    graph = csr_matrix((np.ones(topo.num_links), (topo.link_a, topo.link_b)), shape=(n, n))
    count, labels = connected_components(graph, directed=False)
    if count > 1:
        lonely = int(np.flatnonzero(labels != labels[topo.gpu_node[0]])[0])
        raise UserError(f"{source}: topology is disconnected: {topo.node_name[lonely]} cannot reach GPU 0")


def _compute_routes(topo: Topology, cluster: ClusterConfig, port_pairs: np.ndarray | None = None) -> None:
    fabric = _fabric_routes(topo) if port_pairs is None else _fabric_routes_for(topo, port_pairs)
    parts = [fabric, *_host_routes(topo, cluster)]
    topo.route_node = np.concatenate([p[0] for p in parts]).astype(np.int32)
    topo.route_dst = np.concatenate([p[1] for p in parts]).astype(np.int32)
    counts = np.concatenate([p[2] for p in parts]).astype(np.int64)
    topo.route_ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    topo.route_link = np.concatenate([p[3] for p in parts]).astype(np.int32)


_RouteBlock = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]  # node, dst, count, links


def _fabric_routes(topo: Topology) -> _RouteBlock:
    """Hop-count shortest paths from every fabric node to every NIC, all equal-cost next hops."""
    members, _, graph, eu, ev, elink = _fabric_graph(topo)
    nic_local = np.flatnonzero(topo.node_kind[members] == NIC)
    dist = shortest_path(graph, directed=False, unweighted=True, indices=nic_local)  # (nics, m)
    forwards = topo.node_kind[members[ev]] != NIC  # a NIC never forwards for others
    out_nodes, out_dsts, out_counts, out_links = [], [], [], []
    for d_index, d_local in enumerate(nic_local):
        dd = dist[d_index]
        # unreachable nodes (another plane, another rail of a rail-only fabric) get no entry
        sel = np.flatnonzero((dd[ev] == dd[eu] - 1) & np.isfinite(dd[eu]) & (forwards | (ev == d_local)))
        us, counts = np.unique(eu[sel], return_counts=True)
        out_nodes.append(members[us])
        out_dsts.append(np.full(len(us), members[d_local]))
        out_counts.append(counts)
        out_links.append(elink[sel])
    return _route_block(out_nodes, out_dsts, out_counts, out_links)


def _route_block(nodes: list, dsts: list, counts: list, links: list) -> _RouteBlock:
    """The per-destination lists of route entries as one block (empty arrays when none)."""
    if not nodes:
        z = np.zeros(0, np.int64)
        return z, z, z, z
    return np.concatenate(nodes), np.concatenate(dsts), np.concatenate(counts), np.concatenate(links)


def _fabric_graph(topo: Topology) -> tuple:
    """The fabric's nodes (local numbering), its CSR adjacency and the edges sorted by source."""
    fabric_links = np.flatnonzero(np.isin(topo.link_kind, (ACCESS, FABRIC)))
    members = np.unique(np.concatenate([topo.link_a[fabric_links], topo.link_b[fabric_links]]))
    to_local = np.full(topo.num_nodes, -1, dtype=np.int64)
    to_local[members] = np.arange(len(members))
    a, b = to_local[topo.link_a[fabric_links]], to_local[topo.link_b[fabric_links]]
    m = len(members)
    graph = csr_matrix((np.ones(len(a)), (a, b)), shape=(m, m))
    eu, ev = np.concatenate([a, b]), np.concatenate([b, a])
    elink = np.concatenate([fabric_links, fabric_links])
    order = np.argsort(eu, kind="stable")
    return members, to_local, graph, eu[order], ev[order], elink[order]


# destinations whose distances are computed in one shortest_path call (memory: batch x nodes)
_ROUTE_BATCH = 512


def _fabric_routes_for(topo: Topology, port_pairs: np.ndarray) -> _RouteBlock:
    """:func:`_fabric_routes` restricted to ``port_pairs`` ((source port, destination port)
    nodes): toward each destination, the entries of the nodes on a shortest path from one of
    its sources, each with the same next hops, in the same order, as in the full table."""
    members, to_local, graph, eu, ev, elink = _fabric_graph(topo)
    forwards = topo.node_kind[members[ev]] != NIC
    edge_ptr = np.searchsorted(eu, np.arange(len(members) + 1))
    pairs = port_pairs[np.argsort(port_pairs[:, 1], kind="stable")]
    dsts, starts = np.unique(pairs[:, 1], return_index=True)
    ends = np.append(starts[1:], len(pairs))
    out_nodes, out_dsts, out_counts, out_links = [], [], [], []
    for b0 in range(0, len(dsts), _ROUTE_BATCH):
        batch = to_local[dsts[b0 : b0 + _ROUTE_BATCH]]
        dist = shortest_path(graph, directed=False, unweighted=True, indices=batch)
        for k, d_local in enumerate(batch.tolist()):
            dd = dist[k]
            srcs = to_local[pairs[starts[b0 + k] : ends[b0 + k], 0]]
            frontier = np.unique(srcs[(srcs >= 0) & (srcs != d_local) & np.isfinite(dd[np.maximum(srcs, 0)])])
            seen = np.zeros(len(members), bool)
            while frontier.size:
                seen[frontier] = True
                lo, hi = edge_ptr[frontier], edge_ptr[frontier + 1]
                counts = hi - lo
                edges = np.repeat(lo - np.concatenate([[0], np.cumsum(counts)[:-1]]), counts) + np.arange(
                    counts.sum()
                )
                sel = edges[(dd[ev[edges]] == dd[eu[edges]] - 1) & (forwards[edges] | (ev[edges] == d_local))]
                us, n = np.unique(eu[sel], return_counts=True)
                out_nodes.append(members[us])
                out_dsts.append(np.full(len(us), members[d_local]))
                out_counts.append(n)
                out_links.append(elink[sel])
                nxt = np.unique(ev[sel])
                frontier = nxt[(nxt != d_local) & ~seen[nxt]]
    return _route_block(out_nodes, out_dsts, out_counts, out_links)


def _host_routes(topo: Topology, cluster: ClusterConfig) -> list[_RouteBlock]:
    """Cheapest (sum of 1/rate) host-internal paths; GPUs and NICs are never transit nodes.

    Hosts of one type are built identically, so routes are computed once per type and shifted by
    each host's first node and first link.
    """
    host_link = np.isin(topo.link_kind, (NVLINK, PCIE))
    link_host = np.where(host_link, topo.node_host[topo.link_a], -1)
    blocks: list[_RouteBlock] = []
    template: dict[str, tuple[int, int, _RouteBlock]] = {}
    for host in range(cluster.num_hosts):
        node_ids = np.flatnonzero(topo.node_host == host)
        link_ids = np.flatnonzero(link_host == host)
        type_name = cluster.host_type_of_host[host]
        if type_name not in template:
            template[type_name] = (
                int(node_ids[0]),
                int(link_ids[0]),
                _routes_of_host(topo, node_ids, link_ids),
            )
        node0, link0, (rn, rd, rc, rl) = template[type_name]
        dn, dl = int(node_ids[0]) - node0, int(link_ids[0]) - link0
        blocks.append((rn + dn, rd + dn, rc, rl + dl))
    return blocks


def _routes_of_host(topo: Topology, node_ids: np.ndarray, link_ids: np.ndarray) -> _RouteBlock:
    forward: dict[int, list[tuple[int, int, float]]] = {}  # u -> (v, link, cost) usable from u to v
    backward: dict[int, list[tuple[int, int, float]]] = {}  # v -> (u, link, cost): the same, reversed
    oneway = topo.link_oneway if topo.link_oneway.size else np.zeros(topo.num_links, bool)
    for link in link_ids:
        u, v = int(topo.link_a[link]), int(topo.link_b[link])
        cost = 1e12 / float(topo.link_rate_bps[link])
        pairs = [(u, v)] if oneway[link] else [(u, v), (v, u)]
        for x, y in pairs:
            forward.setdefault(x, []).append((y, int(link), cost))
            backward.setdefault(y, []).append((x, int(link), cost))
    endpoint = (topo.node_kind == GPU) | (topo.node_kind == NIC)
    nodes, dsts, counts, links = [], [], [], []
    for dst in node_ids[endpoint[node_ids]]:
        dist = _dijkstra(int(dst), backward, endpoint)  # cost from every node to dst
        for u in node_ids:
            u = int(u)
            if u == dst or u not in dist:
                continue
            best = sorted(
                link
                for v, link, cost in forward.get(u, [])
                if v in dist
                and (v == dst or not endpoint[v])
                and math.isclose(dist[v] + cost, dist[u], rel_tol=1e-9)
            )
            if best:
                nodes.append(u)
                dsts.append(int(dst))
                counts.append(len(best))
                links.extend(best)
    return (
        np.array(nodes, np.int64),
        np.array(dsts, np.int64),
        np.array(counts, np.int64),
        np.array(links, np.int64),
    )


def _dijkstra(source: int, adjacency: dict, endpoint: np.ndarray) -> dict[int, float]:
    dist = {source: 0.0}
    heap = [(0.0, source)]
    while heap:
        d, u = heapq.heappop(heap)
        if d > dist.get(u, math.inf):
            continue
        if u != source and endpoint[u]:
            continue  # endpoints terminate paths: no transit through a GPU or NIC
        for v, _link, cost in adjacency.get(u, []):
            nd = d + cost
            if nd < dist.get(v, math.inf) - 1e-12 * nd:
                dist[v] = nd
                heapq.heappush(heap, (nd, v))
    return dist
