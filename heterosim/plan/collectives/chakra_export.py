"""Write a decomposed collective as Chakra ET SEND/RECV nodes, one file per communicator rank.

For inspection by other tools (Chakra viewers, ASTRA-sim style replayers): every flow becomes a
``COMM_SEND_NODE`` on its sender and a ``COMM_RECV_NODE`` on its receiver with ``comm_src``,
``comm_dst`` (communicator ranks), ``comm_tag`` (the flow's task index, unique within the
collective) and ``comm_size`` (wire bytes). A send's ``data_deps`` are the local nodes of its
parent flows: the receive that brought the chunk in, or the earlier send on the same
connection. Extension attributes ``channel``, ``step`` and ``chunk`` carry the NCCL tags.
This builds one protobuf message per node: meant for single collectives, not whole traces.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from heterosim.errors import UserError
from heterosim.plan.collectives.graph import CollectivePlan
from heterosim.plan.execution_plan import FLOW
from heterosim.workload.chakra import schema, wire
from heterosim.workload.chakra.writer import encode_metadata
from heterosim.workload.trace import COMM_RECV_NODE, COMM_SEND_NODE


def _int_attr(name: str, kind: str, value: int) -> object:
    attr = schema.AttributeProto(name=name)
    setattr(attr, f"{kind}_val", int(value))
    return attr


def write_collective_chakra(
    plan: CollectivePlan, directory: str | Path, prefix: str = "collective"
) -> list[Path]:
    """Files ``<prefix>.<rank>.et`` in ``directory``; returns their paths in rank order."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    ranks = np.asarray(plan.ranks)
    rank_of_gpu = {int(g): r for r, g in enumerate(ranks)}
    flows: list[int] = np.flatnonzero(plan.kind == FLOW).tolist()
    nodes: list[list[tuple[str, int]]] = [[] for _ in ranks]
    send_id: dict[int, int] = {}
    recv_id: dict[int, int] = {}
    for t in flows:  # receives first on each rank keeps ids small and parents before children
        d = rank_of_gpu[int(plan.dst[t])]
        recv_id[int(t)] = len(nodes[d])
        nodes[d].append(("recv", int(t)))
    for t in flows:
        s = rank_of_gpu[int(plan.gpu[t])]
        send_id[int(t)] = len(nodes[s])
        nodes[s].append(("send", int(t)))
    paths = []
    for r, entries in enumerate(nodes):
        path = directory / f"{prefix}.{r}.et"
        meta = {
            "collective": plan.op,
            "algorithm": plan.algorithm,
            "protocol": plan.protocol,
            "channels": str(plan.channels),
            "size_bytes": str(plan.size_bytes),
            "gpu": str(int(ranks[r])),
        }
        chunks = [encode_metadata(meta)]
        for node_id, (kind, t) in enumerate(entries):
            src, dst = rank_of_gpu[int(plan.gpu[t])], rank_of_gpu[int(plan.dst[t])]
            node = schema.Node(
                id=node_id,
                name=f"{plan.op}.{kind}.{t}",
                type=COMM_SEND_NODE if kind == "send" else COMM_RECV_NODE,
            )
            if kind == "send":
                parents = plan.dep_idx[plan.dep_ptr[t] : plan.dep_ptr[t + 1]]
                deps = sorted(
                    {
                        recv_id[int(p)] if int(plan.dst[p]) == int(ranks[r]) else send_id[int(p)]
                        for p in parents
                        if plan.kind[p] == FLOW
                        and (int(plan.dst[p]) == int(ranks[r]) or int(plan.gpu[p]) == int(ranks[r]))
                    }
                )
                node.data_deps.extend(deps)
            node.attr.extend(
                [
                    schema.AttributeProto(name="is_cpu_op", bool_val=False),
                    _int_attr("comm_src", "int32", src),
                    _int_attr("comm_dst", "int32", dst),
                    _int_attr("comm_tag", "int32", t),
                    _int_attr("comm_size", "int64", int(plan.bytes[t])),
                    _int_attr("channel", "int64", int(plan.channel[t])),
                    _int_attr("step", "int64", int(plan.step[t])),
                    _int_attr("chunk", "int64", plan.chunk[t]),
                ]
            )
            blob = node.SerializeToString()
            chunks.append(wire.encode_varint(len(blob)) + blob)
        try:
            path.write_bytes(b"".join(chunks))
        except OSError as exc:
            raise UserError(f"{path}: cannot write trace: {exc.strerror or exc}") from exc
        paths.append(path)
    return paths
