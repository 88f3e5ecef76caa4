"""Double binary tree, NVLS and p2p decompositions: structure and byte conservation."""

from __future__ import annotations

import numpy as np
import pytest

from heterosim.config.cluster import parse_cluster
from heterosim.errors import UserError
from heterosim.plan.collectives import decompose_collective
from heterosim.plan.collectives.tree import binary_tree_parents
from heterosim.plan.execution_plan import FLOW


def cluster(hosts: int, gpu: str = "H100-SXM", nics: int = 8):
    return parse_cluster(
        {
            "name": "t",
            "host_types": {"h": {"gpu": gpu, "gpus": 8, "nics": nics, "nic_speed": "400Gbps"}},
            "hosts": [{"type": "h", "count": hosts}],
            "fabric": {"kind": "rail-optimized"},
        },
        "t.yaml",
    )


def _children(parents):
    kids = [[] for _ in parents]
    for r, p in enumerate(parents):
        if p >= 0:
            kids[p].append(r)
    return kids


@pytest.mark.parametrize("count", [2, 3, 5, 8, 13, 16, 64])
def test_double_binary_tree_shape(count):
    for which in (0, 1):
        parents = binary_tree_parents(count, which)
        assert sum(p < 0 for p in parents) == 1  # one root
        kids = _children(parents)
        assert max(len(k) for k in kids) <= 2  # binary
        # every node reaches the root (connected, no cycle), depth is logarithmic
        for r in range(count):
            depth, x = 0, r
            while parents[x] >= 0:
                x, depth = parents[x], depth + 1
                assert depth <= count
            assert depth <= 2 * max(1, int(np.ceil(np.log2(count)))) + 1
    if count % 2 == 0 and count >= 4:
        inner0 = {r for r, k in enumerate(_children(binary_tree_parents(count, 0))) if k}
        inner1 = {r for r, k in enumerate(_children(binary_tree_parents(count, 1))) if k}
        assert not inner0 & inner1  # leaves of one tree are the inner nodes of the other


def test_tree_allreduce_bytes_and_order():
    c = cluster(4)
    n, size = 32, 2**26
    plan = decompose_collective("allreduce", size, list(range(n)), c, algorithm="tree", protocol="simple")
    flows = plan.kind == FLOW
    # each of the n-1 tree edges carries the message once up and once down (split over channels)
    assert plan.payload[flows].sum() == 2 * (n - 1) * size
    received = np.bincount(plan.dst[flows], weights=plan.payload[flows], minlength=n)
    assert np.all(received >= size)  # every rank gets the reduced result (and children's data)
    # inter-host tree edges stay on one rail
    inter = flows & (c.gpu_host[np.maximum(plan.gpu, 0)] != c.gpu_host[np.maximum(plan.dst, 0)])
    assert np.all(c.gpu_nic[plan.gpu[inter]] == c.gpu_nic[plan.dst[inter]])


def test_nvls_single_host_port_volume():
    c = cluster(1)
    n, size = 8, 2**28
    plan = decompose_collective("allreduce", size, list(range(n)), c, algorithm="nvls")
    assert (plan.algorithm, plan.protocol) == ("nvls", "simple")
    flows = plan.kind == FLOW
    assert plan.payload[flows].sum() == 2 * (n - 1) * size  # user bytes: slice to owner and back
    wire_out = np.bincount(plan.gpu[flows], weights=plan.bytes[flows], minlength=n)
    wire_in = np.bincount(plan.dst[flows], weights=plan.bytes[flows], minlength=n)
    # NCCL's NVLS model on H100 x8: 8 heads x 40 GB/s x 0.85 x 7/8 x 2 = 476 GB/s busbw; each port
    # carries the bytes that take S / algbw at NCCL's per-GPU NVLink rate (18 x 20.6 GB/s) ...
    busbw = 8 * 40.0 * 0.85 * 7 / 8 * 2
    port = size * 2 * (n - 1) / n * (18 * 20.6) / busbw
    assert np.allclose(wire_out, port, rtol=1e-3)
    assert np.allclose(wire_in, port, rtol=1e-3)
    # ... which is more than the in-switch volume S (n+1)/n alone (the NVLS efficiency)
    assert port > size * (n + 1) / n


