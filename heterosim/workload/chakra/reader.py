"""Read a Chakra ET file (ours or another producer's) into a :class:`RankTrace`.

Accepts plain or gzip-compressed files. Nodes may carry arbitrary, unordered uint64 ids; they
are renumbered to positions in a topological order (file order where the file already is one),
and ``ctrl_deps`` count as dependencies like ``data_deps``. Attributes other producers do not
write get defaults: ``op`` "comm" on communication nodes and "unknown" elsewhere, ``phase``
"fwd", ``dtype`` "bf16", ``layer``/``micro_batch`` -1, ``stage`` 0, shape zeros, ``comm_tag``
0, ``pg_name`` "0" on collectives (Chakra: all ranks) and none (-1) on send/recv, and
``duration_ns`` = ``duration_micros`` * 1000. Malformed input is a :class:`UserError` naming
the file.

Each node is parsed with ``NodeView`` (attributes kept as raw bytes) and every distinct
attribute encoding is decoded once, so the per-node cost is a parse and a few dict lookups.
"""

from __future__ import annotations

import heapq
import os
import re
import stat
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from google.protobuf.message import DecodeError

from heterosim.errors import UserError
from heterosim.workload.chakra import schema, wire
from heterosim.workload.trace import (
    ALL_TO_ALL,
    COMM_COLL_NODE,
    COMM_RECV_NODE,
    COMM_SEND_NODE,
    DTYPES,
    NO_COLLECTIVE,
    PHASES,
    OpTemplates,
    RankTrace,
)

TRACE_NAME = re.compile(r"^(?P<prefix>.+)\.(?P<rank>\d+)\.et(?:\.gz)?$")
_CACHE_LIMIT = 1 << 20  # distinct attribute encodings remembered while reading one file


@dataclass
class EtFile:
    """A decoded file before interpretation: header plus per-node values in file order.

    ``columns`` maps each attribute name to a list with one value per node (None where the
    node lacks it); ``dep_ids`` holds every node's parents (data then ctrl) back to back.
    """

    version: str
    metadata: dict[str, str]
    ids: np.ndarray  # uint64 (N,)
    names: list[str]
    types: np.ndarray  # int64 (N,)
    dep_count: np.ndarray  # int64 (N,)
    dep_ids: np.ndarray  # uint64 (E,)
    duration_micros: np.ndarray  # uint64 (N,)
    columns: dict[str, list[object]]

    def __len__(self) -> int:
        return int(self.ids.shape[0])

    def column(self, name: str, default: object) -> list[object]:
        values = self.columns.get(name)
        if values is None:
            return [default] * len(self)
        return [default if v is None else v for v in values]


MAX_TRACE_BYTES = 4 << 30  # one rank's trace, after decompression
MAX_DURATION_NS = 86_400 * 10**9  # one day: a node longer than that is not a training op
MAX_COMM_BYTES = 1 << 40  # 1 TiB per communication node
KNOWN_NODE_TYPES = (1, 2, 3, 4, 5, 6, 7)  # Chakra NodeType, INVALID_NODE (0) excluded


def _load_bytes(path: Path) -> bytes:
    try:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):
            raise UserError(f"{path}: not a regular file (a folder, pipe or device), expected a Chakra trace")
        if info.st_size > MAX_TRACE_BYTES:
            raise UserError(f"{path}: {info.st_size} bytes; at most 4 GiB per trace")
        blob = path.read_bytes()
    except OSError as exc:
        raise UserError(f"{path}: cannot read trace: {exc.strerror or exc}") from None
    if blob[:2] == b"\x1f\x8b":
        try:
            inflater = zlib.decompressobj(wbits=31)
            blob = inflater.decompress(blob, MAX_TRACE_BYTES)
            if inflater.unconsumed_tail:
                raise UserError(f"{path}: decompresses to more than 4 GiB; at most that per trace")
        except (OSError, EOFError, zlib.error) as exc:
            raise UserError(f"{path}: malformed gzip-compressed trace: {exc}") from None
    return blob


