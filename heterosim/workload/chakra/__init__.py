"""Chakra ET traces: our wire-compatible schema, a fast writer and a tolerant reader.

Files: one ``<prefix>.<rank>.et`` per rank (varint32-length-delimited GlobalMetadata, then
Nodes) and a ``comm_group.json`` beside them. See ``et_def.proto`` for the schema and
``writer.py`` for the attributes we write.
"""

from heterosim.workload.chakra.expand import expand_nodes, traces_equal
from heterosim.workload.chakra.files import COMM_GROUP_FILE, read_comm_groups, trace_files, write_comm_groups
from heterosim.workload.chakra.reader import rank_from_name, read_header, read_trace
from heterosim.workload.chakra.writer import SCHEMA_VERSION, write_trace

__all__ = [
    "COMM_GROUP_FILE",
    "SCHEMA_VERSION",
    "expand_nodes",
    "rank_from_name",
    "read_comm_groups",
    "read_header",
    "read_trace",
    "trace_files",
    "traces_equal",
    "write_comm_groups",
    "write_trace",
]
