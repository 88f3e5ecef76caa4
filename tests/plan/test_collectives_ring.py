"""Ring decomposition: bytes per rank (nccl-tests formulas), protocol overheads, chunk order."""

from __future__ import annotations

import numpy as np
import pytest

from heterosim.config.cluster import parse_cluster
from heterosim.errors import UserError
from heterosim.plan.collectives import decompose_collective
from heterosim.plan.collectives.commview import comm_view
from heterosim.plan.collectives.ring import ring_orders
from heterosim.plan.execution_plan import FLOW


def cluster(hosts: int, gpus: int = 8, nics: int = 8, gpu: str = "H100-SXM", fabric: str = "nvswitch"):
    return parse_cluster(
        {
            "name": "t",
            "host_types": {
                "h": {"gpu": gpu, "gpus": gpus, "fabric": fabric, "nics": nics, "nic_speed": "400Gbps"}
            },
            "hosts": [{"type": "h", "count": hosts}],
            "fabric": {"kind": "rail-optimized"},
        },
        "t.yaml",
    )


S = 64 * 2**20 + 4096  # not a multiple of anything convenient


@pytest.mark.parametrize("hosts", [1, 2, 3])
@pytest.mark.parametrize(
    "op,factor",
    [
        ("allreduce", lambda n: 2 * (n - 1) / n),
        ("allgather", lambda n: (n - 1) / n),
        ("reducescatter", lambda n: (n - 1) / n),
    ],
)
def test_ring_bytes_per_rank(hosts, op, factor):
    c = cluster(hosts)
    n = 8 * hosts
    plan = decompose_collective(op, S, list(range(n)), c, algorithm="ring", protocol="simple")
    sent = plan.sent_bytes_per_gpu(n)
    # Grain alignment (512 B per channel part) may shift up to a grain per segment between ranks.
    assert np.allclose(sent, factor(n) * S, rtol=0, atol=2 * 512 * plan.channels)
    assert np.array_equal(plan.bytes[plan.kind == FLOW], plan.payload[plan.kind == FLOW])
    aligned = 2**27 * 3  # divides into whole grains per channel and rank: exact formula
    plan = decompose_collective(op, aligned, list(range(n)), c, algorithm="ring", protocol="simple")
    assert np.all(plan.sent_bytes_per_gpu(n) == factor(n) * aligned)


def test_alltoall_and_broadcast_bytes():
    c = cluster(2)
    n = 16
    a2a = decompose_collective("alltoall", S, list(range(n)), c)
    assert np.allclose(a2a.sent_bytes_per_gpu(n), (n - 1) / n * S, atol=n)
    bc = decompose_collective("broadcast", S, list(range(n)), c, algorithm="ring", protocol="simple", root=3)
    sent = bc.sent_bytes_per_gpu(n)
    assert sent[3] == S  # the root sends the whole message once
    assert sent.sum() == (n - 1) * S  # every other rank receives S exactly once
    received = np.bincount(bc.dst[bc.kind == FLOW], weights=bc.payload[bc.kind == FLOW], minlength=n)
    assert received[3] == 0 and np.all(np.delete(received, 3) == S)
    red = decompose_collective("reduce", S, list(range(n)), c, algorithm="ring", protocol="simple", root=5)
    assert red.sent_bytes_per_gpu(n)[5] == 0
    assert np.bincount(red.dst[red.kind == FLOW], weights=red.payload[red.kind == FLOW], minlength=n)[5] == S


@pytest.mark.parametrize("protocol,ratio", [("ll", 2.0), ("ll128", 128 / 120)])
def test_protocol_wire_overhead(protocol, ratio):
    c = cluster(1)
    plan = decompose_collective("allreduce", S, list(range(8)), c, algorithm="ring", protocol=protocol)
    flows = plan.kind == FLOW
    assert plan.protocol == protocol
    assert plan.bytes[flows].sum() == pytest.approx(ratio * plan.payload[flows].sum(), rel=1e-4)
    assert plan.payload[flows].sum() == pytest.approx(2 * 7 / 8 * S * 8, abs=8)


def test_uneven_allgather_v():
    c = cluster(2)
    sizes = np.array([0, 1000, 5 * 2**20, 3, 77777, 2**20, 0, 12345] * 2)
    plan = decompose_collective(
        "allgather", 0, list(range(16)), c, algorithm="ring", protocol="simple", sizes_per_rank=sizes
    )
    flows = plan.kind == FLOW
    received = np.bincount(plan.dst[flows], weights=plan.payload[flows], minlength=16)
    # Every rank receives everybody else's block exactly once.
    assert np.array_equal(received, sizes.sum() - sizes)
    with pytest.raises(UserError, match="sizes_per_rank"):
        decompose_collective("allreduce", 0, list(range(16)), c, sizes_per_rank=sizes)


