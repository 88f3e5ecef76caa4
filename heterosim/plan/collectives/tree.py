"""Tree AllReduce as NCCL builds it: a double binary tree over hosts, a chain inside each host.

Trees (:func:`binary_tree_parents`, ``trees.cc``): host positions 0..N-1; position 0 is the root
with one child; positions 1..N-1 form the in-order binary tree where a node's children are
``r -/+ lowbit(r)/2``. The second tree is the mirror image (r -> N-1-r) for even N, the first tree
shifted by one (r -> r+1 mod N) for odd N, so leaves of one tree are inner nodes of the other.
The first half of the channels use the first tree, the second half the other: NCCL sets up
nChannels/2 channel graphs, duplicates them, and connects channel c to tree 0 and its duplicate
c + nChannels/2 to tree 1 (``connectTrees``). Channels c and c + C/2 share a head GPU and NIC
whenever C/2 is a multiple of the GPUs per host, so every NIC carries one inner-node and one leaf
role instead of two of the same kind.

Inside a host the ranks form a chain starting at the channel's head GPU (local offset
``c mod ppn``, so different channels use different NICs); the head connects to the heads of its
parent and children hosts - heads of one channel share a local index, so inter-host tree
edges stay on one rail.

Schedule: every channel carries an even share of the message in chunks. Reduce: a rank sends
chunk k up once it has received chunk k from all its children; broadcast: a rank sends chunk k
down once it has received it from its parent (the root once it received it from all children).
Every connection keeps at most W chunks in flight (credit window).
"""

from __future__ import annotations

from functools import cache

import numpy as np

from heterosim.plan.collectives.common import wire_bytes
from heterosim.plan.collectives.commview import CommView
from heterosim.plan.collectives.graph import FlowGraph


