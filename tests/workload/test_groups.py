"""Rank layout and communicators: Megatron order, group membership, ids."""

from __future__ import annotations

import pytest

from heterosim.workload.groups import ParallelGroups, RankLayout


def test_megatron_default_order_tp_fastest_then_dp_then_pp() -> None:
    lay = RankLayout(tp=2, dp=2, pp=2)
    assert [tuple(c) for c in lay.coords[:8]] == [
        (0, 0, 0),
        (1, 0, 0),
        (0, 1, 0),
        (1, 1, 0),
        (0, 0, 1),
        (1, 0, 1),
        (0, 1, 1),
        (1, 1, 1),
    ]
    for rank in range(8):
        assert lay.rank_of(*lay.coords[rank]) == rank


@pytest.mark.parametrize("order", ["tp-dp-pp", "tp-pp-dp", "dp-tp-pp"])
def test_every_order_is_a_bijection(order: str) -> None:
    lay = RankLayout(tp=2, dp=3, pp=4, order=order)
    seen = {lay.rank_of(t, d, p) for t in range(2) for d in range(3) for p in range(4)}
    assert seen == set(range(24))


def test_tp_pp_dp_order() -> None:
    lay = RankLayout(tp=2, dp=2, pp=2, order="tp-pp-dp")
    assert lay.rank_of(1, 0, 1) == 3 and lay.rank_of(0, 1, 0) == 4


def test_groups_and_ids() -> None:
    groups = ParallelGroups(RankLayout(tp=2, dp=2, pp=2))
    assert groups.group(0).ranks == tuple(range(8))
    assert groups.group(groups.group_id(0, "tp")).ranks == (0, 1)
    assert groups.group(groups.group_id(0, "dp")).ranks == (0, 2)
    assert groups.group(groups.group_id(0, "pp")).ranks == (0, 4)
    assert groups.group(groups.group_id(7, "dp")).ranks == (5, 7)
    # 4 TP + 4 DP + 4 PP groups plus group 0, ids unique and dense
    assert [g.id for g in groups.groups] == list(range(13))
    assert groups.pipeline_neighbours(5) == (1, None)
    assert groups.pipeline_neighbours(1) == (None, 5)
    # every rank is in exactly one group per role
    for role in ("tp", "dp", "pp"):
        members = sorted(r for g in groups.groups if g.role == role for r in g.ranks)
        assert members == list(range(8))


def test_singleton_groups_are_not_listed() -> None:
    groups = ParallelGroups(RankLayout(tp=1, dp=4, pp=1))
    assert groups.group_id(0, "tp") is None and groups.size(0, "tp") == 1
    assert [g.role for g in groups.groups] == ["all", "dp"]


def test_expert_groups_split_data_parallel_axis() -> None:
    groups = ParallelGroups(RankLayout(tp=2, dp=4, pp=1, ep=2))
    # dp indices 0,1 form one EP group; expert-DP joins dp indices 0 and 2
    assert groups.group(groups.group_id(0, "ep")).ranks == (0, 2)
    assert groups.group(groups.group_id(0, "ep_dp")).ranks == (0, 4)
    assert groups.group(groups.group_id(3, "ep_dp")).ranks == (3, 7)


def test_embedding_group_joins_first_and_last_stage() -> None:
    groups = ParallelGroups(RankLayout(tp=1, dp=1, pp=4), tied_embeddings=True)
    assert groups.group(groups.group_id(0, "embd")).ranks == (0, 3)
    assert groups.group_id(1, "embd") is None
