"""Chakra traces from other tools: values outside physical ranges are one-line errors."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import pytest

from heterosim.errors import UserError
from heterosim.workload.chakra import read_trace
from heterosim.workload.chakra.schema import AttributeProto, GlobalMetadata, Node


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _write(path: Path, nodes: list) -> Path:
    messages = [GlobalMetadata(version="0.0.4").SerializeToString()]
    messages += [node.SerializeToString() for node in nodes]
    path.write_bytes(b"".join(_varint(len(m)) + m for m in messages))
    return path


def _comp(node_id: int, micros: int = 5, node_type: int = 4) -> Node:
    return Node(id=node_id, name=f"n{node_id}", type=node_type, duration_micros=micros)


def test_a_valid_file_reads(tmp_path):
    trace = read_trace(_write(tmp_path / "t.0.et", [_comp(1), _comp(2)]))
    assert len(trace) == 2


@pytest.mark.parametrize(
    "nodes, fragment",
    [
        ([_comp(1, micros=2**63)], "longer than one day"),  # * 1000 ns would wrap to 0
        ([_comp(1, micros=2**64 - 1)], "longer than one day"),
        ([_comp(1, node_type=42)], "unknown node type 42"),
        ([_comp(1, node_type=0)], "unknown node type 0"),
    ],
)
def test_out_of_range_nodes(tmp_path, nodes, fragment):
    with pytest.raises(UserError, match=fragment):
        read_trace(_write(tmp_path / "t.0.et", nodes))


def test_communication_size_above_range(tmp_path):
    node = Node(id=1, name="ar", type=7, duration_micros=0)
    node.attr.append(AttributeProto(name="comm_size", int64_val=1 << 50))
    with pytest.raises(UserError, match="comm_size: expected an integer in 0..1099511627776"):
        read_trace(_write(tmp_path / "t.0.et", [node]))


def test_fifo_and_gzip_bomb_are_refused(tmp_path, monkeypatch):
    fifo = tmp_path / "f.0.et"
    os.mkfifo(fifo)
    with pytest.raises(UserError, match="not a regular file"):
        read_trace(fifo)
    import heterosim.workload.chakra.reader as reader

    monkeypatch.setattr(reader, "MAX_TRACE_BYTES", 1 << 20)
    bomb = tmp_path / "b.0.et"
    bomb.write_bytes(gzip.compress(b"\0" * (4 << 20)))
    with pytest.raises(UserError, match="decompresses to more than"):
        read_trace(bomb)
