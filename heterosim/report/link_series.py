"""Per-link-direction throughput and per-port queue depth over time, from the engine's samples.

Both network models sample every ``simulation.sample_interval`` of simulated time:

* packet: the ``queue`` table, one row per sampled port (fabric ports and NIC uplinks) and sample:
  queue depth and cumulative bytes sent on the wire (headers included);
* flow: the ``link`` table, a row where a link direction's cumulative payload bytes changed since
  its previous sample (the fluid model has rates, not queues), for the directions of each kind
  that carried the most (``heterosim.engine.network_model.LINK_SERIES_KEEP``), with every sample time
  (``sample_time_ns``) and every direction's total (``direction_bytes``).

Port / direction ``2*link + d`` is link ``link`` in direction a->b (d = 0) or b->a (d = 1).
Throughput over a sample interval is the growth of the cumulative bytes divided by its length,
so it is the interval's mean, exact for both models.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from heterosim.engine.topology import LINK_KIND_NAMES

NETWORK_KINDS = [LINK_KIND_NAMES.index("access"), LINK_KIND_NAMES.index("fabric")]
ROW_CHUNK = 1 << 20  # sample rows converted at a time: a few MB of temporaries, not the table's size


@dataclass(frozen=True)
class LinkRates:
    """Mean throughput of some link directions over consecutive sample intervals."""

    time_ns: np.ndarray  # (S + 1,) interval bounds: interval s is [time_ns[s], time_ns[s + 1])
    direction: np.ndarray  # (D,) 2*link + d
    names: list[str]  # (D,) "a->b"
    capacity_bps: np.ndarray  # (D,) link rate
    network: np.ndarray  # (D,) bool: a NIC or switch link (else NVLink / PCIe inside a host)
    rate_bps: np.ndarray  # (S, D) mean rate over each interval
    bytes_kind: str  # "wire" (packet: headers included) or "payload" (flow)

    @property
    def utilization(self) -> np.ndarray:
        """(S, D) rate / capacity."""
        return np.divide(
            self.rate_bps, self.capacity_bps, out=np.zeros_like(self.rate_bps), where=self.capacity_bps > 0
        )


@dataclass(frozen=True)
class PortQueues:
    """Queue depth at the egress of some ports at each sample time."""

    time_ns: np.ndarray  # (S,)
    port: np.ndarray  # (P,)
    names: list[str]  # (P,) "a->b", the queue sits at a's egress towards b
    depth_bytes: np.ndarray  # (S, P)


def direction_names(topo: Any, directions: np.ndarray) -> list[str]:
    """``a->b`` node names of link directions ``2*link + d``."""
    out = []
    for direction in np.asarray(directions, dtype=np.int64).tolist():
        link, d = divmod(direction, 2)
        a, b = topo.node_name[topo.link_a[link]], topo.node_name[topo.link_b[link]]
        out.append(f"{a}->{b}" if d == 0 else f"{b}->{a}")
    return out


def link_rates(
    series: dict[str, Any], topo: Any, network_top: int = 16, host_top: int = 8
) -> LinkRates | None:
    """Throughput over time of the ``network_top`` NIC/switch link directions and the
    ``host_top`` NVLink/PCIe directions that carried the most bytes, in that order (None if the
    run recorded no link samples)."""
    queue, link = series.get("queue"), series.get("link")
    if queue is not None and len(queue.get("time_ns", [])) and "tx_bytes" in queue:
        table, kind = queue, "wire"
        time_ns, direction, cumulative = table["time_ns"], table["port"], table["tx_bytes"]
    elif link is not None and len(link.get("time_ns", [])):
        table, kind = link, "payload"
        time_ns, direction, cumulative = table["time_ns"], table["direction"], table["bytes"]
    else:
        return None
    if "direction_bytes" in table:  # the fluid table keeps the busiest directions' rows only
        if max(network_top, host_top) > int(table["kept_per_kind"]):
            raise ValueError(f"link series: only {table['kept_per_kind']} directions per kind kept")
        total = np.asarray(table["direction_bytes"], dtype=np.float64)
    else:
        direction = np.asarray(direction, dtype=np.int64)
        total = np.zeros(int(direction.max()) + 1)
        np.maximum.at(total, direction, np.asarray(cumulative, dtype=np.float64))
    carried = np.flatnonzero(total > 0)
    if not carried.size:
        return None
    on_network = np.isin(np.asarray(topo.link_kind)[carried // 2], NETWORK_KINDS)
    by_bytes = [
        part[np.argsort(-total[part], kind="stable")[:count]]
        for part, count in ((carried[on_network], network_top), (carried[~on_network], host_top))
    ]
    listed = np.concatenate(by_bytes)
    chosen = np.sort(listed)
    column = np.empty(chosen.size, np.int64)  # a chosen direction's column: the listed order
    column[np.searchsorted(chosen, listed)] = np.arange(listed.size)
    times = (
        np.asarray(table["sample_time_ns"], np.int64)
        if "sample_time_ns" in table
        else np.unique(np.asarray(time_ns, dtype=np.int64))
    )
    if times[0] > 0:
        times = np.concatenate([[0], times])
    # the fluid table has rows only where bytes moved: close the series at the run's last sample
    last = series.get("time_ns")
    if last is not None and len(last) and int(last[-1]) > times[-1]:
        times = np.concatenate([times, [int(last[-1])]])
    matrix = np.zeros((times.size, chosen.size))
    for lo in range(0, len(time_ns), ROW_CHUNK):  # a chunk of rows at a time: no copy of the table
        part = np.asarray(direction[lo : lo + ROW_CHUNK], dtype=np.int64)
        rows = np.isin(part, chosen)
        at = np.searchsorted(times, np.asarray(time_ns[lo : lo + ROW_CHUNK], dtype=np.int64)[rows])
        matrix[at, column[np.searchsorted(chosen, part[rows])]] = np.asarray(
            cumulative[lo : lo + ROW_CHUNK], dtype=np.float64
        )[rows]
    np.maximum.accumulate(matrix, axis=0, out=matrix)  # cumulative bytes never fall: forward fill
    seconds = np.diff(times) * 1e-9
    _difference_in_place(matrix)  # rows 1: hold the growth over each interval (no second matrix)
    rate = matrix[1:]
    rate *= 8.0
    rate /= seconds[:, None]
    capacity = np.asarray(topo.link_rate_bps, dtype=np.float64)[listed // 2]
    network = np.isin(np.asarray(topo.link_kind)[listed // 2], NETWORK_KINDS)
    return LinkRates(times, listed, direction_names(topo, listed), capacity, network, rate, kind)


def _difference_in_place(matrix: np.ndarray, cells: int = ROW_CHUNK) -> None:
    """``matrix[1:] = np.diff(matrix, axis=0)`` in place (row 0 kept): blocks of about ``cells``
    values from the last row, so each block reads rows not yet changed (temporaries of a block,
    not of the matrix)."""
    block = max(cells // max(matrix.shape[1], 1), 1)
    for hi in range(matrix.shape[0], 1, -block):
        lo = max(hi - block, 1)
        matrix[lo:hi] -= matrix[lo - 1 : hi - 1]


def port_queues(series: dict[str, Any], topo: Any, top: int = 8) -> PortQueues | None:
    """Queue depth over time of the ``top`` ports with the deepest queue (packet fidelity; None
    if no queue was sampled or none ever held a byte)."""
    table = series.get("queue")
    if table is None or not len(table.get("time_ns", [])):
        return None
    time_ns = np.asarray(table["time_ns"], dtype=np.int64)
    port = np.asarray(table["port"], dtype=np.int64)
    depth = np.asarray(table["bytes"], dtype=np.float64)
    peak = np.zeros(int(port.max()) + 1)
    np.maximum.at(peak, port, depth)
    queued = np.flatnonzero(peak > 0)
    if not queued.size:
        return None
    chosen = np.sort(queued[np.argsort(-peak[queued], kind="stable")[:top]])
    times = np.unique(time_ns)
    matrix = np.zeros((times.size, chosen.size))
    rows = np.isin(port, chosen)
    matrix[np.searchsorted(times, time_ns[rows]), np.searchsorted(chosen, port[rows])] = depth[rows]
    return PortQueues(times, chosen, direction_names(topo, chosen), matrix)
