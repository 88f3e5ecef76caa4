"""The in-memory form of one rank's trace: operation templates plus compact per-node arrays.

A realistic iteration has tens of millions of nodes, so a node is a row in numpy arrays, never a
Python object. What repeats (an op's kind, shapes, FLOPs, bytes, collective type and size) is
stored once in an :class:`OpTemplates` table; a node points at its template and adds what varies
(layer, micro-batch, pipeline chunk, send/recv peer and tag, dependencies).

Node ids are positions ``0..N-1``. Dependencies are CSR arrays: the parents of node ``i`` are
``dep_idx[dep_ptr[i]:dep_ptr[i+1]]``, each an earlier node of the same rank. Every ordering edge
is a dependency (Chakra ``data_deps``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

# Chakra NodeType values.
COMP_NODE = 4
COMM_SEND_NODE = 5
COMM_RECV_NODE = 6
COMM_COLL_NODE = 7

# Chakra CollectiveCommType values.
ALL_REDUCE = 0
REDUCE = 1
ALL_GATHER = 2
GATHER = 3
SCATTER = 4
BROADCAST = 5
ALL_TO_ALL = 6
REDUCE_SCATTER = 7
REDUCE_SCATTER_BLOCK = 8
BARRIER = 9
NO_COLLECTIVE = -1

COLLECTIVE_NAMES = {
    ALL_REDUCE: "ALL_REDUCE",
    REDUCE: "REDUCE",
    ALL_GATHER: "ALL_GATHER",
    GATHER: "GATHER",
    SCATTER: "SCATTER",
    BROADCAST: "BROADCAST",
    ALL_TO_ALL: "ALL_TO_ALL",
    REDUCE_SCATTER: "REDUCE_SCATTER",
    REDUCE_SCATTER_BLOCK: "REDUCE_SCATTER_BLOCK",
    BARRIER: "BARRIER",
}

PHASES = ("fwd", "bwd", "opt", "recompute")

# Compute op kinds and the meaning of their shape columns (shape: 4 ints, shape_extra: 2 ints):
#   gemm          (m, n, k, batch)  C[m,n] = A[m,k] @ B[k,n], `batch` independent GEMMs
#   attention     (batch, seq_q, heads, head_dim); extra (kv_heads, causal 0/1); fused flash kernel
#   norm          (rows, cols, 0, 0)          LayerNorm / RMSNorm over `cols`
#   elementwise   (elements, 0, 0, 0)        activation, residual add, dropout, bias
#   softmax_loss  (rows, vocab, 0, 0)        cross-entropy over the logits
#   embedding     (tokens, hidden, 0, 0)     table lookup (fwd) / scatter-add (bwd)
#   optimizer     (parameters, 0, 0, 0)      Adam step over this rank's parameter shard
#   comm          (0, 0, 0, 0)               a communication node (see comm_* columns)
OP_KINDS = (
    "gemm",
    "attention",
    "norm",
    "elementwise",
    "softmax_loss",
    "embedding",
    "optimizer",
    "comm",
    "framework",
)
# "framework": a blocking host-side cost of the training framework on the rank's compute stream
# (e.g. DeepSpeed 0.3 ZeRO-3 parameter fetches, heterosim/workload/zero3.py); shape[0] is its
# duration in ns, set by the workload model, and the compute model returns it as is.
DTYPES = ("bf16", "fp16", "fp8", "fp32", "tf32")


@dataclass
class OpTemplates:
    """What is shared by many nodes: one row per distinct operation.

    ``shape`` columns depend on ``op_kind``: gemm (m, n, k, batch), attention (batch, seq,
    heads, head_dim; ``shape_extra`` holds kv_heads and causal), elementwise/norm/optimizer
    (elements, 0, 0, 0). Communication rows have ``comm_type`` (a Chakra CollectiveCommType,
    -1 for send/recv), ``comm_bytes`` and ``comm_group`` (process-group id, -1 for send/recv).
    """

    node_type: np.ndarray  # uint8, Chakra NodeType
    op_kind: np.ndarray  # uint16 index into op_kind_names
    label: np.ndarray  # uint16 index into label_names
    phase: np.ndarray  # uint8 index into PHASES
    dtype: np.ndarray  # uint8 index into DTYPES
    shape: np.ndarray  # int64 (T, 4), meaning per op kind: see OP_KINDS
    shape_extra: np.ndarray  # int64 (T, 2)
    flops: np.ndarray  # int64
    bytes_moved: np.ndarray  # int64, memory traffic of a compute op
    comm_type: np.ndarray  # int8
    comm_bytes: np.ndarray  # int64
    comm_group: np.ndarray  # int32
    duration_ns: np.ndarray  # uint64, 0 until the plan layer times the op
    op_kind_names: list[str] = field(default_factory=list)
    label_names: list[str] = field(default_factory=list)
    # all-to-all-v rows: bytes sent to each member of the communicator (communicator order) are
    # comm_split[comm_split_ptr[t]:comm_split_ptr[t+1]]; empty for every other row. An empty
    # comm_split_ptr means no row has a split.
    comm_split_ptr: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    comm_split: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))

    def __len__(self) -> int:
        return int(self.node_type.shape[0])

    def split_lengths(self) -> np.ndarray:
        """Number of per-member sizes of every row (0: an even collective or a compute op)."""
        if self.comm_split_ptr.size == 0:
            return np.zeros(len(self), np.int64)
        return np.diff(self.comm_split_ptr)

    def split_of(self, row: int) -> np.ndarray:
        """Per-member send bytes of row ``row`` (empty unless it is an all-to-all-v)."""
        if self.comm_split_ptr.size == 0:
            return self.comm_split[:0]
        return self.comm_split[self.comm_split_ptr[row] : self.comm_split_ptr[row + 1]]


@dataclass
class RankTrace:
    """Everything one rank does in one iteration, in issue order."""

    rank: int
    templates: OpTemplates
    template: np.ndarray  # int32 (N,) row in templates
    layer: np.ndarray  # int32 (N,), -1 for embedding/head/optimizer
    micro_batch: np.ndarray  # int32 (N,), -1 when not per micro-batch
    stage: np.ndarray  # int16 (N,), pipeline (virtual) stage of the node
    peer: np.ndarray  # int32 (N,), send/recv peer rank, -1 otherwise
    tag: np.ndarray  # int32 (N,), send/recv matching tag, -1 otherwise
    dep_ptr: np.ndarray  # int64 (N+1,)
    dep_idx: np.ndarray  # int64 (E,)
    gpu_type: str = ""
    metadata: dict[str, str] = field(default_factory=dict)

    def __len__(self) -> int:
        return int(self.template.shape[0])

    @property
    def node_type(self) -> np.ndarray:
        return self.templates.node_type[self.template]

    def parents(self, node: int) -> np.ndarray:
        return self.dep_idx[self.dep_ptr[node] : self.dep_ptr[node + 1]]

    def check(self) -> None:
        """Assert the structural invariants (deps point backwards, arrays agree in length)."""
        n = len(self)
        for name in ("layer", "micro_batch", "stage", "peer", "tag"):
            assert getattr(self, name).shape == (n,), f"{name} has the wrong length"
        assert self.dep_ptr.shape == (n + 1,) and self.dep_ptr[0] == 0
        assert self.dep_ptr[-1] == self.dep_idx.shape[0]
        assert np.all(np.diff(self.dep_ptr) >= 0)
        if n and self.dep_idx.size:
            child = np.repeat(np.arange(n), np.diff(self.dep_ptr))
            assert np.all(self.dep_idx < child), "a dependency must point to an earlier node"
            assert np.all(self.dep_idx >= 0)
        if n:
            assert self.template.min() >= 0 and self.template.max() < len(self.templates)
