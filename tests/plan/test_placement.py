"""Rank placement: default packing, custom maps and their one-line errors."""

from __future__ import annotations

import numpy as np
import pytest

from heterosim.config.cluster import load_cluster
from heterosim.errors import UserError
from heterosim.plan.placement import place_ranks, placement_table


@pytest.fixture
def mixed(repo_root):
    return load_cluster(repo_root / "topologies" / "mixed_16gpu.yaml")


def test_default_packs_tp_groups_inside_hosts(mixed):
    gpus = place_ranks(mixed, 16)
    assert np.array_equal(gpus, np.arange(16))
    table = placement_table(mixed, gpus)
    tp = 8
    for group in gpus.reshape(-1, tp):  # Megatron order: TP ranks are consecutive
        assert len(set(table["host"][group])) == 1
    assert list(table["nic"][8:]) == [0, 0, 1, 1, 2, 2, 3, 3]  # A100 host: 2 GPUs per NIC
    assert table["gpu_type"][0] == "H100-SXM" and table["gpu_type"][15] == "A100-80GB-SXM"


def test_custom_map_is_accepted_and_checked(mixed):
    custom = list(range(8, 16)) + list(range(8))
    assert list(place_ranks(mixed, 16, custom=custom)) == custom
    with pytest.raises(UserError, match=r"GPU 3 is given to ranks 3 and 4") as err:
        place_ranks(mixed, 16, custom=[0, 1, 2, 3, 3, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15])
    assert "\n" not in str(err.value)
    with pytest.raises(UserError, match=r"custom\[1\]: GPU 16 does not exist"):
        place_ranks(mixed, 2, custom=[0, 16])
    with pytest.raises(UserError, match="expected 4 GPU ids"):
        place_ranks(mixed, 4, custom=[0, 1])
    with pytest.raises(UserError, match="do not fit"):
        place_ranks(mixed, 17)
    with pytest.raises(UserError, match="integer GPU ids"):
        place_ranks(mixed, 2, custom=[0, "1"])
