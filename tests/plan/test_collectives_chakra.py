"""Decomposed collectives written as Chakra SEND/RECV nodes and read back."""

from __future__ import annotations

import numpy as np

from heterosim.config.cluster import load_cluster
from heterosim.plan.collectives import decompose_collective
from heterosim.plan.collectives.chakra_export import write_collective_chakra
from heterosim.plan.execution_plan import FLOW
from heterosim.workload.chakra.reader import decode_file
from heterosim.workload.trace import COMM_RECV_NODE, COMM_SEND_NODE


def test_ring_allreduce_round_trips_as_send_recv(repo_root, tmp_path):
    c = load_cluster(repo_root / "topologies" / "two_host_h100.yaml")
    plan = decompose_collective(
        "allreduce", 2**22, list(range(4, 12)), c, algorithm="ring", protocol="simple", channels=2
    )
    paths = write_collective_chakra(plan, tmp_path)
    assert len(paths) == 8
    sends, recvs = {}, {}
    for r, path in enumerate(paths):
        et = decode_file(path)
        assert et.metadata["algorithm"] == "ring" and int(et.metadata["gpu"]) == 4 + r
        tags = et.column("comm_tag", -1)
        sizes = et.column("comm_size", 0)
        for i, kind in enumerate(et.types.tolist()):
            (sends if kind == COMM_SEND_NODE else recvs)[tags[i]] = (r, sizes[i])
            assert kind in (COMM_SEND_NODE, COMM_RECV_NODE)
        # every send after the first step depends on a local node (the receive of its chunk)
        deps = np.split(et.dep_ids, np.cumsum(et.dep_count)[:-1])
        steps = et.column("step", 0)
        for i, kind in enumerate(et.types.tolist()):
            if kind == COMM_SEND_NODE and steps[i] >= 1:
                assert len(deps[i]) >= 1 and all(d < et.ids[i] for d in deps[i])
    flows = np.flatnonzero(plan.kind == FLOW)
    assert set(sends) == set(recvs) == set(flows.tolist())
    for t in flows:
        assert sends[t] == (plan.gpu[t] - 4, plan.bytes[t]) and recvs[t][0] == plan.dst[t] - 4
