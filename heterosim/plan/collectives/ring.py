"""Ring collectives as NCCL runs them: channels, loops of chunks, step-by-step forwarding.

Ring order (:func:`ring_orders`): ranks of one host are contiguous; every channel starts its
walk through a host at a different GPU, so with one NIC per GPU every NIC carries ring traffic.
With several hosts, hosts alternate direction: an even host is walked ``L[o], L[o+1], ...,
L[o-1]`` and an odd one ``L[o-1], ..., L[o]``, so the GPU that leaves host h and the GPU that
enters host h+1 have the same local index - the same rail (NCCL_CROSS_NIC=2 behaviour on
rail-optimised fabrics). With an odd number of hosts the closing hop changes rail.

Schedule (:func:`ring_graph`, docs/network_models.md §4.3): channel ``c`` carries an even share of every
segment; a segment is cut into ``L`` loop chunks. In loop ``l`` position ``i`` sends, at step
``s``, segment ``segment_of[i, s]`` to position ``i+1``. A send at step ``s >= 1`` depends on
the transfer that brought that chunk in (position ``i-1``, step ``s-1``), and on the send ``W``
places earlier on the same connection (NCCL's 8-step credit window, W chunks).

* AllReduce: 2(n-1) steps, segment (i-1-s) mod n (reduce-scatter then all-gather);
* ReduceScatter: n-1 steps, segment (i-1-s) mod n; AllGather: n-1 steps, segment (i-s) mod n;
* Broadcast (root at position 0) / Reduce (root at position n-1): position i sends at step i
  only, for i = 0..n-2: a pipelined chain.

Latency: every flow of the first loop waits NCCL's per-hop latency (``delay_ns``: the tuning
model's hardware latency of the hop type and protocol, minus the wire latency the network adds
itself); the first flows also wait the base latency. Later loops pay none: their latency hides
behind the slices already in flight, as NCCL's cost model (latency once + size / bandwidth)
assumes. Flow wire bytes include the protocol overhead (LL x2, LL128 x128/120).
"""

from __future__ import annotations

import numpy as np

from heterosim.plan.collectives.common import wire_bytes
from heterosim.plan.collectives.commview import CommView
from heterosim.plan.collectives.graph import FlowGraph


def ring_orders(view: CommView, channels: int) -> np.ndarray:
    """(channels, n) rank indices: the ring of every channel (see module docstring)."""
    c = np.arange(channels)[:, None]
    parts = []
    for position, group in enumerate(view.groups):
        g = group.size
        offset = c % g
        if position % 2 == 0:
            local = (offset + np.arange(g)[None, :]) % g
        else:
            local = (offset - 1 - np.arange(g)[None, :]) % g
        parts.append(group[local])
    return np.concatenate(parts, axis=1).astype(np.int64)


def ring_segments(coll_steps: int, n: int, shift: int) -> np.ndarray:
    """(n, steps) segment index sent by position i at step s: (i - shift - s) mod n."""
    i = np.arange(n)[:, None]
    s = np.arange(coll_steps)[None, :]
    return (i - shift - s) % n


def chain_segments(n: int) -> np.ndarray:
    """(n, n-1) pipelined chain: position i sends segment 0 at step i (i < n-1), else -1."""
    seg = np.full((n, max(n - 1, 0)), -1, dtype=np.int64)
    idx = np.arange(n - 1)
    seg[idx, idx] = 0
    return seg


def ring_hop_delays(view: CommView, orders: np.ndarray, intra_ns: int, inter_ns: int) -> np.ndarray:
    """(C, n) delay of the hop from position i to i+1 in every channel."""
    host = view.host_of_rank[orders]
    inter = host != np.roll(host, -1, axis=1)
    return np.where(inter, inter_ns, intra_ns).astype(np.int64)


def ring_graph(
    view: CommView,
    orders: np.ndarray,
    seg_bytes: np.ndarray,
    segment_of: np.ndarray,
    window: int,
    protocol: str,
    hop_delay_ns: np.ndarray,
    base_ns: int,
) -> FlowGraph:
    """Flows and dependencies of a ring schedule (see module docstring).

    ``seg_bytes``: (L, C, m) payload of segment j in loop l on channel c, segment j belonging
    to position j (or the single segment 0 of a chain). ``segment_of``: (n, S) segment sent by
    position i at step s, -1 where position i does not send.
    """
    loops, channels, _ = seg_bytes.shape
    n, steps = segment_of.shape
    active = segment_of >= 0
    if active.all():
        return _dense_ring_graph(view, orders, seg_bytes, segment_of, window, protocol, hop_delay_ns, base_ns)
    return _sparse_ring_graph(view, orders, seg_bytes, segment_of, window, protocol, hop_delay_ns, base_ns)


