"""What a decomposer needs to know about a communicator on the cluster.

Ranks are grouped by host in order of first appearance (NCCL orders nodes the same way for a
given rank list); inside a host the ranks keep communicator order. Bandwidths are the numbers
NCCL's topology search would use (docs/network_models.md §4.7), in GB/s (1e9 B/s):
NVLink = links x NCCL per-link value (line rate x NCCL efficiency), PCIe = NCCL's x16 value for
the generation, NIC = its line rate.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from heterosim.config.cluster import ClusterConfig
from heterosim.errors import UserError
from heterosim.plan.host_paths import ring_intra_gbps

# NCCL effective per-link NVLink GB/s over line rate per link (topo.h; line 25 GB/s, B200 50 GB/s).
_NVLINK_EFFICIENCY = {
    "volta": 20.0 / 25.0,
    "ampere": 20.0 / 25.0,
    "hopper": 20.6 / 25.0,
    "blackwell": 40.1 / 50.0,
}
GENERATIONS = ("volta", "ampere", "hopper", "blackwell")
# Catalogue generations outside NCCL's four tables, mapped to the closest one (Ada is SM89,
# tuned like Ampere; Turing is SM75, below NCCL's SM80 threshold, so it takes the Volta tables;
# MI300X runs RCCL, approximated with the Hopper tables).
_GENERATION_ALIAS = {"ada": "ampere", "turing": "volta", "cdna3": "hopper"}


def nccl_generation(catalogue_generation: str) -> str:
    """The NCCL tuning-table generation for a catalogue generation name."""
    gen = catalogue_generation.lower()
    gen = _GENERATION_ALIAS.get(gen, gen)
    return gen if gen in GENERATIONS else "volta"


@dataclass(frozen=True)
class CommView:
    """A communicator on the cluster: GPUs, host groups and the bandwidths NCCL would see."""

    gpus: np.ndarray  # int64 (n,): global GPU of every communicator rank
    host_of_rank: np.ndarray  # int64 (n,): host of every rank
    groups: tuple[np.ndarray, ...]  # rank indices per host, hosts in first-appearance order
    local_index: np.ndarray  # int64 (n,): GPU index inside its host
    nic_of_rank: np.ndarray  # int64 (n,): NIC index (rail) inside its host
    generation: str  # oldest GPU generation in the communicator
    same_generation: bool
    all_nvswitch: bool
    intra_gbps: float  # per-GPU intra-host bandwidth NCCL would use (min over hosts), GB/s
    inter_gbps: float  # per-host aggregate NIC bandwidth (min over hosts), GB/s
    nic_gbps: float  # slowest single NIC, GB/s
    nics_per_host: int  # fewest distinct NICs used by the communicator on one host
    intra_wire_ns: int  # wire latency of an intra-host hop (NVSwitch traversal or PCIe switches)
    net_wire_ns: int  # wire latency of a rail hop: 2 access links + PCIe to and from the NICs
    planes: int = 1  # fabric planes: every GPU has a NIC port on each

    @property
    def n(self) -> int:
        return int(self.gpus.shape[0])

    @property
    def num_hosts(self) -> int:
        return len(self.groups)

    @property
    def ppn(self) -> int:
        return max(len(g) for g in self.groups)

    def rank_of_gpu(self, gpus: np.ndarray) -> np.ndarray:
        """Communicator index of every global GPU in ``gpus`` (all must be members)."""
        order = np.argsort(self.gpus)
        return order[np.searchsorted(self.gpus[order], gpus)]


def comm_view(ranks: list[int] | np.ndarray, cluster: ClusterConfig) -> CommView:
    """Summarise the communicator ``ranks`` (global GPU ids in communicator order)."""
    gpus = np.asarray(ranks, dtype=np.int64).reshape(-1)
    if gpus.size == 0:
        raise UserError("collective: ranks: expected at least one rank")
    if gpus.min() < 0 or gpus.max() >= cluster.world_size:
        raise UserError(
            f"collective: ranks: GPU ids must be in 0..{cluster.world_size - 1}, got {int(gpus.max())}"
        )
    if np.unique(gpus).size != gpus.size:
        raise UserError("collective: ranks: a GPU appears twice in the communicator")
    host_of_rank = cluster.gpu_host[gpus].astype(np.int64)
    _, first = np.unique(host_of_rank, return_index=True)
    host_order = host_of_rank[np.sort(first)]
    groups = tuple(np.flatnonzero(host_of_rank == h) for h in host_order)
    types = [cluster.host(int(h)) for h in host_order]
    gens = [nccl_generation(t.spec.generation) for t in types]
    generation = min(gens, key=GENERATIONS.index)
    intra = []
    for h, t in zip(host_order, types):
        if t.fabric == "nvswitch":
            intra.append(t.nvlink_bps / 8e9 * _NVLINK_EFFICIENCY[nccl_generation(t.spec.generation)])
        else:  # PCIe hosts: P2P, or SHM through the CPU sharing switch uplinks (host_paths)
            local = cluster.gpu_local_index[gpus[host_of_rank == h]]
            intra.append(ring_intra_gbps(t, [int(g) for g in local]))
    planes = cluster.fabric.planes  # a GPU uses its port on every plane (plan/collectives/planes.py)
    nics_used = [np.unique(cluster.gpu_nic[gpus[g]] // planes).size * planes for g in groups]
    inter = [nu * t.nic_speed_bps / 8e9 for nu, t in zip(nics_used, types)]
    fabric = cluster.fabric
    return CommView(
        gpus=gpus,
        host_of_rank=host_of_rank,
        groups=groups,
        local_index=cluster.gpu_local_index[gpus].astype(np.int64),
        nic_of_rank=cluster.gpu_nic[gpus].astype(np.int64),
        generation=generation,
        same_generation=len({t.spec.generation for t in types}) == 1,
        all_nvswitch=all(t.fabric == "nvswitch" for t in types),
        intra_gbps=float(min(intra)),
        inter_gbps=float(min(inter)),
        nic_gbps=float(min(t.nic_speed_bps for t in types) / 8e9),
        nics_per_host=int(min(nics_used)),
        intra_wire_ns=int(
            fabric.nvlink_delay_ns if all(t.fabric == "nvswitch" for t in types) else 3 * fabric.pcie_delay_ns
        ),
        net_wire_ns=int(2 * fabric.link_delay_ns + 4 * fabric.pcie_delay_ns),
        planes=int(planes),
    )
