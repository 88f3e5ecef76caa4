"""How finely a collective is cut into flows: ``chunk``, ``step`` or ``connection``.

* ``chunk`` (default): NCCL's schedule chunk by chunk - one flow per chunk, step and channel,
  with the data and credit-window dependencies of the real pipeline (ring.py, tree.py, nvls.py).
* ``step``: rings run one loop - one flow per step and channel carrying the channel's whole
  segment, dependencies kept (lock-step and per-hop latency as in ``chunk``). A ring's time does
  not depend on its chunking (every position sends at every step), so this is exact for rings up
  to the protocol overhead's rounding; it only shrinks collectives whose per-channel segments are
  larger than one chunk (2 MiB Simple). Trees and NVLS are pipelines whose time does depend on
  the chunking (one chunk per channel would pay the whole tree depth per byte), so they keep
  their chunks; point-to-point transfers are unchanged.
* ``connection``: the collective becomes ONE flow per distinct (source GPU, destination GPU)
  pair, carrying exactly the wire bytes the chunk schedule sends over that pair (channels on
  the same pair merged), computed per channel without building the chunk graph. All flows start
  when the collective starts and none depends on another. NCCL's cost-model latency of the
  chosen algorithm and protocol (``TuningChoice.latency_us``, the ``lat`` of ``lat + S / bw``) is
  charged once, as a delay before every flow, less the wire latency the network adds to a flow on
  that pair's path (an intra-host hop or a rail hop, as ``tuning.step_delay_ns``), so it is not
  counted twice. Point-to-point operations (send/recv, gather, scatter) become one flow per pair;
  all-to-all already is.

What ``connection`` drops, and what that means: the ring's lock-step. In the chunk schedule a
GPU can forward a chunk only after receiving it, so a ring advances at the pace of its slowest
connection; here each connection runs on its own, and a fast connection (NVLink inside a host)
may finish long before a slow one (a NIC) instead of being paced by it. The collective still
ends with its slowest connection, so with links of uniform rate over the collective's life the
bandwidth term is exact: the slowest connection carries the same bytes at the same rate as in
the paced schedule (per-link bytes are conserved, and a connection's max-min rate is its
bottleneck's share). It is optimistic where rates change during the collective: a connection
slowed for a while by other traffic delays only itself, not the whole ring, and the fast
connections' early finish frees link capacity that the paced schedule would have kept busy, so
concurrent traffic (other collectives, pipeline sends) sees less contention than it would.
Pipeline fill (trees, chains) and per-step latencies are replaced by the model's single latency.

Shares of a contended link: NCCL drives one queue pair per channel and peer, and the engine does
the same by default (``simulation.queue_pairs: connection``): the chunk flows of one channel
between two GPUs are messages on one queue pair, sent one after another, so in ``chunk`` and
``step`` granularity a connection takes one share of a link however many chunks it has in
flight, as a ``connection`` flow does. With ``queue_pairs: flow`` every chunk in flight (up to
the credit window, 8 per channel) is its own flow with its own share, and traffic overlapping a
collective - pipeline sends beside a data-parallel all-gather - gets a fraction of the link
(measured on GPT-3 175B TP8 PP8 DP2, H0 128: pipeline sends 32x slower than alone in chunk
granularity then, 2x in ``connection``; benchmarks/README.md, "Simulator speed at scale").
"""

from __future__ import annotations

import numpy as np

from heterosim.config.choices import GRANULARITIES, require_choice
from heterosim.plan.collectives.commview import CommView
from heterosim.plan.collectives.graph import FlowGraph

CHUNK, STEP, CONNECTION = GRANULARITIES


def check_granularity(value: str) -> str:
    """``value`` if it is a known granularity, else a UserError."""
    return require_choice("collective: granularity", value, GRANULARITIES)


def merge_pairs(
    src: np.ndarray, dst: np.ndarray, payload: np.ndarray, wire: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Sum ``payload`` and ``wire`` per distinct (src, dst) pair; pairs with no wire bytes are
    dropped. Returns (src, dst, payload, wire) sorted by (src, dst)."""
    src = np.asarray(src, np.int64).reshape(-1)
    dst = np.asarray(dst, np.int64).reshape(-1)
    payload = np.asarray(payload, np.int64).reshape(-1)
    wire = np.asarray(wire, np.int64).reshape(-1)
    keep = wire > 0
    src, dst, payload, wire = src[keep], dst[keep], payload[keep], wire[keep]
    if src.size == 0:
        z = np.zeros(0, np.int64)
        return z, z, z, z
    width = int(max(src.max(), dst.max())) + 1
    pairs, inverse = np.unique(src * width + dst, return_inverse=True)
    inverse = inverse.reshape(-1)
    out_payload = np.zeros(pairs.size, np.int64)
    out_wire = np.zeros(pairs.size, np.int64)
    np.add.at(out_payload, inverse, payload)
    np.add.at(out_wire, inverse, wire)
    return pairs // width, pairs % width, out_payload, out_wire


def connection_graph(
    view: CommView, src: np.ndarray, dst: np.ndarray, payload: np.ndarray, wire: np.ndarray, latency_ns: float
) -> FlowGraph:
    """One flow per (src, dst) pair of the given per-connection totals (module notes).

    ``latency_ns`` is the collective's model latency; every flow waits it, less the wire latency
    of its own path, before it starts.
    """
    src, dst, payload, wire = merge_pairs(src, dst, payload, wire)
    f = src.size
    host = view.host_of_rank[view.rank_of_gpu(src)] != view.host_of_rank[view.rank_of_gpu(dst)]
    path_ns = np.where(host, view.net_wire_ns, view.intra_wire_ns)
    delay = np.maximum(0, np.round(latency_ns - path_ns)).astype(np.int64)
    z = np.zeros(f, np.int32)
    return FlowGraph(
        src=src,
        dst=dst,
        payload=payload,
        wire=wire,
        delay_ns=delay,
        channel=z,
        step=z,
        chunk=z.copy(),
        edge_child=np.zeros(0, np.int64),
        edge_parent=np.zeros(0, np.int64),
    )
