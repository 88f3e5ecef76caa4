"""Netbench results: results.json, CSV tables and time series, the terminal summary.

Input is the dict returned by a network run (``heterosim.engine.packet.run_flows`` or
``heterosim.engine.fluid.run_flows_fluid``): per-flow arrays under ``"flows"``, packet-level
counters, per-port arrays and sampled series. Output follows the netbench contract in docs/results.md.

Jain's fairness index (``fairness_jain``)
    Compared flows ``C``: the scenario's ``fairness_flows``, or every flow. The interval during
    which all of them are active together is ``[t0, t1]`` with ``t0 = max(start_i)`` and
    ``t1 = min(end_i)`` over ``C`` (an unfinished flow ends at the end of the simulation). The
    window is its second half, ``[(t0 + t1) / 2, t1]``. Each flow's throughput ``x_i`` is its
    goodput in the window, measured from the sampled cumulative acknowledged bytes
    (``series.rate.acked_bytes``) between its first and last sample in the window; when a series
    has no acknowledged bytes, ``x_i`` is the mean of its sampled sending rates (``rate_bps``, the
    congestion control's pacing rate) in the window. ``J = (sum x_i)^2 / (n * sum x_i^2)``.
    ``J`` is ``null`` (with ``fairness_note`` saying why) when there is no rate series, when the
    flows are never all active together, or when some flow has too few samples in the window
    (window shorter than about two sample intervals).

The sending rate of a window-less CC (``none``) stays at line rate even while PFC pauses or drops
hold its goodput down, which is why fairness is measured on acknowledged bytes.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from heterosim import __version__
from heterosim.config.network_model import network_model
from heterosim.config.scenario import ScenarioConfig
from heterosim.engine.topology import Topology
from heterosim.report.tcp_tables import write_tcp_tables
from heterosim.report.trims import trim_counters

# each flow of results.json's flows[] and each row of flows.csv, in order (docs/results.md)
FLOW_COLUMNS = (
    *("id", "src", "dst", "bytes", "start_s", "end_s", "fct_s", "goodput_Gbps", "retransmits"),
    *("out_of_order", "max_reorder_depth"),
)
COUNTER_KEYS = ("flows", "bytes", "drops", "retransmits", "pfc_pause_frames", "ecn_marks", "cnps")
PORT_KEYS = (
    "bytes_sent",
    "max_queue_bytes",
    "mean_queue_bytes",
    "pause_sent",
    "pause_received",
    "paused_ns",
    "ecn_marks",
    "drops",
)


def jain_index(values: np.ndarray) -> float | None:
    """Jain's fairness index ``(sum x)^2 / (n * sum x^2)``; None for no values or all zeros."""
    x = np.asarray(values, dtype=np.float64)
    if x.size == 0:
        return None
    square_sum = float(np.sum(x * x))
    if square_sum <= 0.0:
        return None
    return float(np.sum(x) ** 2 / (x.size * square_sum))


def fairness_window(start_ns: np.ndarray, end_ns: np.ndarray, sim_end_ns: int) -> tuple[int, int] | None:
    """Second half of the interval during which all the given flows are active (None if empty)."""
    if len(start_ns) == 0:
        return None
    ends = np.where(np.asarray(end_ns) < 0, sim_end_ns, end_ns)
    t0, t1 = int(np.max(start_ns)), int(np.min(ends))
    if t1 <= t0:
        return None
    return (t0 + t1) // 2, t1


def fairness_from_series(
    flow_ids: np.ndarray,
    start_ns: np.ndarray,
    end_ns: np.ndarray,
    sim_end_ns: int,
    rate_series: Mapping[str, Any] | None,
) -> tuple[float | None, tuple[int, int] | None, str]:
    """Jain's index over the window (module docstring) with the window and a note."""
    window = fairness_window(start_ns, end_ns, sim_end_ns)
    if window is None:
        return None, None, "the compared flows are never all active at the same time"
    if not rate_series or len(rate_series.get("time_ns", ())) == 0:
        return None, window, "no per-flow rate series (sampling off or not provided by this fidelity)"
    times = np.asarray(rate_series["time_ns"], dtype=np.int64)
    flows = np.asarray(rate_series["flow"], dtype=np.int64)
    rates = np.asarray(rate_series["rate_bps"], dtype=np.float64)
    acked = rate_series.get("acked_bytes")
    acked = None if acked is None or len(acked) != len(times) else np.asarray(acked, np.float64)
    in_window = (times >= window[0]) & (times <= window[1])
    values = []
    for fid in np.asarray(flow_ids, dtype=np.int64):
        sel = np.flatnonzero(in_window & (flows == fid))
        if acked is not None:
            if len(sel) < 2 or times[sel[-1]] == times[sel[0]]:
                return None, window, f"flow {int(fid)} has fewer than 2 samples in the window"
            order = sel[np.argsort(times[sel], kind="stable")]
            first, last = order[0], order[-1]
            values.append((acked[last] - acked[first]) * 8e9 / (times[last] - times[first]))
        else:
            if len(sel) == 0:
                return None, window, f"flow {int(fid)} has no rate sample in the window"
            values.append(float(rates[sel].mean()))
    jain = jain_index(np.array(values))
    return jain, window, "" if jain is not None else "all compared rates are zero"


