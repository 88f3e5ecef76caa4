"""Point-to-point operations: Send/Recv, AllToAll, Gather, Scatter.

NCCL moves p2p data in chunks of NCCL_P2P_NET_CHUNKSIZE (128 KiB) over the network,
NCCL_P2P_NVL_CHUNKSIZE (512 KiB) over NVLink and NCCL_P2P_PCI_CHUNKSIZE (128 KiB) over PCIe,
with at most NCCL_STEPS = 8 chunks in flight per connection. Chunks on one connection follow
each other back to back, so the plan merges them: a transfer becomes at most 8 flows of
``max(chunk, bytes / 8)`` bytes, each waiting for the one 8 places earlier - nothing in between
(a chain of 8 in flight is a single pipe). AllToAll runs all pairs concurrently (NCCL posts
every peer of a group call at once); with one flow per pair and direction. AllToAllv
(per-pair sizes) is the same with each pair's own size.

Channels: on one fabric plane every flow is on channel 0 (one connection per pair). On a multi-plane
fabric NCCL's NCCL_NCHANNELS_PER_NET_PEER (2) channels per peer land on different NIC ports
(ncclTopoGetLocalNet: channelId % ports), and peers at different distances start at
different channels (ncclP2pChannelBaseForRound). Here flow ``k`` of the transfer to the peer
``d`` ranks ahead is on channel ``(d + k % 2) % (2 x planes)``: the pieces of one transfer
alternate between two channels, and the peers of an all-to-all spread over all of them, so
over every plane (:mod:`heterosim.plan.collectives.planes`).
"""

from __future__ import annotations

import numpy as np

from heterosim.plan.collectives.common import (
    NCCL_STEPS,
    NCHANNELS_PER_NET_PEER,
    P2P_NET_CHUNK,
    P2P_NVL_CHUNK,
    P2P_PCI_CHUNK,
    wire_bytes,
)
from heterosim.plan.collectives.commview import CommView
from heterosim.plan.collectives.graph import FlowGraph


def p2p_chunk(view: CommView, src_rank: int, dst_rank: int) -> int:
    if view.host_of_rank[src_rank] != view.host_of_rank[dst_rank]:
        return P2P_NET_CHUNK
    return P2P_NVL_CHUNK if view.all_nvswitch else P2P_PCI_CHUNK


def pairs_graph(
    view: CommView,
    src_rank: np.ndarray,
    dst_rank: np.ndarray,
    payload: np.ndarray,
    protocol: str,
    intra_ns: int,
    inter_ns: int,
    pieces: int = 1,
) -> FlowGraph:
    """Independent transfers ``src_rank[k] -> dst_rank[k]`` of ``payload[k]`` bytes, each split
    into ``pieces`` flows chained one after another (no window: pieces = chunks in flight)."""
    src_rank, dst_rank = np.asarray(src_rank, np.int64), np.asarray(dst_rank, np.int64)
    payload = np.asarray(payload, np.int64)
    m = src_rank.size
    per = -(-payload // pieces)
    k = np.arange(pieces)
    sizes = np.minimum(per[:, None], np.maximum(payload[:, None] - k[None, :] * per[:, None], 0))
    inter = view.host_of_rank[src_rank] != view.host_of_rank[dst_rank]
    delay = np.where(inter, inter_ns, intra_ns)
    flat = sizes.reshape(-1)
    channel = np.zeros(m * pieces, np.int32)
    if view.planes > 1:
        ahead = (dst_rank - src_rank) % max(view.n, 1)
        two = NCHANNELS_PER_NET_PEER
        channel = ((ahead[:, None] + k[None, :] % two) % (two * view.planes)).reshape(-1).astype(np.int32)
    return FlowGraph(
        src=np.repeat(view.gpus[src_rank], pieces),
        dst=np.repeat(view.gpus[dst_rank], pieces),
        payload=flat,
        wire=wire_bytes(flat, protocol),
        delay_ns=np.repeat(delay, pieces),
        channel=channel,
        step=np.zeros(m * pieces, np.int32),
        chunk=np.tile(k, m).astype(np.int32),
        edge_child=np.zeros(0, np.int64),
        edge_parent=np.zeros(0, np.int64),
    )


def sendrecv_graph(
    view: CommView, size_bytes: int, protocol: str, intra_ns: int, inter_ns: int, one_flow: bool = False
) -> FlowGraph:
    """Rank 0 of the communicator sends ``size_bytes`` to rank 1, in merged chunks (one flow
    with ``one_flow``: connection granularity)."""
    chunk = p2p_chunk(view, 0, 1)
    pieces = 1 if one_flow else int(min(NCCL_STEPS, max(1, -(-size_bytes // chunk))))
    return pairs_graph(
        view, np.array([0]), np.array([1]), np.array([size_bytes]), protocol, intra_ns, inter_ns, pieces
    )


def alltoall_graph(
    view: CommView, per_rank_bytes: np.ndarray, protocol: str, intra_ns: int, inter_ns: int
) -> FlowGraph:
    """Every rank i sends ``per_rank_bytes[i] / n`` to every other rank (its own share stays)."""
    n = view.n
    i, j = np.nonzero(~np.eye(n, dtype=bool))
    share = np.asarray(per_rank_bytes, np.int64)[i] // n
    return pairs_graph(view, i, j, share, protocol, intra_ns, inter_ns)


def alltoallv_graph(
    view: CommView, pair_bytes: np.ndarray, protocol: str, intra_ns: int, inter_ns: int
) -> FlowGraph:
    """Every rank i sends ``pair_bytes[i, j]`` to every other rank j with something to send (an
    all-to-all-v: one flow per pair and direction, all at once, as the even all-to-all)."""
    n = view.n
    i, j = np.nonzero(~np.eye(n, dtype=bool) & (np.asarray(pair_bytes) > 0))
    return pairs_graph(view, i, j, np.asarray(pair_bytes, np.int64)[i, j], protocol, intra_ns, inter_ns)


def rooted_graph(
    view: CommView,
    per_rank_bytes: np.ndarray,
    root: int,
    to_root: bool,
    protocol: str,
    intra_ns: int,
    inter_ns: int,
) -> FlowGraph:
    """Gather (``to_root``) or Scatter: rank i's block of ``per_rank_bytes[i]`` moves to/from root."""
    others = np.array([r for r in range(view.n) if r != root], dtype=np.int64)
    payload = np.asarray(per_rank_bytes, np.int64)[others]
    roots = np.full(others.size, root, dtype=np.int64)
    if to_root:
        return pairs_graph(view, others, roots, payload, protocol, intra_ns, inter_ns)
    return pairs_graph(view, roots, others, payload, protocol, intra_ns, inter_ns)
