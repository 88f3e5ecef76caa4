"""Per-node values of a trace, templates resolved: the basis of trace equality.

Two traces are equal when every node has the same expanded values and the same parents, even
if their template tables are ordered or deduplicated differently.
"""

from __future__ import annotations

import numpy as np

from heterosim.workload.trace import DTYPES, PHASES, RankTrace


def expand_nodes(trace: RankTrace) -> dict[str, np.ndarray]:
    """One array per node attribute (strings as str arrays), plus ``dep_ptr``/``dep_idx``."""
    t, row = trace.templates, trace.template
    split_ptr, split = _node_splits(trace)
    return {
        "node_type": t.node_type[row].astype(np.int64),
        "op": np.asarray(t.op_kind_names, dtype=str)[t.op_kind[row]],
        "label": np.asarray(t.label_names, dtype=str)[t.label[row]],
        "phase": np.asarray(PHASES, dtype=str)[t.phase[row]],
        "dtype": np.asarray(DTYPES, dtype=str)[t.dtype[row]],
        "shape": np.concatenate([t.shape[row], t.shape_extra[row]], axis=1).astype(np.int64),
        "flops": t.flops[row].astype(np.int64),
        "bytes_moved": t.bytes_moved[row].astype(np.int64),
        "comm_type": t.comm_type[row].astype(np.int64),
        "comm_bytes": t.comm_bytes[row].astype(np.int64),
        "comm_group": t.comm_group[row].astype(np.int64),
        "duration_ns": t.duration_ns[row].astype(np.uint64),
        "layer": trace.layer.astype(np.int64),
        "micro_batch": trace.micro_batch.astype(np.int64),
        "stage": trace.stage.astype(np.int64),
        "peer": trace.peer.astype(np.int64),
        "tag": trace.tag.astype(np.int64),
        "dep_ptr": trace.dep_ptr.astype(np.int64),
        "dep_idx": trace.dep_idx.astype(np.int64),
        "comm_split_ptr": split_ptr,
        "comm_split": split,
    }


def _node_splits(trace: RankTrace) -> tuple[np.ndarray, np.ndarray]:
    """Per node CSR of its all-to-all-v sizes (OpTemplates.comm_split resolved per node)."""
    t, row = trace.templates, trace.template
    lengths = t.split_lengths()[row]
    ptr = np.zeros(len(trace) + 1, dtype=np.int64)
    np.cumsum(lengths, out=ptr[1:])
    if not t.comm_split_ptr.size:
        return ptr, np.zeros(0, np.int64)
    index = np.repeat(t.comm_split_ptr[row] - ptr[:-1], lengths) + np.arange(int(ptr[-1]))
    return ptr, t.comm_split[index].astype(np.int64)


def traces_equal(a: RankTrace, b: RankTrace) -> bool:
    """Same rank, GPU type, metadata and per-node values."""
    if (a.rank, a.gpu_type, a.metadata, len(a)) != (b.rank, b.gpu_type, b.metadata, len(b)):
        return False
    ea, eb = expand_nodes(a), expand_nodes(b)
    return all(np.array_equal(ea[k], eb[k]) for k in ea)