def goodput_series(rate_series: Mapping[str, Any] | None) -> np.ndarray:
    """Per-sample goodput (bit/s) from cumulative acknowledged bytes: the bytes acknowledged since
    the flow's previous sample over the time between them (NaN at a flow's first sample, or when
    the series has no acknowledged bytes). Aligned with the samples of ``rate_series``."""
    if not rate_series or rate_series.get("acked_bytes") is None:
        n = len(rate_series.get("time_ns", ())) if rate_series else 0
        return np.full(n, np.nan)
    times = np.asarray(rate_series["time_ns"], dtype=np.int64)
    flows = np.asarray(rate_series["flow"], dtype=np.int64)
    acked = np.asarray(rate_series["acked_bytes"], dtype=np.float64)
    order = np.lexsort((times, flows))
    goodput = np.full(len(times), np.nan)
    if len(order) > 1:
        same = flows[order[1:]] == flows[order[:-1]]
        dt = (times[order[1:]] - times[order[:-1]]).astype(np.float64)
        ok = same & (dt > 0)
        rate = np.divide(
            (acked[order[1:]] - acked[order[:-1]]) * 8e9, dt, out=np.zeros(len(dt)), where=dt > 0
        )
        goodput[order[1:][ok]] = rate[ok]
    return goodput


def _arr(mapping: Mapping[str, Any], key: str, n: int, dtype: Any, fill: Any = 0) -> np.ndarray:
    value = mapping.get(key)
    if value is None:
        return np.full(n, fill, dtype=dtype)
    return np.asarray(value, dtype=dtype)


def _num(value: float | None, digits: int = 12) -> float | None:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return None
    return float(f"{value:.{digits}g}")


def flow_records(run: Mapping[str, Any], scenario: ScenarioConfig) -> list[dict[str, Any]]:
    """The ``flows`` list of results.json (seconds, Gb/s; unfinished flows have null times)."""
    flows = run["flows"]
    n = len(scenario.flows)
    ids = _arr(flows, "id", n, np.int64) if "id" in flows else np.arange(n)
    start = _arr(flows, "start_ns", n, np.int64)
    end = _arr(flows, "end_ns", n, np.int64, -1)
    size = _arr(flows, "bytes", n, np.int64)
    retx = _arr(flows, "retransmits", n, np.int64)
    # reordering seen by the receivers (packet fidelity; the fluid model has none)
    ooo = _arr(flows, "out_of_order", n, np.int64)
    depth = _arr(flows, "max_reorder_depth", n, np.int64)
    records = []
    for i in range(len(ids)):
        done = end[i] >= 0
        fct_ns = int(end[i] - start[i]) if done else None
        goodput = size[i] * 8 / fct_ns if fct_ns is not None and fct_ns > 0 else None
        values = (
            int(ids[i]),
            int(scenario.flows.src[ids[i]]),
            int(scenario.flows.dst[ids[i]]),
            int(size[i]),
            start[i] / 1e9,
            end[i] / 1e9 if done else None,
            fct_ns / 1e9 if fct_ns is not None else None,
            _num(goodput, 9),
            int(retx[i]),
            int(ooo[i]),
            int(depth[i]),
        )
        records.append(dict(zip(FLOW_COLUMNS, values, strict=True)))
    return records


def network_counters(run: Mapping[str, Any], scenario: ScenarioConfig) -> dict[str, int]:
    """The ``network`` counters of results.json; a fluid run has no packets (zeros)."""
    counters = run.get("counters") or run.get("network") or {}
    out = {key: int(counters.get(key, 0)) for key in COUNTER_KEYS}
    if "trims" in counters:  # network.trimming only: data packets cut to their header
        out["trims"] = int(counters["trims"])
    if not counters:
        out["flows"] = len(scenario.flows)
        end = np.asarray(run["flows"]["end_ns"])
        out["bytes"] = int(np.asarray(run["flows"]["bytes"], dtype=np.int64)[end >= 0].sum())
    return out


