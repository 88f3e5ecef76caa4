"""Names and NCCL constants shared by the collective decomposers.

Collective names are lower-case strings (``allreduce``, ``allgather``, ...); trace collective
constants (:mod:`heterosim.workload.trace`) map onto them. Protocol and chunk constants follow
NCCL 2.30 (docs/network_models.md §4.2, §4.3).
"""

from __future__ import annotations

import numpy as np

from heterosim.config.choices import COLLECTIVE_ALGORITHMS, COLLECTIVE_PROTOCOLS
from heterosim.errors import UserError
from heterosim.workload import trace

ALLREDUCE = "allreduce"
ALLGATHER = "allgather"
REDUCESCATTER = "reducescatter"
BROADCAST = "broadcast"
REDUCE = "reduce"
ALLTOALL = "alltoall"
SENDRECV = "sendrecv"
GATHER = "gather"
SCATTER = "scatter"
BARRIER = "barrier"
COLLECTIVES = (
    ALLREDUCE,
    ALLGATHER,
    REDUCESCATTER,
    BROADCAST,
    REDUCE,
    ALLTOALL,
    SENDRECV,
    GATHER,
    SCATTER,
    BARRIER,
)

_TRACE_TO_NAME = {
    trace.ALL_REDUCE: ALLREDUCE,
    trace.REDUCE: REDUCE,
    trace.ALL_GATHER: ALLGATHER,
    trace.GATHER: GATHER,
    trace.SCATTER: SCATTER,
    trace.BROADCAST: BROADCAST,
    trace.ALL_TO_ALL: ALLTOALL,
    trace.REDUCE_SCATTER: REDUCESCATTER,
    trace.REDUCE_SCATTER_BLOCK: REDUCESCATTER,
    trace.BARRIER: BARRIER,
}
_ALIASES = {
    "all_reduce": ALLREDUCE,
    "all-reduce": ALLREDUCE,
    "all_gather": ALLGATHER,
    "all-gather": ALLGATHER,
    "reduce_scatter": REDUCESCATTER,
    "reduce-scatter": REDUCESCATTER,
    "all_to_all": ALLTOALL,
    "all-to-all": ALLTOALL,
    "send_recv": SENDRECV,
    "send": SENDRECV,
    "p2p": SENDRECV,
    "bcast": BROADCAST,
}

# Protocols.
SIMPLE, LL, LL128 = COLLECTIVE_PROTOCOLS[1:]  # after "auto"
PROTOCOLS = (LL, LL128, SIMPLE)  # NCCL's order (index p in the tuning tables)
# Bytes on the wire per payload byte: LL sends 8 B (4 data + 4 flag) per 4 B, LL128 128 B per 120 B.
WIRE_FACTOR = {SIMPLE: 1.0, LL: 2.0, LL128: 128.0 / 120.0}
# Alignment grain of per-channel parts.
GRAIN = {SIMPLE: 512, LL: 16, LL128: 1920}

# Algorithms.
RING, TREE, NVLS = COLLECTIVE_ALGORITHMS[1:]  # after "auto"
NVLS_TREE, P2P = "nvls_tree", "p2p"  # chosen by the tuning model, not by configuration

NCCL_STEPS = 8
SIMPLE_STEP = (1 << 22) // NCCL_STEPS  # 512 KiB
LL_STEP_PAYLOAD = (1 << 19) // NCCL_STEPS // 2  # 64 KiB on the wire, half payload
LL128_STEP_PAYLOAD = 4_915_200 // NCCL_STEPS * 120 // 128  # 576,000 B
NVLS_CHUNK = 128 * 1024
P2P_NET_CHUNK = 128 * 1024
NCHANNELS_PER_NET_PEER = 2  # NCCL_NCHANNELS_PER_NET_PEER default (NCCL env docs; src/init.cc)
P2P_NVL_CHUNK = 512 * 1024
P2P_PCI_CHUNK = 128 * 1024
MAX_CHANNELS = 64


def ring_chunk(coll: str, protocol: str) -> tuple[int, int]:
    """(payload bytes per chunk, chunks in flight per connection) for ring collectives.

    Simple: AllReduce/AllGather/ReduceScatter move chunks of CHUNKSTEPS = 4 steps (2 MiB);
    Broadcast/Reduce chunks are one step (512 KiB). LL and LL128 move one step per chunk.
    The window is NCCL_STEPS chunks for all: NCCL frees a buffer slot when the receiver starts
    consuming it (8 steps = 2 Simple chunks of credit), which a DAG of completion dependencies
    cannot express; waiting for the completion of the send 2 chunks back stalls lock-stepped
    rings (measured: ring AllReduce busbw 430 instead of 447 of 450 GB/s on one H100 host), so
    the window is loosened to 8 chunks, where the data dependencies dominate.
    """
    if protocol == LL:
        return LL_STEP_PAYLOAD, NCCL_STEPS
    if protocol == LL128:
        return LL128_STEP_PAYLOAD, NCCL_STEPS
    if coll in (BROADCAST, REDUCE):
        return SIMPLE_STEP, NCCL_STEPS
    return SIMPLE_STEP * 4, NCCL_STEPS


