"""NVLS (NVLink SHARP) collectives, represented with GPU-to-GPU flows.

On Hopper+ NVSwitch hosts NCCL reduces inside the switch: for AllReduce GPU j pulls the
reduced slice j (``multimem.ld_reduce``: the switch reads slice j from every GPU and returns one
reduced copy) and multicasts it back (``multimem.st``: one copy in, the switch writes every GPU).
Each GPU's NVLink port then carries S(n+1)/n bytes each way instead of the ring's 2S(n-1)/n.

Our network has no switch endpoint that reduces or replicates, so NVLS is represented as a
reduce-scatter (GPU i -> GPU j: slice j) followed by an all-gather (GPU j -> GPU i: reduced slice
j) with direct flows through the NVSwitch, and every flow's wire bytes scaled (``wire_factor``)
so that each GPU's NVLink port, at the link's rate B, is busy exactly as long as NCCL's NVLS
model says the collective takes:

    wire factor = B / busbw_NVLS,   busbw_NVLS = heads x speed x eff x (heads-1)/heads x k

with NCCL's NVLS search graph (heads = GPUs of the host, per-head speed from the speed ladder
with (ppn+1) x speed <= B), eff = 0.85 (Hopper) / 0.74 (Blackwell), k = 2 for AllReduce and
(ppn-1)/ppn for AllGather / ReduceScatter (tuning.nvls_bus_gbps, docs/network_models.md §4.4, §4.6). The
AllReduce flows of one port then carry 2S(n-1)/n x factor = S(n+1)/n / eta per direction: the
in-switch volume S(n+1)/n at a fraction eta = busbw_NVLS (n+1) / (2(n-1) B) of the port (H100 x8:
476 GB/s busbw, eta = 0.825 of 370.8 GB/s). The simulated busbw at large sizes is therefore
NCCL's model busbw (S / t x 2(n-1)/n = busbw_NVLS), less latency and pipeline fill.
AllGather / ReduceScatter: S (n-1)/n x factor per port on both directions (the flows load the
switch's replicated / reduced direction symmetrically).

``payload`` keeps the user bytes. The message moves in pieces of ``16 x n x 128 KiB``
(NCCL_NVLS_NCHANNELS CTAs x NCCL_NVLS_CHUNKSIZE; the CTAs are merged into one flow per GPU
pair since they share the same NVLink ports); an all-gather flow of piece q waits for every
reduce-scatter flow of piece q into its sender; two pieces are in flight per pair.

Limits: the efficiency loss is carried as extra wire bytes, so NVLS traffic takes more of a
shared NVLink port than the in-switch volume when it overlaps other traffic; the rate follows
the link if the link is slower or faster than NCCL's view of it (the factor is a ratio to
NCCL's per-GPU bandwidth); no multicast-object setup cost; the smaller NVLS chunks NCCL uses
for small messages (64/32/16 KiB) are not modelled; the model's one NVLS latency (25 us on
NVLink, less the wire) is added once: it delays the first reduce-scatter pieces, and every later
piece waits for them.

NVLS Tree (several hosts): NVLS reduce-scatter inside each host, a double binary tree across
hosts per slice (GPUs of one local index, one rail), then NVLS all-gather inside each host. The
two in-host phases use the single-host AllReduce wire factor (same in-switch volume and NVLS
efficiency per port).
"""

from __future__ import annotations

import numpy as np

from heterosim.plan.collectives.common import ALLGATHER, ALLREDUCE, REDUCESCATTER
from heterosim.plan.collectives.commview import CommView
from heterosim.plan.collectives.graph import FlowGraph, concat_graphs
from heterosim.plan.collectives.tree import binary_tree_parents, tree_allreduce_graph, tree_connections
from heterosim.plan.collectives.tuning import nvls_bus_gbps


def wire_factor(coll: str, view: CommView) -> float:
    """Wire bytes per payload byte of NVLS flows: NCCL-view per-GPU NVLink GB/s over the NVLS
    model busbw (module notes); never below the in-switch volume alone."""
    n = min(len(g) for g in view.groups)
    physical = (n + 1) / (2 * (n - 1)) if coll == ALLREDUCE else n / (n - 1)
    bus = nvls_bus_gbps(coll, view)
    return max(physical, view.intra_gbps / bus) if bus > 0 else physical


def _scaled(payload: np.ndarray, factor: float) -> np.ndarray:
    return np.maximum(np.ceil(payload * factor), np.where(payload > 0, 1, 0)).astype(np.int64)


def _all_pairs(members: np.ndarray, pieces: int) -> tuple[np.ndarray, ...]:
    """(piece, i, j) for every ordered pair i != j of ``members`` positions, pieces outermost."""
    m = members.size
    i, j = np.nonzero(~np.eye(m, dtype=bool))
    q = np.repeat(np.arange(pieces), i.size)
    return q, np.tile(i, pieces), np.tile(j, pieces)