def print_warnings(warnings: Any) -> None:
    """One ``heterosim: warning:`` line on stderr per warning."""
    import sys

    for warning in warnings:
        print(f"heterosim: warning: {warning}", file=sys.stderr)


def build_results(
    scenario: ScenarioConfig, run: Mapping[str, Any], fidelity: str, topology: Topology | None = None
) -> dict[str, Any]:
    """results.json for one netbench run (contract keys plus scenario echo and sim info).

    With ``topology``, ``summary.busiest_port`` names the port with the highest utilization
    (bytes sent over link capacity during the whole run)."""
    flows = flow_records(run, scenario)
    sim_end_ns = int(run.get("sim_end_ns", scenario.simulation.stop_ns))
    compared = np.array(scenario.fairness_flows if scenario.fairness_flows else range(len(flows)))
    start = np.array([flows[i]["start_s"] for i in compared]) * 1e9
    end = np.array([-1 if flows[i]["end_s"] is None else flows[i]["end_s"] * 1e9 for i in compared])
    series = run.get("series") or {}
    jain, window, note = fairness_from_series(
        compared, start.round().astype(np.int64), end.round().astype(np.int64), sim_end_ns, series.get("rate")
    )
    injected = scenario.flows.total_bytes
    per_flow_delivered = run["flows"].get("bytes_delivered")
    if per_flow_delivered is not None:  # counted by the receivers (packet model)
        delivered = int(np.sum(np.asarray(per_flow_delivered, dtype=np.int64)))
    else:
        delivered = sum(f["bytes"] for f in flows if f["end_s"] is not None)
    fcts = [f["fct_s"] for f in flows if f["fct_s"] is not None]
    results: dict[str, Any] = {
        "name": scenario.name,
        "flows": flows,
        "fairness_jain": _num(jain, 9),
        "fairness_window_s": [window[0] / 1e9, window[1] / 1e9] if window else None,
        "fairness_flows": [int(i) for i in compared],
        "network": network_counters(run, scenario),
        "summary": {
            "injected_bytes": injected,
            "delivered_bytes": int(delivered),
            "unfinished_flows": sum(1 for f in flows if f["end_s"] is None),
            "fct_mean_s": _num(float(np.mean(fcts))) if fcts else None,
            "fct_max_s": _num(float(np.max(fcts))) if fcts else None,
            "max_queue_bytes": _max_port(run, "max_queue_bytes"),
        },
        "scenario": {
            "source": scenario.source,
            "cc": scenario.network.cc,
            "pfc": scenario.network.pfc,
            "config": scenario.resolved,
        },
        "sim": {
            "fidelity": fidelity,
            "wall_s": round(float(run.get("wall_s", 0.0)), 6),
            "events": int(run.get("events", 0)),
            "sim_end_s": sim_end_ns / 1e9,
            "stop_s": scenario.simulation.stop_ns / 1e9,
            "seed": scenario.simulation.seed,
            "version": __version__,
        },
        "warnings": list(getattr(scenario, "warnings", ())),
    }
    if network_model(fidelity).accelerates:
        mode = scenario.simulation.packet_acceleration
        accel = {"mode": mode, **(run.get("fast_forward") or {})}
        if "memo" not in mode.split("+"):
            accel.pop("memo", None)
        results["sim"]["packet_acceleration"] = accel
    if note:
        results["fairness_note"] = note
    if run.get("tcp"):  # socket hosts: TCP congestion control (cwnd, retransmissions)
        results["network"]["tcp"] = dict(run["tcp"]["summary"])
    if topology is not None:
        ports = ports_of_run(run, topology)
        # network.trimming: trims per switch beside the total (heterosim.report.trims)
        results["network"].update(trim_counters(results["network"], ports, topology))
        utilization = port_utilization(ports, topology, sim_end_ns / 1e9)
        if len(utilization):
            busiest = int(np.argmax(utilization))
            results["summary"]["busiest_port"] = {
                "name": port_names(run, topology)[busiest],
                "utilization": round(float(utilization[busiest]), 6),
            }
    return results


def _max_port(run: Mapping[str, Any], key: str) -> int | None:
    ports = run.get("ports")
    if not ports or len(ports.get(key, ())) == 0:
        return None
    return int(np.max(np.asarray(ports[key])))


