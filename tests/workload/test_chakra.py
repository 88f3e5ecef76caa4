"""Chakra ET layer: schema agreement, round trip, independent decoding, interop, bad files."""

from __future__ import annotations

import gzip
import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from heterosim.cli import main
from heterosim.errors import UserError
from heterosim.workload.chakra import (
    expand_nodes,
    read_comm_groups,
    read_trace,
    schema,
    trace_files,
    traces_equal,
    wire,
    write_comm_groups,
    write_trace,
)
from heterosim.workload.chakra.reader import _split_messages
from heterosim.workload.chakra.synthetic import synthetic_trace
from heterosim.workload.trace import ALL_REDUCE, COMM_COLL_NODE, COMM_RECV_NODE, COMM_SEND_NODE, COMP_NODE

PROTO = Path(schema.__file__).with_name("et_def.proto")
INTEROP = Path(__file__).parent / "data" / "chakra_interop"


def _messages(path: Path) -> list[bytes]:
    return _split_messages(path.read_bytes(), path)


# --- schema: the .proto text and the runtime descriptor agree --------------------------------


def _parse_proto(text: str) -> tuple[dict, dict]:
    """Minimal .proto reader: {message: {field: (type, number, repeated, oneof)}}, enums."""
    text = re.sub(r"//[^\n]*", "", text)
    messages: dict[str, dict] = {}
    enums: dict[str, dict] = {}
    for kind, name, body in re.findall(r"(message|enum)\s+(\w+)\s*\{((?:[^{}]|\{[^{}]*\})*)\}", text):
        if kind == "enum":
            enums[name] = {k: int(v) for k, v in re.findall(r"(\w+)\s*=\s*(\d+);", body)}
            continue
        fields = {}
        oneofs = dict(re.findall(r"oneof\s+(\w+)\s*\{([^{}]*)\}", body))
        in_oneof = {f: o for o, b in oneofs.items() for f in re.findall(r"\w+\s+(\w+)\s*=", b)}
        for rep, ftype, fname, num in re.findall(r"(repeated\s+)?([\w.]+)\s+(\w+)\s*=\s*(\d+);", body):
            fields[fname] = (ftype, int(num), bool(rep), in_oneof.get(fname))
        messages[name] = fields
    return messages, enums


def test_proto_file_and_runtime_descriptor_agree() -> None:
    text = PROTO.read_text()
    assert re.search(r"^package ChakraProtoMsg;", text, re.M)
    assert 'syntax = "proto3";' in text
    messages, enums = _parse_proto(text)
    fdp = schema.chakra_file_descriptor()
    scalar_names = {v: k[5:].lower() for k, v in descriptor_pb2.FieldDescriptorProto.Type.items()}
    runtime = {}
    for msg in fdp.message_type:
        fields = {}
        for f in msg.field:
            ftype = f.type_name.rsplit(".", 1)[-1] if f.type_name else scalar_names[f.type]
            oneof = msg.oneof_decl[f.oneof_index].name if f.HasField("oneof_index") else None
            fields[f.name] = (
                ftype,
                f.number,
                f.label == descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED,
                oneof,
            )
        runtime[msg.name] = fields
    assert messages == runtime
    assert enums == {e.name: {v.name: v.number for v in e.value} for e in fdp.enum_type}
    assert len(messages) == 1 + 15 + 4  # AttributeProto, 15 lists, GlobalMetadata/Node/IOInfo/Tensor


@pytest.mark.skipif(shutil.which("protoc") is None, reason="protoc not installed")
def test_proto_file_compiles_to_the_runtime_descriptor(tmp_path: Path) -> None:
    out = tmp_path / "set.pb"
    subprocess.run(
        ["protoc", f"--proto_path={PROTO.parent}", f"--descriptor_set_out={out}", PROTO.name], check=True
    )
    compiled = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file[0]
    ours = schema.chakra_file_descriptor()
    strip = {"json_name"}
    for a, b in zip(compiled.message_type, ours.message_type, strict=True):
        assert a.name == b.name
        for fa, fb in zip(a.field, b.field, strict=True):
            for name in ("name", "number", "type", "label", "type_name"):
                if name not in strip:
                    assert getattr(fa, name) == getattr(fb, name), (a.name, fa.name, name)


# --- wire encoder ----------------------------------------------------------------------------


