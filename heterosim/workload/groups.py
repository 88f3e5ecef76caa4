"""Rank layout and communicators (process groups) of a TP x DP x PP (x EP) job.

A rank's coordinates are its indices along the tensor-, data- and pipeline-parallel axes. The
rank order names the axes from fastest- to slowest-varying: Megatron's default ``tp-dp-pp`` puts
the TP peers on consecutive ranks (so on one host), then the data-parallel replicas, then the
pipeline stages: ``rank = tp + TP * (dp + DP * pp)``.

Expert parallelism splits the data-parallel axis as Megatron does: EP groups are blocks of ``ep``
consecutive DP indices (``ep_index = dp % ep``); the expert-data-parallel group ("ep_dp") joins
the DP indices that hold the same experts (stride ``ep``). Without EP (``ep == 1``) the
expert-data-parallel group is the DP group.

Context parallelism (``cp``) sits right after TP, as in Megatron-core's default order
``tp-cp-ep-dp-pp`` (megatron/core/parallel_state.py, ``initialize_model_parallel(order=...)``):
the tp axis of the rank order stands for the block of ``tp*cp`` consecutive positions, TP index
fastest, so ``tp-dp-pp`` reads ``rank = tp + TP * (cp + CP * (dp + DP * pp))``. The "cp" groups
join the ranks that differ only in their CP index (in CP order: the ring of
:mod:`heterosim.workload.cp`). Gradients are reduced over data and context parallelism together,
as Megatron's DDP and distributed optimizer use ``get_data_parallel_group(
with_context_parallel=True)``: with ``cp > 1`` every "dp" group holds the ``dp*cp`` ranks with
the same TP and PP index.

Every communicator with at least two ranks gets a stable integer id; id 0 is reserved for the
group of all ranks (Chakra's convention). Ids are assigned role by role in the order
tp, dp, pp, ep, ep_dp, embd, cp, and inside a role by the lowest member rank.

An explicit plan (``parallel.stages``) gives a :class:`StagedLayout`: ranks numbered stage by
stage, replica by replica, TP index fastest (the generalisation of ``tp-dp-pp``), each cell
(stage, replica) with its own TP degree and GPU type. Its data-parallel groups:

- replicas of a stage with equal TP: as on the grid, the ranks with the same TP index;
- replicas with different TP degrees hold different gradient shards. The stage's gradients are
  cut into ``L = lcm(tp of its replicas)`` equal pieces; piece ``j`` lives on TP index
  ``j * tp_r // L`` of replica ``r``; the pieces held by the same ranks form one "dp" group
  whose collectives carry their share (``pieces / L``) of the stage's full gradient
  (:meth:`ParallelGroups.dp_shards`). With equal degrees this is the grid's grouping.

Pipeline ("pp") groups join the ranks of one replica with the same TP index in the stages that
have it. The tied-embedding ("embd") groups of a pipeline whose first and last stage differ in TP
are cut the same way: ``lcm`` of the two degrees pieces of the word embedding, each reduced
between the first-stage and last-stage rank that hold it (:meth:`ParallelGroups.shards`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cached_property
from typing import cast

import numpy as np

ROLES = ("tp", "dp", "pp", "ep", "ep_dp", "embd", "cp")
AXES = ("tp", "dp", "pp")


@dataclass(frozen=True)
class RankLayout:
    """Where each rank sits on the tp/dp/pp grid (and its CP index) for a given rank order."""

    tp: int
    dp: int
    pp: int
    ep: int = 1
    order: str = "tp-dp-pp"
    cp: int = 1

    def __post_init__(self) -> None:
        axes = self.order.split("-")
        if sorted(axes) != sorted(AXES):
            raise ValueError(f"rank order {self.order!r} must name tp, dp and pp once each")
        if self.ep < 1 or self.dp % self.ep:
            raise ValueError(f"ep {self.ep} must divide dp {self.dp}")
        if self.cp < 1:
            raise ValueError(f"cp must be >= 1, got {self.cp}")

    @property
    def world_size(self) -> int:
        return self.tp * self.cp * self.dp * self.pp

    @cached_property
    def _sizes(self) -> dict[str, int]:
        """Positions per axis of the order; the tp axis holds the tp*cp block (module docstring)."""
        return {"tp": self.tp * self.cp, "dp": self.dp, "pp": self.pp}

    @cached_property
    def _grid(self) -> np.ndarray:
        """(world, 4) int array: tp, dp, pp and cp index of every rank."""
        ranks = np.arange(self.world_size)
        out = np.zeros((self.world_size, 4), dtype=np.int64)
        rest = ranks.copy()
        for axis in self.order.split("-"):
            size = self._sizes[axis]
            out[:, AXES.index(axis)] = rest % size
            rest //= size
        out[:, 3] = out[:, 0] // self.tp
        out[:, 0] %= self.tp
        return out

    @property
    def coords(self) -> np.ndarray:
        """(world, 3) int array: the tp, dp and pp index of every rank."""
        return self._grid[:, :3]

    @property
    def cp_coords(self) -> np.ndarray:
        """(world,) int array: the CP index of every rank."""
        return self._grid[:, 3]

    def rank_of(self, tp: int, dp: int, pp: int, cp: int = 0) -> int:
        """The rank at grid position (tp, dp, pp) with CP index ``cp``."""
        index = {"tp": tp + self.tp * cp, "dp": dp, "pp": pp}
        rank, stride = 0, 1
        for axis in self.order.split("-"):
            rank += index[axis] * stride
            stride *= self._sizes[axis]
        return rank

    def cp_index(self, rank: int) -> int:
        return int(self._grid[rank, 3])

    def tp_index(self, rank: int) -> int:
        return int(self.coords[rank, 0])

    def dp_index(self, rank: int) -> int:
        return int(self.coords[rank, 1])

    def pp_index(self, rank: int) -> int:
        return int(self.coords[rank, 2])

    def stage_ranks(self, stage: int) -> list[int]:
        """All ranks (every TP and DP index) of pipeline stage ``stage``."""
        return [int(r) for r in np.flatnonzero(self.coords[:, 2] == stage)]

    def replica_ranks(self, replica: int) -> list[int]:
        """All ranks (every TP and PP index) of data-parallel replica ``replica``."""
        return [int(r) for r in np.flatnonzero(self.coords[:, 1] == replica)]

    def tp_degree(self, rank: int) -> int:
        """TP degree of ``rank``'s tensor-parallel group."""
        return self.tp

    def cell_tp(self, replica: int, stage: int) -> int:
        return self.tp

    def stage_is_mixed(self, stage: int) -> bool:
        """True when the replicas of ``stage`` differ in TP degree (never on a grid)."""
        return False


