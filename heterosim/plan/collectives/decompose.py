"""``decompose_collective``: one collective -> a sub-DAG of point-to-point flows, NCCL style.

Sizes follow nccl-tests (docs/network_models.md §4.5): AllReduce, Broadcast, Reduce and Send/Recv take the
per-rank buffer; AllGather and ReduceScatter the whole gathered / reduced array (rank i owns
1/n of it); AllToAll the per-rank send buffer (1/n to every peer); Gather/Scatter the whole
array. Uneven "v" variants (AllGatherv, ReduceScatterv, AllToAllv, Gatherv, Scatterv) pass
``sizes_per_rank`` - rank i's block - and then ``size_bytes`` must be 0 or their sum. An
all-to-all-v with a size per pair passes ``pair_bytes`` (an n x n matrix: bytes communicator
rank i sends rank j; the diagonal stays local), and then ``size_bytes`` must be 0 or its sum.

``granularity`` (chunk | step | connection) sets how finely the schedule is cut into flows; see
:mod:`.granularity` for what the coarser forms keep and drop.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import replace

import numpy as np

from heterosim.config.choices import COLLECTIVE_ALGORITHMS, COLLECTIVE_PROTOCOLS, require_choice
from heterosim.config.cluster import ClusterConfig
from heterosim.errors import UserError
from heterosim.plan.collectives import nvls, p2p, ring, tree
from heterosim.plan.collectives.common import (
    ALLGATHER,
    ALLREDUCE,
    ALLTOALL,
    BARRIER,
    BROADCAST,
    GATHER,
    GRAIN,
    LL128,
    NVLS,
    NVLS_CHUNK,
    NVLS_TREE,
    P2P,
    PROTOCOLS,
    REDUCE,
    REDUCESCATTER,
    RING,
    SCATTER,
    SENDRECV,
    SIMPLE,
    TREE,
    collective_name,
    ring_chunk,
    split_even,
    split_rows,
    tree_chunk,
    tree_ll128_chunk_payload,
    wire_bytes,
)
from heterosim.plan.collectives.commview import CommView, comm_view
from heterosim.plan.collectives.granularity import (
    CHUNK,
    CONNECTION,
    STEP,
    check_granularity,
    connection_graph,
)
from heterosim.plan.collectives.graph import CollectivePlan, FlowGraph, empty_graph, finish_plan
from heterosim.plan.collectives.tuning import BASE_LAT_US, NVLS_NCHANNELS, TuningChoice, choose, step_delay_ns

_P = {p: i for i, p in enumerate(PROTOCOLS)}
V_COLLECTIVES = (ALLGATHER, REDUCESCATTER, ALLTOALL, GATHER, SCATTER)
_CACHE: OrderedDict[tuple, tuple[ClusterConfig, CollectivePlan]] = OrderedDict()
_CACHE_SIZE = 256
# Plans by communicator shape (_communicator_shape): a communicator of a known shape gets the
# cached plan relabelled instead of a new decomposition (thousands of TP groups, one shape).
_SHAPE_CACHE: OrderedDict[tuple, tuple[ClusterConfig, CollectivePlan]] = OrderedDict()


def _remember(
    cache: OrderedDict[tuple, tuple[ClusterConfig, CollectivePlan]],
    key: tuple,
    cluster: ClusterConfig,
    plan: CollectivePlan,
) -> None:
    """Keep ``plan`` under ``key``, the oldest entry dropped past :data:`_CACHE_SIZE`."""
    cache[key] = (cluster, plan)
    if len(cache) > _CACHE_SIZE:
        cache.popitem(last=False)


def decompose_collective(
    op: int | str,
    size_bytes: int,
    ranks: list[int] | np.ndarray,
    cluster: ClusterConfig,
    *,
    algorithm: str = "auto",
    protocol: str = "auto",
    channels: int = 0,
    sizes_per_rank: list[int] | np.ndarray | None = None,
    priority: int = 0,
    root: int = 0,
    strict: bool = True,
    granularity: str = CHUNK,
    pair_bytes: np.ndarray | None = None,
) -> CollectivePlan:
    """Decompose one collective into flows with dependencies (see the package modules).

    ``ranks``: global GPU ids in communicator order. ``algorithm`` ring|tree|nvls|auto,
    ``protocol`` simple|ll|ll128|auto, ``channels`` 0 = as NCCL would pick. ``root`` is a
    communicator index (Broadcast, Reduce, Gather, Scatter). With ``strict=False`` an algorithm
    or protocol the collective cannot use falls back to NCCL's own choice (the plan records what
    was used). ``priority`` is accepted for callers that pass it along; the plan applies it.
    ``granularity``: chunk (NCCL's chunk schedule), step or connection (see :mod:`.granularity`).
    Results are cached per (arguments, cluster object); treat returned arrays as read-only.
    """
    del priority  # applied to the flows when the collective is added to a plan
    name, gpus, sizes, pairs = _checked_arguments(
        op, ranks, algorithm, protocol, granularity, sizes_per_rank, pair_bytes
    )
    args = (name, int(size_bytes), gpus, cluster, algorithm, protocol, int(channels), sizes, int(root))
    key = _cache_key(*args, strict, granularity, pairs)
    plan, shape_key = _cached_plan(key, gpus, cluster)
    if plan is None:
        plan = _decompose(*args, strict, granularity, pairs)
        _remember(_CACHE, key, cluster, plan)
        if shape_key is not None:
            _remember(_SHAPE_CACHE, shape_key, cluster, plan)
    return plan


def _checked_arguments(
    op: int | str,
    ranks: list[int] | np.ndarray,
    algorithm: str,
    protocol: str,
    granularity: str,
    sizes_per_rank: list[int] | np.ndarray | None,
    pair_bytes: np.ndarray | None,
) -> tuple[str, np.ndarray, np.ndarray | None, np.ndarray | None]:
    """The collective's name, and its GPU ids, sizes per rank and pair matrix as int64 arrays,
    once the algorithm, protocol and granularity are known names (one-line UserErrors)."""
    name = collective_name(op)
    require_choice("collective: algorithm", algorithm, COLLECTIVE_ALGORITHMS)
    require_choice("collective: protocol", protocol, COLLECTIVE_PROTOCOLS)
    check_granularity(granularity)
    gpus = np.asarray(ranks, dtype=np.int64).reshape(-1)
    sizes = None if sizes_per_rank is None else np.asarray(sizes_per_rank, dtype=np.int64).reshape(-1)
    pairs = None if pair_bytes is None else np.asarray(pair_bytes, dtype=np.int64)
    return name, gpus, sizes, pairs


def _cache_key(
    name: str,
    size_bytes: int,
    gpus: np.ndarray,
    cluster: ClusterConfig,
    algorithm: str,
    protocol: str,
    channels: int,
    sizes: np.ndarray | None,
    root: int,
    strict: bool,
    granularity: str,
    pairs: np.ndarray | None,
) -> tuple:
    """:func:`_decompose`'s arguments as a key of :data:`_CACHE` (the GPU ids third: the shape
    cache's key is this one without them, :func:`_cached_plan`)."""
    return (
        name,
        size_bytes,
        gpus.tobytes(),
        algorithm,
        protocol,
        channels,
        None if sizes is None else sizes.tobytes(),
        root,
        strict,
        granularity,
        id(cluster),
        None if pairs is None else (pairs.shape, pairs.tobytes()),
    )


def _cached_plan(
    key: tuple, gpus: np.ndarray, cluster: ClusterConfig
) -> tuple[CollectivePlan | None, tuple | None]:
    """The plan cached under ``key`` (:func:`decompose_collective`'s arguments, the GPU ids third),
    else that of a communicator of the same shape relabelled to ``gpus`` (then cached under
    ``key`` too), else None; with the shape cache's key for a new plan (None: ``gpus`` has no
    shape, or a plan was found)."""
    hit = _CACHE.get(key)
    if hit is not None and hit[0] is cluster:
        _CACHE.move_to_end(key)
        return hit[1], None
    shape = _communicator_shape(gpus, cluster)
    if shape is None:
        return None, None
    shape_key = (*key[:2], *key[3:], shape)
    shaped = _SHAPE_CACHE.get(shape_key)
    if shaped is not None and shaped[0] is cluster:
        _SHAPE_CACHE.move_to_end(shape_key)
        plan = _relabelled(shaped[1], gpus)
        _remember(_CACHE, key, cluster, plan)
        return plan, None
    return None, shape_key


def _communicator_shape(gpus: np.ndarray, cluster: ClusterConfig) -> tuple | None:
    """Everything :func:`comm_view` reads of the cluster, with the GPU and host ids replaced by
    their order: two communicators of one shape decompose alike up to renaming their GPUs (the
    decomposers see GPUs only through the view: hosts in first-appearance order, local and NIC
    indices, host types; ids only as labels or in sorted order). None for an invalid list (the
    direct decomposition raises its error)."""
    if gpus.size == 0 or gpus.min() < 0 or gpus.max() >= cluster.world_size:
        return None
    if np.unique(gpus).size != gpus.size:
        return None
    hosts = cluster.gpu_host[gpus]
    _, first, host_pos = np.unique(hosts, return_index=True, return_inverse=True)
    appearance = np.argsort(np.argsort(first))  # sorted-host position -> first-appearance index
    types = tuple(cluster.host_type_of_host[int(h)] for h in hosts[np.sort(first)])
    return (
        np.argsort(gpus, kind="stable").tobytes(),
        appearance[host_pos.reshape(-1)].tobytes(),
        appearance.tobytes(),
        cluster.gpu_local_index[gpus].tobytes(),
        cluster.gpu_nic[gpus].tobytes(),
        types,
    )


def _relabelled(plan: CollectivePlan, gpus: np.ndarray) -> CollectivePlan:
    """``plan`` of a communicator of the same shape, its GPU ids replaced position by position."""
    position = np.argsort(plan.ranks)
    sorted_ranks = plan.ranks[position]

    def moved(ids: np.ndarray) -> np.ndarray:
        out = ids.copy()
        real = ids >= 0
        out[real] = gpus[position[np.searchsorted(sorted_ranks, ids[real])]]
        return out

    return replace(plan, ranks=gpus, gpu=moved(plan.gpu), dst=moved(plan.dst))


def _check_pairs(name: str, size_bytes: int, sizes: np.ndarray | None, pairs: np.ndarray, n: int) -> int:
    """The total of an all-to-all-v's pair matrix (its checks are one-line UserErrors)."""
    if name != ALLTOALL or sizes is not None:
        raise UserError(
            f"collective: pair_bytes: only an all-to-all (without sizes_per_rank) takes sizes "
            f"per pair, not {name}"
        )
    if pairs.shape != (n, n) or (pairs < 0).any():
        raise UserError(f"collective: pair_bytes: expected a {n} x {n} matrix of non-negative sizes")
    total = int(pairs.sum())
    if size_bytes not in (0, total):
        raise UserError(f"collective: size: {size_bytes} differs from the sum of pair_bytes ({total})")
    return total


def _check_sizes(
    name: str, size_bytes: int, sizes: np.ndarray | None, n: int
) -> tuple[int, np.ndarray | None]:
    if size_bytes < 0:
        raise UserError(f"collective: size: must not be negative, got {size_bytes}")
    if sizes is None:
        return size_bytes, None
    if name not in V_COLLECTIVES:
        raise UserError(f"collective: sizes_per_rank: {name} has no uneven variant")
    if sizes.size != n or (sizes < 0).any():
        raise UserError(f"collective: sizes_per_rank: expected {n} non-negative sizes, one per rank")
    total = int(sizes.sum())
    if size_bytes not in (0, total):
        raise UserError(f"collective: size: {size_bytes} differs from the sum of sizes_per_rank ({total})")
    return total, sizes


def _decompose(
    name: str,
    size_bytes: int,
    ranks: np.ndarray,
    cluster: ClusterConfig,
    algorithm: str,
    protocol: str,
    channels: int,
    sizes: np.ndarray | None,
    root: int,
    strict: bool,
    granularity: str = CHUNK,
    pairs: np.ndarray | None = None,
) -> CollectivePlan:
    view = comm_view(ranks, cluster)
    n = view.n
    size_bytes, sizes = _check_sizes(name, size_bytes, sizes, n)
    if pairs is not None:
        size_bytes = _check_pairs(name, size_bytes, sizes, pairs, n)
        if not (pairs * ~np.eye(n, dtype=bool)).any():
            size_bytes = 0  # everything stays on its own rank
    if name == BARRIER:
        name, size_bytes = ALLREDUCE, 4  # frameworks implement a barrier as a one-element all-reduce
    if name == SENDRECV and n != 2:
        raise UserError(f"collective: ranks: sendrecv takes exactly 2 ranks (sender, receiver), got {n}")
    if not 0 <= root < n:
        raise UserError(f"collective: root: expected a communicator index in 0..{n - 1}, got {root}")
    if n == 1 or size_bytes == 0:
        return finish_plan(
            empty_graph(),
            op=name,
            size_bytes=size_bytes,
            ranks=ranks,
            algorithm="none",
            protocol="none",
            channels=0,
            predicted_ns=0,
            granularity=granularity,
        )
    if name in (ALLTOALL, SENDRECV, GATHER, SCATTER):
        return _p2p_plan(name, size_bytes, view, ranks, protocol, sizes, root, granularity, pairs)
    try:
        choice = choose(name, size_bytes, view, algorithm=algorithm, protocol=protocol, channels=channels)
    except UserError:
        if strict:
            raise
        choice = choose(name, size_bytes, view, channels=channels)
    if choice.algorithm == NVLS_TREE and len({g.size for g in view.groups}) != 1:
        if strict and algorithm != "auto":
            raise UserError(
                "collective: algorithm: nvls across hosts needs the same number of ranks per host"
            )
        choice = choose(name, size_bytes, view, algorithm=RING, protocol=SIMPLE, channels=channels)
    if granularity == CONNECTION:
        src, dst, payload, wire = _connections(name, size_bytes, view, choice, sizes, root)
        graph = connection_graph(view, src, dst, payload, wire, latency_ns=choice.latency_us * 1000.0)
    else:
        graph = _build(name, size_bytes, view, choice, sizes, root, granularity)
    return finish_plan(
        graph,
        op=name,
        size_bytes=size_bytes,
        ranks=ranks,
        algorithm=choice.algorithm,
        protocol=choice.protocol,
        channels=choice.channels,
        predicted_ns=int(round(choice.predicted_us * 1000)),
        candidates=choice.candidates,
        granularity=granularity,
    )


def _build(
    name: str,
    size_bytes: int,
    view: CommView,
    choice: TuningChoice,
    sizes: np.ndarray | None,
    root: int,
    granularity: str,
) -> FlowGraph:
    a, p, c = choice.algorithm, choice.protocol, choice.channels
    if a == RING:
        orders, seg_bytes, segment_of = _ring_schedule(
            name, size_bytes, view, p, c, sizes, root, one_loop=granularity == STEP
        )
        delays = ring.ring_hop_delays(
            view, orders, step_delay_ns(view, RING, p, False), step_delay_ns(view, RING, p, True)
        )
        return ring.ring_graph(
            view,
            orders,
            seg_bytes,
            segment_of,
            ring_chunk(name, p)[1],
            p,
            delays,
            int(BASE_LAT_US[RING][_P[p]] * 1000),
        )
    if a == TREE:
        parents, chunk_bytes = _tree_schedule(size_bytes, view, p, c)
        return tree.tree_allreduce_graph(
            view,
            parents,
            chunk_bytes,
            tree_chunk(p)[1],
            p,
            step_delay_ns(view, TREE, p, False),
            step_delay_ns(view, TREE, p, True),
            int(BASE_LAT_US[TREE][_P[p]] * 1000),
        )
    seg = _nvls_pieces(size_bytes, view, a, c, sizes)
    if a == NVLS:
        return nvls.nvls_graph(view, name, seg, step_delay_ns(view, NVLS, SIMPLE, False))
    return nvls.nvls_tree_graph(
        view,
        seg,
        step_delay_ns(view, NVLS_TREE, SIMPLE, False),
        step_delay_ns(view, NVLS_TREE, SIMPLE, True),
        0,
    )


def _connections(
    name: str, size_bytes: int, view: CommView, choice: TuningChoice, sizes: np.ndarray | None, root: int
) -> tuple[np.ndarray, ...]:
    """(src, dst, payload, wire) per connection of the chunk schedule, summed over its chunks
    without building them (the chunk-level arrays are at most segments x loops)."""
    a, p, c = choice.algorithm, choice.protocol, choice.channels
    if a == RING:
        orders, seg_bytes, segment_of = _ring_schedule(name, size_bytes, view, p, c, sizes, root)
        return ring.ring_connections(
            view, orders, seg_bytes.sum(axis=0), wire_bytes(seg_bytes, p).sum(axis=0), segment_of
        )
    if a == TREE:
        parents, chunk_bytes = _tree_schedule(size_bytes, view, p, c)
        return tree.tree_connections(
            view, parents, chunk_bytes.sum(axis=1), wire_bytes(chunk_bytes, p).sum(axis=1)
        )
    seg = _nvls_pieces(size_bytes, view, a, c, sizes)
    if a == NVLS:
        return nvls.nvls_connections(view, name, seg)
    return nvls.nvls_tree_connections(view, seg)


def _tree_schedule(
    size_bytes: int, view: CommView, protocol: str, channels: int
) -> tuple[np.ndarray, np.ndarray]:
    """(parents (C, n), chunk payloads (C, K)) of a tree all-reduce."""
    chunk = tree_chunk(protocol)[0]
    if protocol == LL128:
        chunk = tree_ll128_chunk_payload(size_bytes, channels, view.num_hosts, view.n)
    per_channel = split_even(size_bytes, channels, GRAIN[protocol])
    k = max(1, -(-int(per_channel.max()) // chunk))
    return tree.tree_parents(view, channels), split_rows(per_channel, k)


def _nvls_pieces(
    size_bytes: int, view: CommView, algorithm: str, channels: int, sizes: np.ndarray | None
) -> np.ndarray:
    """(P, slots) payload of every slot in every piece: ranks (NVLS) or local slots (NVLS Tree)."""
    nvls_channels = max(1, min(NVLS_NCHANNELS, channels))
    if algorithm == NVLS:
        piece = nvls_channels * view.n * NVLS_CHUNK
        if sizes is None:
            pieces = max(1, -(-size_bytes // piece))
            per_rank = split_even(size_bytes, view.n, GRAIN[SIMPLE])
        else:
            pieces = max(1, -(-int(sizes.max()) * view.n // piece))
            per_rank = sizes
        return split_rows(per_rank, pieces).T.copy()
    ppn = view.groups[0].size
    pieces = max(1, -(-size_bytes // (nvls_channels * ppn * NVLS_CHUNK)))
    return split_rows(split_even(size_bytes, ppn, GRAIN[SIMPLE]), pieces).T.copy()


def _ring_schedule(
    name: str,
    size_bytes: int,
    view: CommView,
    protocol: str,
    channels: int,
    sizes: np.ndarray | None,
    root: int,
    one_loop: bool = False,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(orders (C, n), segment payload per loop (L, C, m), segment_of (n, S)) of a ring
    collective; ``one_loop`` puts each segment in a single loop (step granularity)."""
    n = view.n
    grain = GRAIN[protocol]
    orders = ring.ring_orders(view, channels)
    chunk = ring_chunk(name, protocol)[0]
    if name in (BROADCAST, REDUCE):
        where = np.argmax(orders == root, axis=1)
        shift = where if name == BROADCAST else where - (n - 1)
        orders = orders[np.arange(channels)[:, None], (np.arange(n)[None, :] + shift[:, None]) % n]
        seg_total = split_even(size_bytes, channels, grain)[:, None]
        segment_of = ring.chain_segments(n)
    else:
        if sizes is None:
            seg_total = split_rows(split_even(size_bytes, channels, grain), n, grain)
        else:
            seg_total = split_rows(sizes, channels, grain).T[np.arange(channels)[:, None], orders]
        steps = 2 * (n - 1) if name == ALLREDUCE else n - 1
        segment_of = ring.ring_segments(steps, n, 0 if name == ALLGATHER else 1)
    loops = 1 if one_loop else max(1, -(-int(seg_total.max()) // chunk))
    return orders, np.moveaxis(split_rows(seg_total, loops), -1, 0), segment_of


def _p2p_plan(
    name: str,
    size_bytes: int,
    view: CommView,
    ranks: np.ndarray,
    protocol: str,
    sizes: np.ndarray | None,
    root: int,
    granularity: str,
    pairs: np.ndarray | None = None,
) -> CollectivePlan:
    proto = SIMPLE if protocol == "auto" else protocol
    intra = step_delay_ns(view, RING, proto, False)
    inter = step_delay_ns(view, RING, proto, True)
    n = view.n
    per_rank = sizes if sizes is not None else split_even(size_bytes, n) if name != ALLTOALL else None
    if name == SENDRECV:
        graph = p2p.sendrecv_graph(view, size_bytes, proto, intra, inter, one_flow=granularity == CONNECTION)
    elif name == ALLTOALL and pairs is not None:
        graph = p2p.alltoallv_graph(view, pairs, proto, intra, inter)
    elif name == ALLTOALL:
        send = sizes if sizes is not None else np.full(n, size_bytes // n * n, np.int64)
        graph = p2p.alltoall_graph(view, send, proto, intra, inter)
    else:
        assert per_rank is not None  # only all-to-all goes without per-rank sizes
        graph = p2p.rooted_graph(view, per_rank, root, name == GATHER, proto, intra, inter)
    # Prediction: per-hop latency + the most loaded resource, each direction: a GPU's port
    # (NVLink/PCIe), its NIC for traffic leaving or entering the host, a host's NICs together.
    host = view.host_of_rank
    order = np.argsort(view.gpus)
    srank = order[np.searchsorted(view.gpus[order], graph.src)]
    drank = order[np.searchsorted(view.gpus[order], graph.dst)]
    cross = (host[srank] != host[drank]) * graph.payload
    busy_ns = 0.0
    for r in (srank, drank):
        busy_ns = max(
            busy_ns,
            float(np.bincount(r, weights=graph.payload, minlength=n).max()) / view.intra_gbps,
            float(np.bincount(r, weights=cross, minlength=n).max()) / view.nic_gbps,
            float(np.bincount(host[r], weights=cross).max()) / view.inter_gbps,
        )
    predicted = (inter if cross.any() else intra) + busy_ns  # bytes / (GB/s) = ns
    return finish_plan(
        graph,
        op=name,
        size_bytes=size_bytes,
        ranks=ranks,
        algorithm=P2P,
        protocol=proto,
        channels=1,
        predicted_ns=int(round(predicted)),
        granularity=granularity,
    )