def test_nvls_availability():
    with pytest.raises(UserError, match="not available"):
        decompose_collective(
            "allreduce", 2**20, list(range(8)), cluster(1, gpu="A100-80GB-SXM", nics=4), algorithm="nvls"
        )
    plan = decompose_collective("allreduce", 2**28, list(range(16)), cluster(2), algorithm="nvls")
    assert plan.algorithm == "nvls_tree"
    flows = plan.kind == FLOW
    inter = flows & (plan.gpu // 8 != plan.dst // 8)
    assert np.all(plan.gpu[inter] % 8 == plan.dst[inter] % 8)  # inter-host traffic is rail-local


def test_p2p_operations():
    c = cluster(2)
    plan = decompose_collective("sendrecv", 10**7, [3, 12], c)
    flows = plan.kind == FLOW
    assert plan.algorithm == "p2p" and plan.payload[flows].sum() == 10**7
    assert set(plan.gpu[flows]) == {3} and set(plan.dst[flows]) == {12}
    gather = decompose_collective("gather", 16 * 1000, list(range(16)), c, root=2)
    g = gather.kind == FLOW
    assert np.all(gather.dst[g] == 2) and gather.payload[g].sum() == 15 * 1000
    sizes = np.arange(16) * 160
    a2av = decompose_collective("alltoall", 0, list(range(16)), c, sizes_per_rank=sizes)
    assert np.allclose(a2av.sent_bytes_per_gpu(16), sizes // 16 * 15)
    with pytest.raises(UserError, match="exactly 2"):
        decompose_collective("sendrecv", 100, [0, 1, 2], c)


def test_tree_ll128_chunk_follows_nccl_sizing():
    from heterosim.plan.collectives.common import LL128_STEP_PAYLOAD, tree_ll128_chunk_payload

    # 88.5 MB, 16 channels, 16 hosts x 8: nsteps = 1 + 4 + 0.8 = 5.8; the 614,400 B (wire) step
    # is halved while fewer than 5.8 x 64 / 8 = 46.4 chunks per channel and above 128 KiB:
    # 9 -> 18 -> 36 chunks, 614,400 -> 76,800 B; then 72 >= 11.6, so it stays: 72,000 B payload.
    assert tree_ll128_chunk_payload(88_531_200, 16, 16, 128) == 72_000
    assert tree_ll128_chunk_payload(1 << 30, 16, 16, 128) == LL128_STEP_PAYLOAD  # large: unchanged
    # 1 MiB on 2 hosts: the first loop stops at 76,800 (not above 128 KiB), the second halves
    # while above 32 KiB: 76,800 -> 38,400 -> 19,200 B wire = 18,000 B payload
    assert tree_ll128_chunk_payload(1 << 20, 16, 2, 16) == 18_000
    plan = decompose_collective(
        "allreduce",
        88_531_200,
        list(range(128)),
        cluster(16),
        algorithm="tree",
        protocol="ll128",
        channels=16,
    )
    flows = plan.kind == FLOW
    assert plan.payload[flows].max() <= 72_000 and plan.chunk[flows].max() + 1 >= 72


def test_tree_channels_sharing_a_nic_use_both_trees():
    """NCCL's channel c and its duplicate c + C/2 share the head GPU (NIC) and take the two trees,
    so every NIC carries one inner-node and one leaf role: inter-host bytes per NIC are balanced
    (with both channels of a NIC on one tree, the inner hosts' NICs carried 1.7x the mean)."""
    for hosts in (8, 16):
        n = 8 * hosts
        plan = decompose_collective(
            "allreduce",
            64 << 20,
            list(range(n)),
            cluster(hosts),
            algorithm="tree",
            protocol="simple",
            channels=16,
        )
        flows = plan.kind == FLOW
        src, dst, wire = plan.gpu[flows], plan.dst[flows], plan.bytes[flows]
        inter = src // 8 != dst // 8
        out = np.bincount(src[inter], weights=wire[inter], minlength=n)
        into = np.bincount(dst[inter], weights=wire[inter], minlength=n)
        assert (out > 0).all() and (into > 0).all()  # every NIC is some channel's head
        assert out.max() / out.mean() <= 1.15 and into.max() / into.mean() <= 1.15