def _sparse_ring_graph(
    view: CommView,
    orders: np.ndarray,
    seg_bytes: np.ndarray,
    segment_of: np.ndarray,
    window: int,
    protocol: str,
    hop_delay_ns: np.ndarray,
    base_ns: int,
) -> FlowGraph:
    """:func:`ring_graph` for any activity pattern (chains), by explicit index grids."""
    loops, channels, _ = seg_bytes.shape
    n, steps = segment_of.shape
    active = segment_of >= 0
    # Flows ordered by (loop, step, channel, position): every parent precedes its child.
    grid = np.broadcast_to(active.T[None, :, None, :], (loops, steps, channels, n))
    ll, ss, cc, ii = np.nonzero(grid)
    f = ll.size
    index = np.full((loops, channels, n, steps), -1, dtype=np.int64)
    index[ll, cc, ii, ss] = np.arange(f)
    gpus = view.gpus
    src = gpus[orders[cc, ii]]
    dst = gpus[orders[cc, (ii + 1) % n]]
    payload = seg_bytes[ll, cc, segment_of[ii, ss]]
    # Data dependency: the chunk arrived from position i-1 at step s-1.
    data_parent = np.where(ss >= 1, index[ll, cc, (ii - 1) % n, np.maximum(ss - 1, 0)], -1)
    # Credit window on connection (c, i): the send `window` places earlier.
    per_pos = active.sum(axis=1)
    rank_in_pos = np.cumsum(active, axis=1) - 1
    steps_of = np.zeros((n, max(int(per_pos.max()), 1)), dtype=np.int64)
    pi, ps = np.nonzero(active)
    steps_of[pi, rank_in_pos[pi, ps]] = ps
    m = per_pos[ii]
    k = ll * m + rank_in_pos[ii, ss] - window
    ok = k >= 0
    kk = np.where(ok, k, 0)
    win_parent = np.where(ok, index[kk // np.maximum(m, 1), cc, ii, steps_of[ii, kk % np.maximum(m, 1)]], -1)
    # Per-hop latency is charged in the first loop only: later loops' latency overlaps with the
    # slices already in flight, as in NCCL's cost model (latency once + size / bandwidth).
    delay = np.where(ll == 0, hop_delay_ns[cc, ii], 0) + np.where((ll == 0) & (data_parent < 0), base_ns, 0)
    flows = np.arange(f)
    has_data, has_win = data_parent >= 0, win_parent >= 0
    return FlowGraph(
        src=src,
        dst=dst,
        payload=payload,
        wire=wire_bytes(payload, protocol),
        delay_ns=delay.astype(np.int64),
        channel=cc.astype(np.int32),
        step=ss.astype(np.int32),
        chunk=ll.astype(np.int32),
        edge_child=np.concatenate([flows[has_data], flows[has_win]]),
        edge_parent=np.concatenate([data_parent[has_data], win_parent[has_win]]),
    )


def _dense_ring_graph(
    view: CommView,
    orders: np.ndarray,
    seg_bytes: np.ndarray,
    segment_of: np.ndarray,
    window: int,
    protocol: str,
    hop_delay_ns: np.ndarray,
    base_ns: int,
) -> FlowGraph:
    """:func:`ring_graph` when every position sends at every step (AllReduce, AllGather,
    ReduceScatter): flow ids are ``((l * S + s) * C + c) * n + i`` and parents are id arithmetic."""
    loops, channels, _ = seg_bytes.shape
    n, steps = segment_of.shape
    shape = (loops, steps, channels, n)
    f = loops * steps * channels * n
    gpus = view.gpus[orders]  # (C, n)
    src = np.broadcast_to(gpus[None, None], shape).reshape(-1)
    dst = np.broadcast_to(np.roll(gpus, -1, axis=1)[None, None], shape).reshape(-1)
    payload = seg_bytes[
        np.arange(loops)[:, None, None, None],
        np.arange(channels)[None, None, :, None],
        segment_of.T[None, :, None, :],
    ].reshape(-1)
    first_loop = np.zeros((loops, 1, 1, 1), dtype=np.int64)
    first_loop[0] = 1
    first_step = np.zeros((1, steps, 1, 1), dtype=np.int64)
    first_step[0, 0] = 1
    delay = (first_loop * (hop_delay_ns[None, None] + first_step * base_ns)).astype(np.int64)
    delay = np.broadcast_to(delay, shape).reshape(-1)
    ids = np.arange(f, dtype=np.int64)
    block = channels * n
    # data parent: position i-1 at step s-1 (same loop): exists for s >= 1
    data_child = ids.reshape(loops, steps, block)[:, 1:].reshape(-1)
    i_of = data_child % n
    data_parent = data_child - block + np.where(i_of == 0, n - 1, -1)
    win_child = ids[window * block :]
    win_parent = win_child - window * block
    step_col = np.broadcast_to(np.arange(steps, dtype=np.int32)[None, :, None, None], shape).reshape(-1)
    chunk_col = np.broadcast_to(np.arange(loops, dtype=np.int32)[:, None, None, None], shape).reshape(-1)
    chan_col = np.broadcast_to(np.arange(channels, dtype=np.int32)[None, None, :, None], shape).reshape(-1)
    return FlowGraph(
        src=src,
        dst=dst,
        payload=payload,
        wire=wire_bytes(payload, protocol),
        delay_ns=delay,
        channel=chan_col,
        step=step_col,
        chunk=chunk_col,
        edge_child=np.concatenate([data_child, win_child]),
        edge_parent=np.concatenate([data_parent, win_parent]),
    )


def ring_connections(
    view: CommView, orders: np.ndarray, seg_payload: np.ndarray, seg_wire: np.ndarray, segment_of: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Bytes every ring connection (channel c, position i -> i+1) carries over the whole
    schedule, without the per-chunk flows: (src, dst, payload, wire), one row per connection.

    ``seg_payload`` / ``seg_wire``: (C, m) totals of segment j on channel c over all loops;
    ``segment_of`` as in :func:`ring_graph`. Position i sends segment j ``count[i, j]`` times.
    """
    n, _ = segment_of.shape
    m = seg_payload.shape[1]
    pos, step = np.nonzero(segment_of >= 0)
    count = np.bincount(pos * m + segment_of[pos, step], minlength=n * m).reshape(n, m)
    gpus = view.gpus[orders]
    return (
        gpus.reshape(-1),
        np.roll(gpus, -1, axis=1).reshape(-1),
        (seg_payload @ count.T).reshape(-1),
        (seg_wire @ count.T).reshape(-1),
    )
