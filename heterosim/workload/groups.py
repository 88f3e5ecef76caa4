"""Rank layout and communicators (process groups) of a TP x DP x PP (x EP) job.

A rank's coordinates are its indices along the tensor-, data- and pipeline-parallel axes. The
rank order names the axes from fastest- to slowest-varying: Megatron's default ``tp-dp-pp`` puts
the TP peers on consecutive ranks (so on one host), then the data-parallel replicas, then the
pipeline stages: ``rank = tp + TP * (dp + DP * pp)``.

Expert parallelism splits the data-parallel axis as Megatron does: EP groups are blocks of ``ep``
consecutive DP indices (``ep_index = dp % ep``); the expert-data-parallel group ("ep_dp") joins
the DP indices that hold the same experts (stride ``ep``). Without EP (``ep == 1``) the
expert-data-parallel group is the DP group.

Every communicator with at least two ranks gets a stable integer id; id 0 is reserved for the
group of all ranks (Chakra's convention). Ids are assigned role by role in the order
tp, dp, pp, ep, ep_dp, embd, and inside a role by the lowest member rank.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

ROLES = ("tp", "dp", "pp", "ep", "ep_dp", "embd")
AXES = ("tp", "dp", "pp")


@dataclass(frozen=True)
class RankLayout:
    """Where each rank sits on the tp/dp/pp grid for a given rank order."""

    tp: int
    dp: int
    pp: int
    ep: int = 1
    order: str = "tp-dp-pp"

    def __post_init__(self) -> None:
        axes = self.order.split("-")
        if sorted(axes) != sorted(AXES):
            raise ValueError(f"rank order {self.order!r} must name tp, dp and pp once each")
        if self.ep < 1 or self.dp % self.ep:
            raise ValueError(f"ep {self.ep} must divide dp {self.dp}")

    @property
    def world_size(self) -> int:
        return self.tp * self.dp * self.pp

    @cached_property
    def _sizes(self) -> dict[str, int]:
        return {"tp": self.tp, "dp": self.dp, "pp": self.pp}

    @cached_property
    def coords(self) -> np.ndarray:
        """(world, 3) int array: the tp, dp and pp index of every rank."""
        ranks = np.arange(self.world_size)
        out = np.zeros((self.world_size, 3), dtype=np.int64)
        rest = ranks.copy()
        for axis in self.order.split("-"):
            size = self._sizes[axis]
            out[:, AXES.index(axis)] = rest % size
            rest //= size
        return out

    def rank_of(self, tp: int, dp: int, pp: int) -> int:
        """The rank at grid position (tp, dp, pp)."""
        index = {"tp": tp, "dp": dp, "pp": pp}
        rank, stride = 0, 1
        for axis in self.order.split("-"):
            rank += index[axis] * stride
            stride *= self._sizes[axis]
        return rank

    def tp_index(self, rank: int) -> int:
        return int(self.coords[rank, 0])

    def dp_index(self, rank: int) -> int:
        return int(self.coords[rank, 1])

    def pp_index(self, rank: int) -> int:
        return int(self.coords[rank, 2])

    def stage_ranks(self, stage: int) -> list[int]:
        """All ranks (every TP and DP index) of pipeline stage ``stage``."""
        return [int(r) for r in np.flatnonzero(self.coords[:, 2] == stage)]


@dataclass(frozen=True)
class CommGroup:
    """One communicator: its id (Chakra ``pg_name``), role and member ranks in group order."""

    id: int
    role: str
    ranks: tuple[int, ...]


@dataclass
class ParallelGroups:
    """Every communicator of a layout, with per-rank lookup by role."""

    layout: RankLayout
    tied_embeddings: bool = False
    groups: list[CommGroup] = field(init=False)
    _by_rank: dict[tuple[int, str], int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        layout = self.layout
        self.groups = [CommGroup(0, "all", tuple(range(layout.world_size)))]
        self._by_rank = {}
        for role in ROLES:
            seen: set[tuple[int, ...]] = set()
            for rank in range(layout.world_size):
                members = self._members(role, rank)
                if len(members) < 2 or members in seen:
                    continue
                seen.add(members)
                group = CommGroup(len(self.groups), role, members)
                self.groups.append(group)
                for member in members:
                    self._by_rank[(member, role)] = group.id

    def _members(self, role: str, rank: int) -> tuple[int, ...]:
        lay = self.layout
        t, d, p = (int(x) for x in lay.coords[rank])
        if role == "tp":
            return tuple(lay.rank_of(i, d, p) for i in range(lay.tp))
        if role == "dp":
            return tuple(lay.rank_of(t, i, p) for i in range(lay.dp))
        if role == "pp":
            return tuple(lay.rank_of(t, d, i) for i in range(lay.pp))
        if role in ("ep", "ep_dp") and lay.ep == 1:
            return ()
        if role == "ep":
            base = d - d % lay.ep
            return tuple(lay.rank_of(t, base + i, p) for i in range(lay.ep))
        if role == "ep_dp":
            return tuple(lay.rank_of(t, i, p) for i in range(d % lay.ep, lay.dp, lay.ep))
        if role == "embd":
            if not self.tied_embeddings or lay.pp < 2 or p not in (0, lay.pp - 1):
                return ()
            return (lay.rank_of(t, d, 0), lay.rank_of(t, d, lay.pp - 1))
        raise ValueError(f"unknown communicator role {role!r}")

    def group_id(self, rank: int, role: str) -> int | None:
        """Id of the ``role`` communicator of ``rank``; None when that group has one member."""
        if role not in ROLES:
            raise ValueError(f"unknown communicator role {role!r}; roles: {', '.join(ROLES)}")
        if role == "ep_dp" and self.layout.ep == 1:
            role = "dp"
        return self._by_rank.get((rank, role))

    def group(self, group_id: int) -> CommGroup:
        return self.groups[group_id]

    def size(self, rank: int, role: str) -> int:
        gid = self.group_id(rank, role)
        return 1 if gid is None else len(self.groups[gid].ranks)

    def pipeline_neighbours(self, rank: int) -> tuple[int | None, int | None]:
        """(previous, next) rank in the pipeline: same tp and dp index, stage -1 / +1."""
        lay = self.layout
        t, d, p = (int(x) for x in lay.coords[rank])
        prev = lay.rank_of(t, d, p - 1) if p > 0 else None
        nxt = lay.rank_of(t, d, p + 1) if p < lay.pp - 1 else None
        return prev, nxt

    def as_json(self) -> dict[str, list[int]]:
        """``comm_group.json`` content: group id (string) -> member ranks (Chakra convention)."""
        return {str(g.id): list(g.ranks) for g in self.groups}

    def listing(self) -> list[dict[str, object]]:
        """Every communicator with id, role and ranks (for workload.json)."""
        return [{"id": g.id, "role": g.role, "ranks": list(g.ranks)} for g in self.groups]
