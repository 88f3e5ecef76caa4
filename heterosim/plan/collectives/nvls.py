"""NVLS (NVLink SHARP) collectives, represented with GPU-to-GPU flows.

On Hopper+ NVSwitch hosts NCCL reduces inside the switch: for AllReduce GPU j pulls the
reduced slice j (``multimem.ld_reduce``: the switch reads slice j from every GPU and returns one
reduced copy) and multicasts it back (``multimem.st``: one copy in, the switch writes every GPU).
Each GPU's NVLink port then carries S(n+1)/n bytes each way instead of the ring's 2S(n-1)/n.

Our network has no switch endpoint that reduces or replicates, so NVLS is represented as a
reduce-scatter (GPU i -> GPU j: slice j) followed by an all-gather (GPU j -> GPU i: reduced slice
j) with direct flows through the NVSwitch, and every flow's wire bytes scaled so that each
GPU's NVLink port carries exactly the in-switch volume:

* AllReduce: x (n+1) / (2(n-1))  ->  S(n+1)/n per port and direction;
* AllGather / ReduceScatter: x n/(n-1)  ->  S per port on the loaded direction (the switch's
  own replication / reduction covers the other direction, which the flows over-fill
  symmetrically, so the time is that of the loaded direction).

``payload`` keeps the user bytes. The message moves in pieces of ``channels x n x 128 KiB``
(NCCL_NVLS_CHUNKSIZE per channel; channels are merged into one flow per GPU pair since they
share the same NVLink ports); an all-gather flow of piece q waits for every reduce-scatter flow
of piece q into its sender. Approximation limits: no multicast-object setup cost, and the
0.85 NVLS efficiency of NCCL's model is in the tuning prediction, not in the flows.

NVLS Tree (several hosts): NVLS reduce-scatter inside each host, a double binary tree across
hosts per slice (GPUs of one local index, one rail), then NVLS all-gather inside each host.
"""

from __future__ import annotations

import numpy as np

from heterosim.plan.collectives.common import ALLGATHER, ALLREDUCE, REDUCESCATTER
from heterosim.plan.collectives.commview import CommView
from heterosim.plan.collectives.graph import FlowGraph, concat_graphs
from heterosim.plan.collectives.tree import binary_tree_parents, tree_allreduce_graph


def _scaled(payload: np.ndarray, factor: float) -> np.ndarray:
    return np.maximum(np.ceil(payload * factor), np.where(payload > 0, 1, 0)).astype(np.int64)


def _all_pairs(members: np.ndarray, pieces: int) -> tuple[np.ndarray, ...]:
    """(piece, i, j) for every ordered pair i != j of ``members`` positions, pieces outermost."""
    m = members.size
    i, j = np.nonzero(~np.eye(m, dtype=bool))
    q = np.repeat(np.arange(pieces), i.size)
    return q, np.tile(i, pieces), np.tile(j, pieces)


def _phase(members_gpu: np.ndarray, seg: np.ndarray, factor: float, to_owner: bool, step: int,
           delay_ns: int, window: int) -> tuple[FlowGraph, np.ndarray]:
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
        src=src, dst=dst, payload=payload, wire=_scaled(payload, factor),
        delay_ns=np.full(f, delay_ns, np.int64), channel=np.zeros(f, np.int32),
        step=np.full(f, step, np.int32), chunk=q.astype(np.int32), edge_child=child,
        edge_parent=parent,
    )
    return graph, grid


def nvls_graph(view: CommView, coll: str, seg: np.ndarray, delay_ns: int, window: int = 2) -> FlowGraph:
    """Single-host NVLS flows. ``seg``: (P, n) payload of rank j's slice in piece q."""
    n = view.n
    gpus = view.gpus
    if coll == ALLREDUCE:
        factor = (n + 1) / (2 * (n - 1))
        rs, rs_grid = _phase(gpus, seg, factor, True, 0, delay_ns, window)
        ag, ag_grid = _phase(gpus, seg, factor, False, 1, delay_ns, window)
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
    factor = n / (n - 1)
    graph, _ = _phase(gpus, seg, factor, coll == REDUCESCATTER, 0, delay_ns, window)
    assert coll in (ALLGATHER, REDUCESCATTER)
    return graph


