"""NCCL's tuning (cost) model: pick algorithm, protocol and channels for a collective.

For every enabled (algorithm a, protocol p) the model has a latency ``lat`` (us) and a bandwidth
``bw`` (GB/s); a message of S bytes is predicted to take ``lat + S / (1000 bw)`` us and the
cheapest pair wins (docs/network_models.md §4.6, constants of NCCL 2.30.7).

Approximations (documented, tested where they matter):

* Channel count: NCCL's topology search is not re-run. One host: rings = floor(per-GPU intra
  bandwidth / top speed of the generation's ladder), doubled by graph duplication and again by
  ``connect.cc`` (H100: 6 -> 24 channels, A100: 6 -> 24 as observed). Several hosts: one ring per
  NIC of a host, doubled by ``connect.cc`` (8 NICs -> 16 channels), doubled again on Hopper+ when
  below 16; clamped to 1..64.
* Ring bus bandwidth with several hosts is ``min(intra, NICs x NIC speed)`` (the physical
  bottleneck); NCCL's search would find the same number on rail-optimised hosts.
* Graph inter-node latency and the Simple "flush" latency are left out (the simulated network
  adds its own wire latency).
* The Tree "TREE pattern" x0.85 factor is not applied (we build balanced trees).
* NVLS graph (``nvls_search_graph``): NCCL's search (``ncclTopoSearchTryNvls``) makes one channel per
  local GPU ("head"; one host: min = max channels, "pull evenly from all GPUs") and charges each
  channel once on every GPU's NVSwitch port and twice on its head's, so the per-head speed is the
  largest ladder value with (ppn + 1) x speed <= per-GPU NVLink bandwidth (H100 x8: 370.8 / 9
  -> 40 GB/s, as NCCL logs "Pattern 5 ... nChannels 8, bw 40"). The model's NVLS bus bandwidth
  is heads x speed x efficiency x (heads - 1) / heads, x2 for AllReduce, x(ppn - 1)/ppn for
  AllGather / ReduceScatter (H100 x8 AllReduce: 8 x 40 x 0.85 x 7/8 x 2 = 476 GB/s). The
  execution uses ``NVLS_NCHANNELS`` = 16 CTAs (NCCL_NVLS_NCHANNELS), a different number.
* NVLS availability (``ncclNvlsInit``): NCCL_NVLS_ENABLE = 2 (auto) enables it where the GPU
  supports multicast (Hopper+ on NVSwitch) and the communicator has more than 2 GPUs on the
  node; a 2-GPU communicator never uses NVLS. NVLS runs AllReduce, AllGather, ReduceScatter
  on one host (Simple only); across hosts only NVLS Tree AllReduce (NVLS alone needs CollNet).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from heterosim.errors import UserError
from heterosim.plan.collectives.common import (
    ALLGATHER,
    ALLREDUCE,
    BROADCAST,
    LL,
    LL128,
    MAX_CHANNELS,
    NVLS,
    NVLS_TREE,
    PROTOCOLS,
    REDUCE,
    REDUCESCATTER,
    RING,
    SIMPLE,
    TREE,
)
from heterosim.plan.collectives.commview import CommView

_P = {LL: 0, LL128: 1, SIMPLE: 2}
BASE_LAT_US = {
    TREE: (6.8, 14.0, 8.4),
    RING: (6.6, 14.0, 8.4),
    NVLS: (0.0, 0.0, 0.0),
    NVLS_TREE: (0.0, 0.0, 0.0),
}
NVLINK_HW, PCI_HW, NET_HW = "nvlink", "pci", "net"
HW_LAT_US = {
    NVLINK_HW: {
        TREE: (0.6, 1.25, 4.0),
        RING: (0.6, 1.9, 3.4),
        NVLS: (0.0, 0.0, 25.0),
        NVLS_TREE: (0.0, 0.0, 25.0),
    },
    PCI_HW: {TREE: (1.0, 1.9, 4.0), RING: (1.0, 2.5, 5.7), NVLS: (0.0, 0.0, 0.0), NVLS_TREE: (0.0, 0.0, 0.0)},
    NET_HW: {
        TREE: (5.0, 8.5, 14.0),
        RING: (2.7, 4.0, 14.0),
        NVLS: (0.0, 0.0, 18.0),
        NVLS_TREE: (0.0, 0.0, 20.9),
    },
}
_GEN = {"volta": 0, "ampere": 1, "hopper": 2, "blackwell": 3}
PER_CH_RING_LL128 = ((20, 20, 20), (20, 20, 20), (36.7, 36.7, 36.7), (40, 40, 40))
PER_CH_TREE_LL128 = ((20, 20, 20), (20, 20, 20), (36.7, 36.7, 29.0), (55.6, 31.67, 20.0))
PER_CH_TREE = ((26.5, 18.5, 10.0), (24.0, 23.6, 17.8), (38.7, 41.4, 36.0), (70.0, 42.8, 24.0))
PER_CH_NVLS_TREE = ((26.5, 18.5, 10.0), (24.0, 23.6, 17.8), (0, 57.7, 45.5), (0, 96.0, 80.0))
NVLS_EFFICIENCY = (0.0, 0.0, 0.85, 0.74)
NVLS_NCHANNELS = 16  # NCCL_NVLS_NCHANNELS default: CTAs an NVLS collective runs on
NVLS_MIN_LOCAL_RANKS = 3  # ncclNvlsInit: no NVLS with <= 2 GPUs on the node
LL_MAX_SINGLE = (39.0, 87.7, 141.0, 282.0)
LL_MAX_MULTI = (39.0, 20.4)  # Intel row: 2 nodes, >= 3 nodes
NET_OVERHEAD_US = 1.0
TREE_SIZE_FACTOR = {
    LL: (
        1.0,
        1.0,
        1.0,
        1.0,
        0.9,
        0.8,
        0.7,
        0.7,
        0.7,
        0.7,
        0.6,
        0.5,
        0.4,
        0.4,
        0.5,
        0.6,
        0.7,
        0.8,
        0.9,
        1.0,
        1.0,
        1.0,
        1.0,
    ),
    LL128: (
        1.0,
        1.0,
        1.0,
        1.0,
        1.0,
        0.9,
        0.8,
        0.8,
        0.8,
        0.7,
        0.6,
        0.6,
        0.6,
        0.6,
        0.6,
        0.6,
        0.8,
        0.9,
        0.9,
        0.9,
        0.9,
        1.0,
        1.0,
    ),
    SIMPLE: (
        0.9,
        0.9,
        0.9,
        0.9,
        0.9,
        0.9,
        0.9,
        0.8,
        0.7,
        0.6,
        0.6,
        0.5,
        0.5,
        0.5,
        0.5,
        0.6,
        0.7,
        0.8,
        0.7,
        0.7,
        0.8,
        0.9,
        0.9,
    ),
}
# Speed ladders of the topology search, GB/s per channel (search.cc sm90/sm100SpeedArrayIntra;
# Volta/Ampere use the generic intra array).
_LADDER = {
    2: (60, 50, 40, 30, 24, 20, 15, 12, 11, 6, 3),
    3: (90, 80, 70, 60, 50, 45, 40, 30, 24, 20, 19, 18),
    1: (40, 30, 20, 18, 15, 12, 10, 9, 7, 6, 5, 4, 3),
    0: (40, 30, 20, 18, 15, 12, 10, 9, 7, 6, 5, 4, 3),
}
_THREADS = {LL: 512, LL128: 640, SIMPLE: 512}
_THREAD_THRESHOLD = {LL: 8, LL128: 8, SIMPLE: 64}

RING_COLLECTIVES = (ALLREDUCE, ALLGATHER, REDUCESCATTER, BROADCAST, REDUCE)
NVLS_COLLECTIVES = (ALLREDUCE, ALLGATHER, REDUCESCATTER)


@dataclass(frozen=True)
class TuningChoice:
    """The chosen (algorithm, protocol, channels) and the model's prediction."""

    algorithm: str
    protocol: str
    channels: int
    predicted_us: float
    latency_us: float
    bandwidth_gbps: float  # algorithm bandwidth of the model, GB/s
    candidates: dict[str, float] = field(default_factory=dict, compare=False)  # "a/p" -> us