def test_varints_match_protobuf_encoding() -> None:
    values = np.array(
        [0, 1, 127, 128, 300, 16383, 16384, 2**31 - 1, 2**35, 2**62, -1, -2, -(2**31), -(2**63)],
        dtype=np.int64,
    )
    encoded = wire.varints(values)
    rows = wire.split_rows(encoded)
    for value, row in zip(values.tolist(), rows):
        reference = schema.AttributeProto(int64_val=value).SerializeToString()
        assert reference == b"\x48" + row
    assert (
        wire.decimals(np.array([0, 9, 10, 12345, 10**18])).data.tobytes() == b"0910123451000000000000000000"
    )


# --- round trip ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    trace = synthetic_trace(3000, rank=3)
    trace.check()
    path = tmp_path_factory.mktemp("et") / "trace.3.et"
    write_trace(trace, path, metadata={"experiment": "unit"})
    return path, trace


def test_round_trip_reconstructs_the_trace(written) -> None:
    path, trace = written
    back = read_trace(path)
    back.check()
    assert back.rank == 3 and back.gpu_type == "H100-SXM"
    assert back.metadata == {"model": "synthetic", "experiment": "unit"}
    assert not traces_equal(trace, back)  # metadata differs: the file has one more key
    back.metadata.pop("experiment")
    assert traces_equal(trace, back)
    a, b = expand_nodes(trace), expand_nodes(back)
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)
    assert len(back.templates) == len(trace.templates)
    # A second pass is byte-identical.
    again = path.with_name("again.3.et")
    write_trace(back, again, metadata={"experiment": "unit"})
    assert again.read_bytes() == path.read_bytes()


def test_fast_encoder_bytes_equal_the_protobuf_serializer(written) -> None:
    path, _ = written
    messages = _messages(path)
    assert schema.GlobalMetadata.FromString(messages[0]).version == "1.0.0"
    for i, blob in enumerate(messages[1:]):
        node = schema.Node.FromString(blob)
        assert node.id == i
        assert node.SerializeToString(deterministic=True) == blob


def _independent_classes() -> dict[str, type]:
    """Chakra messages rebuilt here from the field table in heterosim/workload/chakra/et_def.proto."""
    t = descriptor_pb2.FieldDescriptorProto
    fdp = descriptor_pb2.FileDescriptorProto(name="md_table.proto", package="md", syntax="proto3")
    scalar = {
        "double": t.TYPE_DOUBLE,
        "float": t.TYPE_FLOAT,
        "int32": t.TYPE_INT32,
        "int64": t.TYPE_INT64,
        "uint32": t.TYPE_UINT32,
        "uint64": t.TYPE_UINT64,
        "sint32": t.TYPE_SINT32,
        "sint64": t.TYPE_SINT64,
        "fixed32": t.TYPE_FIXED32,
        "fixed64": t.TYPE_FIXED64,
        "sfixed32": t.TYPE_SFIXED32,
        "sfixed64": t.TYPE_SFIXED64,
        "bool": t.TYPE_BOOL,
        "string": t.TYPE_STRING,
        "bytes": t.TYPE_BYTES,
    }
    # "kind | scalar field | list field" rows of the md table
    table = [
        ("double", 3, 4),
        ("float", 5, 6),
        ("int32", 7, 8),
        ("int64", 9, 10),
        ("uint32", 11, 12),
        ("uint64", 13, 14),
        ("sint32", 15, 16),
        ("sint64", 17, 18),
        ("fixed32", 19, 20),
        ("fixed64", 21, 22),
        ("sfixed32", 23, 24),
        ("sfixed64", 25, 26),
        ("bool", 27, 28),
        ("string", 29, 30),
        ("bytes", 31, 32),
    ]
    attr = fdp.message_type.add(name="Attr")
    attr.field.add(name="name", number=1, type=t.TYPE_STRING, label=t.LABEL_OPTIONAL)
    attr.oneof_decl.add(name="value")
    for kind, sn, ln in table:
        attr.field.add(
            name=f"{kind}_val", number=sn, type=scalar[kind], label=t.LABEL_OPTIONAL, oneof_index=0
        )
        attr.field.add(
            name=f"{kind}_list",
            number=ln,
            type=t.TYPE_MESSAGE,
            type_name=f".md.L_{kind}",
            label=t.LABEL_OPTIONAL,
            oneof_index=0,
        )
        lst = fdp.message_type.add(name=f"L_{kind}")
        lst.field.add(name="values", number=1, type=scalar[kind], label=t.LABEL_REPEATED)
    meta = fdp.message_type.add(name="Meta")
    meta.field.add(name="version", number=1, type=t.TYPE_STRING, label=t.LABEL_OPTIONAL)
    meta.field.add(name="attr", number=2, type=t.TYPE_MESSAGE, type_name=".md.Attr", label=t.LABEL_REPEATED)
    node = fdp.message_type.add(name="N")
    for name, number, ftype, label in (
        ("id", 1, t.TYPE_UINT64, t.LABEL_OPTIONAL),
        ("name", 2, t.TYPE_STRING, t.LABEL_OPTIONAL),
        ("type", 3, t.TYPE_INT32, t.LABEL_OPTIONAL),
        ("ctrl_deps", 4, t.TYPE_UINT64, t.LABEL_REPEATED),
        ("data_deps", 5, t.TYPE_UINT64, t.LABEL_REPEATED),
        ("start_time_micros", 6, t.TYPE_UINT64, t.LABEL_OPTIONAL),
        ("duration_micros", 7, t.TYPE_UINT64, t.LABEL_OPTIONAL),
    ):
        node.field.add(name=name, number=number, type=ftype, label=label)
    node.field.add(name="attr", number=10, type=t.TYPE_MESSAGE, type_name=".md.Attr", label=t.LABEL_REPEATED)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    get = getattr(message_factory, "GetMessageClass", None)
    return {
        n: (
            get(pool.FindMessageTypeByName(f"md.{n}"))
            if get
            else message_factory.MessageFactory(pool).GetPrototype(pool.FindMessageTypeByName(f"md.{n}"))
        )
        for n in ("Meta", "N")
    }