LL128_STEP_WIRE = 4_915_200 // NCCL_STEPS  # 614,400 B: LL128 stepSize (wire bytes)


def tree_chunk(protocol: str) -> tuple[int, int]:
    """(payload bytes per chunk, chunks in flight per connection) for tree collectives.

    LL128 chunks shrink with the message (:func:`tree_ll128_chunk_payload`); this is the largest.
    """
    if protocol == LL:
        return LL_STEP_PAYLOAD, NCCL_STEPS
    if protocol == LL128:
        return LL128_STEP_PAYLOAD, NCCL_STEPS
    return SIMPLE_STEP, NCCL_STEPS


def tree_ll128_chunk_payload(size_bytes: int, channels: int, nodes: int, ranks: int) -> int:
    """Payload bytes per chunk of a Tree LL128 all-reduce, as NCCL sizes it (enqueue.cc).

    NCCL halves the LL128 chunk (stepSize, wire bytes) while the message gives each channel fewer
    chunks than the tree needs to stay pipelined: target nsteps x 64 / ppn chunks (down to 128 KiB)
    and then nsteps x 16 / ppn (down to 32 KiB), nsteps = 1 + floor(log2(nodes)) + 0.1 ppn.
    """
    ppn = ranks / max(1, nodes)
    nsteps = 1 + (max(1, nodes).bit_length() - 1) + 0.1 * ppn
    chunk = LL128_STEP_WIRE
    per = max(1, channels)
    while size_bytes // (per * chunk) < nsteps * 64 / ppn and chunk > 131072:
        chunk //= 2
    while size_bytes // (per * chunk) < nsteps * 16 / ppn and chunk > 32768:
        chunk //= 2
    return chunk * 120 // 128


def bus_factor(op: int | str, n: int) -> float:
    """nccl-tests bus-bandwidth factor: busbw = algbw x factor (docs/network_models.md §4.5)."""
    name = collective_name(op)
    if name == ALLREDUCE:
        return 2.0 * (n - 1) / n
    if name in (BROADCAST, REDUCE, SENDRECV):
        return 1.0
    return (n - 1) / n


def collective_name(op: int | str) -> str:
    """Canonical collective name from a trace constant or a (case-insensitive) name."""
    if isinstance(op, (int, np.integer)) and not isinstance(op, bool):
        name = _TRACE_TO_NAME.get(int(op))
        if name is None:
            raise UserError(f"collective: op: unknown trace collective type {int(op)}")
        return name
    text = str(op).strip().lower()
    text = _ALIASES.get(text, text)
    if text not in COLLECTIVES:
        raise UserError(f"collective: op: unknown collective {op!r}; known: {', '.join(COLLECTIVES)}")
    return text


def wire_bytes(payload: np.ndarray, protocol: str) -> np.ndarray:
    """Bytes a flow carries on the wire for ``payload`` bytes under ``protocol``."""
    payload = np.asarray(payload, dtype=np.int64)
    if protocol == SIMPLE:
        return payload
    return np.ceil(payload * WIRE_FACTOR[protocol]).astype(np.int64)


def split_even(total: int, parts: int, grain: int = 1) -> np.ndarray:
    """``parts`` int64 sizes summing to ``total``: whole grains spread as evenly as possible
    (sizes differ by at most one grain), the sub-grain remainder taken off the last non-empty part."""
    if parts <= 0:
        return np.zeros(0, dtype=np.int64)
    return split_rows(np.array([total]), parts, grain)[0]


def split_rows(totals: np.ndarray, parts: int, grain: int = 1) -> np.ndarray:
    """Split every entry of ``totals`` like :func:`split_even`; result shape ``totals.shape + (parts,)``."""
    totals = np.asarray(totals, dtype=np.int64)
    units = -(-totals // grain)
    q, r = units // parts, units % parts
    k = np.arange(parts, dtype=np.int64)
    sizes = (q[..., None] + (k < r[..., None])) * grain
    excess = units * grain - totals
    last = np.where(r > 0, r - 1, parts - 1)
    np.put_along_axis(
        sizes, last[..., None], np.take_along_axis(sizes, last[..., None], -1) - excess[..., None], -1
    )
    return sizes.astype(np.int64)