def _check_ranges(et: EtFile, path: Path) -> None:
    """Node types Chakra defines; durations and sizes inside physical ranges (before they are
    scaled to nanoseconds and summed, where 2^63 would wrap)."""

    def first(mask: np.ndarray) -> int:
        return int(np.flatnonzero(mask)[0])

    unknown = ~np.isin(et.types, KNOWN_NODE_TYPES)
    if unknown.any():
        i = first(unknown)
        raise UserError(
            f"{path}: node {et.ids[i]} ({et.names[i]!r}): unknown node type "
            f"{int(et.types[i])}; Chakra defines 1..7"
        )
    long = et.duration_micros > np.uint64(MAX_DURATION_NS // 1000)
    if long.any():
        i = first(long)
        raise UserError(
            f"{path}: node {et.ids[i]} ({et.names[i]!r}): duration_micros "
            f"{int(et.duration_micros[i])} is longer than one day"
        )
    for name, limit in (
        ("duration_ns", MAX_DURATION_NS),
        ("comm_size", MAX_COMM_BYTES),
        ("tensor_size", 1 << 50),
        ("num_ops", 1 << 62),
    ):
        column = et.columns.get(name)
        if column is None:
            continue
        for i, value in enumerate(column):
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= limit:
                raise UserError(
                    f"{path}: node {et.ids[i]} ({et.names[i]!r}): attribute {name}: "
                    f"expected an integer in 0..{limit}, got {value!r:.40}"
                )


def _split_messages(blob: bytes, path: Path) -> list[bytes]:
    """The varint32-length-delimited messages of a file."""
    out: list[bytes] = []
    pos, end = 0, len(blob)
    while pos < end:
        start = pos
        try:
            size, pos = wire.decode_varint(blob, pos)
        except (IndexError, ValueError):
            raise UserError(
                f"{path}: malformed Chakra trace: bad length prefix at byte {start} (message {len(out)})"
            ) from None
        if size > end - pos or size >= 1 << 32:
            raise UserError(
                f"{path}: malformed Chakra trace: message {len(out)} at byte "
                f"{start} claims {size} bytes but {end - pos} remain "
                f"(truncated or not a trace)"
            )
        out.append(blob[pos : pos + size])
        pos += size
    if not out:
        raise UserError(f"{path}: malformed Chakra trace: empty file (no GlobalMetadata)")
    return out


def _attr_value(attr: object) -> object:
    kind = attr.WhichOneof("value")  # type: ignore[attr-defined]
    if kind is None:
        return None
    value = getattr(attr, kind)
    if kind.endswith("_list"):
        return tuple(value.values)
    return value


def _decode_attr(blob: bytes) -> tuple[str, object]:
    attr = schema.AttributeProto.FromString(blob)
    return attr.name, _attr_value(attr)


def decode_file(path: str | Path) -> EtFile:
    """Parse every message of ``path`` (no interpretation of the attributes yet)."""
    path = Path(path)
    messages = _split_messages(_load_bytes(path), path)
    n = len(messages) - 1
    ids: list[int] = []
    names: list[str] = []
    types: list[int] = []
    dep_count: list[int] = []
    dep_ids: list[int] = []
    durations: list[int] = []
    columns: dict[str, list[object]] = {}
    cache: dict[bytes, tuple[list[object], object]] = {}
    parse = schema.NodeView.FromString
    index = 0
    try:
        meta = schema.GlobalMetadata.FromString(messages[0])
        metadata = {a.name: _metadata_text(_attr_value(a)) for a in meta.attr}
        for index in range(1, n + 1):
            view = parse(messages[index])
            ids.append(view.id)
            names.append(view.name)
            types.append(view.type)
            parents = view.data_deps[:]
            if len(view.ctrl_deps):
                parents += [p for p in view.ctrl_deps[:] if p not in parents]
            dep_count.append(len(parents))
            dep_ids.extend(parents)
            durations.append(view.duration_micros)
            node = index - 1
            for raw in view.attr[:]:
                hit = cache.get(raw)
                if hit is None:
                    if len(cache) >= _CACHE_LIMIT:
                        cache.clear()
                    name, value = _decode_attr(raw)
                    column = columns.get(name)
                    if column is None:
                        column = columns[name] = [None] * n
                    hit = cache[raw] = (column, value)
                hit[0][node] = hit[1]
    except (DecodeError, UnicodeDecodeError, RuntimeError) as exc:
        what = "GlobalMetadata" if index == 0 else f"node message {index}"
        detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise UserError(f"{path}: malformed Chakra trace: cannot decode {what}: {detail}") from None
    return EtFile(
        meta.version,
        metadata,
        np.array(ids, dtype=np.uint64),
        names,
        np.array(types, dtype=np.int64),
        np.array(dep_count, dtype=np.int64),
        np.array(dep_ids, dtype=np.uint64),
        np.array(durations, dtype=np.uint64),
        columns,
    )


def _metadata_text(value: object) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, tuple):
        return ",".join(str(v) for v in value)
    return "" if value is None else str(value)


