"""Cluster files: host types, how many hosts of each, and the switch fabric (schema in docs/config.md).

All bandwidths are per direction, in bits per second. GPUs are numbered globally in host order
(host 0's GPUs first); that numbering is the default rank placement. ``transport`` per host type
says whether its NICs do RDMA (``rdma``, default) or NCCL must use its socket transport over TCP
(``socket``); a flow between hosts uses RDMA only if both ends have it.

``gpus:`` defines accelerators in the GPU catalogue's own fields (heterosim/catalog/gpus.yaml:
``tflops``, ``memory_gb`` and ``memory_tbps`` required; ``memory_mib`` (the driver-reported total,
used as the capacity when given), ``vendor``, ``generation``, ``segment``, ``nvlink_gbps_per_dir``,
``nvlink_bridge``, ``pcie_gen``, ``sm_count``, ``power_limit_w`` (a board power limit below the
default, on parts whose clock-power curve is catalogued), ``aliases``, ``sources`` optional). Host types
name them like catalogue GPUs. A ``gpus:`` entry whose name or alias is also a catalogue name
*shadows* the catalogue entry inside this cluster (the file says what the hardware is); when any
number differs, ``ClusterConfig.notes`` says which, and ``run`` prints it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from heterosim.catalog.gpus import (
    DTYPE_BYTES,
    GPU_FIELDS,
    SEGMENTS,
    GpuSpec,
    canonical_gpu_name,
    gpu_spec,
    known_gpu_names,
    make_gpu_spec,
    pcie_x16_bytes_per_s,
    power_curve,
    power_curve_names,
)
from heterosim.config.fields import Section, read_yaml_mapping
from heterosim.errors import UserError

# rail-only: rail switches and no spine joining the rails (Wang et al., "Rail-only: A Low-Cost
# High-Performance Network for Training LLMs with Trillion Parameters", arXiv:2307.12169, 2023);
# traffic between rails crosses NVLink first (heterosim.engine.topology).
FABRIC_KINDS = ("rail-optimized", "fat-tree", "rail-only")

# Physical ranges (bit/s, ns): the slowest RoCE NIC in use is 10 GbE, the fastest 1.6 Tbit/s;
# NVLink 5 is 14.4 Tbit/s per GPU and direction; PCIe 6.0 x16 is 1 Tbit/s. The ranges leave
# room on both sides but refuse values no link has (1 bit/s, an infinite speed).
NIC_SPEED_RANGE = (1e9, 3.2e12)
NVLINK_RANGE = (1e9, 1e14)
PCIE_RANGE = (1e9, 1e13)
SPINE_RANGE = (1e9, 1e14)
MAX_LINK_DELAY_NS = 10_000_000  # 10 ms: a 2000 km fibre
MAX_HOST_DELAY_NS = 1_000_000
MAX_CUSTOM_GPUS = 1024  # gpus: entries of one cluster file (the catalogue holds a few dozen)
MAX_GPU_ALIASES = 64  # gpus.<name>.aliases
MAX_GPUS = 1 << 17  # 131,072: above the largest training clusters built (about 100k GPUs)
HOST_FABRICS = ("nvswitch", "pcie")
# NCCL's inter-host transports: RDMA (RoCEv2 queue pairs) or its socket transport over TCP
# (net_socket.cc), for Ethernet without RDMA. A flow between hosts uses RDMA only if both have it.
HOST_TRANSPORTS = ("rdma", "socket")
# host_types.<name>.cpu: the CPU family, for NCCL's P2P level (AMD: P2P across the CPU with <= 2
# GPUs) and the default inter-socket link bandwidth (heterosim.plan.host_paths)
CPU_FAMILIES = ("intel", "intel-spr", "amd")
# NCCL's bandwidths of the links its topology search sees, GB/s (src/graph/topo.h): PCIe x16 by
# generation (width x 60/80 x rate: Gen3 12, Gen4 24, Gen5 48, Gen6 96) and the inter-socket link
# per CPU family (SKL_QPI_BW 10 for Intel Skylake and later before Sapphire Rapids, SRP_QPI_BW 22
# for Sapphire Rapids, AMD_BW 16 for AMD Infinity Fabric): the defaults of pcie and socket_link_bw.
NCCL_PCIE_GBPS = {3: 12.0, 4: 24.0, 5: 48.0, 6: 96.0}
NCCL_SOCKET_LINK_GBPS = {"intel": 10.0, "intel-spr": 22.0, "amd": 16.0}
# host_types.<name>.p2p_level: NCCL_P2P_LEVEL (LOC disables P2P; NVL allows it over NVLink only)
P2P_LEVELS = ("LOC", "NVL", "PIX", "PXB", "PHB", "SYS")
MAX_SOCKETS = 8
# zone_links: one-way latency up to 500 ms (half the round trip between the farthest cloud
# regions, about 300 ms), bandwidth 1 Mbit/s .. 100 Tbit/s
MAX_ZONE_LATENCY_NS = 500_000_000
ZONE_BW_RANGE = (1e6, 1e14)
SOCKET_LINK_RANGE = (1e9, 1e13)
MEMORY_BW_RANGE = (1e10, 1e14)

# NCCL's effective NVLink bandwidth per link (src/graph/topo.h: SM70/SM80 20.0, SM90 20.6,
# SM100 40.1 GB/s; docs/network_models.md §4.7) over the per-link line rate (NVLink 2-4:
# 25 GB/s per direction, NVLink 5: 50 GB/s; §6.1). NCCL's copy loops move data over NVLink at
# this fraction of the line rate, so the links of the network models carry that rate. These are
# NCCL's own constants, not fitted to any measurement.
NVLINK_EFFICIENCY = {
    "volta": 20.0 / 25.0,
    "ampere": 20.0 / 25.0,
    "hopper": 20.6 / 25.0,
    "blackwell": 40.1 / 50.0,
    "cdna3": 1.0,
}


@dataclass(frozen=True)
class HostType:
    """One kind of server: its GPUs, intra-host fabric and NICs."""

    name: str
    gpu: str  # canonical catalogue name
    gpus: int
    fabric: str  # nvswitch | pcie
    nics: int
    nic_speed_bps: float
    nvlink_bps: float  # per GPU, per direction (nvswitch hosts), line rate
    pcie_bps: float  # per PCIe x16 link, per direction
    gpu_nic: tuple[int, ...]  # NIC index used by each local GPU
    pcie_switches: int  # PCIe switches in the host; GPUs and NICs spread over them
    nvlink_efficiency: float = 1.0  # share of the NVLink line rate that NCCL's data path reaches
    gpu_spec: GpuSpec | None = None  # the GPU's spec (the cluster's own or the catalogue's)
    transport: str = "rdma"  # rdma | socket (HOST_TRANSPORTS)
    sockets: int = 1  # CPU sockets (NUMA nodes); PCIe switches spread evenly over them
    cpu_vendor: str = "intel"  # CPU_FAMILIES
    socket_link_bps: float = 80e9  # inter-socket link (UPI / Infinity Fabric), per direction
    p2p: bool = True  # PCIe peer-to-peer between the host's GPUs (GeForce: none; NCCL uses SHM)
    p2p_level: str = ""  # NCCL_P2P_LEVEL override ("" = NCCL's default)
    memory_bps: float = 0.0  # DRAM bandwidth per socket that SHM copies share (0 = not modelled)
    nvlink_bridges: bool = False  # 2-way NVLink bridges join GPUs 0-1, 2-3, ... of a pcie host

    @property
    def pcie_nccl_gbps(self) -> float:
        """NCCL's PCIe x16 bandwidth for this GPU's generation (GB/s, graph/topo.h)."""
        return NCCL_PCIE_GBPS.get(self.spec.pcie_gen, self.pcie_bps / 8e9 * 0.76)

    @property
    def nvlink_effective_bps(self) -> float:
        """NVLink rate the network models use: line rate x ``nvlink_efficiency``."""
        return self.nvlink_bps * self.nvlink_efficiency

    @property
    def spec(self) -> GpuSpec:
        return self.gpu_spec if self.gpu_spec is not None else gpu_spec(self.gpu)


@dataclass(frozen=True)
class FabricConfig:
    """The scale-out network between hosts."""

    kind: str
    link_delay_ns: int
    oversubscription: float
    spine_speed_bps: float
    hosts_per_leaf: int  # fat-tree: hosts under one leaf switch
    nvlink_delay_ns: int
    pcie_delay_ns: int
    planes: int = 1  # independent copies of the fabric; NIC port j is on plane j % planes


@dataclass(frozen=True)
class ZoneLink:
    """A link between the fabrics of two zones (availability zones, regions, sites)."""

    a: int  # zone indices
    b: int
    latency_ns: int  # one-way
    bandwidth_bps: float  # per direction


@dataclass(frozen=True)
class ClusterConfig:
    """A whole cluster, hosts listed in rank-placement order."""

    name: str
    host_types: dict[str, HostType]
    host_type_of_host: tuple[str, ...]
    fabric: FabricConfig
    source: str = ""
    gpus: dict[str, GpuSpec] = field(default_factory=dict)  # defined in the file (``gpus:``)
    gpu_aliases: dict[str, str] = field(default_factory=dict)  # lower-case name/alias -> name
    notes: tuple[str, ...] = ()  # e.g. a ``gpus:`` entry shadowing a different catalogue entry
    zone_of_host: tuple[int, ...] = ()  # zone index of every host (empty: one zone)
    zones: tuple[str, ...] = ()
    zone_links: tuple[ZoneLink, ...] = ()

    def resolve_gpu_name(self, name: str) -> str | None:
        """The canonical name of ``name``: the file's own GPUs first, then the catalogue."""
        key = str(name).strip().lower()
        return self.gpu_aliases.get(key) or canonical_gpu_name(key)

    def gpu_spec(self, name: str) -> GpuSpec:
        """Spec of GPU ``name`` as this cluster knows it; UserError listing the known names."""
        canonical = self.resolve_gpu_name(name)
        if canonical is None:
            raise UserError(
                f"{self.source or 'cluster'}: unknown GPU {name!r}; known: "
                f"{', '.join(self.known_gpu_names())}"
            )
        return self.gpus[canonical] if canonical in self.gpus else gpu_spec(canonical)

    def known_gpu_names(self) -> list[str]:
        return [*self.gpus, *(n for n in known_gpu_names() if n not in self.gpus)]

    @property
    def num_hosts(self) -> int:
        return len(self.host_type_of_host)

    def host(self, host: int) -> HostType:
        return self.host_types[self.host_type_of_host[host]]

    @cached_property
    def world_size(self) -> int:
        return int(sum(self.host(h).gpus for h in range(self.num_hosts)))

    @cached_property
    def gpu_host(self) -> np.ndarray:
        """Host index of every global GPU."""
        return np.repeat(np.arange(self.num_hosts), [self.host(h).gpus for h in range(self.num_hosts)])

    @cached_property
    def gpu_local_index(self) -> np.ndarray:
        """Index of every global GPU inside its host."""
        return np.concatenate([np.arange(self.host(h).gpus) for h in range(self.num_hosts)])

    @cached_property
    def gpu_type(self) -> tuple[str, ...]:
        """Canonical GPU name of every global GPU."""
        return tuple(self.host(int(h)).gpu for h in self.gpu_host)

    @cached_property
    def gpu_nic(self) -> np.ndarray:
        """NIC index (inside its host) used by every global GPU (its port on plane 0)."""
        return np.array(
            [self.host(int(h)).gpu_nic[int(i)] for h, i in zip(self.gpu_host, self.gpu_local_index)],
            dtype=np.int64,
        )

    @cached_property
    def gpu_plane_nics(self) -> np.ndarray:
        """(GPUs, planes) NIC index (inside its host) of every GPU's port on every plane.

        With ``fabric.planes`` P, a host's NICs form groups of P consecutive ports, port ``j``
        on plane ``j % P`` (a P-port NIC, or P NICs behind one PCIe switch); a GPU uses every
        port of the group of its ``gpu_nic``.
        """
        planes = self.fabric.planes
        first = self.gpu_nic // planes * planes
        return first[:, None] + np.arange(planes)[None, :]

    @cached_property
    def host_socket(self) -> np.ndarray:
        """1 for every host that uses NCCL's socket transport, 0 for RDMA hosts (uint8)."""
        return np.array([self.host(h).transport == "socket" for h in range(self.num_hosts)], dtype=np.uint8)