def graph_channels(view: CommView) -> int:
    """Channels NCCL would build for rings and trees on this communicator (see module notes)."""
    gen = _GEN[view.generation]
    if view.num_hosts == 1:
        ladder = _LADDER[gen]
        speed = next((s for s in ladder if s <= view.intra_gbps), ladder[-1])
        rings = max(1, int(view.intra_gbps // speed))
        channels = 4 * rings
    else:
        channels = 2 * view.nics_per_host
        if gen >= 2 and view.intra_gbps > 45 and channels < 16:
            channels *= 2
    return int(min(max(channels, 1), MAX_CHANNELS))


def nsteps(coll: str, n: int) -> int:
    """Ring steps per chunk: 2(n-1) AllReduce, n-1 AllGather/ReduceScatter, n Broadcast/Reduce."""
    if coll == ALLREDUCE:
        return 2 * (n - 1)
    if coll in (ALLGATHER, REDUCESCATTER):
        return n - 1
    return n


def hop_latency_us(view: CommView, algorithm: str, protocol: str, inter: bool) -> float:
    """Per-hop latency NCCL's model charges for one step of ``algorithm``."""
    p = _P[protocol]
    if inter:
        return HW_LAT_US[NET_HW][algorithm][p]
    lat = HW_LAT_US[NVLINK_HW if view.all_nvswitch else PCI_HW][algorithm][p]
    if view.num_hosts > 1:
        lat = max(lat, NET_OVERHEAD_US * (3 if protocol == SIMPLE else 1))
    return lat


def nvls_supported(view: CommView) -> bool:
    """NCCL's nvlsSupport: Hopper+ NVSwitch hosts, more than 2 GPUs of the communicator on every
    host (NCCL_NVLS_ENABLE = 2), and an NVLS graph the search can build."""
    return (
        view.all_nvswitch
        and _GEN[view.generation] >= 2
        and min(len(g) for g in view.groups) >= NVLS_MIN_LOCAL_RANKS
        and nvls_search_graph(view)[1] > 0
    )


def nvls_search_graph(view: CommView) -> tuple[int, float]:
    """(heads, per-head GB/s) of NCCL's NVLS search graph on this communicator (module notes)."""
    heads = min(len(g) for g in view.groups)
    ladder = _LADDER[_GEN[view.generation]]
    speed = next((s for s in ladder if (heads + 1) * s <= view.intra_gbps + 1e-9), 0.0)
    return heads, float(speed)


def nvls_bus_gbps(coll: str, view: CommView) -> float:
    """Intra-host bus bandwidth of NCCL's NVLS model (GB/s, nccl-tests busbw convention)."""
    heads, speed = nvls_search_graph(view)
    if heads < 2 or speed <= 0:
        return 0.0
    bus = heads * speed * NVLS_EFFICIENCY[_GEN[view.generation]] * (heads - 1) / heads
    if coll == ALLREDUCE:
        return bus * 2.0
    ppn = min(len(g) for g in view.groups)
    return bus * (ppn - 1) / ppn


def available(coll: str, view: CommView) -> list[tuple[str, str]]:
    """(algorithm, protocol) pairs NCCL would consider for ``coll`` on this communicator."""
    protocols = [LL, SIMPLE]
    gen = _GEN[view.generation]
    if view.all_nvswitch and (view.same_generation or gen >= 2):
        protocols.insert(1, LL128)
    pairs: list[tuple[str, str]] = []
    if coll in RING_COLLECTIVES:
        pairs += [(RING, p) for p in protocols]
    if coll == ALLREDUCE and view.n > 1:
        pairs += [(TREE, p) for p in protocols]
    nvls_ok = nvls_supported(view)
    if nvls_ok and coll in NVLS_COLLECTIVES and view.num_hosts == 1:
        pairs.append((NVLS, SIMPLE))
    if nvls_ok and coll == ALLREDUCE and view.num_hosts > 1:
        pairs.append((NVLS_TREE, SIMPLE))
    return pairs


def model_bw_lat(
    coll: str, algorithm: str, protocol: str, view: CommView, channels: int, size_bytes: int
) -> tuple[float, float]:
    """(algorithm bandwidth GB/s, latency us) of NCCL's model for one (a, p)."""
    n, nodes, ppn = view.n, view.num_hosts, view.ppn
    gen = _GEN[view.generation]
    ni = 0 if nodes == 1 else (1 if nodes == 2 else 2)
    p = _P[protocol]
    base = BASE_LAT_US[algorithm][p]
    intra_lat = hop_latency_us(view, algorithm, protocol, inter=False)
    inter_lat = hop_latency_us(view, algorithm, protocol, inter=True)
    ll_max = LL_MAX_SINGLE[gen] if nodes == 1 else LL_MAX_MULTI[0 if nodes == 2 else 1]
    steps = nsteps(coll, n)
    log2n = math.floor(math.log2(nodes)) if nodes > 1 else 0
    if algorithm == RING:
        bus = view.intra_gbps if nodes == 1 else min(view.intra_gbps, view.inter_gbps)
        if protocol == LL:
            bus = min(0.5 * bus, ll_max)
        elif protocol == LL128:
            bus = min(0.92 * bus, channels * PER_CH_RING_LL128[gen][ni])
        bw = bus * n / steps
        if coll in (BROADCAST, REDUCE):
            hops = n - 1
            inter_hops = nodes - 1
            lat = base + (hops - inter_hops) * intra_lat + inter_hops * inter_lat
        else:
            inter_hops = 0 if nodes == 1 else (2 * (nodes - 1) if coll == ALLREDUCE else nodes - 1)
            lat = base + (steps - inter_hops) * intra_lat + inter_hops * inter_lat
            if nodes > 1 and protocol == SIMPLE and coll == ALLREDUCE and size_bytes / (channels * n) >= 64:
                lat *= 1.4 if gen >= 1 else 1.9
    elif algorithm == TREE:
        graph = view.intra_gbps if nodes <= 2 else min(view.intra_gbps, view.inter_gbps)
        if protocol == LL:
            bus = min(graph * 0.92 / 3.8, ll_max)
        elif protocol == LL128:
            factor = 7.0 / 9.0 if nodes == 1 else 120.0 / 128.0
            bus = min(graph * 0.92 * factor, channels * PER_CH_TREE_LL128[gen][ni])
        else:
            bus = min(graph * 0.92, channels * PER_CH_TREE[gen][ni])
        bw = bus * 0.5
        lat = base + 2 * ((ppn - 1) * intra_lat + log2n * inter_lat)
    elif algorithm == NVLS:
        bus = nvls_bus_gbps(coll, view)
        bw = bus * n / steps
        lat = intra_lat
    else:  # NVLS_TREE
        heads = nvls_search_graph(view)[0]
        inter = view.inter_gbps * (2.0 if nodes <= 2 else 1.0)
        bus = min(nvls_bus_gbps(ALLREDUCE, view), inter, heads * PER_CH_NVLS_TREE[gen][ni])
        bw = bus * n / steps
        lat = base + intra_lat + 2 * log2n * inter_lat
    return bw, lat


def _tree_size_factor(protocol: str, size_bytes: int) -> float:
    if size_bytes < 64:
        return TREE_SIZE_FACTOR[protocol][0]
    index = int(math.floor(math.log2(size_bytes / 64)))
    return TREE_SIZE_FACTOR[protocol][index] if index < 23 else 1.0


def reduce_channels(algorithm: str, protocol: str, channels: int, size_bytes: int, n: int) -> int:
    """NCCL's post-choice channel reduction for small messages (enqueue.cc)."""
    if algorithm in (NVLS, NVLS_TREE):
        return max(1, min(NVLS_NCHANNELS, channels))
    threads = 640 if algorithm == TREE else _THREADS[protocol]
    threshold = _THREAD_THRESHOLD[protocol] * (n if (protocol == LL and algorithm == RING) else 1)
    c = channels
    while c > 1 and size_bytes < c * threads * threshold:
        c -= 1
    return c


def choose(
    coll: str,
    size_bytes: int,
    view: CommView,
    *,
    algorithm: str = "auto",
    protocol: str = "auto",
    channels: int = 0,
) -> TuningChoice:
    """NCCL's choice for ``coll`` of ``size_bytes`` (nccl-tests size), with optional overrides."""
    pairs = available(coll, view)
    if algorithm != "auto":
        wanted = algorithm
        if wanted == NVLS and view.num_hosts > 1:
            wanted = NVLS_TREE
        pairs = [(a, p) for a, p in pairs if a == wanted]
        if not pairs:
            raise UserError(
                f"collective: algorithm: {algorithm} is not available for {coll} on "
                f"{view.n} ranks over {view.num_hosts} host(s)"
            )
    if protocol != "auto":
        if protocol not in PROTOCOLS:
            raise UserError(f"collective: protocol: expected one of {', '.join(PROTOCOLS)}")
        pairs = [(a, p) for a, p in pairs if p == protocol]
        if not pairs:
            raise UserError(
                f"collective: protocol: {protocol} is not available with algorithm {algorithm} "
                f"for {coll} on this communicator"
            )
    full_channels = int(channels) if channels > 0 else graph_channels(view)
    best: tuple[float, str, str, float, float] | None = None
    candidates: dict[str, float] = {}
    for a, p in pairs:
        bw, lat = model_bw_lat(coll, a, p, view, full_channels, size_bytes)
        if bw <= 0:
            continue
        select_bw = bw * (_tree_size_factor(p, size_bytes) if a == TREE else 1.0)
        t = lat + size_bytes / (1000.0 * select_bw)
        candidates[f"{a}/{p}"] = t
        if best is None or t < best[0]:
            best = (t, a, p, bw, lat)
    if best is None:
        raise UserError(f"collective: no algorithm/protocol available for {coll} on this communicator")
    t, a, p, bw, lat = best
    used = full_channels if channels > 0 else reduce_channels(a, p, full_channels, size_bytes, view.n)
    return TuningChoice(
        algorithm=a,
        protocol=p,
        channels=used,
        predicted_us=t,
        latency_us=lat,
        bandwidth_gbps=bw,
        candidates=candidates,
    )


def step_delay_ns(view: CommView, algorithm: str, protocol: str, inter: bool) -> int:
    """Latency a plan adds before one step's transfer: NCCL's per-hop latency minus the wire
    latency the simulated network adds by itself (never negative)."""
    lat_ns = hop_latency_us(view, algorithm, protocol, inter) * 1000.0
    wire = view.net_wire_ns if inter else view.intra_wire_ns
    return int(max(0.0, round(lat_ns - wire)))