def rank_from_name(path: str | Path) -> int | None:
    """The rank in ``<prefix>.<rank>.et`` (or ``.et.gz``), None if the name has none."""
    match = TRACE_NAME.match(Path(path).name)
    return int(match.group("rank")) if match else None


def _kahn_order(parents: np.ndarray, dep_count: np.ndarray, et: EtFile, path: Path) -> np.ndarray:
    """Topological order of file indices, preferring file order (smallest index first)."""
    n = len(et)
    child = np.repeat(np.arange(n), dep_count)
    by_parent = np.argsort(parents, kind="stable")
    child_ptr = np.concatenate([[0], np.cumsum(np.bincount(parents, minlength=n))])
    children = child[by_parent].tolist()
    waiting = dep_count.tolist()
    ready = [i for i in range(n) if waiting[i] == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for c in children[child_ptr[i] : child_ptr[i + 1]]:
            waiting[c] -= 1
            if waiting[c] == 0:
                heapq.heappush(ready, c)
    if len(order) != n:
        stuck = next(i for i in range(n) if waiting[i] > 0)
        raise UserError(f"{path}: dependency cycle through node {et.ids[stuck]} ({et.names[stuck]!r})")
    return np.array(order, dtype=np.int64)


def _execution_order(et: EtFile, path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(file indices in execution order, dep_ptr, dep_idx in new positions)."""
    n = len(et)
    child = np.repeat(np.arange(n), et.dep_count)
    dep_ptr = np.concatenate([[0], np.cumsum(et.dep_count)]).astype(np.int64)
    if np.array_equal(et.ids, np.arange(n, dtype=np.uint64)):
        parents = et.dep_ids.astype(np.int64)
        known = et.dep_ids < np.uint64(n)
    else:
        sorter = np.argsort(et.ids, kind="stable")
        sorted_ids = et.ids[sorter]
        same = np.flatnonzero(sorted_ids[1:] == sorted_ids[:-1])
        if same.size:
            raise UserError(f"{path}: node id {sorted_ids[same[0]]} appears more than once")
        slot = np.minimum(np.searchsorted(sorted_ids, et.dep_ids), max(n - 1, 0))
        known = sorted_ids[slot] == et.dep_ids if n else np.zeros(0, bool)
        parents = sorter[slot] if n else np.zeros(0, np.int64)
    if not np.all(known):
        edge = int(np.flatnonzero(~known)[0])
        node = int(child[edge])
        raise UserError(
            f"{path}: node {et.ids[node]} ({et.names[node]!r}) depends on node "
            f"{et.dep_ids[edge]}, which is not in the file"
        )
    if np.all(parents < child):
        return np.arange(n), dep_ptr, parents
    order = _kahn_order(parents, et.dep_count, et, path)
    new_position = np.empty(n, dtype=np.int64)
    new_position[order] = np.arange(n)
    lengths = et.dep_count[order]
    rows = wire._positions(dep_ptr[:-1][order], lengths)
    new_ptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    return order, new_ptr, new_position[parents[rows]]


def _int_column(et: EtFile, name: str, default: int, path: Path) -> np.ndarray:
    values = et.column(name, default)
    try:
        return np.array(values, dtype=np.int64)
    except (TypeError, ValueError, OverflowError):
        bad = next(
            i for i, v in enumerate(values) if not isinstance(v, (int, bool)) or not -(1 << 63) <= v < 1 << 63
        )
        raise UserError(
            f"{path}: node {et.ids[bad]}: attribute {name}: expected a 64-bit integer, got {values[bad]!r}"
        ) from None


def _choice(et: EtFile, name: str, allowed: tuple[str, ...], path: Path) -> np.ndarray:
    values = et.column(name, allowed[0])
    lookup: dict[object, int] = {v: i for i, v in enumerate(allowed)}
    try:
        return np.array([lookup[v] for v in values], dtype=np.uint8)
    except (KeyError, TypeError):
        bad = next(i for i, v in enumerate(values) if not isinstance(v, str) or v not in lookup)
        raise UserError(
            f"{path}: node {et.ids[bad]}: attribute {name}: {values[bad]!r} is "
            f"not one of {', '.join(allowed)}"
        ) from None


def _interned(values: list[object]) -> tuple[np.ndarray, list[str]]:
    table: dict[str, int] = {}
    index = np.array([table.setdefault(str(v), len(table)) for v in values], dtype=np.int64)
    return index, list(table)


def _group_ids(et: EtFile, node_type: np.ndarray, path: Path) -> np.ndarray:
    table: dict[object, int] = {None: -1, "": -1}
    out = np.empty(len(et), dtype=np.int64)
    for i, name in enumerate(et.columns.get("pg_name", [None] * len(et))):
        group = table.get(name)
        if group is None:
            try:
                group = table[name] = int(str(name))
            except ValueError:
                raise UserError(
                    f"{path}: node {et.ids[i]}: attribute pg_name: expected an "
                    f"integer process-group id, got {name!r}"
                ) from None
        out[i] = group
    # Chakra: an empty or missing pg_name on a collective means all ranks (group 0)
    return np.where((node_type == COMM_COLL_NODE) & (out < 0), 0, out)


def _splits(
    et: EtFile, comm_type: np.ndarray, comm_bytes: np.ndarray, path: Path
) -> tuple[np.ndarray, list[tuple[int, ...]]]:
    """Per node the id of its ``comm_split_bytes`` (an all-to-all-v's bytes per group member;
    -1: none) and the distinct splits. Only an ALL_TO_ALL may carry one, summing to its size."""
    ids = np.full(len(et), -1, dtype=np.int64)
    table: dict[tuple[int, ...], int] = {}
    for i, value in enumerate(et.columns.get("comm_split_bytes", ())):
        if value is None:
            continue
        where = f"{path}: node {et.ids[i]}: attribute comm_split_bytes"
        if int(comm_type[i]) != ALL_TO_ALL:
            raise UserError(f"{where}: only an ALL_TO_ALL collective takes sizes per member")
        if not isinstance(value, tuple) or any(not isinstance(v, int) or v < 0 for v in value):
            raise UserError(f"{where}: expected a list of non-negative byte counts")
        if sum(value) != int(comm_bytes[i]):
            raise UserError(f"{where}: sums to {sum(value)} but comm_size is {int(comm_bytes[i])}")
        ids[i] = table.setdefault(value, len(table))
    return ids, list(table)


def _split_arrays(ids: np.ndarray, table: list[tuple[int, ...]]) -> tuple[np.ndarray, np.ndarray]:
    """OpTemplates.comm_split_ptr / comm_split of template rows whose split ids are ``ids``."""
    if not table:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    lengths = np.array([len(table[i]) if i >= 0 else 0 for i in ids.tolist()], dtype=np.int64)
    ptr = np.zeros(ids.size + 1, dtype=np.int64)
    np.cumsum(lengths, out=ptr[1:])
    return ptr, np.array([v for i in ids.tolist() if i >= 0 for v in table[i]], dtype=np.int64)


def _node_columns(
    et: EtFile, comm: np.ndarray, path: Path
) -> tuple[dict[str, np.ndarray], list[str], list[str]]:
    """Per node, the values that make its op template (in the template key's column order; the
    comm split is added by the caller), with the op and label names the indices refer to."""
    n = len(et)
    node_type = et.types
    ops = et.column("op", None)
    op_index, op_names = _interned(
        [("comm" if c else "unknown") if o is None else o for o, c in zip(ops, comm.tolist())]
    )
    labels = et.column("label", None)
    label_index, label_names = _interned([name if v is None else v for v, name in zip(labels, et.names)])
    phase = _choice(et, "phase", PHASES, path)
    dtype = _choice(et, "dtype", DTYPES, path)
    shape = np.zeros((n, 6), dtype=np.int64)
    for i, dims in enumerate(et.columns.get("shape", ())):
        if isinstance(dims, tuple) and dims:
            shape[i, : min(6, len(dims))] = dims[:6]

    flops = _int_column(et, "num_ops", 0, path)
    moved = _int_column(et, "tensor_size", 0, path)
    comm_type = np.where(node_type == COMM_COLL_NODE, _int_column(et, "comm_type", 0, path), NO_COLLECTIVE)
    comm_bytes = np.where(comm, _int_column(et, "comm_size", 0, path), 0)
    group = _group_ids(et, node_type, path)
    duration = et.duration_micros * np.uint64(1000)
    exact = et.columns.get("duration_ns")
    if exact is not None:
        known = np.array([v is not None for v in exact])
        duration[known] = np.array([v for v in exact if v is not None], dtype=np.uint64)
    columns = {
        "node_type": node_type,
        "op_kind": op_index,
        "label": label_index,
        "phase": phase,
        "dtype": dtype,
        "shape": shape,
        "flops": flops,
        "bytes_moved": moved,
        "comm_type": comm_type,
        "comm_bytes": comm_bytes,
        "comm_group": group,
        "duration_ns": duration.view(np.int64),
    }
    return columns, op_names, label_names


def _p2p_peers(et: EtFile, send: np.ndarray, recv: np.ndarray, path: Path) -> tuple[np.ndarray, np.ndarray]:
    """(peer, tag) per node: the destination of a send, the source of a recv, -1 elsewhere."""
    p2p = send | recv
    src = _int_column(et, "comm_src", -1, path)
    dst = _int_column(et, "comm_dst", -1, path)
    peer = np.where(send, dst, np.where(recv, src, -1))
    missing = p2p & (peer < 0)
    if missing.any():
        i = int(np.flatnonzero(missing)[0])
        key = "comm_dst" if send[i] else "comm_src"
        raise UserError(
            f"{path}: node {et.ids[i]} ({et.names[i]!r}): a "
            f"{'send' if send[i] else 'recv'} node needs attribute {key}"
        )
    tag = np.where(p2p, _int_column(et, "comm_tag", 0, path), -1)
    return peer, tag


def _op_templates(
    rows: np.ndarray, op_names: list[str], label_names: list[str], split_table: list[tuple[int, ...]]
) -> OpTemplates:
    """The distinct template key rows (:func:`to_rank_trace`) as :class:`OpTemplates`."""
    split_ptr, split = _split_arrays(rows[:, 17], split_table)
    return OpTemplates(
        node_type=rows[:, 0].astype(np.uint8),
        op_kind=rows[:, 1].astype(np.uint16),
        label=rows[:, 2].astype(np.uint16),
        phase=rows[:, 3].astype(np.uint8),
        dtype=rows[:, 4].astype(np.uint8),
        shape=rows[:, 5:9].copy(),
        shape_extra=rows[:, 9:11].copy(),
        flops=rows[:, 11].copy(),
        bytes_moved=rows[:, 12].copy(),
        comm_type=rows[:, 13].astype(np.int8),
        comm_bytes=rows[:, 14].copy(),
        comm_group=rows[:, 15].astype(np.int32),
        duration_ns=rows[:, 16].view(np.uint64).copy(),
        op_kind_names=op_names,
        label_names=label_names,
        comm_split_ptr=split_ptr,
        comm_split=split,
    )


def to_rank_trace(et: EtFile, rank: int, path: str | Path = "<trace>") -> RankTrace:
    """Interpret a decoded file as one rank's trace (see the module docstring for defaults)."""
    path = Path(path)
    _check_ranges(et, path)
    order, dep_ptr, dep_idx = _execution_order(et, path)
    node_type = et.types
    comm = np.isin(node_type, (COMM_COLL_NODE, COMM_SEND_NODE, COMM_RECV_NODE))
    send, recv = node_type == COMM_SEND_NODE, node_type == COMM_RECV_NODE
    columns, op_names, label_names = _node_columns(et, comm, path)
    peer, tag = _p2p_peers(et, send, recv, path)
    split_id, split_table = _splits(et, columns["comm_type"], columns["comm_bytes"], path)

    # One template per distinct (type, op, label, ..., duration) row, in first-use order.
    key = np.column_stack([*columns.values(), split_id]).astype(np.int64)[order]
    template, rows = _first_use_templates(key)
    gpu_types = {str(v) for v in et.columns.get("gpu_type", ()) if v is not None}
    return RankTrace(
        rank=rank,
        templates=_op_templates(rows, op_names, label_names, split_table),
        template=template,
        layer=_int_column(et, "layer", -1, path)[order].astype(np.int32),
        micro_batch=_int_column(et, "micro_batch", -1, path)[order].astype(np.int32),
        stage=_int_column(et, "stage", 0, path)[order].astype(np.int16),
        peer=peer[order].astype(np.int32),
        tag=tag[order].astype(np.int32),
        dep_ptr=dep_ptr,
        dep_idx=dep_idx.astype(np.int64),
        gpu_type=min(gpu_types) if gpu_types else et.metadata.get("gpu_type", ""),
        metadata=dict(et.metadata),
    )


def _first_use_templates(key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct rows of ``key`` in order of first use, and each row's template index."""
    if key.shape[0] == 0:
        return np.zeros(0, np.int32), key
    rows = np.ascontiguousarray(key).view(np.dtype((np.void, key.shape[1] * 8))).ravel()
    _, first, inverse = np.unique(rows, return_index=True, return_inverse=True)
    rank_of = np.empty(first.shape[0], dtype=np.int64)
    rank_of[np.argsort(first, kind="stable")] = np.arange(first.shape[0])
    return rank_of[inverse.reshape(-1)].astype(np.int32), key[np.sort(first)]


def read_trace(path: str | Path, rank: int | None = None) -> RankTrace:
    """Read one rank's Chakra ET file; ``rank`` defaults to the one in ``<prefix>.<rank>.et``."""
    path = Path(path)
    if rank is None:
        rank = rank_from_name(path)
        if rank is None:
            raise UserError(
                f"{path}: cannot tell the rank: name the file <prefix>.<rank>.et or pass the rank"
            )
    return to_rank_trace(decode_file(path), rank, path)


def read_header(path: str | Path) -> tuple[str, dict[str, str]]:
    """The schema version and GlobalMetadata attributes of a file."""
    path = Path(path)
    first = _split_messages(_load_bytes(path), path)[0]
    try:
        meta = schema.GlobalMetadata.FromString(first)
    except DecodeError as exc:
        raise UserError(f"{path}: malformed Chakra trace: cannot decode GlobalMetadata: {exc}") from None
    return meta.version, {a.name: _metadata_text(_attr_value(a)) for a in meta.attr}
