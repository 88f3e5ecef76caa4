"""Inside one host as NCCL sees it: the path type between two GPUs and the transport NCCL picks.

NCCL classifies the path between two GPUs of a node (src/include/graph.h, computed in
src/graph/paths.cc ``ncclTopoComputePaths``), best first: ``NVL`` (NVLink, through an NVSwitch or
a bridge), ``PIX`` (one PCIe switch), ``PXB`` (several PCIe switches, no host bridge), ``PHB``
(through the CPU's PCIe host bridge), ``SYS`` (across the inter-socket link, UPI / Infinity
Fabric). Its transport rules (NCCL 2.30, paths.cc ``ncclTopoCheckP2p`` and
``ncclTopoComputePaths``; shm.cc ``shmCanConnect``):

* **P2P** when the path type is at most the P2P level and the driver reports P2P read and write
  between the pair (NVML ``p2pStatusRead/Write``). The level is ``PXB`` by default ("don't use P2P
  across CPU host bridges"), ``SYS`` on AMD x86 CPUs with at most 2 GPUs, or the
  ``NCCL_P2P_LEVEL`` override (host type key ``p2p_level``). GeForce cards report no PCIe P2P
  (catalogue ``pcie_p2p: false``); a bridged NVLink pair still has P2P over NVLink.
* Else NCCL "diverts all traffic through the CPU" local to the receiving GPU and connects the pair
  with **SHM**: the sender's kernel writes into a host-memory buffer on the receiver's NUMA node
  (``NCCL_SHM_LOCALITY`` = 2, receiver side) and the receiver's kernel reads it: two PCIe
  crossings through host memory, plus the inter-socket link when the GPUs sit on different sockets.
* **NET** inside a host only when ``ncclTopoCheckNet`` says the network is faster: both GPUs reach
  a NIC over ``PXB`` or better (GPUDirect RDMA) at a higher bandwidth than their GPU-to-GPU path.
  GPUDirect RDMA needs the same peer access as P2P, so GPUs without PCIe P2P never take it.

APPROXIMATION: multi-level PCIe switch trees (``PXB``) are not built (a GPU sits on one switch
under its socket's root complex); NET inside a host is reported by :func:`transport` but the
simulated route stays the host-internal one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from heterosim.config.cluster import HostType

# NCCL path types, best first (graph.h values LOC 0, NVL 1, PIX 4, PXB 5, PHB 8, SYS 9, NET 10).
PATH_TYPES = ("LOC", "NVL", "PIX", "PXB", "PHB", "SYS", "NET")
P2P, SHM, NET = "p2p", "shm", "net"
# NCCL's bandwidths of the links its search sees (NCCL_PCIE_GBPS, NCCL_SOCKET_LINK_GBPS) are
# defined with the host keys that default to them, in heterosim.config.cluster.


def rank(path: str) -> int:
    """Order of a path type (smaller is closer)."""
    return PATH_TYPES.index(path)


def switch_of_gpu(host: HostType, gpu: int) -> int:
    """PCIe switch of local GPU ``gpu``: the switch of its NIC (NIC ``j`` sits on switch
    ``j * switches // nics``), or, on hosts with more switches than NICs, GPUs spread evenly."""
    if host.pcie_switches > host.nics:
        return gpu * host.pcie_switches // host.gpus
    return host.gpu_nic[gpu] * host.pcie_switches // host.nics


def socket_of_switch(host: HostType, switch: int) -> int:
    """CPU socket whose root complex holds PCIe switch ``switch`` (switches spread evenly)."""
    return switch * host.sockets // host.pcie_switches


def socket_of_gpu(host: HostType, gpu: int) -> int:
    return socket_of_switch(host, switch_of_gpu(host, gpu))


def nvlink_pair(host: HostType, a: int, b: int) -> bool:
    """Whether local GPUs ``a`` and ``b`` are joined by NVLink (NVSwitch, or the same 2-way bridge)."""
    if host.fabric == "nvswitch":
        return True
    return host.spec.has_nvlink and host.spec.nvlink_bridge and host.nvlink_bridges and a // 2 == b // 2


def path_type(host: HostType, a: int, b: int) -> str:
    """NCCL's path type between local GPUs ``a`` and ``b`` of ``host``."""
    if a == b:
        return "LOC"
    if nvlink_pair(host, a, b):
        return "NVL"
    sa, sb = switch_of_gpu(host, a), switch_of_gpu(host, b)
    if sa == sb:
        return "PIX"
    if socket_of_switch(host, sa) == socket_of_switch(host, sb):
        return "PHB"
    return "SYS"


def p2p_level(host: HostType) -> str:
    """The P2P level NCCL applies on ``host`` (paths.cc: PXB; SYS on AMD with <= 2 GPUs; override)."""
    if host.p2p_level:
        return host.p2p_level
    if host.cpu_vendor == "amd" and host.gpus <= 2:
        return "SYS"
    return "PXB"


def p2p_possible(host: HostType, a: int, b: int) -> bool:
    """NCCL's ``ncclTopoCheckP2p`` for local GPUs ``a`` and ``b``."""
    path = path_type(host, a, b)
    if rank(path) > rank(p2p_level(host)):
        return False
    return path == "NVL" or host.p2p


def gpu_path_gbps(host: HostType, a: int, b: int) -> float:
    """Bandwidth NCCL's topology gives the GPU-to-GPU path (GB/s): NVLink, PCIe, or the slower of
    PCIe and the inter-socket link where the path crosses sockets."""
    if nvlink_pair(host, a, b):
        return host.nvlink_effective_bps / 8e9
    pcie = host.pcie_nccl_gbps
    if path_type(host, a, b) == "SYS":
        return min(pcie, host.socket_link_bps / 8e9)
    return pcie


def transport(host: HostType, a: int, b: int) -> str:
    """The transport NCCL connects local GPU ``a`` to local GPU ``b`` with: p2p, shm or net."""
    if p2p_possible(host, a, b):
        return P2P
    nic_gbps = min(host.nic_speed_bps / 8e9, host.pcie_nccl_gbps)
    if host.p2p and nic_gbps > gpu_path_gbps(host, a, b):  # GPUDirect RDMA at PIX, faster than the path
        return NET
    return SHM


def transport_matrix(host: HostType) -> list[list[str]]:
    """``transport(host, a, b)`` for every ordered pair of local GPUs ("-" on the diagonal)."""
    return [["-" if a == b else transport(host, a, b) for b in range(host.gpus)] for a in range(host.gpus)]


def uses_host_memory(host: HostType) -> bool:
    """True when every GPU pair not joined by NVLink goes through host memory (no PCIe P2P at all):
    the topology then routes all PCIe traffic of the host through the CPU (heterosim.engine.topology)."""
    return host.fabric == "pcie" and not host.p2p


def ring_intra_gbps(host: HostType, local_gpus: list[int]) -> float:
    """Per-GPU bandwidth NCCL's ring search finds inside ``host`` for ``local_gpus`` (GB/s).

    APPROXIMATION of ``ncclTopoCompute``: P2P within one PCIe switch runs at the PCIe rate; paths
    through the CPU share each switch's x16 uplink among its GPUs of the ring, and a ring spanning
    sockets crosses the inter-socket link once each way.
    """
    if host.fabric == "nvswitch":
        return host.nvlink_effective_bps / 8e9
    pcie = host.pcie_nccl_gbps
    switches: dict[int, int] = {}
    for g in local_gpus:
        switches[switch_of_gpu(host, g)] = switches.get(switch_of_gpu(host, g), 0) + 1
    if len(switches) == 1 and host.p2p:
        return pcie
    through_cpu = max(switches.values()) if not host.p2p else 1
    bw = pcie / through_cpu
    if len({socket_of_switch(host, s) for s in switches}) > 1:
        bw = min(bw, host.socket_link_bps / 8e9)
    return bw