def _attrs(node) -> dict[str, tuple[str, object]]:
    out = {}
    for a in node.attr:
        kind = a.WhichOneof("value")
        value = getattr(a, kind)
        out[a.name] = (kind, tuple(value.values) if kind.endswith("_list") else value)
    return out


def test_independent_schema_sees_the_same_nodes_and_attribute_types(written) -> None:
    path, trace = written
    classes = _independent_classes()
    messages = _messages(path)
    assert classes["Meta"].FromString(messages[0]).version == "1.0.0"
    nodes = [classes["N"].FromString(b) for b in messages[1:]]
    assert len(nodes) == len(trace)
    e = expand_nodes(trace)
    rank = trace.rank
    for i, node in enumerate(nodes):
        assert node.id == i and node.type == e["node_type"][i]
        assert list(node.data_deps) == trace.parents(i).tolist()
        assert node.duration_micros == e["duration_ns"][i] // 1000
        a = _attrs(node)
        assert a["is_cpu_op"] == ("bool_val", False)
        assert a["op"] == ("string_val", e["op"][i])
        assert a["phase"] == ("string_val", e["phase"][i])
        assert a["label"] == ("string_val", e["label"][i])
        assert a["dtype"] == ("string_val", e["dtype"][i])
        assert a["gpu_type"] == ("string_val", "H100-SXM")
        assert a["layer"] == ("int64_val", e["layer"][i])
        assert a["micro_batch"] == ("int64_val", e["micro_batch"][i])
        assert a["stage"] == ("int64_val", e["stage"][i])
        assert a["shape"] == ("int64_list", tuple(e["shape"][i]))
        if e["duration_ns"][i]:
            assert a["duration_ns"] == ("uint64_val", e["duration_ns"][i])
        else:
            assert "duration_ns" not in a
        kind = node.type
        if kind == COMP_NODE:
            assert a["num_ops"] == ("int64_val", e["flops"][i])
            assert a["tensor_size"] == ("uint64_val", e["bytes_moved"][i])
        elif kind == COMM_COLL_NODE:
            assert a["comm_type"] == ("int64_val", e["comm_type"][i])
            assert a["comm_size"] == ("int64_val", e["comm_bytes"][i])
            assert a["pg_name"] == ("string_val", str(e["comm_group"][i]))
        else:
            peer = e["peer"][i]
            src, dst = (rank, peer) if kind == COMM_SEND_NODE else (peer, rank)
            assert a["comm_src"] == ("int32_val", src)
            assert a["comm_dst"] == ("int32_val", dst)
            assert a["comm_tag"] == ("int32_val", e["tag"][i])
            assert a["comm_size"] == ("int64_val", e["comm_bytes"][i])
            if e["comm_group"][i] >= 0:
                assert a["pg_name"] == ("string_val", str(e["comm_group"][i]))
    layer, mb = e["layer"][-1], e["micro_batch"][-1]
    assert nodes[-1].name == f"L{layer}.mb{mb}.{e['phase'][-1]}.{e['label'][-1]}"


