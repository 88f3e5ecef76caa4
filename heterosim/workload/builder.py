"""Assemble one rank's trace arrays from unit programs without a Python object per node.

A *unit program* is the node sequence of one schedule step (the forward or backward of one model
chunk for one micro-batch), built once per rank and kind and then stamped out per micro-batch
with numpy. Inside a unit the *chain* nodes (kernels and the blocking TP/EP collectives, in issue
order) each depend on the previous chain node; *side* nodes (gradient buckets, ZeRO gathers and
scatters) carry explicit dependencies and nothing in the chain waits for them unless stated.
A dependency on local index ``-1`` means "the previous unit's last chain node" (the rank's
compute stream order); it is dropped for the very first unit. A unit's node may carry a send/recv
peer and tag (the context-parallel ring, heterosim/workload/cp.py), stamped unchanged into every
copy: sends and recvs match by (peer, tag, occurrence).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from heterosim.workload.ops_base import OpSpec
from heterosim.workload.trace import DTYPES, OP_KINDS, PHASES, OpTemplates, RankTrace

PREVIOUS_TAIL = -1


class TemplateTable:
    """Distinct (OpSpec, process-group id) rows of one rank, in first-use order."""

    def __init__(self) -> None:
        self._index: dict[tuple[OpSpec, int], int] = {}
        self.rows: list[tuple[OpSpec, int]] = []

    def add(self, spec: OpSpec, group_id: int = -1) -> int:
        key = (spec, group_id)
        found = self._index.get(key)
        if found is None:
            found = self._index[key] = len(self.rows)
            self.rows.append(key)
        return found

    def build(self) -> OpTemplates:
        labels: dict[str, int] = {}
        n = len(self.rows)
        shape = np.zeros((n, 4), dtype=np.int64)
        extra = np.zeros((n, 2), dtype=np.int64)
        cols: dict[str, list[Any]] = {
            k: []
            for k in (
                "node_type",
                "op_kind",
                "label",
                "phase",
                "dtype",
                "flops",
                "bytes_moved",
                "comm_type",
                "comm_bytes",
                "comm_group",
            )
        }
        for i, (op, gid) in enumerate(self.rows):
            shape[i] = op.shape
            extra[i] = op.shape_extra
            cols["node_type"].append(op.node_type)
            cols["op_kind"].append(OP_KINDS.index(op.op_kind))
            cols["label"].append(labels.setdefault(op.label, len(labels)))
            cols["phase"].append(PHASES.index(op.phase))
            cols["dtype"].append(DTYPES.index(op.dtype))
            cols["flops"].append(op.flops)
            cols["bytes_moved"].append(op.bytes_moved)
            cols["comm_type"].append(op.comm_type)
            cols["comm_bytes"].append(op.comm_bytes)
            cols["comm_group"].append(gid)
        lengths = np.array([len(op.comm_split) for op, _ in self.rows], dtype=np.int64)
        split_ptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(lengths, out=split_ptr[1:])
        split = [x for op, _ in self.rows for x in op.comm_split]
        return OpTemplates(
            node_type=np.array(cols["node_type"], dtype=np.uint8),
            op_kind=np.array(cols["op_kind"], dtype=np.uint16),
            label=np.array(cols["label"], dtype=np.uint16),
            phase=np.array(cols["phase"], dtype=np.uint8),
            dtype=np.array(cols["dtype"], dtype=np.uint8),
            shape=shape,
            shape_extra=extra,
            flops=np.array(cols["flops"], dtype=np.int64),
            bytes_moved=np.array(cols["bytes_moved"], dtype=np.int64),
            comm_type=np.array(cols["comm_type"], dtype=np.int8),
            comm_bytes=np.array(cols["comm_bytes"], dtype=np.int64),
            comm_group=np.array(cols["comm_group"], dtype=np.int32),
            duration_ns=np.zeros(n, dtype=np.uint64),
            op_kind_names=list(OP_KINDS),
            label_names=list(labels),
            comm_split_ptr=split_ptr if split else np.zeros(0, np.int64),
            comm_split=np.array(split, dtype=np.int64),
        )


@dataclass
class UnitProgram:
    """Nodes of one schedule step with local dependencies (see module docstring)."""

    template: list[int] = field(default_factory=list)
    layer: list[int] = field(default_factory=list)
    dep_child: list[int] = field(default_factory=list)
    dep_parent: list[int] = field(default_factory=list)
    head: int = -1  # first chain node
    tail: int = -1  # last chain node
    grad_sync: list[int] = field(default_factory=list)  # gradient collectives (optimizer waits)
    peer: list[int] = field(default_factory=list)  # send/recv peer rank, -1 otherwise
    tag: list[int] = field(default_factory=list)  # send/recv tag, -1 otherwise

    def add(
        self,
        template: int,
        layer: int,
        deps: list[int] | tuple[int, ...] = (),
        *,
        peer: int = -1,
        tag: int = -1,
    ) -> int:
        index = len(self.template)
        self.template.append(template)
        self.layer.append(layer)
        self.peer.append(peer)
        self.tag.append(tag)
        for parent in deps:
            self.dep_child.append(index)
            self.dep_parent.append(parent)
        return index

    def chain(self, template: int, layer: int, extra_deps: list[int] | tuple[int, ...] = ()) -> int:
        """Append a chain node depending on the previous chain node (or the previous unit)."""
        index = self.add(template, layer, [self.tail if self.tail >= 0 else PREVIOUS_TAIL, *extra_deps])
        if self.head < 0:
            self.head = index
        self.tail = index
        return index

    def freeze(self) -> FrozenUnit:
        return FrozenUnit(
            template=np.array(self.template, dtype=np.int32),
            layer=np.array(self.layer, dtype=np.int32),
            dep_child=np.array(self.dep_child, dtype=np.int64),
            dep_parent=np.array(self.dep_parent, dtype=np.int64),
            head=self.head,
            tail=self.tail,
            grad_sync=np.array(self.grad_sync, dtype=np.int64),
            peer=np.array(self.peer, dtype=np.int32) if max(self.peer, default=-1) >= 0 else None,
            tag=np.array(self.tag, dtype=np.int32) if max(self.tag, default=-1) >= 0 else None,
        )


@dataclass(frozen=True)
class FrozenUnit:
    template: np.ndarray
    layer: np.ndarray
    dep_child: np.ndarray
    dep_parent: np.ndarray
    head: int
    tail: int
    grad_sync: np.ndarray
    peer: np.ndarray | None = None  # None: no send/recv in the unit
    tag: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.template.shape[0])


class TraceAssembler:
    """Appends units and single nodes for one rank; ``finish`` returns the RankTrace."""

    def __init__(self) -> None:
        self._cols: dict[str, list[np.ndarray]] = {
            k: [] for k in ("template", "layer", "micro_batch", "stage", "peer", "tag")
        }
        self._pending: dict[str, list[int]] = {k: [] for k in self._cols}
        self._child: list[np.ndarray] = []
        self._parent: list[np.ndarray] = []
        self.size = 0
        self.tail = -1  # last chain node so far (compute-stream order)
        self.grad_sync: list[int] = []

    def _flush(self) -> None:
        if self._pending["template"]:
            for key, values in self._pending.items():
                self._cols[key].append(np.array(values, dtype=np.int64))
                values.clear()

    def _push(self, template, layer, micro_batch, stage, peer, tag, n: int) -> None:
        self._flush()
        for key, value, dtype in (
            ("template", template, np.int32),
            ("layer", layer, np.int32),
            ("micro_batch", micro_batch, np.int32),
            ("stage", stage, np.int16),
            ("peer", peer, np.int32),
            ("tag", tag, np.int32),
        ):
            arr = np.asarray(value, dtype=dtype)
            self._cols[key].append(np.broadcast_to(arr, (n,)) if arr.ndim == 0 else arr)
        self.size += n

    def node(
        self,
        template: int,
        *,
        layer: int = -1,
        micro_batch: int = -1,
        stage: int = 0,
        peer: int = -1,
        tag: int = -1,
        deps: list[int] | tuple[int, ...] = (),
    ) -> int:
        """Append one node; returns its global index."""
        index = self.size
        for key, value in (
            ("template", template),
            ("layer", layer),
            ("micro_batch", micro_batch),
            ("stage", stage),
            ("peer", peer),
            ("tag", tag),
        ):
            self._pending[key].append(value)
        self.size += 1
        if deps:
            self._child.append(np.full(len(deps), index, dtype=np.int64))
            self._parent.append(np.array(deps, dtype=np.int64))
        return index

    def unit(
        self, unit: FrozenUnit, *, micro_batch: int, stage: int, head_deps: tuple[int, ...] = ()
    ) -> tuple[int, int]:
        """Stamp a unit; returns (global head, global tail) and advances the stream tail."""
        offset = self.size
        peer = -1 if unit.peer is None else unit.peer
        tag = -1 if unit.tag is None else unit.tag
        self._push(unit.template, unit.layer, micro_batch, stage, peer, tag, len(unit))
        parent = unit.dep_parent + offset
        external = unit.dep_parent == PREVIOUS_TAIL
        parent[external] = self.tail
        keep = parent >= 0
        self._child.append(unit.dep_child[keep] + offset)
        self._parent.append(parent[keep])
        head = offset + unit.head
        if head_deps:
            self._child.append(np.full(len(head_deps), head, dtype=np.int64))
            self._parent.append(np.array(head_deps, dtype=np.int64))
        self.tail = offset + unit.tail
        if unit.grad_sync.size:
            self.grad_sync.extend((unit.grad_sync + offset).tolist())
        return head, self.tail

    def finish(self, rank: int, templates: OpTemplates, gpu_type: str, metadata: dict[str, str]) -> RankTrace:
        self._flush()
        n = self.size
        cols = {k: (np.concatenate(v) if v else np.zeros(0)) for k, v in self._cols.items()}
        child = np.concatenate(self._child) if self._child else np.zeros(0, dtype=np.int64)
        parent = np.concatenate(self._parent) if self._parent else np.zeros(0, dtype=np.int64)
        order = np.argsort(child, kind="stable")
        dep_idx = parent[order].astype(np.int64)
        dep_ptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(child, minlength=n), out=dep_ptr[1:])
        return RankTrace(
            rank=rank,
            templates=templates,
            template=cols["template"].astype(np.int32, copy=False),
            layer=cols["layer"].astype(np.int32, copy=False),
            micro_batch=cols["micro_batch"].astype(np.int32, copy=False),
            stage=cols["stage"].astype(np.int16, copy=False),
            peer=cols["peer"].astype(np.int32, copy=False),
            tag=cols["tag"].astype(np.int32, copy=False),
            dep_ptr=dep_ptr,
            dep_idx=dep_idx,
            gpu_type=gpu_type,
            metadata=metadata,
        )