def nvls_tree_graph(view: CommView, seg: np.ndarray, intra_ns: int, inter_ns: int, base_ns: int,
                    window: int = 2) -> FlowGraph:
    """Multi-host NVLS Tree AllReduce. ``seg``: (P, ppn) payload of local slot j in piece q.

    Every host must hold the same number of ranks (checked by the caller).
    """
    pieces, ppn = seg.shape
    hosts = view.num_hosts
    members = np.stack(view.groups)  # (N, ppn) rank indices
    factor = ppn / (ppn - 1)  # reduce-scatter / all-gather alone inside each host
    rs_parts, ag_parts, rs_grids, ag_grids = [], [], [], []
    for h in range(hosts):
        rs, rs_grid = _phase(view.gpus[members[h]], seg, factor, True, 0, intra_ns, window)
        ag, ag_grid = _phase(view.gpus[members[h]], seg, factor, False, 2, intra_ns, window)
        rs_parts.append(rs)
        ag_parts.append(ag)
        rs_grids.append(rs_grid)
        ag_grids.append(ag_grid)
    # Tree across hosts per slot j (slot = "channel" of the tree builder).
    parents = np.full((ppn, view.n), -1, dtype=np.int64)
    for j in range(ppn):
        host_parent = binary_tree_parents(hosts, j % 2)
        for h in range(hosts):
            if host_parent[h] >= 0:
                parents[j, members[h, j]] = members[host_parent[h], j]
    tree = tree_allreduce_graph(view, parents, seg.T.copy(), window, "simple", intra_ns, inter_ns,
                                base_ns)
    tree.step = tree.step + 1
    tree.channel = tree.channel.astype(np.int32)
    rs_all = concat_graphs(rs_parts)
    ag_all = concat_graphs(ag_parts)
    off_tree = len(rs_all)
    off_ag = off_tree + len(tree)
    graph = concat_graphs([rs_all, tree, ag_all])
    rs_off = np.cumsum([0] + [len(g) for g in rs_parts[:-1]])
    ag_off = np.cumsum([0] + [len(g) for g in ag_parts[:-1]])
    # Which rank (slot j of host h) receives / sends each tree flow.
    e = len(tree) // (2 * pieces)
    up_src_rank = _rank_of_gpu(view, tree.src[: e * pieces])
    up_dst_rank = _rank_of_gpu(view, tree.dst[: e * pieces])
    host_pos = np.empty(view.n, dtype=np.int64)
    slot = np.empty(view.n, dtype=np.int64)
    for h in range(hosts):
        host_pos[members[h]] = h
        slot[members[h]] = np.arange(ppn)
    q_tree = tree.chunk[: e * pieces].astype(np.int64)
    x = np.arange(ppn)
    children, parents_e = [graph.edge_child], [graph.edge_parent]

    def rs_into(rank: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(repeat index, global rs flow ids) of every reduce-scatter flow into ``rank`` in piece q."""
        h, j = host_pos[rank], slot[rank]
        rep = np.repeat(np.arange(rank.size), ppn)
        xs = np.tile(x, rank.size)
        local = np.stack(rs_grids)[np.repeat(h, ppn), np.repeat(q, ppn), xs, np.repeat(j, ppn)]
        return rep[local >= 0], local[local >= 0] + rs_off[np.repeat(h, ppn)][local >= 0]

    # Up flows (and down flows out of a root) wait for the sender's slice to be reduced in-host.
    up_ids = np.arange(e * pieces) + off_tree
    rep, rs_ids = rs_into(up_src_rank, q_tree)
    children.append(up_ids[rep])
    parents_e.append(rs_ids)
    down_ids = np.arange(e * pieces, 2 * e * pieces) + off_tree
    root_sender = np.ones(view.n, dtype=bool)
    root_sender[up_src_rank] = False  # ranks that send up are not roots
    down_src_rank = _rank_of_gpu(view, tree.src[e * pieces:])
    is_root = root_sender[down_src_rank]
    rep, rs_ids = rs_into(down_src_rank[is_root], q_tree[is_root])
    children.append(down_ids[is_root][rep])
    parents_e.append(rs_ids)
    # All-gather flows out of rank r (slot j, host h) in piece q wait for r's final slice: the
    # down flow into r, or (r a root) every up flow into r and r's own reduce-scatter.
    ag_stack = np.stack(ag_grids)  # (H, P, ppn, ppn): flow j -> i is [h, q, i, j]
    down_dst_rank = _rank_of_gpu(view, tree.dst[e * pieces:])
    final_key = down_dst_rank * pieces + q_tree
    down_into = np.full(view.n * pieces, -1, dtype=np.int64)
    down_into[final_key] = down_ids
    for h in range(hosts):
        hq, hi, hj = np.nonzero(ag_stack[h] >= 0)
        ag_ids = ag_stack[h][hq, hi, hj] + ag_off[h] + off_ag
        sender = members[h, hj]
        d = down_into[sender * pieces + hq]
        nonroot = d >= 0
        children.append(ag_ids[nonroot])
        parents_e.append(d[nonroot])
        root_rows = np.flatnonzero(~nonroot)
        if root_rows.size:
            into_root = up_dst_rank[None, :] == sender[root_rows][:, None]
            same_q = q_tree[None, :] == hq[root_rows][:, None]
            rr, uu = np.nonzero(into_root & same_q)
            children.append(ag_ids[root_rows][rr])
            parents_e.append(up_ids[uu])
            rep, rs_ids = rs_into(sender[root_rows], hq[root_rows])
            children.append(ag_ids[root_rows][rep])
            parents_e.append(rs_ids)
    graph.edge_child = np.concatenate(children).astype(np.int64)
    graph.edge_parent = np.concatenate(parents_e).astype(np.int64)
    return graph


def _rank_of_gpu(view: CommView, gpus: np.ndarray) -> np.ndarray:
    order = np.argsort(view.gpus)
    return order[np.searchsorted(view.gpus[order], gpus)]
