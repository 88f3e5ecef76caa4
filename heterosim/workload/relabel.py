"""Rank traces reused across ranks that differ only in their communicators and peers.

On a homogeneous tp/dp/pp grid every rank of one pipeline stage and CP index runs the same
schedule on the same ops: two such ranks' traces differ only in the process-group ids of their
collectives (the TP group of another replica, the DP group of another TP index) and in the peers
of their sends and receives (the same stage-neighbour in another replica). A trace is built once
per :func:`prototype_key` and every other rank's is the prototype relabelled: group ids mapped
role by role (``group_id(prototype, role) -> group_id(rank, role)``), peers moved to the rank's
own TP and DP index. The node arrays are shared, read-only, between the copies; only ``peer``,
the templates' ``comm_group`` and the metadata are the rank's own.

A rank whose relabelling is not well defined (a group id of the prototype that two roles map to
different groups, a peer outside the prototype's own TP and DP index) is built directly.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from heterosim.workload.groups import ROLES, ParallelGroups, RankLayout
from heterosim.workload.trace import RankTrace

_SHARED = ("template", "layer", "micro_batch", "stage", "tag", "dep_ptr", "dep_idx")


def frozen(trace: RankTrace) -> RankTrace:
    """``trace`` with its node arrays read-only (a prototype kept for later relabelling)."""
    for name in (*_SHARED, "peer"):
        getattr(trace, name).setflags(write=False)
    return trace


def relabel(proto: RankTrace, rank: int, layout: RankLayout, groups: ParallelGroups) -> RankTrace | None:
    """``proto`` as rank ``rank``'s trace, or None when the relabelling is not well defined."""
    p = proto.rank
    gid_map: dict[int, int] = {}
    for role in ROLES:
        mine, theirs = groups.group_id(p, role), groups.group_id(rank, role)
        if mine is None and theirs is None:
            continue
        if mine is None or theirs is None or gid_map.setdefault(mine, theirs) != theirs:
            return None
    comm_group = proto.templates.comm_group
    used = np.unique(comm_group[comm_group >= 0])
    if not all(int(g) in gid_map for g in used):
        return None
    new_group = comm_group.copy()
    for g in used:
        new_group[comm_group == g] = gid_map[int(g)]
    peers = np.unique(proto.peer[proto.peer >= 0])
    coords, cp = layout.coords, layout.cp_coords
    tp_p, dp_p = int(coords[p, 0]), int(coords[p, 1])
    tp_r, dp_r = int(coords[rank, 0]), int(coords[rank, 1])
    if peers.size and not (np.all(coords[peers, 0] == tp_p) and np.all(coords[peers, 1] == dp_p)):
        return None
    new_peer = proto.peer.copy()
    for q in peers:
        moved = layout.rank_of(tp_r, dp_r, int(coords[q, 2]), int(cp[q]))
        new_peer[proto.peer == q] = moved
    meta = dict(proto.metadata)
    meta.update(rank=str(rank), dp_replica=str(dp_r))
    shared = {name: _read_only_view(getattr(proto, name)) for name in _SHARED}
    return RankTrace(
        rank=rank,
        templates=replace(
            proto.templates, comm_group=new_group, duration_ns=proto.templates.duration_ns.copy()
        ),
        peer=new_peer,
        gpu_type=proto.gpu_type,
        metadata=meta,
        **shared,
    )


def _read_only_view(array: np.ndarray) -> np.ndarray:
    view = array.view()
    view.setflags(write=False)
    return view
