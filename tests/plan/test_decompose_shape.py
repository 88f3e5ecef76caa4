"""Communicators of one shape share a decomposition up to renaming their GPUs: the relabelled
plan equals the one decomposed directly, on homogeneous, mixed, multi-plane and PCIe-host clusters."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import numpy as np
import pytest

from heterosim.config.cluster import load_cluster
from heterosim.plan.collectives import decompose as dec
from heterosim.plan.collectives import decompose_collective

REPO = Path(__file__).resolve().parents[2]
CLUSTERS = [
    "topologies/h0_128gpu.yaml",
    "topologies/h2_128gpu.yaml",
    "topologies/b200_2plane_128gpu.yaml",
    "topologies/h3_128gpu.yaml",
]
OPS = [("allreduce", 64 << 20), ("allgather", 3 << 20), ("reducescatter", 1 << 30), ("alltoall", 8 << 20)]


def _same(a, b) -> None:
    for f in fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        assert np.array_equal(x, y) if isinstance(x, np.ndarray) else x == y, f.name


def _shifted_groups(cluster, rng: np.random.Generator) -> list[tuple[np.ndarray, np.ndarray]]:
    """(a, b) pairs: a random communicator and the same one moved by whole hosts."""
    per_host = cluster.host(0).gpus
    hosts = cluster.num_hosts
    out = []
    for size in (2, per_host, 2 * per_host, 4 * per_host):
        if size > cluster.world_size // 2:
            continue
        a = np.sort(rng.choice(cluster.world_size // 2, size, replace=False))
        for shift in (1, hosts // 2):
            out.append((a, a + shift * per_host))
        out.append((a[::-1].copy(), a[::-1] + (hosts // 2) * per_host))
    sub = np.sort(rng.choice(per_host, max(2, per_host // 2), replace=False))
    out.append((sub, sub + per_host))  # host 0 -> host 1 (the same type on every preset here)
    tp = np.arange(per_host)  # TP groups: whole hosts; DP groups: one GPU per host
    out.append((tp, tp + per_host * (hosts - 1)))
    dp = np.arange(hosts) * per_host
    out.append((dp, dp + 1))
    return out


@pytest.mark.parametrize("path", CLUSTERS)
@pytest.mark.parametrize("granularity", ["chunk", "connection"])
def test_relabelled_plan_equals_the_direct_decomposition(path: str, granularity: str) -> None:
    cluster = load_cluster(REPO / path)
    rng = np.random.default_rng(7)
    relabelled = 0
    for a, b in _shifted_groups(cluster, rng):
        for op, size in OPS:
            dec._CACHE.clear()
            dec._SHAPE_CACHE.clear()
            decompose_collective(op, size, a, cluster, granularity=granularity)
            got = decompose_collective(op, size, b, cluster, granularity=granularity)
            same_shape = dec._communicator_shape(a, cluster) == dec._communicator_shape(b, cluster)
            relabelled += same_shape
            dec._CACHE.clear()
            dec._SHAPE_CACHE.clear()
            _same(got, decompose_collective(op, size, b, cluster, granularity=granularity))
    assert relabelled > 0  # the shifted groups do reuse a decomposition


def test_shape_tells_hosts_nics_and_types_apart() -> None:
    cluster = load_cluster(REPO / "topologies/h2_128gpu.yaml")
    shape = dec._communicator_shape
    assert shape(np.array([0, 8]), cluster) == shape(np.array([8, 16]), cluster)  # same host types
    assert shape(np.array([0, 1]), cluster) != shape(np.array([0, 8]), cluster)  # one host vs two
    assert shape(np.array([0, 8]), cluster) != shape(np.array([1, 9]), cluster)  # other NICs
    assert shape(np.array([0, 8]), cluster) != shape(np.array([8, 0]), cluster)  # order
    last = cluster.world_size - 8
    assert shape(np.array([0, 8]), cluster) != shape(np.array([last - 8, last]), cluster)  # types
    assert shape(np.array([3, 3]), cluster) is None