@cache
def _inorder_parents(count: int) -> tuple[int, ...]:
    parents = [-1] * count
    if count <= 1:
        return tuple(parents)
    top = 1 << ((count - 1).bit_length() - 1)  # largest power of two <= count-1
    parents[top] = 0
    stack = [top]
    while stack:
        r = stack.pop()
        low = r & -r
        if low < 2:
            continue
        for child in (r - low // 2, r + low // 2):
            half = low // 4
            while child >= count and half >= 1:
                child -= half
                half //= 2
            if 0 < child < count and child != r and parents[child] == -1 and child != top:
                parents[child] = r
                stack.append(child)
    return tuple(parents)


@cache
def binary_tree_parents(count: int, which: int) -> tuple[int, ...]:
    """Parent host position of every host position in tree ``which`` (0 or 1); -1 at the root."""
    base = _inorder_parents(count)
    if which == 0 or count <= 1:
        return base
    if count % 2 == 0:
        mapping = [count - 1 - r for r in range(count)]
    else:
        mapping = [(r + 1) % count for r in range(count)]
    parents = [-1] * count
    for r in range(count):
        if base[r] >= 0:
            parents[mapping[r]] = mapping[base[r]]
    return tuple(parents)


def tree_parents(view: CommView, channels: int) -> np.ndarray:
    """(channels, n) parent rank index of every rank in every channel's tree; -1 at the root."""
    n = view.n
    parents = np.full((channels, n), -1, dtype=np.int64)
    hosts = view.num_hosts
    for c in range(channels):
        host_parent = binary_tree_parents(hosts, (2 * c) // channels if channels > 1 else 0)
        heads = np.empty(hosts, dtype=np.int64)
        for h, group in enumerate(view.groups):
            g = group.size
            chain = group[(c + np.arange(g)) % g]
            heads[h] = chain[0]
            parents[c, chain[1:]] = chain[:-1]
        for h in range(hosts):
            if host_parent[h] >= 0:
                parents[c, heads[h]] = heads[host_parent[h]]
    return parents


def _tree_dependencies(
    cc: np.ndarray, pp: np.ndarray, edge_id: np.ndarray, chunks: int, window: int
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """(child flows, parent flows) of the tree edges' chunk dependencies: up(x) after up of x's
    children, down(x) after down(p) (or, below a root, after every up into that root), and each
    connection's credit window. Flow (direction d, edge j, chunk k) is ``(d * E + j) * K + k``."""
    e = cc.size
    n = edge_id.shape[1]

    def fid(d, j, k):
        return (d * e + j) * chunks + k

    k_all = np.arange(chunks)
    j_all = np.arange(e)
    children, parents_e = [], []
    # up(x, k) <- up(y, k) for each child y of x (edge y -> x with x non-root).
    y_edges = j_all[edge_id[cc, pp] >= 0]  # edges whose parent is itself a child (non-root)
    up_parent_edge = edge_id[cc[y_edges], pp[y_edges]]
    for_k = k_all[None, :]
    children.append(fid(0, up_parent_edge[:, None], for_k).reshape(-1))
    parents_e.append(fid(0, y_edges[:, None], for_k).reshape(-1))
    # down(x, k) <- down(p, k) if p non-root, else <- up(y, k) for every child y of the root p.
    nonroot_p = edge_id[cc, pp] >= 0
    dj = j_all[nonroot_p]
    children.append(fid(1, dj[:, None], for_k).reshape(-1))
    parents_e.append(fid(1, edge_id[cc[dj], pp[dj]][:, None], for_k).reshape(-1))
    rj = j_all[~nonroot_p]  # edges into a root: pair every such down edge with every up edge
    if rj.size:
        key = cc[rj] * n + pp[rj]
        order = np.argsort(key, kind="stable")
        rj_sorted, key_sorted = rj[order], key[order]
        starts = np.searchsorted(key_sorted, key_sorted, side="left")
        ends = np.searchsorted(key_sorted, key_sorted, side="right")
        counts = ends - starts
        down_e = np.repeat(rj_sorted, counts)
        pos = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
        up_e = rj_sorted[np.repeat(starts, counts) + pos]
        children.append(fid(1, down_e[:, None], for_k).reshape(-1))
        parents_e.append(fid(0, up_e[:, None], for_k).reshape(-1))
    # Credit windows on every connection.
    if chunks > window:
        wk = k_all[window:][None, :]
        for d in (0, 1):
            children.append(fid(d, j_all[:, None], wk).reshape(-1))
            parents_e.append(fid(d, j_all[:, None], wk - window).reshape(-1))
    return children, parents_e


def tree_allreduce_graph(
    view: CommView,
    parents: np.ndarray,
    chunk_bytes: np.ndarray,
    window: int,
    protocol: str,
    intra_ns: int,
    inter_ns: int,
    base_ns: int,
) -> FlowGraph:
    """Flows of a pipelined reduce-up / broadcast-down over every channel's tree.

    ``chunk_bytes``: (C, K) payload of chunk k of channel c.
    """
    channels, chunks = chunk_bytes.shape
    n = view.n
    cc, xx = np.nonzero(parents >= 0)  # tree edges: child x of parent p in channel c
    e = cc.size
    pp = parents[cc, xx]
    edge_id = np.full((channels, n), -1, dtype=np.int64)
    edge_id[cc, xx] = np.arange(e)

    k_all = np.arange(chunks)
    inter = view.host_of_rank[xx] != view.host_of_rank[pp]
    hop = np.where(inter, inter_ns, intra_ns)
    # Up flows x -> p; down flows p -> x.
    src = np.concatenate([np.repeat(view.gpus[xx], chunks), np.repeat(view.gpus[pp], chunks)])
    dst = np.concatenate([np.repeat(view.gpus[pp], chunks), np.repeat(view.gpus[xx], chunks)])
    payload = np.tile(chunk_bytes[cc].reshape(-1), 2)
    chunk = np.tile(np.tile(k_all, e), 2)
    channel = np.tile(np.repeat(cc, chunks), 2)
    step = np.concatenate([np.zeros(e * chunks, np.int32), np.ones(e * chunks, np.int32)])
    is_leaf = np.ones((channels, n), dtype=bool)
    is_leaf[cc, pp] = False
    delay = np.tile(np.repeat(hop, chunks) * (np.tile(k_all, e) == 0), 2)  # first chunk pays latency
    leaf_up = np.repeat(is_leaf[cc, xx], chunks) & (np.tile(k_all, e) == 0)
    delay[: e * chunks] += np.where(leaf_up, base_ns, 0)
    children, parents_e = _tree_dependencies(cc, pp, edge_id, chunks, window)
    return FlowGraph(
        src=src,
        dst=dst,
        payload=payload,
        wire=wire_bytes(payload, protocol),
        delay_ns=delay.astype(np.int64),
        channel=channel.astype(np.int32),
        step=step,
        chunk=chunk.astype(np.int32),
        edge_child=np.concatenate(children).astype(np.int64),
        edge_parent=np.concatenate(parents_e).astype(np.int64),
    )


def tree_connections(
    view: CommView, parents: np.ndarray, channel_payload: np.ndarray, channel_wire: np.ndarray
) -> tuple[np.ndarray, ...]:
    """Bytes every tree edge carries each way over the whole schedule: every chunk of channel c
    goes up (child -> parent) and down (parent -> child) once. (src, dst, payload, wire) rows."""
    cc, xx = np.nonzero(parents >= 0)
    child, parent = view.gpus[xx], view.gpus[parents[cc, xx]]
    return (
        np.concatenate([child, parent]),
        np.concatenate([parent, child]),
        np.tile(channel_payload[cc], 2),
        np.tile(channel_wire[cc], 2),
    )