def _phase(
    members_gpu: np.ndarray,
    seg: np.ndarray,
    factor: float,
    to_owner: bool,
    step: int,
    delay_ns: int,
    window: int,
) -> tuple[FlowGraph, np.ndarray]:
    """All-pairs flows of one phase for one host; also returns flow index (q, i, j) grid.

    ``seg``: (P, m) payload of slice j in piece q. ``to_owner``: flow i -> j carries slice j
    (reduce-scatter); otherwise j -> i carries slice j (all-gather; i is the receiver).
    """
    pieces, m = seg.shape
    q, i, j = _all_pairs(np.arange(m), pieces)
    f = q.size
    grid = np.full((pieces, m, m), -1, dtype=np.int64)
    grid[q, i, j] = np.arange(f)
    payload = seg[q, j]
    src = members_gpu[i] if to_owner else members_gpu[j]
    dst = members_gpu[j] if to_owner else members_gpu[i]
    ok = q >= window
    child = np.flatnonzero(ok)
    parent = grid[q[ok] - window, i[ok], j[ok]]
    graph = FlowGraph(
        src=src,
        dst=dst,
        payload=payload,
        wire=_scaled(payload, factor),
        delay_ns=np.where(q < window, delay_ns, 0).astype(np.int64),
        channel=np.zeros(f, np.int32),
        step=np.full(f, step, np.int32),
        chunk=q.astype(np.int32),
        edge_child=child,
        edge_parent=parent,
    )
    return graph, grid


def nvls_graph(view: CommView, coll: str, seg: np.ndarray, delay_ns: int, window: int = 2) -> FlowGraph:
    """Single-host NVLS flows. ``seg``: (P, n) payload of rank j's slice in piece q.

    ``delay_ns`` (NCCL's one NVLS latency per collective, less the wire) delays the pieces that
    start the first phase (those without a predecessor in the window), so the whole pipeline
    starts that much later; the all-gather phase of AllReduce adds none.
    """
    n = view.n
    gpus = view.gpus
    factor = wire_factor(coll, view)
    if coll == ALLREDUCE:
        rs, rs_grid = _phase(gpus, seg, factor, True, 0, delay_ns, window)
        ag, ag_grid = _phase(gpus, seg, factor, False, 1, 0, window)
        both = concat_graphs([rs, ag])
        # all-gather (q, i, j) [j -> i] waits for every reduce-scatter (q, x, j) [x -> j].
        pieces = seg.shape[0]
        q, i, j = _all_pairs(np.arange(n), pieces)
        x = np.arange(n)
        child = np.repeat(ag_grid[q, i, j], n) + len(rs)
        parent = rs_grid[np.repeat(q, n), np.tile(x, q.size), np.repeat(j, n)]
        keep = parent >= 0
        both.edge_child = np.concatenate([both.edge_child, child[keep]])
        both.edge_parent = np.concatenate([both.edge_parent, parent[keep]])
        return both
    graph, _ = _phase(gpus, seg, factor, coll == REDUCESCATTER, 0, delay_ns, window)
    assert coll in (ALLGATHER, REDUCESCATTER)
    return graph


def nvls_tree_graph(
    view: CommView, seg: np.ndarray, intra_ns: int, inter_ns: int, base_ns: int, window: int = 2
) -> FlowGraph:
    """Multi-host NVLS Tree AllReduce. ``seg``: (P, ppn) payload of local slot j in piece q.

    ``intra_ns`` (NCCL's NVLS intra latency, less the wire) delays the first in-host
    reduce-scatter pieces (as in ``nvls_graph``); the tree adds its own per-hop latency.

    Slot j's reduced slice is all-reduced across hosts over both binary trees (half each, as
    NCCL splits channels over the two trees) among the GPUs of local index j. Every host must
    hold the same number of ranks (checked by the caller).
    """
    pieces, ppn = seg.shape
    hosts = view.num_hosts
    members = np.stack(view.groups)  # (N, ppn) rank indices
    factor = wire_factor(ALLREDUCE, view)  # in-host phases: the single-host AllReduce volume
    rs_parts, ag_parts = [], []
    for h in range(hosts):
        rs_parts.append(_phase(view.gpus[members[h]], seg, factor, True, 0, intra_ns, window)[0])
        ag_parts.append(_phase(view.gpus[members[h]], seg, factor, False, 2, 0, window)[0])
    parents = _slot_tree_parents(view, members)
    half = seg.T[:, :, None] // 2
    halves = np.concatenate([seg.T[:, :, None] - half, half], axis=2)  # (ppn, P, 2)
    tree_bytes = np.moveaxis(halves, 2, 1).reshape(2 * ppn, pieces)
    tree = tree_allreduce_graph(view, parents, tree_bytes, window, "simple", intra_ns, inter_ns, base_ns)
    tree.step = tree.step + 1
    rs_all, ag_all = concat_graphs(rs_parts), concat_graphs(ag_parts)
    off_tree, off_ag = len(rs_all), len(rs_all) + len(tree)
    graph = concat_graphs([rs_all, tree, ag_all])
    # Keys (rank, piece) for every phase's flows.
    rs_key = view.rank_of_gpu(rs_all.dst) * pieces + rs_all.chunk
    t_src = view.rank_of_gpu(tree.src) * pieces + tree.chunk
    t_dst = view.rank_of_gpu(tree.dst) * pieces + tree.chunk
    ag_key = view.rank_of_gpu(ag_all.src) * pieces + ag_all.chunk
    tree_ids = np.arange(len(tree)) + off_tree
    up = tree.step == 1
    sends_up = np.zeros(view.n * pieces, dtype=bool)
    sends_up[t_src[up]] = True
    # A tree flow leaves a GPU after its in-host reduce-scatter (up flows, and down flows of roots).
    needs_rs = up | ~sends_up[t_src]
    c1, p1 = _join(t_src[needs_rs], tree_ids[needs_rs], rs_key, np.arange(len(rs_all)))
    # The final slice at a GPU: down flows into it, or up flows into it where it is a root.
    final = ~up | ~sends_up[t_dst]
    c2, p2 = _join(ag_key, np.arange(len(ag_all)) + off_ag, t_dst[final], tree_ids[final])
    c3, p3 = _join(ag_key, np.arange(len(ag_all)) + off_ag, rs_key, np.arange(len(rs_all)))
    graph.edge_child = np.concatenate([graph.edge_child, c1, c2, c3]).astype(np.int64)
    graph.edge_parent = np.concatenate([graph.edge_parent, p1, p2, p3]).astype(np.int64)
    return graph