def _gpu_entry(section: Section, name: str) -> GpuSpec:
    """One ``gpus:`` entry, checked field by field (names the file and the key on error)."""
    tflops = section.section("tflops", required=True)
    peaks: dict[str, float | None] = {}
    for dtype in list(tflops.data):
        if dtype not in DTYPE_BYTES:
            raise tflops.error(dtype, f"unknown dtype; expected one of {', '.join(DTYPE_BYTES)}")
        value = tflops.raw(dtype, None)
        if value is not None:  # 0 = not supported; else 1 GFLOP/s .. 100 PFLOP/s per GPU
            value = tflops.number(dtype, minimum=0.0, maximum=1e5)
            if 0 < value < 1e-3:
                raise tflops.error(dtype, f"expected 0 (unsupported) or at least 0.001 TFLOP/s, got {value}")
        peaks[dtype] = value or None
    if not any(peaks.values()):
        raise section.error(
            "tflops", "expected at least one positive dense peak in TFLOP/s, e.g. {fp16: 71, fp32: 35.6}"
        )
    entry: dict[str, object] = {"tflops": peaks}
    entry["memory_gb"] = section.number("memory_gb", minimum=1e-3, maximum=1e5)
    if section.has("memory_mib"):
        entry["memory_mib"] = section.number("memory_mib", minimum=1.0, maximum=1e8)
    entry["memory_tbps"] = section.number("memory_tbps", minimum=1e-3, maximum=1e3)
    entry["nvlink_gbps_per_dir"] = section.number("nvlink_gbps_per_dir", 0.0, minimum=0.0, maximum=1e5)
    entry["nvlink_bridge"] = section.boolean("nvlink_bridge", False)
    pcie_gen = section.integer("pcie_gen", 4, minimum=1, maximum=64)
    if pcie_x16_bytes_per_s(pcie_gen) is None:
        raise section.error("pcie_gen", f"PCIe generation {pcie_gen} is not tabulated; use 3..6")
    entry["pcie_gen"] = pcie_gen
    entry["vendor"] = section.string("vendor", "unknown")
    entry["generation"] = section.string("generation", "unknown").lower()
    entry["segment"] = section.string("segment", "datacenter", choices=SEGMENTS)
    entry["pcie_p2p"] = section.boolean("pcie_p2p", entry["segment"] != "consumer")
    if section.has("sm_count"):
        entry["sm_count"] = section.integer("sm_count", minimum=1, maximum=100_000)
    if section.has("power_limit_w"):
        entry["power_limit_w"] = _power_limit(section, name)
    sources = section.raw("sources", {})
    if not isinstance(sources, dict):
        raise section.error("sources", "expected a mapping of field name to source text")
    entry["sources"] = {str(k): str(v) for k, v in sources.items()}
    aliases = section.raw("aliases", [])
    if not isinstance(aliases, list) or not all(isinstance(a, str) for a in aliases):
        raise section.error("aliases", "expected a list of names")
    if len(aliases) > MAX_GPU_ALIASES:
        raise section.error("aliases", f"{len(aliases):,} names; at most {MAX_GPU_ALIASES}")
    entry["aliases"] = aliases
    section.reject_unknown(GPU_FIELDS)
    return make_gpu_spec(name, entry)