def test_gzip_and_rank_from_name(written, tmp_path: Path) -> None:
    path, trace = written
    packed = tmp_path / "run.17.et.gz"
    packed.write_bytes(gzip.compress(path.read_bytes()))
    back = read_trace(packed)
    assert back.rank == 17 and len(back) == len(trace)
    with pytest.raises(UserError, match="rank"):
        read_trace(shutil.copy(path, tmp_path / "noname.et"))


# --- traces written by another producer ------------------------------------------------------


def test_interop_all_reduce_microbenchmark() -> None:
    files = trace_files(INTEROP / "all_reduce_4npus_1MB")
    assert sorted(files) == [0, 1, 2, 3]
    for rank, path in files.items():
        trace = read_trace(path)
        trace.check()
        e = expand_nodes(trace)
        assert trace.rank == rank and len(trace) == 1
        assert e["node_type"].tolist() == [COMM_COLL_NODE]
        assert e["comm_type"].tolist() == [ALL_REDUCE]
        assert e["comm_bytes"].tolist() == [1048576]
        assert e["comm_group"].tolist() == [0]  # no pg_name: all ranks
        assert e["op"].tolist() == ["comm"] and e["label"].tolist() == ["all_reduce_4npus_1MB"]
        assert schema.GlobalMetadata.FromString(_messages(path)[0]).version == "0.0.4"


def test_interop_ring_all_reduce_send_recv_chains() -> None:
    files = trace_files(INTEROP / "custom_ring_allreduce_8npus_1MB")
    assert sorted(files) == list(range(8))
    for rank, path in files.items():
        trace = read_trace(path)
        trace.check()
        e = expand_nodes(trace)
        types = e["node_type"]
        send, recv, comp = types == COMM_SEND_NODE, types == COMM_RECV_NODE, types == COMP_NODE
        assert len(trace) == 35 and (send.sum(), recv.sum(), comp.sum()) == (14, 14, 7)
        assert set(e["peer"][send].tolist()) == {(rank + 1) % 8}
        assert set(e["peer"][recv].tolist()) == {(rank - 1) % 8}
        assert set(e["comm_bytes"][send | recv].tolist()) == {131072}
        assert set(e["tag"][send | recv].tolist()) == {0}
        # ring all-reduce moves 2 (n-1)/n of the buffer out of each rank
        assert e["comm_bytes"][send].sum() == 2 * 7 * (1 << 20) // 8
        assert set(e["duration_ns"][comp].tolist()) == {7000}
        assert set(e["op"][comp].tolist()) == {"unknown"}
        # one chain: every node after the first waits for the one before it
        assert trace.dep_ptr.tolist() == [0, *range(35)]
        assert trace.dep_idx.tolist() == list(range(34))
        assert trace.metadata["collective"] == "allreduce"


def _foreign_file(path: Path, nodes: list) -> None:
    blobs = [schema.GlobalMetadata(version="0.0.4").SerializeToString()]
    blobs += [n.SerializeToString() for n in nodes]
    path.write_bytes(b"".join(wire.encode_varint(len(b)) + b for b in blobs))


def test_arbitrary_ids_ctrl_deps_and_reverse_order(tmp_path: Path) -> None:
    a = schema.AttributeProto
    nodes = [
        schema.Node(
            id=900,
            name="last",
            type=COMP_NODE,
            ctrl_deps=[5],
            data_deps=[77],
            attr=[a(name="num_ops", int64_val=10)],
        ),
        schema.Node(
            id=77,
            name="middle",
            type=COMM_COLL_NODE,
            data_deps=[5],
            attr=[
                a(name="comm_type", int64_val=2),
                a(name="comm_size", uint64_val=64),
                a(name="pg_name", string_val="4"),
            ],
        ),
        schema.Node(
            id=5,
            name="first",
            type=COMM_RECV_NODE,
            attr=[a(name="comm_src", int32_val=6), a(name="comm_size", int64_val=8)],
        ),
    ]
    path = tmp_path / "x.2.et"
    _foreign_file(path, nodes)
    trace = read_trace(path)
    trace.check()
    e = expand_nodes(trace)
    assert e["label"].tolist() == ["first", "middle", "last"]
    assert [trace.parents(i).tolist() for i in range(3)] == [[], [0], [1, 0]]
    assert e["peer"].tolist() == [6, -1, -1] and e["tag"].tolist() == [0, -1, -1]
    assert e["comm_bytes"].tolist() == [8, 64, 0] and e["comm_group"].tolist() == [-1, 4, -1]
    assert e["flops"].tolist() == [0, 0, 10]


