"""NCCL's channel-to-NIC mapping on a multi-plane fabric: the plane of every flow.

On a fabric of P planes every GPU has one NIC port per plane (``ClusterConfig.gpu_plane_nics``),
all equally close to it, and NCCL sees each port as a NIC. NCCL picks a GPU's NIC per channel in
``ncclTopoGetLocalNet`` (src/graph/topo.cc, NCCL 2.19 and later; docs/network_models.md
§4.8): of the ``localNetCount`` NICs closest to the GPU, channel ``c`` uses
``localNets[(mirrorBits(dev, localNetCount) + c % DIVUP(localNetCount, localGpuCount)) % localNetCount]``;
with one group of P ports per GPU ``DIVUP(...)`` is P, so the channels by which a GPU leaves
its host walk round-robin over its P ports, one plane each. A connection leaves by the
sender's port and enters by the receiver's on the same plane (a plane is a separate network;
NCCL's rings cross hosts between GPUs of the same local index, so both ends agree).

The rule here: the flows of one collective instance that leave a host from GPU ``g`` are
grouped by channel; the ``k``-th of those channels (in channel order) is on plane ``k % P``.
APPROXIMATION: NCCL's per-GPU start offset (``mirrorBits(dev, ...)``) is left out (every GPU
starts at plane 0); the receiver's port is taken on the sender's plane. Point-to-point
collectives (send/recv, all-to-all, gather, scatter) tag their flows with NCCL's two channels
per peer on a multi-plane fabric (:mod:`heterosim.plan.collectives.p2p`), so they use two
planes, as NCCL does; with 4 planes a single peer's data then uses 2 of a GPU's 4 ports, as
in NCCL. Sends and receives of the traces (pipeline parallelism) are one flow each, outside
any collective (channel -1): the engine hashes each to one plane, where NCCL would split it
over two channels - a pipeline send gets one port's bandwidth (APPROXIMATION).
"""

from __future__ import annotations

import numpy as np

from heterosim.plan.execution_plan import FLOW


def flow_planes(
    kind: np.ndarray,
    src: np.ndarray,
    dst: np.ndarray,
    channel: np.ndarray,
    collective: np.ndarray,
    gpu_host: np.ndarray,
    planes: int,
) -> np.ndarray | None:
    """Plane per task (int8; -1: none, the engine hashes the flow to a plane) of a plan's
    columns, ``gpu_host`` the host of every global GPU; None with one plane."""
    if planes <= 1:
        return None
    out = np.full(kind.shape[0], -1, np.int8)
    flows = np.flatnonzero(kind == FLOW)
    flows = flows[(channel[flows] >= 0) & (gpu_host[src[flows]] != gpu_host[dst[flows]])]
    if flows.size == 0:
        return out
    cols = np.stack(
        [collective[flows].astype(np.int64), src[flows].astype(np.int64), channel[flows].astype(np.int64)],
        axis=1,
    )
    triples, inverse = np.unique(cols, axis=0, return_inverse=True)  # sorted by (instance, GPU, channel)
    new_group = np.ones(len(triples), dtype=bool)
    new_group[1:] = np.any(triples[1:, :2] != triples[:-1, :2], axis=1)
    start = np.maximum.accumulate(np.where(new_group, np.arange(len(triples)), 0))
    rank = np.arange(len(triples)) - start  # k: the channel's place among the GPU's channels
    out[flows] = (rank[inverse.reshape(-1)] % planes).astype(np.int8)
    return out