def _power_limit(section: Section, name: str) -> float:
    """``power_limit_w`` of a ``gpus:`` entry: only on a part whose clock-power curve the catalogue
    holds, within the limits its driver accepts."""
    curve = power_curve(name)
    if curve is None:
        measured = ", ".join(power_curve_names())
        raise section.error(
            "power_limit_w",
            f"no measured clock-power curve for GPU {name} (measured: {measured}); remove the key",
        )
    low, high = curve.limit_range_w
    return section.number("power_limit_w", minimum=low, maximum=high)


def _shadow_note(spec: GpuSpec, catalogued: GpuSpec, where: str) -> str | None:
    def value(s: GpuSpec, name: str) -> object:
        v = getattr(s, name)
        return {k: x for k, x in v.items() if x} if name == "peak_tflops" else v

    fields = [
        f
        for f in (
            "peak_tflops",
            "memory_bytes",
            "memory_bytes_per_s",
            "nvlink_bytes_per_s",
            "pcie_gen",
            "power_limit_w",
        )
        if value(spec, f) != value(catalogued, f)
    ]
    if not fields:
        return None
    return (
        f"{where}: GPU {spec.name} is defined in the cluster file and differs from the "
        f"catalogue's {catalogued.name} in {', '.join(fields)}; the cluster file's numbers are used"
    )