# --- bad input -------------------------------------------------------------------------------


@pytest.mark.parametrize("damage", ["truncated", "garbage", "empty", "bad_node"])
def test_malformed_files_give_one_line_errors(written, tmp_path: Path, damage: str) -> None:
    path, _ = written
    bad = tmp_path / "bad.0.et"
    blob = path.read_bytes()
    bad.write_bytes(
        {
            "truncated": blob[: len(blob) // 2],
            "garbage": b"this is not a Chakra trace\n" * 3,
            "empty": b"",
            "bad_node": blob[:200] + b"\x05\xff\xff\xff\xff\xff",
        }[damage]
    )
    with pytest.raises(UserError) as info:
        read_trace(bad)
    message = str(info.value)
    assert "\n" not in message and message.startswith(str(bad))


@pytest.mark.parametrize(
    ("nodes", "expect"),
    [
        ([schema.Node(id=1, type=COMP_NODE, data_deps=[9])], "not in the file"),
        ([schema.Node(id=1, type=COMP_NODE), schema.Node(id=1, type=COMP_NODE)], "more than once"),
        (
            [
                schema.Node(id=1, type=COMP_NODE, data_deps=[2]),
                schema.Node(id=2, type=COMP_NODE, data_deps=[1]),
            ],
            "cycle",
        ),
        ([schema.Node(id=1, type=COMM_SEND_NODE)], "comm_dst"),
        (
            [
                schema.Node(
                    id=1, type=COMM_COLL_NODE, attr=[schema.AttributeProto(name="pg_name", string_val="tp")]
                )
            ],
            "pg_name",
        ),
    ],
)
def test_inconsistent_graphs_are_user_errors(tmp_path: Path, nodes: list, expect: str) -> None:
    path = tmp_path / "g.0.et"
    _foreign_file(path, nodes)
    with pytest.raises(UserError, match=expect):
        read_trace(path)


def test_cli_reports_a_bad_trace_with_exit_2(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "bad.0.et"
    bad.write_bytes(b"\xff" * 20)
    assert main(["trace", "show", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(bad) in err


# --- comm_group.json and listing -------------------------------------------------------------


def test_comm_groups_round_trip_and_errors(tmp_path: Path) -> None:
    groups = {0: [0, 1, 2, 3], 5: [1, 3]}
    path = tmp_path / "comm_group.json"
    write_comm_groups(groups, path)
    assert json.loads(path.read_text()) == {"0": [0, 1, 2, 3], "5": [1, 3]}
    assert read_comm_groups(path) == groups
    path.write_text('{"tp": [0, 1]}')
    with pytest.raises(UserError, match="tp: a group id must be an integer"):
        read_comm_groups(path)
    path.write_text('{"1": [0, "x"]}')
    with pytest.raises(UserError, match="1: expected a list"):
        read_comm_groups(path)


def test_trace_files_lists_ranks(tmp_path: Path) -> None:
    for name in ("run.0.et", "run.10.et", "run.2.et.gz", "comm_group.json", "notes.txt"):
        (tmp_path / name).write_bytes(b"")
    assert {r: p.name for r, p in trace_files(tmp_path).items()} == {
        0: "run.0.et",
        2: "run.2.et.gz",
        10: "run.10.et",
    }
    (tmp_path / "other.2.et").write_bytes(b"")
    with pytest.raises(UserError, match="two traces for rank 2"):
        trace_files(tmp_path)


# --- CLI -------------------------------------------------------------------------------------


def test_cli_show_table_and_json(capsys) -> None:
    path = INTEROP / "custom_ring_allreduce_8npus_1MB" / "custom_allreduce.5.et"
    assert main(["trace", "show", str(path), "--limit", "3"]) == 0
    out = capsys.readouterr().out
    assert "SEND" in out and "peer 6" in out and "32 more nodes" in out
    assert main(["trace", "show", str(path), "--json", "--limit", "0"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["rank"] == 5 and data["node_count"] == 35 and len(data["nodes"]) == 35
    assert data["node_types"] == {"COMP": 7, "SEND": 14, "RECV": 14}
    assert data["nodes"][1] == {
        "id": 1,
        "type": "RECV",
        "name": "COMM_RECV_NODE_tb0_step1",
        "op": "comm",
        "phase": "fwd",
        "layer": -1,
        "micro_batch": -1,
        "stage": 0,
        "comm_bytes": 131072,
        "peer": 4,
        "tag": 0,
        "deps": [0],
    }