def _check_chunk_order(plan):
    """Every send at ring step s >= 1 has, among its parents, the transfer that delivered the same
    chunk (same channel, loop, payload) to its sender at step s-1."""
    flows = np.flatnonzero((plan.kind == FLOW) & (plan.step >= 1))
    assert flows.size
    for t in flows:
        parents = plan.dep_idx[plan.dep_ptr[t] : plan.dep_ptr[t + 1]]
        ok = (
            (plan.dst[parents] == plan.gpu[t])
            & (plan.step[parents] == plan.step[t] - 1)
            & (plan.channel[parents] == plan.channel[t])
            & (plan.chunk[parents] == plan.chunk[t])
        )
        assert ok.any(), f"task {t} sends before receiving its chunk"
    # and parents always come earlier in a topological sense: indices are a valid DAG order
    child = np.repeat(np.arange(len(plan)), np.diff(plan.dep_ptr))
    assert np.all(plan.dep_idx < child)


@pytest.mark.parametrize("op", ["allreduce", "allgather", "reducescatter", "broadcast"])
def test_chunk_dependencies(op):
    c = cluster(2)
    plan = decompose_collective(
        op, 200 * 2**20, list(range(16)), c, algorithm="ring", protocol="simple", channels=2
    )
    assert plan.chunk.max() >= 1  # several loops of chunks
    _check_chunk_order(plan)


def test_rings_are_rail_aligned_between_hosts():
    c = cluster(4)
    view = comm_view(list(range(32)), c)
    orders = ring_orders(view, 16)
    host = c.gpu_host[orders]
    nxt = np.roll(orders, -1, axis=1)
    crossing = host != c.gpu_host[nxt]
    assert np.all(crossing.sum(axis=1) == 4)  # each ring enters and leaves every host once
    assert np.all(c.gpu_nic[orders[crossing]] == c.gpu_nic[nxt[crossing]])  # same rail
    # every NIC carries the same number of channels out of its host
    senders = c.gpu_nic[orders[crossing]] + 8 * c.gpu_host[orders[crossing]]
    assert np.all(np.bincount(senders, minlength=32) == 2)
    # each ring visits every GPU exactly once
    assert all(sorted(row) == list(range(32)) for row in orders.tolist())


def test_single_rank_and_empty_sizes_give_marker_only_plans():
    c = cluster(1)
    for plan in (
        decompose_collective("allreduce", 1024, [3], c),
        decompose_collective("allreduce", 0, [0, 1], c),
    ):
        assert plan.num_flows == 0 and len(plan) == 2 and list(plan.dep_idx) == [0]


def test_bad_input_is_user_error():
    c = cluster(1)
    with pytest.raises(UserError, match="ranks"):
        decompose_collective("allreduce", 1024, [0, 0], c)
    with pytest.raises(UserError, match="ranks"):
        decompose_collective("allreduce", 1024, [0, 99], c)
    with pytest.raises(UserError, match="unknown collective"):
        decompose_collective("allsum", 1024, [0, 1], c)
    with pytest.raises(UserError, match="not available"):
        decompose_collective("allgather", 1024, [0, 1], c, algorithm="tree")


@pytest.mark.parametrize("op", ["allreduce", "allgather", "reducescatter"])
@pytest.mark.parametrize("protocol", ["simple", "ll"])
def test_dense_fast_path_equals_generic_construction(op, protocol, monkeypatch):
    from heterosim.plan.collectives import decompose as dec
    from heterosim.plan.collectives import ring

    c = cluster(3)
    args = (op, 300 * 2**20 + 17, np.arange(24), c, "ring", protocol, 3, None, 0, True)
    fast = dec._decompose(*args)
    monkeypatch.setattr(ring, "_dense_ring_graph", ring._sparse_ring_graph)
    slow = dec._decompose(*args)
    for name in (
        "kind",
        "gpu",
        "dst",
        "bytes",
        "payload",
        "delay_ns",
        "channel",
        "step",
        "chunk",
        "dep_ptr",
        "dep_idx",
    ):
        assert np.array_equal(getattr(fast, name), getattr(slow, name)), name
