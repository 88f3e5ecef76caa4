"""A synthetic :class:`RankTrace` of any size with every node kind, for I/O tests and benchmarks.

Its values are arbitrary but cover the encoder's corner cases: node 0 (id omitted on the
wire), negative layer / micro-batch / peer values, multi-byte varints, several parents per
node, templates with and without a known duration, collectives with group ids, sends and
receives with tags.
"""

from __future__ import annotations

import numpy as np

from heterosim.workload.trace import (
    ALL_GATHER,
    ALL_REDUCE,
    COMM_COLL_NODE,
    COMM_RECV_NODE,
    COMM_SEND_NODE,
    COMP_NODE,
    NO_COLLECTIVE,
    OP_KINDS,
    OpTemplates,
    RankTrace,
)

# (node_type, op kind, label, phase, shape, flops, bytes, comm_type, comm_bytes, group, ns)
_ROWS = [
    (
        COMP_NODE,
        "gemm",
        "qkv_proj",
        0,
        (2048, 4608, 12288, 1),
        2 * 2048 * 4608 * 12288,
        150_994_944,
        NO_COLLECTIVE,
        0,
        -1,
        1_234_567,
    ),
    (
        COMP_NODE,
        "attention",
        "core_attn",
        0,
        (1, 2048, 12, 128),
        51_539_607_552,
        25_165_824,
        NO_COLLECTIVE,
        0,
        -1,
        0,
    ),
    (COMP_NODE, "elementwise", "gelu", 1, (25_165_824, 0, 0, 0), 0, 100_663_296, NO_COLLECTIVE, 0, -1, 999),
    (COMM_COLL_NODE, "comm", "tp_allreduce", 0, (0, 0, 0, 0), 0, 0, ALL_REDUCE, 50_331_648, 3, 0),
    (COMM_COLL_NODE, "comm", "dp_allgather", 2, (0, 0, 0, 0), 0, 0, ALL_GATHER, 1 << 30, 0, 7_000_000),
    (COMM_SEND_NODE, "comm", "pp_send_act", 0, (0, 0, 0, 0), 0, 0, NO_COLLECTIVE, 25_165_824, -1, 0),
    (COMM_RECV_NODE, "comm", "pp_recv_grad", 1, (0, 0, 0, 0), 0, 0, NO_COLLECTIVE, 25_165_824, 5, 0),
    (COMP_NODE, "optimizer", "adam", 2, (1_000_000_000, 0, 0, 0), 0, 16_000_000_000, NO_COLLECTIVE, 0, -1, 0),
]


def synthetic_templates() -> OpTemplates:
    t = len(_ROWS)
    kinds = sorted({r[1] for r in _ROWS}, key=OP_KINDS.index)
    labels = [r[2] for r in _ROWS]
    shape_extra = np.zeros((t, 2), dtype=np.int64)
    shape_extra[1] = (12, 1)
    return OpTemplates(
        node_type=np.array([r[0] for r in _ROWS], dtype=np.uint8),
        op_kind=np.array([kinds.index(r[1]) for r in _ROWS], dtype=np.uint16),
        label=np.arange(t, dtype=np.uint16),
        phase=np.array([r[3] for r in _ROWS], dtype=np.uint8),
        dtype=np.array([i % 2 for i in range(t)], dtype=np.uint8),
        shape=np.array([r[4] for r in _ROWS], dtype=np.int64),
        shape_extra=shape_extra,
        flops=np.array([r[5] for r in _ROWS], dtype=np.int64),
        bytes_moved=np.array([r[6] for r in _ROWS], dtype=np.int64),
        comm_type=np.array([r[7] for r in _ROWS], dtype=np.int8),
        comm_bytes=np.array([r[8] for r in _ROWS], dtype=np.int64),
        comm_group=np.array([r[9] for r in _ROWS], dtype=np.int32),
        duration_ns=np.array([r[10] for r in _ROWS], dtype=np.uint64),
        op_kind_names=kinds,
        label_names=labels,
    )


def synthetic_trace(nodes: int, rank: int = 3, seed: int = 0, gpu_type: str = "H100-SXM") -> RankTrace:
    """``nodes`` nodes cycling through every template, each depending on 0-3 earlier nodes."""
    rng = np.random.default_rng(seed)
    templates = synthetic_templates()
    template = (np.arange(nodes) % len(templates)).astype(np.int32)
    node_type = templates.node_type[template]
    p2p = (node_type == COMM_SEND_NODE) | (node_type == COMM_RECV_NODE)
    fan_in = rng.integers(0, 4, size=nodes)
    child = np.repeat(np.arange(nodes), fan_in)
    within = np.arange(child.shape[0]) - np.repeat(np.cumsum(fan_in) - fan_in, fan_in)
    # distinct parents per node: offsets strictly increase within a row; the first is often 1
    offset = 1 + within * (1 + rng.integers(0, 100, size=child.shape[0]))
    keep = child - offset >= 0
    child, parent = child[keep], (child - offset)[keep]
    dep_ptr = np.concatenate([[0], np.cumsum(np.bincount(child, minlength=nodes))])
    layer = (np.arange(nodes) // 97 % 130 - 1).astype(np.int32)
    micro_batch = (np.arange(nodes) // 13 % 300 - 1).astype(np.int32)
    return RankTrace(
        rank=rank,
        templates=templates,
        template=template,
        layer=layer,
        micro_batch=micro_batch,
        stage=(np.arange(nodes) // 1000 % 4).astype(np.int16),
        peer=np.where(p2p, (rank + 1 + np.arange(nodes) % 5) % 1024, -1).astype(np.int32),
        tag=np.where(p2p, np.arange(nodes) % 70_000, -1).astype(np.int32),
        dep_ptr=dep_ptr.astype(np.int64),
        dep_idx=parent.astype(np.int64),
        gpu_type=gpu_type,
        metadata={"model": "synthetic"},
    )