@dataclass(frozen=True)
class StagedLayout:
    """Ranks of an explicit plan: per stage, per replica a TP group of its own degree and GPU type.

    ``cell_tps[s][r]`` and ``cell_gpus[s][r]`` describe replica ``r`` of stage ``s``. Ranks are
    numbered stage by stage, replica by replica, TP index fastest.
    """

    cell_tps: tuple[tuple[int, ...], ...]
    cell_gpus: tuple[tuple[str, ...], ...]
    ep: int = 1
    order: str = "stages"
    cp: int = 1  # explicit plans run without context parallelism (checked by the config)

    @property
    def pp(self) -> int:
        return len(self.cell_tps)

    @property
    def dp(self) -> int:
        return len(self.cell_tps[0])

    @property
    def tp(self) -> int:
        """The largest TP degree of any replica."""
        return max(t for row in self.cell_tps for t in row)

    @cached_property
    def _first_rank(self) -> np.ndarray:
        sizes = np.asarray(self.cell_tps, dtype=np.int64)  # (pp, dp)
        starts = np.concatenate([[0], np.cumsum(sizes.ravel())[:-1]])
        return starts.reshape(sizes.shape)

    @property
    def world_size(self) -> int:
        return int(sum(t for row in self.cell_tps for t in row))

    @cached_property
    def coords(self) -> np.ndarray:
        """(world, 3) int array: the tp, dp and pp index of every rank."""
        out = np.zeros((self.world_size, 3), dtype=np.int64)
        for p, row in enumerate(self.cell_tps):
            for d, t in enumerate(row):
                first = int(self._first_rank[p, d])
                out[first : first + t] = np.stack([np.arange(t), np.full(t, d), np.full(t, p)], axis=1)
        return out

    def rank_of(self, tp: int, dp: int, pp: int, cp: int = 0) -> int | None:
        """The rank at (tp, dp, pp), or None when that cell's TP group is smaller than ``tp``+1."""
        if cp or not 0 <= tp < self.cell_tps[pp][dp]:
            return None
        return int(self._first_rank[pp, dp]) + tp

    def tp_index(self, rank: int) -> int:
        return int(self.coords[rank, 0])

    def dp_index(self, rank: int) -> int:
        return int(self.coords[rank, 1])

    def pp_index(self, rank: int) -> int:
        return int(self.coords[rank, 2])

    def ep_index(self, rank: int) -> int:
        return 0

    def cp_index(self, rank: int) -> int:
        return 0

    def stage_ranks(self, stage: int) -> list[int]:
        return [int(r) for r in np.flatnonzero(self.coords[:, 2] == stage)]

    def replica_ranks(self, replica: int) -> list[int]:
        return [int(r) for r in np.flatnonzero(self.coords[:, 1] == replica)]

    def tp_degree(self, rank: int) -> int:
        return self.cell_tps[self.pp_index(rank)][self.dp_index(rank)]

    def cell_tp(self, replica: int, stage: int) -> int:
        return self.cell_tps[stage][replica]

    def gpu_type(self, rank: int) -> str:
        """GPU type the plan names for ``rank``'s replica."""
        return self.cell_gpus[self.pp_index(rank)][self.dp_index(rank)]

    def stage_is_mixed(self, stage: int) -> bool:
        return len(set(self.cell_tps[stage])) > 1

    def pieces(self, cells: list[tuple[int, int]]) -> tuple[int, list[tuple[tuple[int, ...], int]]]:
        """(L, [(member ranks, pieces)]): a tensor sharded over the TP groups of ``cells``
        ((replica, stage) pairs), cut into ``L = lcm`` of their degrees; piece ``j`` lives on TP
        index ``j * tp // L`` of each cell; pieces on the same ranks form one group."""
        tps = [self.cell_tps[stage][replica] for replica, stage in cells]
        total = math.lcm(*tps)
        groups: dict[tuple[int, ...], int] = {}
        for j in range(total):
            members = tuple(
                int(self.rank_of(j * t // total, d, p))  # type: ignore[arg-type]
                for (d, p), t in zip(cells, tps)
            )
            groups[members] = groups.get(members, 0) + 1
        return total, list(groups.items())

    def dp_pieces(self, stage: int) -> tuple[int, list[tuple[tuple[int, ...], int]]]:
        """:meth:`pieces` of a stage's gradient over its replicas (module docstring)."""
        return self.pieces([(d, stage) for d in range(self.dp)])


@dataclass(frozen=True)
class CommGroup:
    """One communicator: its id (Chakra ``pg_name``), role and member ranks in group order."""

    id: int
    role: str
    ranks: tuple[int, ...]


@dataclass
class ParallelGroups:
    """Every communicator of a layout, with per-rank lookup by role."""

    layout: RankLayout | StagedLayout
    tied_embeddings: bool = False
    groups: list[CommGroup] = field(init=False)
    _by_rank: dict[tuple[int, str], int] = field(init=False, repr=False)
    _shards: dict[tuple[int, str], list[tuple[int, int, int]]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        layout = self.layout
        self.groups = [CommGroup(0, "all", tuple(range(layout.world_size)))]
        self._by_rank = {}
        self._shards = {}
        grid = isinstance(layout, RankLayout)
        for role in ROLES:
            seen: set[tuple[int, ...]] = set()
            for rank in range(layout.world_size):
                if grid and (rank, role) in self._by_rank:
                    continue  # on a grid a rank has one group per role: found with a lower member
                for members, pieces, total in self._member_sets(role, rank):
                    if len(members) < 2:
                        continue
                    if members not in seen:
                        seen.add(members)
                        group = CommGroup(len(self.groups), role, members)
                        self.groups.append(group)
                        for member in members:
                            self._by_rank.setdefault((member, role), group.id)
                        if total:
                            for member in members:
                                self._shards.setdefault((member, role), []).append((group.id, pieces, total))

    def _member_sets(self, role: str, rank: int) -> list[tuple[tuple[int, ...], int, int]]:
        """(members, pieces, total pieces) of every ``role`` group of ``rank``; pieces are 0
        except for the shard groups of a mixed-TP stage ("dp") or pipeline ends ("embd")."""
        lay = self.layout
        if role == "dp" and lay.stage_is_mixed(lay.pp_index(rank)):
            total, groups = lay.dp_pieces(lay.pp_index(rank))  # type: ignore[union-attr]
            return [(m, k, total) for m, k in groups if rank in m]
        if role == "embd" and self._mixed_ends(rank):
            d, last = lay.dp_index(rank), lay.pp - 1
            total, groups = lay.pieces([(d, 0), (d, last)])  # type: ignore[union-attr]
            return [(m, k, total) for m, k in groups if rank in m]
        return [(self._members(role, rank), 0, 0)]

    def _mixed_ends(self, rank: int) -> bool:
        """True when ``rank``'s pipeline ties embeddings between a first and a last stage of
        different TP degrees (and ``rank`` is in one of them)."""
        lay = self.layout
        d, p = lay.dp_index(rank), lay.pp_index(rank)
        return (
            self.tied_embeddings
            and lay.pp >= 2
            and p in (0, lay.pp - 1)
            and lay.cell_tp(d, 0) != lay.cell_tp(d, lay.pp - 1)
        )

    def _members(self, role: str, rank: int) -> tuple[int, ...]:
        lay = self.layout
        t, d, p = (int(x) for x in lay.coords[rank])
        c = lay.cp_index(rank)
        if role == "tp":
            return tuple(lay.rank_of(i, d, p, c) for i in range(lay.cell_tp(d, p)))  # type: ignore
        if role == "dp":  # with context parallelism: the data+context-parallel group, rank order
            members = (lay.rank_of(t, i, p, j) for i in range(lay.dp) for j in range(lay.cp))
            return tuple(sorted(cast(int, m) for m in members))
        if role == "cp":
            if lay.cp == 1:
                return ()
            return tuple(cast(int, lay.rank_of(t, d, p, j)) for j in range(lay.cp))
        if role == "pp":
            members = (lay.rank_of(t, d, i, c) for i in range(lay.pp))
            return tuple(m for m in members if m is not None)
        if role in ("ep", "ep_dp") and lay.ep == 1:
            return ()
        if role == "ep":
            base = d - d % lay.ep
            return tuple(cast(int, lay.rank_of(t, base + i, p, c)) for i in range(lay.ep))
        if role == "ep_dp":
            return tuple(cast(int, lay.rank_of(t, i, p, c)) for i in range(d % lay.ep, lay.dp, lay.ep))
        if role == "embd":
            if not self.tied_embeddings or lay.pp < 2 or p not in (0, lay.pp - 1):
                return ()
            return (lay.rank_of(t, d, 0, c), lay.rank_of(t, d, lay.pp - 1, c))  # type: ignore
        raise ValueError(f"unknown communicator role {role!r}")

    def group_id(self, rank: int, role: str) -> int | None:
        """Id of the ``role`` communicator of ``rank``; None when that group has one member."""
        if role not in ROLES:
            raise ValueError(f"unknown communicator role {role!r}; roles: {', '.join(ROLES)}")
        if role == "ep_dp" and self.layout.ep == 1:
            role = "dp"
        return self._by_rank.get((rank, role))

    def shards(self, rank: int, role: str) -> list[tuple[int, int, int]]:
        """(group id, pieces, total pieces) of every shard group of ``rank`` in ``role`` ("dp":
        its stage mixes TP degrees; "embd": its pipeline's ends do); empty otherwise."""
        return list(self._shards.get((rank, role), []))

    def dp_shards(self, rank: int) -> list[tuple[int, int, int]]:
        """:meth:`shards` of the gradient (role "dp")."""
        return self.shards(rank, "dp")

    def group(self, group_id: int) -> CommGroup:
        return self.groups[group_id]

    def size(self, rank: int, role: str) -> int:
        gid = self.group_id(rank, role)
        return 1 if gid is None else len(self.groups[gid].ranks)

    def pipeline_neighbours(self, rank: int) -> tuple[int | None, int | None]:
        """(previous, next) rank in the pipeline: same tp and dp index, stage -1 / +1 (grid
        layouts; an explicit plan's boundary transfers are :func:`boundary_transfers`)."""
        lay = self.layout
        t, d, p = (int(x) for x in lay.coords[rank])
        c = lay.cp_index(rank)
        prev = lay.rank_of(t, d, p - 1, c) if p > 0 else None
        nxt = lay.rank_of(t, d, p + 1, c) if p < lay.pp - 1 else None
        return prev, nxt

    def cp_ring(self, rank: int) -> tuple[int, int]:
        """(previous, next) rank of ``rank``'s CP group in ring order (CP index -1 / +1 mod cp);
        ``rank`` itself twice without context parallelism."""
        gid = self.group_id(rank, "cp")
        if gid is None:
            return rank, rank
        members = self.groups[gid].ranks
        i = members.index(rank)
        return members[i - 1], members[(i + 1) % len(members)]

    def as_json(self) -> dict[str, list[int]]:
        """``comm_group.json`` content: group id (string) -> member ranks (Chakra convention)."""
        return {str(g.id): list(g.ranks) for g in self.groups}

    def listing(self) -> list[dict[str, object]]:
        """Every communicator with id, role and ranks (for workload.json)."""
        return [{"id": g.id, "role": g.role, "ranks": list(g.ranks)} for g in self.groups]


def boundary_transfers(tp_from: int, tp_to: int, sequence_parallel: bool) -> list[tuple[int, int, Fraction]]:
    """Point-to-point transfers that carry one activation (or its gradient) from a stage whose
    TP degree is ``tp_from`` to one of degree ``tp_to``: ``(source TP index, destination TP
    index, share of the full b*s*h tensor)``.

    Without sequence parallelism every TP rank holds (and needs) the whole tensor: destination
    ``j`` receives it from source ``j mod tp_from`` (with equal degrees: rank i to rank i, as
    Megatron's p2p does). With sequence parallelism rank ``i`` holds sequence shard ``i`` of
    ``tp``: each destination receives the overlap of its shard with every source shard (a
    re-sharding by send/recv; with equal degrees: rank i's 1/tp to rank i).
    """
    if not sequence_parallel:
        return [(j % tp_from, j, Fraction(1)) for j in range(tp_to)]
    out = []
    for i in range(tp_from):
        for j in range(tp_to):
            lo = max(Fraction(i, tp_from), Fraction(j, tp_to))
            hi = min(Fraction(i + 1, tp_from), Fraction(j + 1, tp_to))
            if hi > lo:
                out.append((i, j, hi - lo))
    return out