def _cluster_gpus(top: Section) -> tuple[dict[str, GpuSpec], dict[str, str], tuple[str, ...]]:
    section = top.section("gpus")
    if len(section.data) > MAX_CUSTOM_GPUS:  # before any entry is read
        raise top.error(
            "gpus", f"{len(section.data):,} GPU entries; at most {MAX_CUSTOM_GPUS:,} custom GPUs per cluster"
        )
    specs: dict[str, GpuSpec] = {}
    aliases: dict[str, str] = {}
    notes: list[str] = []
    for name in list(section.data):
        if not isinstance(name, str) or not name.strip():
            raise section.error(str(name), "expected a GPU name (a string)")
        entry = section.section(name, required=True)
        spec = _gpu_entry(entry, name)
        for alias in [name, *entry.data.get("aliases", [])]:
            key = alias.strip().lower()
            if key in aliases:
                raise entry.error(
                    "aliases" if alias != name else "",
                    f"name {alias!r} is already used by GPU {aliases[key]}",
                )
            aliases[key] = name
            catalogued = canonical_gpu_name(key)
            if catalogued is not None:
                note = _shadow_note(spec, gpu_spec(catalogued), entry.key_path(""))
                if note and note not in notes:
                    notes.append(f"{top.source}: {note}")
        specs[name] = spec
    return specs, aliases, tuple(notes)