def _slot_tree_parents(view: CommView, members: np.ndarray) -> np.ndarray:
    """(2 ppn, n) tree rows (slot j, tree t) = 2j + t: parents among the slot-j GPUs of every host."""
    hosts, ppn = members.shape
    parents = np.full((2 * ppn, view.n), -1, dtype=np.int64)
    for t in range(2):
        host_parent = np.array(binary_tree_parents(hosts, t), dtype=np.int64)
        has = np.flatnonzero(host_parent >= 0)
        for j in range(ppn):
            parents[2 * j + t, members[has, j]] = members[host_parent[has], j]
    return parents


def _join(
    child_key: np.ndarray, child_id: np.ndarray, parent_key: np.ndarray, parent_id: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Every (child, parent) pair whose keys are equal."""
    order = np.argsort(parent_key, kind="stable")
    pk, pid = parent_key[order], parent_id[order]
    lo = np.searchsorted(pk, child_key, side="left")
    hi = np.searchsorted(pk, child_key, side="right")
    counts = hi - lo
    children = np.repeat(child_id, counts)
    pos = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
    return children, pid[np.repeat(lo, counts) + pos]


def _host_pairs(
    members_gpu: np.ndarray, slot_payload: np.ndarray, slot_wire: np.ndarray, to_owner: bool, from_owner: bool
) -> tuple[np.ndarray, ...]:
    """Per-pair totals of the in-host phases: sender a -> receiver b carries slot b's slice in
    the reduce-scatter (``to_owner``) and slot a's slice in the all-gather (``from_owner``)."""
    a, b = np.nonzero(~np.eye(members_gpu.size, dtype=bool))
    payload = np.zeros(a.size, np.int64)
    wire = np.zeros(a.size, np.int64)
    if to_owner:
        payload, wire = payload + slot_payload[b], wire + slot_wire[b]
    if from_owner:
        payload, wire = payload + slot_payload[a], wire + slot_wire[a]
    return members_gpu[a], members_gpu[b], payload, wire


def nvls_connections(view: CommView, coll: str, seg: np.ndarray) -> tuple[np.ndarray, ...]:
    """Per-pair byte totals of :func:`nvls_graph` (same ``seg``), without the per-piece flows:
    (src, dst, payload, wire) rows."""
    wire = _scaled(seg, wire_factor(coll, view)).sum(axis=0)
    return _host_pairs(
        view.gpus, seg.sum(axis=0), wire, coll in (ALLREDUCE, REDUCESCATTER), coll in (ALLREDUCE, ALLGATHER)
    )


def nvls_tree_connections(view: CommView, seg: np.ndarray) -> tuple[np.ndarray, ...]:
    """Per-pair byte totals of :func:`nvls_tree_graph` (same ``seg``): the in-host reduce-scatter
    and all-gather of every host plus both trees of every slot. (src, dst, payload, wire) rows."""
    pieces, ppn = seg.shape
    members = np.stack(view.groups)
    slot_payload = seg.sum(axis=0)
    slot_wire = _scaled(seg, wire_factor(ALLREDUCE, view)).sum(axis=0)
    parts = [
        _host_pairs(view.gpus[members[h]], slot_payload, slot_wire, True, True) for h in range(view.num_hosts)
    ]
    parents = _slot_tree_parents(view, members)
    half = seg.T // 2
    per_row = np.stack([(seg.T - half).sum(axis=1), half.sum(axis=1)], axis=1).reshape(-1)
    parts.append(tree_connections(view, parents, per_row, per_row))
    return tuple(np.concatenate([p[k] for p in parts]) for k in range(4))