def ports_of_run(run: Mapping[str, Any], topology: Topology) -> dict[str, np.ndarray]:
    """Per-port arrays: the packet model's ``ports``, or, for a fluid run, its per link-direction
    ``links`` (bytes carried; no queues, pauses, marks or drops exist in that model)."""
    if run.get("ports"):
        return dict(run["ports"])
    links = run.get("links")
    if not links:
        return {}
    link = np.asarray(links["link"], dtype=np.int64)
    direction = np.asarray(links["direction"], dtype=np.int64)
    node = np.where(direction == 0, topology.link_a[link], topology.link_b[link])
    ports: dict[str, np.ndarray] = {"node": node, "link": link, "direction": direction}
    for key in PORT_KEYS:
        ports[key] = np.zeros(len(link), dtype=np.int64)
    ports["bytes_sent"] = np.asarray(links["bytes"], dtype=np.int64)
    return ports


def port_utilization(ports: Mapping[str, Any], topology: Topology, sim_end_s: float) -> np.ndarray:
    """Bytes sent on each port (wire bytes for the packet model) over what its link could carry
    in the whole run, ``bytes_sent * 8 / (rate * sim_end)``."""
    if not ports or len(ports.get("link", ())) == 0 or sim_end_s <= 0:
        return np.zeros(0)
    rate = topology.link_rate_bps[np.asarray(ports["link"], dtype=np.int64)]
    return np.asarray(ports["bytes_sent"], dtype=np.float64) * 8 / (rate * sim_end_s)


def port_names(run: Mapping[str, Any], topology: Topology) -> list[str]:
    """``node->neighbour`` for every port in ``run["ports"]`` (the node that sends on the link)."""
    ports = ports_of_run(run, topology)
    nodes = np.asarray(ports.get("node", ()), dtype=np.int64)
    links = np.asarray(ports.get("link", ()), dtype=np.int64)
    return [
        f"{topology.node_name[n]}->{topology.node_name[topology.other_end(int(link), int(n))]}"
        for n, link in zip(nodes, links)
    ]


def comparison_row(cc: str, results: Mapping[str, Any]) -> dict[str, Any]:
    """One row of the CC comparison table."""
    summary, net = results["summary"], results["network"]
    return {
        "cc": cc,
        "fct_mean_s": summary["fct_mean_s"],
        "fct_max_s": summary["fct_max_s"],
        "fairness_jain": results["fairness_jain"],
        "max_queue_bytes": summary["max_queue_bytes"],
        "pfc_pause_frames": net["pfc_pause_frames"],
        "drops": net["drops"],
        "retransmits": net["retransmits"],
        "ecn_marks": net["ecn_marks"],
        "cnps": net["cnps"],
        "busiest_port_utilization": (summary.get("busiest_port") or {}).get("utilization"),
        "unfinished_flows": summary["unfinished_flows"],
    }


def write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=2, sort_keys=False) + "\n")


def write_csv(path: Path, header: list[str], rows: Any) -> None:
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)


def write_tables(out: Path, results: Mapping[str, Any], run: Mapping[str, Any], topology: Topology) -> None:
    """flows.csv, ports.csv, rates.csv, queues.csv (time series empty when sampling was off)."""
    write_csv(
        out / "flows.csv",
        list(FLOW_COLUMNS),
        ([("" if f[k] is None else f[k]) for k in FLOW_COLUMNS] for f in results["flows"]),
    )
    ports = ports_of_run(run, topology)
    names = port_names(run, topology)
    n = len(names)
    keys = (*PORT_KEYS, "trims") if "trims" in ports else PORT_KEYS  # network.trimming runs only
    columns = [_arr(ports, key, n, np.float64) for key in keys]
    utilization = port_utilization(ports, topology, results["sim"]["sim_end_s"])
    write_csv(
        out / "ports.csv",
        ["port", "name", "node", "link", "rate_Gbps", *keys, "utilization"],
        (
            [
                i,
                names[i],
                int(ports["node"][i]),
                int(ports["link"][i]),
                _cell(topology.link_rate_bps[int(ports["link"][i])] / 1e9),
                *(_cell(col[i]) for col in columns),
                round(float(utilization[i]), 6),
            ]
            for i in range(n)
        ),
    )
    series = run.get("series") or {}
    rate = series.get("rate") or {}
    goodput = goodput_series(rate) / 1e9
    write_csv(
        out / "rates.csv",
        ["time_s", "flow", "rate_Gbps", "goodput_Gbps", "acked_bytes"],
        (
            (t, f, r, "" if np.isnan(g) else g, int(a))
            for t, f, r, g, a in zip(
                np.asarray(rate.get("time_ns", []), dtype=np.float64) / 1e9,
                np.asarray(rate.get("flow", []), dtype=np.int64),
                np.asarray(rate.get("rate_bps", []), dtype=np.float64) / 1e9,
                goodput,
                np.asarray(rate.get("acked_bytes", np.zeros(len(goodput))), dtype=np.int64),
            )
        ),
    )
    if run.get("tcp"):
        write_tcp_tables(out, run["tcp"], list(topology.node_name))
    queue = series.get("queue") or {}
    port_ids = np.asarray(queue.get("port", []), dtype=np.int64)
    write_csv(
        out / "queues.csv",
        ["time_s", "port", "name", "queue_bytes"],
        (
            (t, p, names[p] if p < n else "", int(b))
            for t, p, b in zip(
                np.asarray(queue.get("time_ns", []), dtype=np.float64) / 1e9,
                port_ids,
                np.asarray(queue.get("bytes", []), dtype=np.int64),
            )
        ),
    )


