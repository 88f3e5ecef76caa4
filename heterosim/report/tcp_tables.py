"""CSV tables of the socket transport's TCP connections (packet fidelity with socket hosts).

``tcp_connections.csv``: one row per TCP connection (NCCL's control socket is ``socket`` 0,
its data sockets 1..n), with the NICs it joins, the bytes it carried, its largest and final
congestion window, retransmitted segments, retransmission timeouts and fast recoveries.
``cwnd.csv``: the congestion-window samples (every decrease, increases at the sampling period).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from heterosim.report.numeric_csv import write_numeric_csv

STREAM_COLUMNS = (
    "first_flow",
    "src_node",
    "dst_node",
    "socket",
    "bytes",
    "received_bytes",
    "max_cwnd_bytes",
    "last_cwnd_bytes",
    "retransmits",
    "timeouts",
    "fast_recoveries",
)


def write_tcp_tables(folder: Path, tcp: Mapping[str, Any], node_names: list[str]) -> None:
    """Write tcp_connections.csv and cwnd.csv for ``tcp`` (``heterosim.engine.packet.tcp_stats``)."""
    streams = tcp["streams"]
    n = len(streams["first_flow"])
    ids = np.arange(n, dtype=np.int64)
    columns = [ids] + [np.asarray(streams[key], dtype=np.int64) for key in STREAM_COLUMNS]
    write_numeric_csv(folder / "tcp_connections.csv", ["stream", *STREAM_COLUMNS], columns)
    if node_names:  # a readable name per connection, beside the numeric table
        names = [
            f"{node_names[int(a)]}->{node_names[int(b)]}"
            for a, b in zip(streams["src_node"], streams["dst_node"])
        ]
        (folder / "tcp_connection_names.csv").write_text(
            "stream,path\r\n" + "".join(f"{i},{name}\r\n" for i, name in enumerate(names))
        )
    cwnd = tcp["cwnd"]
    write_numeric_csv(
        folder / "cwnd.csv",
        ["time_s", "stream", "cwnd_bytes"],
        [
            np.asarray(cwnd["time_ns"], dtype=np.int64) * 1e-9,
            np.asarray(cwnd["stream"], dtype=np.int64),
            np.asarray(cwnd["cwnd_bytes"], dtype=np.int64),
        ],
    )