def _host_type(
    section: Section,
    name: str,
    own: dict[str, GpuSpec] | None = None,
    own_aliases: dict[str, str] | None = None,
) -> HostType:
    section = _with_instance(section)
    gpu_name = section.string("gpu")
    own, own_aliases = own or {}, own_aliases or {}
    canonical = own_aliases.get(gpu_name.strip().lower()) or canonical_gpu_name(gpu_name)
    if canonical is None:
        known = [*own, *(n for n in known_gpu_names() if n not in own)]
        raise section.error(
            "gpu", f"unknown GPU {gpu_name!r}; define it under gpus: or use one of: {', '.join(known)}"
        )
    spec = own[canonical] if canonical in own else gpu_spec(canonical)
    gpus = section.integer("gpus", minimum=1, maximum=1024)
    default_fabric = "nvswitch" if spec.has_nvlink and not spec.nvlink_bridge else "pcie"
    fabric = section.string("fabric", default_fabric, choices=HOST_FABRICS)
    if fabric == "nvswitch" and not spec.has_nvlink and not section.has("nvlink_bw"):
        raise section.error(
            "fabric", f"{canonical} has no NVLink in the catalogue; use fabric: pcie or set nvlink_bw"
        )
    if fabric == "nvswitch" and spec.nvlink_bridge and not section.has("nvlink_bw") and gpus > 2:
        raise section.error(
            "fabric",
            f"{canonical}'s NVLink is a 2-way bridge, not a switch joining {gpus} GPUs; "
            "use fabric: pcie (or set nvlink_bw to model a switch)",
        )
    nics = section.integer("nics", minimum=1, maximum=gpus * 4)
    nic_speed = section.rate("nic_speed", minimum=NIC_SPEED_RANGE[0], maximum=NIC_SPEED_RANGE[1])
    nvlink = section.rate("nvlink_bw", spec.nvlink_bytes_per_s * 8 if spec.has_nvlink else 1.0, *NVLINK_RANGE)
    pcie = section.rate("pcie_bw", spec.pcie_bytes_per_s * 8, *PCIE_RANGE)
    if section.has("gpu_nic"):
        mapping = section.raw("gpu_nic")
        if (
            not isinstance(mapping, list)
            or len(mapping) != gpus
            or not all(isinstance(x, int) and not isinstance(x, bool) for x in mapping)
        ):
            raise section.error("gpu_nic", f"expected a list of {gpus} NIC indices, one per GPU")
        bad = [x for x in mapping if not 0 <= x < nics]
        if bad:
            raise section.error("gpu_nic", f"NIC index {bad[0]} out of range 0..{nics - 1}")
        gpu_nic = tuple(mapping)
    else:
        gpu_nic = tuple(local * nics // gpus for local in range(gpus)) if nics <= gpus else tuple(range(gpus))
    sockets = section.integer("sockets", 1, minimum=1, maximum=min(MAX_SOCKETS, gpus))
    default_switches = max(1, min(nics, gpus // 2), sockets)
    pcie_switches = section.integer("pcie_switches", default_switches, minimum=1, maximum=gpus)
    nvlink_efficiency = section.number(
        "nvlink_efficiency", NVLINK_EFFICIENCY.get(spec.generation, 1.0), minimum=0.05, maximum=1.0
    )
    transport = section.string("transport", "rdma", choices=HOST_TRANSPORTS)
    intra = _intra_host(section, spec, canonical, sockets, pcie_switches, fabric)
    section.reject_unknown()
    return HostType(
        name=name,
        gpu=canonical,
        gpus=gpus,
        fabric=fabric,
        nics=nics,
        nic_speed_bps=nic_speed,
        nvlink_bps=nvlink,
        pcie_bps=pcie,
        gpu_nic=gpu_nic,
        pcie_switches=pcie_switches,
        nvlink_efficiency=nvlink_efficiency,
        gpu_spec=spec,
        transport=transport,
        **intra,
    )


def _with_instance(section: Section) -> Section:
    """``instance: provider/name``: the catalogued instance's keys as defaults for this host type
    (heterosim/catalog/instances.yaml); keys the host type sets itself win."""
    if not section.has("instance"):
        return section
    from heterosim.catalog.instances import host_type_defaults, instance_types

    name = section.string("instance")
    defaults = host_type_defaults(name)
    if defaults is None:
        raise section.error(
            "instance", f"unknown instance type {name!r}; known: {', '.join(instance_types())}"
        )
    merged = Section({**defaults, **section.data}, section.source, section.path)
    merged.string("instance")  # read: not an unknown key
    return merged


def _intra_host(
    section: Section, spec: GpuSpec, gpu: str, sockets: int, pcie_switches: int, fabric: str
) -> dict[str, Any]:
    """Sockets, CPU, P2P and host-memory keys of a host type (heterosim.plan.host_paths)."""
    if sockets > pcie_switches:
        raise section.error(
            "sockets", f"{sockets} sockets but {pcie_switches} PCIe switches; set pcie_switches >= sockets"
        )
    cpu = section.string("cpu", "intel", choices=CPU_FAMILIES)
    link = section.rate("socket_link_bw", NCCL_SOCKET_LINK_GBPS[cpu] * 8e9, *SOCKET_LINK_RANGE)
    p2p = section.boolean("p2p", spec.pcie_p2p)
    if p2p and not spec.pcie_p2p:
        why = spec.sources.get("pcie_p2p", "the GPU catalogue says pcie_p2p: false")
        raise section.error("p2p", f"{gpu} has no PCIe peer-to-peer ({why}); remove p2p or set it to false")
    level = section.string("p2p_level", "", choices=P2P_LEVELS).upper() if section.has("p2p_level") else ""
    memory = section.rate("memory_bw", 0.0, *MEMORY_BW_RANGE) if section.has("memory_bw") else 0.0
    bridges = section.boolean("nvlink_bridges", False)
    if bridges and not (spec.has_nvlink and spec.nvlink_bridge):
        raise section.error("nvlink_bridges", f"{gpu} has no 2-way NVLink bridge in the catalogue")
    if bridges and fabric != "pcie":
        raise section.error("nvlink_bridges", "bridged pairs are for fabric: pcie hosts")
    return {
        "sockets": sockets,
        "cpu_vendor": "amd" if cpu == "amd" else "intel",
        "socket_link_bps": link,
        "p2p": p2p,
        "p2p_level": level,
        "memory_bps": memory,
        "nvlink_bridges": bridges,
    }


def parse_cluster(data: dict[str, Any], source: str) -> ClusterConfig:
    """Validate a cluster mapping read from ``source``."""
    top = Section(data, source)
    name = top.string("name", "cluster")
    own, own_aliases, notes = _cluster_gpus(top)
    types_section = top.section("host_types", required=True)
    if not types_section.data:
        raise types_section.error("", "at least one host type is required")
    host_types = {
        type_name: _host_type(types_section.section(type_name, required=True), type_name, own, own_aliases)
        for type_name in list(types_section.data)
    }
    hosts_raw = top.raw("hosts")
    if not isinstance(hosts_raw, list) or not hosts_raw:
        raise top.error("hosts", "expected a non-empty list of {type: NAME, count: N}")
    zones = _zone_names(top)
    order: list[str] = []
    zone_of_host: list[int] = []
    gpus = 0
    for index, entry in enumerate(hosts_raw):
        entry_section = Section(entry, source, f"hosts[{index}]")
        type_name = entry_section.string("type")
        zone = entry_section.string("zone", zones[0] if zones else "")
        if zones and zone not in zones:
            raise entry_section.error(
                "zone", f"unknown zone {zone!r}; defined under zones: {', '.join(zones)}"
            )
        if not zones and zone:
            raise entry_section.error("zone", "no zones: are defined in this file")
        if type_name not in host_types:
            raise entry_section.error(
                "type", f"unknown host type {type_name!r}; defined: {', '.join(host_types)}"
            )
        count = entry_section.integer("count", 1, minimum=1, maximum=100_000)
        entry_section.reject_unknown()
        gpus += count * host_types[type_name].gpus
        if gpus > MAX_GPUS:
            raise entry_section.error(
                "count", f"the cluster reaches {gpus:,} GPUs; at most {MAX_GPUS:,} are simulated"
            )
        order.extend([type_name] * count)
        zone_of_host.extend([zones.index(zone) if zones else 0] * count)
    fabric_section = top.section("fabric")
    fastest_nic = max(host_types[t].nic_speed_bps for t in set(order))
    fabric = FabricConfig(
        kind=fabric_section.string("kind", "rail-optimized", choices=FABRIC_KINDS),
        link_delay_ns=fabric_section.time_ns("link_delay", "1us", maximum=MAX_LINK_DELAY_NS),
        oversubscription=fabric_section.number("oversubscription", 1.0, minimum=1.0, maximum=64),
        spine_speed_bps=fabric_section.rate("spine_speed", fastest_nic, *SPINE_RANGE),
        hosts_per_leaf=fabric_section.integer("hosts_per_leaf", 16, minimum=1, maximum=100_000),
        nvlink_delay_ns=fabric_section.time_ns("nvlink_delay", "500ns", maximum=MAX_HOST_DELAY_NS),
        pcie_delay_ns=fabric_section.time_ns("pcie_delay", "105ns", maximum=MAX_HOST_DELAY_NS),
    )
    # a sanity bound: deployed multi-plane fabrics have 2 (Alibaba HPN, SIGCOMM 2024) to 4 planes
    planes = fabric_section.integer("planes", 1, minimum=1, maximum=64)
    fabric_section.reject_unknown()
    if planes > 1:
        host_types = _split_planes(host_types, planes, fabric_section, types_section)
        fabric = replace(fabric, planes=planes)
    zone_links = _zone_links(top, zones, set(zone_of_host))
    top.reject_unknown()
    return ClusterConfig(
        name=name,
        host_types=host_types,
        host_type_of_host=tuple(order),
        fabric=fabric,
        source=source,
        gpus=own,
        gpu_aliases=own_aliases,
        notes=notes,
        zone_of_host=tuple(zone_of_host) if zones else (),
        zones=zones,
        zone_links=zone_links,
    )


def _zone_names(top: Section) -> tuple[str, ...]:
    """``zones:``: a list of zone names (optional)."""
    raw = top.raw("zones", [])
    if not isinstance(raw, list) or not all(isinstance(z, str) and z.strip() for z in raw):
        raise top.error("zones", "expected a list of zone names, e.g. [us-east-1a, us-east-1b]")
    if len(set(raw)) != len(raw):
        raise top.error("zones", "a zone is named twice")
    return tuple(raw)


def _zone_links(top: Section, zones: tuple[str, ...], used: set[int]) -> tuple[ZoneLink, ...]:
    """``zone_links:``: ``{zones: [A, B], latency: 1ms, bandwidth: 100Gbps}``; every pair of zones
    that holds hosts must be joined (directly or through other zones)."""
    raw = top.raw("zone_links", [])
    if not isinstance(raw, list):
        raise top.error("zone_links", "expected a list of {zones: [A, B], latency: TIME, bandwidth: RATE}")
    links: list[ZoneLink] = []
    for index, entry in enumerate(raw):
        link = Section(entry, top.source, f"zone_links[{index}]")
        pair = link.raw("zones")
        if not isinstance(pair, list) or len(pair) != 2 or not all(isinstance(z, str) for z in pair):
            raise link.error("zones", "expected two zone names")
        for z in pair:
            if z not in zones:
                raise link.error(
                    "zones", f"unknown zone {z!r}; defined under zones: {', '.join(zones) or 'none'}"
                )
        if pair[0] == pair[1]:
            raise link.error("zones", "a zone link joins two different zones")
        latency = link.time_ns("latency", minimum=1, maximum=MAX_ZONE_LATENCY_NS)
        bandwidth = link.rate("bandwidth", minimum=ZONE_BW_RANGE[0], maximum=ZONE_BW_RANGE[1])
        link.reject_unknown()
        links.append(ZoneLink(zones.index(pair[0]), zones.index(pair[1]), latency, bandwidth))
    _check_zones_joined(top, zones, used, links)
    return tuple(links)


def _check_zones_joined(top: Section, zones: tuple[str, ...], used: set[int], links: list[ZoneLink]) -> None:
    if len(used) < 2:
        return
    reach = {min(used)}
    changed = True
    while changed:
        changed = False
        for link in links:
            if (link.a in reach) != (link.b in reach):
                reach |= {link.a, link.b}
                changed = True
    missing = sorted(used - reach)
    if missing:
        raise top.error("zone_links", f"zone {zones[missing[0]]} holds hosts but no zone link reaches it")


def _split_planes(
    host_types: dict[str, HostType], planes: int, fabric: Section, types: Section
) -> dict[str, HostType]:
    """Host types on a ``planes``-plane fabric: every type's NICs split evenly over the planes,
    and a GPU without an explicit ``gpu_nic`` on its own group of ``planes`` ports."""
    out = {}
    for name, htype in host_types.items():
        if htype.nics % planes:
            raise fabric.error(
                "planes",
                f"{planes} planes do not divide host type {name}'s {htype.nics} NICs "
                "(every plane needs the same number of NIC ports per host)",
            )
        groups = htype.nics // planes
        if types.section(name).has("gpu_nic"):
            gpu_nic = tuple(j // planes * planes for j in htype.gpu_nic)
        elif groups <= htype.gpus:
            gpu_nic = tuple(g * groups // htype.gpus * planes for g in range(htype.gpus))
        else:
            gpu_nic = tuple(g * planes for g in range(htype.gpus))
        out[name] = replace(htype, gpu_nic=gpu_nic)
    return out


def load_cluster(path: str | Path) -> ClusterConfig:
    """Read and validate a cluster YAML file."""
    return parse_cluster(read_yaml_mapping(path), str(path))