def _cell(value: float) -> int | float:
    return int(value) if float(value).is_integer() else float(value)


def summary_text(results: Mapping[str, Any], max_flows: int = 16) -> str:
    """Terminal table: per-flow FCT and goodput, counters, Jain's index."""
    lines = [
        f"netbench {results['name']}  (cc={results['scenario']['cc']}, "
        f"pfc={'on' if results['scenario']['pfc'] else 'off'}, "
        f"fidelity={results['sim']['fidelity']})",
        f"{'flow':>5} {'src':>4} {'dst':>4} {'bytes':>12} {'start_us':>10} {'fct_us':>11} "
        f"{'goodput_Gbps':>13} {'retx':>6}",
    ]
    for f in results["flows"][:max_flows]:
        fct = f"{f['fct_s'] * 1e6:11.2f}" if f["fct_s"] is not None else f"{'unfinished':>11}"
        goodput = f"{f['goodput_Gbps']:13.2f}" if f["goodput_Gbps"] is not None else f"{'-':>13}"
        lines.append(
            f"{f['id']:>5} {f['src']:>4} {f['dst']:>4} {f['bytes']:>12} "
            f"{f['start_s'] * 1e6:10.2f} {fct} {goodput} {f['retransmits']:>6}"
        )
    if len(results["flows"]) > max_flows:
        lines.append(f"  ... {len(results['flows']) - max_flows} more flows in flows.csv")
    net = results["network"]
    lines.append("network: " + ", ".join(f"{k}={net[k]}" for k in (*COUNTER_KEYS, "trims") if k in net))
    jain = results["fairness_jain"]
    lines.append(
        f"fairness (Jain, second half): {jain:.4f}"
        if jain is not None
        else f"fairness (Jain): n/a ({results.get('fairness_note', '')})"
    )
    summary = results["summary"]
    if summary.get("busiest_port"):
        busiest = summary["busiest_port"]
        lines.append(
            f"busiest port: {busiest['name']} at {busiest['utilization']:.1%} of its link over the run"
        )
    lines.append(
        f"delivered {summary['delivered_bytes']} of {summary['injected_bytes']} bytes; "
        f"unfinished flows: {summary['unfinished_flows']}; "
        f"wall {results['sim']['wall_s']:.2f}s, events {results['sim']['events']}"
    )
    return "\n".join(lines)


def comparison_text(rows: list[Mapping[str, Any]]) -> str:
    """Terminal table of a CC comparison."""
    head = (
        f"{'cc':<7} {'fct_mean_us':>12} {'fct_max_us':>11} {'jain':>7} {'max_queue_KiB':>14} "
        f"{'pauses':>8} {'drops':>7} {'retx':>7} {'busiest_util':>12} {'unfinished':>10}"
    )
    lines = [head]
    for r in rows:

        def us(v: float | None) -> str:
            return "-" if v is None else f"{v * 1e6:.2f}"

        jain = "-" if r["fairness_jain"] is None else f"{r['fairness_jain']:.4f}"
        queue = "-" if r["max_queue_bytes"] is None else f"{r['max_queue_bytes'] / 1024:.1f}"
        busiest = r.get("busiest_port_utilization")
        util = "-" if busiest is None else f"{busiest:.1%}"
        lines.append(
            f"{r['cc']:<7} {us(r['fct_mean_s']):>12} {us(r['fct_max_s']):>11} {jain:>7} "
            f"{queue:>14} {r['pfc_pause_frames']:>8} {r['drops']:>7} "
            f"{r['retransmits']:>7} {util:>12} {r['unfinished_flows']:>10}"
        )
    return "\n".join(lines)
