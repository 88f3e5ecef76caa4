"""Faults of an experiment resolved against its topology, handed to the C++ models, reported.

Link faults (``down``, ``rate``, ``loss``) become ``ns3::FaultSchedule`` events that act on the
network model at their simulated times (``FlowNetwork::SetLinkUp/SetLinkRate/SetLinkLoss``):

* packet fidelity: a link going down drops what its two ports hold and what is on the wire;
  fabric routes are recomputed over the remaining links and every switch re-hashes (ECMP) over
  what is left; the RDMA transport recovers lost frames (NACK on a gap, or the retransmission
  timeout, go-back-N). A rate fault changes the ports' line rate; a loss fault drops each frame
  arriving over the link with the given probability.
* flow fidelity: a down link has capacity 0 and active flows move to their re-hashed paths (a
  flow with no path left waits at rate 0 until the link returns); a rate fault changes the
  capacity; a loss fault scales the capacity by :func:`go_back_n_goodput` (the fluid model has
  no frames to lose: an approximation, see there).

A straggler (``slowdown``) becomes ``ns3::ComputeSlowdown`` windows on the plan executor: a
compute task on that GPU runs at 1/factor of its speed while a window is open.

A link that goes down for good (``down: true``) and cuts NICs off from the rest of the fabric
stops the run before it starts, naming the unreachable hosts; a temporary outage that cuts a
host off is allowed (its traffic waits for the link and is recovered) and reported.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components, shortest_path

from heterosim.config.experiment import NetworkConfig
from heterosim.config.faults import MAX_SLOWDOWN, MIN_SLOWDOWN, FaultSpec
from heterosim.config.network_model import network_model
from heterosim.engine.network_model import NetworkModel
from heterosim.engine.topology import ACCESS, FABRIC, LINK_KIND_NAMES, NIC, Topology
from heterosim.errors import UserError
from heterosim.plan.execution_plan import COMPUTE, FLOW, ExecutionPlan
from heterosim.units import parse_time_ns

# ns3::FaultSchedule::Kind
LINK_DOWN, LINK_UP, RATE, LOSS = 0, 1, 2, 3
# ns3::RdmaNic defaults (rdma-nic.cc): Rto 4.096 us * 2^20 (NCCL_IB_TIMEOUT 20), RtoLossy 320 us
DEFAULT_RTO_NS = 4_294_967_296
DEFAULT_RTO_LOSSY_NS = 320_000
ACK_FRAME_BYTES = 86  # RoCEv2 ACK with preamble and gap (rdma-nic.h, RdmaFrameSizes)
DATA_HEADER_BYTES = 82


@dataclass
class FaultPlan:
    """Faults resolved to links and GPUs, as arrays for the C++ models."""

    specs: tuple[FaultSpec, ...]
    link: list[int | None]  # topology link of each link fault
    link_name: list[str | None]  # canonical "a-b" name
    nominal_rate_bps: list[float | None]
    goodput: list[float | None]  # fluid capacity factor of loss faults
    events: dict[str, np.ndarray]  # time_ns, kind, link, value, value2, fault
    windows: dict[str, np.ndarray]  # gpu, start_ns, end_ns (-1 open), factor
    isolated: list[list[int]] = field(default_factory=list)  # hosts cut off while a fault lasts
    rto_ns: int = DEFAULT_RTO_NS  # the NICs' retransmission timeout (packet fidelity)
    routing_delay_ns: int = 0  # link change -> routes follow (FaultSchedule::RoutingDelay)

    @property
    def longest_outage_ns(self) -> int:
        out = self.routing_delay_ns * len(self.specs)
        for spec in self.specs:
            if spec.kind == "down":
                out += (spec.until_ns or spec.at_ns) - spec.at_ns
        return out

    def stall_margin_ns(self, network: NetworkConfig) -> int:
        """How much longer a transport that recovers lost frames may go without finishing a
        task: the outages and twice the retransmission timeout."""
        return self.longest_outage_ns + 2 * rto_ns(network)


def link_index(topology: Topology, name: str, where: str) -> int:
    """The link named ``a-b`` or ``a->b`` (either order), as links.csv names its directions."""
    text = name.strip()
    a, sep, b = text.partition("->")
    if not sep:
        a, sep, b = text.partition("-")
    if not sep or not a.strip() or not b.strip():
        raise UserError(
            f"{where}: link: {name!r}: expected two node names as in links.csv, e.g. {_example(topology)}"
        )
    index = {n: i for i, n in enumerate(topology.node_name)}
    ends = []
    for node in (a.strip(), b.strip()):
        if node not in index:
            raise UserError(
                f"{where}: link: {name!r}: no node {node!r} in the topology (links are "
                f"named as in links.csv, e.g. {_example(topology)})"
            )
        ends.append(index[node])
    hit = np.flatnonzero(
        ((topology.link_a == ends[0]) & (topology.link_b == ends[1]))
        | ((topology.link_a == ends[1]) & (topology.link_b == ends[0]))
    )
    if not hit.size:
        raise UserError(
            f"{where}: link: {name!r}: the link does not exist (no link joins {a.strip()} and {b.strip()})"
        )
    link = int(hit[0])
    if int(topology.link_kind[link]) not in (ACCESS, FABRIC):
        raise UserError(
            f"{where}: link: {name!r} is a {LINK_KIND_NAMES[int(topology.link_kind[link])]} "
            "link inside a host; faults apply to fabric links (NIC-leaf, leaf-spine)"
        )
    return link


def _example(topology: Topology) -> str:
    fabric = np.flatnonzero(np.isin(topology.link_kind, (ACCESS, FABRIC)))
    if not fabric.size:
        return "h0.nic0-leaf0"
    link = int(fabric[0])
    return f"{topology.node_name[topology.link_a[link]]}-{topology.node_name[topology.link_b[link]]}"


def rto_ns(network: NetworkConfig) -> int:
    """The retransmission timeout the NICs use (network.attributes may override it)."""
    names = ("RtoLossy",) if not network.pfc else ("Rto",)
    for key, value in network.attributes.items():
        short = str(key).split("::")[-1]
        if short in names:
            try:
                return parse_time_ns(str(value))
            except ValueError:
                break
    return DEFAULT_RTO_LOSSY_NS if not network.pfc else DEFAULT_RTO_NS


def go_back_n_goodput(loss: float, rate_bps: float, rtt_ns: float, frame_bytes: int) -> float:
    """Share of a lossy link's rate left as goodput under go-back-N (the fluid approximation).

    Each lost frame makes the sender resend everything it sent in the round trip until the gap is
    reported (NACK at the next arrival): ``W = ceil(rate * RTT / frame)`` frames. With frames
    lost independently with probability ``p`` a frame is delivered once per
    ``1 + p * (W - 1)`` transmissions on average, and a share ``p`` of those is lost again:
    ``goodput = (1 - p) / (1 + p * (W - 1))``, the textbook go-back-N efficiency. It ignores
    tail losses (recovered by the retransmission timeout, not by a NACK), which the packet
    model pays in full: the fluid figure is an upper bound on goodput.
    """
    window = max(1, math.ceil(rate_bps * rtt_ns * 1e-9 / (8.0 * frame_bytes)))
    return (1.0 - loss) / (1.0 + loss * (window - 1))


def fabric_rtt_ns(topology: Topology, rate_bps: float, frame_bytes: int) -> float:
    """Base round trip of the longest NIC-to-NIC path: propagation both ways plus one data frame
    and one ACK serialised per hop at ``rate_bps``."""
    fabric = np.flatnonzero(np.isin(topology.link_kind, (ACCESS, FABRIC)))
    hops = 4 if np.any(topology.link_kind[fabric] == FABRIC) else 2
    delay = float(topology.link_delay_ns[fabric].max()) if fabric.size else 0.0
    return hops * (2 * delay + (frame_bytes + ACK_FRAME_BYTES) * 8e9 / rate_bps)


def _link_events(
    spec: FaultSpec, rate: float, name: str, topology: Topology, frame: int
) -> tuple[list[tuple[int, int, float, float]], float | None]:
    """A link fault's model events, (time_ns, kind, value, value2) each, and for a lossy link its
    go-back-N goodput factor (None otherwise)."""
    events: list[tuple[int, int, float, float]] = []
    factor = None
    if spec.kind == "down":
        events.append((spec.at_ns, LINK_DOWN, 0.0, 0.0))
        if spec.until_ns is not None:
            events.append((spec.until_ns, LINK_UP, 0.0, 0.0))
    elif spec.kind == "rate":
        if spec.rate_bps >= rate:
            raise UserError(
                f"{spec.where}: rate: {spec.rate_bps:g} bit/s is not below the line rate of "
                f"link {name} ({rate:g} bit/s); a degraded link is slower than its line rate"
            )
        events.append((spec.at_ns, RATE, spec.rate_bps, 0.0))
        if spec.until_ns is not None:
            events.append((spec.until_ns, RATE, rate, 0.0))
    else:
        factor = go_back_n_goodput(spec.loss, rate, fabric_rtt_ns(topology, rate, frame), frame)
        events.append((spec.at_ns, LOSS, spec.loss, factor))
        if spec.until_ns is not None:
            events.append((spec.until_ns, LOSS, 0.0, 1.0))
    return events, factor


def _event_arrays(ev: dict[str, list]) -> dict[str, np.ndarray]:
    """The model events' columns as the typed arrays the C++ side reads."""
    return {
        "time_ns": np.asarray(ev["time_ns"], np.int64),
        "kind": np.asarray(ev["kind"], np.uint8),
        "link": np.asarray(ev["link"], np.uint32),
        "value": np.asarray(ev["value"], np.float64),
        "value2": np.asarray(ev["value2"], np.float64),
        "fault": np.asarray(ev["fault"], np.uint32),
    }


def resolve_faults(
    faults: Sequence[FaultSpec], topology: Topology, network: NetworkConfig, stop_ns: int | None = None
) -> FaultPlan | None:
    """Check ``faults`` against ``topology`` and turn them into model events (None if none)."""
    if not faults:
        return None
    links: list[int | None] = []
    names: list[str | None] = []
    nominal: list[float | None] = []
    goodput: list[float | None] = []
    ev: dict[str, list] = {k: [] for k in ("time_ns", "kind", "link", "value", "value2", "fault")}
    win: dict[str, list] = {k: [] for k in ("gpu", "start_ns", "end_ns", "factor")}
    gpus = len(topology.gpu_node)
    frame = int(network.mtu_bytes) + DATA_HEADER_BYTES
    for spec in faults:
        if stop_ns is not None and spec.at_ns >= stop_ns:
            raise UserError(
                f"{spec.where}: at: {spec.at_ns} ns is not before the end of the run ({stop_ns} ns, --until)"
            )
        if spec.kind == "slowdown":
            if spec.gpu is None or not 0 <= spec.gpu < gpus:
                raise UserError(
                    f"{spec.where}: gpu: GPU {spec.gpu} does not exist (the cluster has GPUs 0..{gpus - 1})"
                )
            links.append(None)
            names.append(None)
            nominal.append(None)
            goodput.append(None)
            win["gpu"].append(spec.gpu)
            win["start_ns"].append(spec.at_ns)
            win["end_ns"].append(-1 if spec.until_ns is None else spec.until_ns)
            win["factor"].append(spec.slowdown)
            continue
        link = link_index(topology, spec.link or "", spec.where)
        rate = float(topology.link_rate_bps[link])
        name = f"{topology.node_name[topology.link_a[link]]}-{topology.node_name[topology.link_b[link]]}"
        links.append(link)
        names.append(name)
        nominal.append(rate)
        events, factor = _link_events(spec, rate, name, topology, frame)
        for time_ns, kind, value, value2 in events:
            for key, v in zip(ev, (time_ns, kind, link, value, value2, spec.index)):
                ev[key].append(v)
        goodput.append(factor)
    plan = FaultPlan(
        specs=tuple(faults),
        link=links,
        link_name=names,
        nominal_rate_bps=nominal,
        goodput=goodput,
        events=_event_arrays(ev),
        windows=_merge_windows(win, faults),
        rto_ns=rto_ns(network),
        routing_delay_ns=int(network.routing_delay_ns),
    )
    _check_overlaps(plan)
    _check_partitions(plan, topology)
    return plan


def _check_overlaps(plan: FaultPlan) -> None:
    """Two faults of one kind on one link may not be in force at the same time."""
    for spec in plan.specs:
        for other in plan.specs[: spec.index]:
            if (
                other.kind == spec.kind
                and spec.kind != "slowdown"
                and plan.link[other.index] == plan.link[spec.index]
                and spec.at_ns < (other.until_ns if other.until_ns is not None else math.inf)
                and other.at_ns < (spec.until_ns if spec.until_ns is not None else math.inf)
            ):
                raise UserError(
                    f"{spec.where}: {spec.kind} fault on link {plan.link_name[spec.index]} "
                    f"overlaps faults[{other.index}] on the same link"
                )


def _merge_windows(win: dict[str, list], faults: Sequence[FaultSpec] = ()) -> dict[str, np.ndarray]:
    """Disjoint windows per GPU; where faults overlap their factors multiply, and the product
    must stay within the range one slowdown may take (MIN_SLOWDOWN..MAX_SLOWDOWN)."""
    out: dict[str, list] = {k: [] for k in win}
    for gpu in sorted(set(win["gpu"])):
        mine = [i for i, g in enumerate(win["gpu"]) if g == gpu]
        big = np.iinfo(np.int64).max
        ends = [win["end_ns"][i] if win["end_ns"][i] >= 0 else big for i in mine]
        points = sorted({win["start_ns"][i] for i in mine} | set(ends))
        for lo, hi in zip(points[:-1], points[1:]):
            factor = 1.0
            for i, end in zip(mine, ends):
                if win["start_ns"][i] <= lo and hi <= end:
                    factor *= win["factor"][i]
            if not MIN_SLOWDOWN <= factor <= MAX_SLOWDOWN:
                _overlap_error(faults, gpu, lo, factor)
            if factor != 1.0:
                out["gpu"].append(gpu)
                out["start_ns"].append(lo)
                out["end_ns"].append(-1 if hi == big else hi)
                out["factor"].append(factor)
    return {
        "gpu": np.asarray(out["gpu"], np.int32),
        "start_ns": np.asarray(out["start_ns"], np.int64),
        "end_ns": np.asarray(out["end_ns"], np.int64),
        "factor": np.asarray(out["factor"], np.float64),
    }


def _overlap_error(faults: Sequence[FaultSpec], gpu: int, at_ns: int, factor: float) -> None:
    """Overlapping slowdowns of ``gpu`` whose product ``factor`` leaves the physical range."""
    mine = [
        s
        for s in faults
        if s.kind == "slowdown"
        and s.gpu == gpu
        and s.at_ns <= at_ns
        and (s.until_ns is None or at_ns < s.until_ns)
    ]
    where = mine[-1].where if mine else "faults"
    others = ", ".join(f"faults[{s.index}]" for s in mine)
    raise UserError(
        f"{where}: slowdown: overlapping slowdowns of GPU {gpu} ({others}) multiply to "
        f"{factor:g} at {at_ns} ns; their product must stay within {MIN_SLOWDOWN:g}..{MAX_SLOWDOWN:g}"
    )


def _cut_off_hosts(topology: Topology, down: set[int]) -> list[int]:
    """Hosts with a NIC cut off by the ``down`` links: outside the largest piece of the fabric
    component it was in with every link up (a multi-plane or rail-only fabric has several)."""
    fabric = np.flatnonzero(np.isin(topology.link_kind, (ACCESS, FABRIC)))
    keep = np.array([link for link in fabric if int(link) not in down], dtype=np.int64)
    n = topology.num_nodes

    def components(links: np.ndarray) -> np.ndarray:
        graph = csr_matrix(
            (np.ones(links.size), (topology.link_a[links], topology.link_b[links])), shape=(n, n)
        )
        return connected_components(graph, directed=False)[1]

    nics = np.flatnonzero(topology.node_kind == NIC)
    if not nics.size:
        return []
    before, after = components(fabric)[nics], components(keep)[nics]
    cut: set[int] = set()
    for component in np.unique(before):
        members = nics[before == component]
        pieces = after[before == component]
        main = int(np.bincount(pieces).argmax())
        cut |= {int(topology.node_host[x]) for x in members[pieces != main]}
    return sorted(cut)


def _check_partitions(plan: FaultPlan, topology: Topology) -> None:
    """A permanent outage that cuts hosts off stops the run now; temporary ones are recorded."""
    permanent = {plan.link[s.index] for s in plan.specs if s.kind == "down" and s.until_ns is None}
    permanent.discard(None)
    if permanent:
        hosts = _cut_off_hosts(topology, permanent)  # type: ignore[arg-type]
        if hosts:
            lasting = [s for s in plan.specs if s.kind == "down" and s.until_ns is None]
            alone = [s for s in lasting if _cut_off_hosts(topology, {plan.link[s.index]})]  # type: ignore[arg-type]
            spec = (alone or lasting)[-1]
            raise UserError(
                f"{spec.where}: link {plan.link_name[spec.index]} down to the end of the run "
                f"partitions the fabric: unreachable hosts {', '.join(str(h) for h in hosts)}; "
                "give the outage a duration (down: 2ms) or fail a link with a redundant path"
            )
    plan.isolated = []
    for spec in plan.specs:
        if spec.kind == "down":
            overlapping = {
                plan.link[s.index]
                for s in plan.specs
                if s.kind == "down"
                and s.at_ns < (spec.until_ns or math.inf)
                and spec.at_ns < (s.until_ns or math.inf)
            }
            plan.isolated.append(_cut_off_hosts(topology, overlapping))  # type: ignore[arg-type]
        else:
            plan.isolated.append([])


def install(plan: FaultPlan | None, gbl: Any, net: Any, executor: Any) -> Any:
    """Create the native fault schedule and slowdown windows; return the schedule (or None).

    Call after the network and executor exist and before the executor starts."""
    if plan is None:
        return None
    ns3 = gbl.ns3
    schedule = None
    ev = plan.events
    if ev["time_ns"].size:
        schedule = ns3.CreateObject[ns3.FaultSchedule]()
        schedule.SetAttribute("RoutingDelay", ns3.TimeValue(ns3.NanoSeconds(int(plan.routing_delay_ns))))
        for i in range(ev["time_ns"].size):
            schedule.AddLinkEvent(
                int(ev["time_ns"][i]),
                int(ev["kind"][i]),
                int(ev["link"][i]),
                float(ev["value"][i]),
                float(ev["value2"][i]),
                int(ev["fault"][i]),
            )
        schedule.Start(net)
    win = plan.windows
    if win["gpu"].size:
        slowdown = ns3.CreateObject[ns3.ComputeSlowdown]()
        slowdown.SetWindows(
            int(win["gpu"].size),
            np.ascontiguousarray(win["gpu"]),
            np.ascontiguousarray(win["start_ns"]),
            np.ascontiguousarray(win["end_ns"]),
            np.ascontiguousarray(win["factor"]),
        )
        executor.SetComputeSlowdown(slowdown)
    return schedule


def collect(plan: FaultPlan | None, schedule: Any, net: Any, model: NetworkModel) -> list[dict[str, Any]]:
    """What the models counted per fault (before the network is disposed)."""
    if plan is None:
        return []
    out = []
    for spec in plan.specs:
        link = plan.link[spec.index]
        record: dict[str, Any] = {}
        if link is not None:
            record["flows_rerouted"] = int(schedule.GetRerouted(spec.index)) if schedule is not None else 0
            record["frames_dropped"] = model.link_fault_drops(net, link)
        out.append(record)
    return out


def fault_records(
    plan: FaultPlan,
    counted: list[dict[str, Any]],
    fidelity: str,
    tasks: ExecutionPlan,
    start_ns: np.ndarray,
    end_ns: np.ndarray,
    run_end_ns: int,
    links: dict[str, np.ndarray] | None = None,
) -> list[dict[str, Any]]:
    """results.json ``faults``: each fault as given plus what it did."""
    drops_frames = network_model(fidelity).faults_drop_frames
    records = []
    link_bytes: dict[int, int] = {}
    if links and len(links.get("link", [])):
        for li, b in zip(np.asarray(links["link"]), np.asarray(links["bytes"])):
            link_bytes[int(li)] = link_bytes.get(int(li), 0) + int(b)
    for spec, counts in zip(plan.specs, counted):
        until = spec.until_ns
        record: dict[str, Any] = {
            "index": spec.index,
            "kind": spec.kind,
            "at_s": spec.at_ns * 1e-9,
            "until_s": None if until is None else until * 1e-9,
            "active_s": (min(until if until is not None else run_end_ns, run_end_ns) - spec.at_ns) * 1e-9,
        }
        link = plan.link[spec.index]
        if link is not None:
            record.update(
                {
                    "link": plan.link_name[spec.index],
                    "link_index": link,
                    "nominal_rate_bps": plan.nominal_rate_bps[spec.index],
                    "link_bytes": link_bytes.get(link, 0),
                    **counts,
                }
            )
            if drops_frames and spec.kind in ("down", "loss"):
                record["transport_rto_s"] = plan.rto_ns * 1e-9  # a lost tail waits this long
            if spec.kind == "down":
                record["isolated_hosts"] = plan.isolated[spec.index]
                record["effect"] = (
                    "frames queued on or crossing the link are lost and recovered "
                    "by the transport; routing avoids the link"
                    if drops_frames
                    else "capacity 0 while down; active flows moved to their re-hashed paths"
                )
            elif spec.kind == "rate":
                record["rate_bps"] = spec.rate_bps
            else:
                record["probability"] = spec.loss
                record["goodput_factor"] = plan.goodput[spec.index]
                record["effect"] = (
                    "frames arriving over the link dropped at random, recovered by go-back-N"
                    if drops_frames
                    else "capacity scaled by the go-back-N goodput factor (approximation)"
                )
        else:
            record.update(
                {
                    "gpu": spec.gpu,
                    "slowdown": spec.slowdown,
                    **_slowdown_effect(spec, tasks, start_ns, end_ns),
                }
            )
        records.append(record)
    return records


def _slowdown_effect(
    spec: FaultSpec, plan: ExecutionPlan, start_ns: np.ndarray, end_ns: np.ndarray
) -> dict[str, Any]:
    """Compute tasks on the GPU that overlapped the window and the time they took beyond nominal."""
    until = spec.until_ns if spec.until_ns is not None else np.iinfo(np.int64).max
    tasks = np.flatnonzero(
        (plan.kind == COMPUTE)
        & (plan.gpu == spec.gpu)
        & (end_ns >= 0)
        & (end_ns > spec.at_ns)
        & (start_ns < until)
    )
    extra = (end_ns[tasks] - start_ns[tasks]) - plan.duration_ns[tasks]
    return {"tasks_slowed": int(np.count_nonzero(extra > 0)), "extra_compute_s": float(extra.sum()) * 1e-9}


def unused_link_warnings(plan: FaultPlan | None, topology: Topology, tasks: ExecutionPlan) -> list[str]:
    """Link faults on links that no flow of the plan can cross (no shortest fabric path between
    the NICs of any flow's two hosts uses them): valid, but they cannot change the result."""
    if plan is None:
        return []
    faulted = sorted({link for link in plan.link if link is not None})
    if not faulted:
        return []
    flows = np.flatnonzero(tasks.kind == FLOW)
    src = topology.gpu_nic_node[tasks.gpu[flows]]
    dst = topology.gpu_nic_node[tasks.dst[flows]]
    crosses = topology.node_host[src] != topology.node_host[dst]
    pairs = np.unique(np.stack([src[crosses], dst[crosses]], axis=1), axis=0).reshape(-1, 2)
    used = _links_on_shortest_paths(topology, pairs, faulted)
    return [
        f"{spec.where}: link {plan.link_name[spec.index]}: no flow of this run can cross this link; "
        "the fault cannot change the result"
        for spec in plan.specs
        if plan.link[spec.index] is not None and plan.link[spec.index] not in used
    ]


def _links_on_shortest_paths(topology: Topology, pairs: np.ndarray, links: list[int]) -> set[int]:
    """Those of ``links`` on a shortest (hop count) fabric path of a (source NIC, destination
    NIC) pair of ``pairs``: ``dist(s, a) + 1 + dist(b, d) == dist(s, d)`` in either direction."""
    if not pairs.size:
        return set()
    fabric = np.flatnonzero(np.isin(topology.link_kind, (ACCESS, FABRIC)))
    n = topology.num_nodes
    graph = csr_matrix(
        (np.ones(fabric.size), (topology.link_a[fabric], topology.link_b[fabric])), shape=(n, n)
    )
    sources = np.unique(pairs[:, 0])
    dist = shortest_path(graph, directed=False, unweighted=True, indices=sources)
    row = np.searchsorted(sources, pairs[:, 0])
    total = dist[row, pairs[:, 1]]
    used = set()
    for link in links:
        a, b = int(topology.link_a[link]), int(topology.link_b[link])
        for x, y in ((a, b), (b, a)):
            via = (
                dist[row, x]
                + 1
                + shortest_path(graph, directed=False, unweighted=True, indices=y)[pairs[:, 1]]
            )
            if np.any(np.isfinite(total) & (via == total)):
                used.add(link)
    return used


def check_faults_in_run(plan: FaultPlan | None, run_end_ns: int, partial: bool) -> None:
    """A fault that starts after the run has ended never acted: a one-line error."""
    if plan is None or partial:
        return
    for spec in plan.specs:
        if spec.at_ns > run_end_ns:
            raise UserError(
                f"{spec.where}: at: {spec.at_ns / 1e6:g} ms is after the end of the run "
                f"({run_end_ns / 1e6:.3f} ms): the fault never takes effect"
            )


def flow_count(plan: ExecutionPlan) -> int:
    return int(np.count_nonzero(plan.kind == FLOW))


def fault_impact(
    engine: Any, baseline: Any, collectives: dict[str, np.ndarray], names: dict[int, str], top: int = 10
) -> dict[str, Any]:
    """What the faults cost against the same plan run without them (``fault_baseline``): the
    iteration, and the collective instances that finished latest compared with the baseline."""
    out: dict[str, Any] = {
        "baseline_iteration_time_s": baseline.makespan_ns * 1e-9,
        "iteration_time_s": engine.makespan_ns * 1e-9,
        "extra_s": (engine.makespan_ns - baseline.makespan_ns) * 1e-9,
        "baseline_network": dict(baseline.network),
    }
    ends = np.asarray(collectives.get("end_task", []), np.int64)
    starts = np.asarray(collectives.get("start_task", []), np.int64)
    if ends.size:
        delay = engine.task_end_ns[ends] - baseline.task_end_ns[ends]
        order = np.argsort(-delay, kind="stable")[:top]
        out["collectives_delayed"] = int(np.count_nonzero(delay > 0))
        out["most_delayed"] = [
            {
                "id": int(i),
                "type": names.get(int(collectives["comm_type"][i]), "collective"),
                "size_bytes": int(collectives["size_bytes"][i]),
                "baseline_start_s": float(baseline.task_start_ns[starts[i]]) * 1e-9,
                "baseline_end_s": float(baseline.task_end_ns[ends[i]]) * 1e-9,
                "end_s": float(engine.task_end_ns[ends[i]]) * 1e-9,
                "delay_s": float(delay[i]) * 1e-9,
                "start_delay_s": float(engine.task_start_ns[starts[i]] - baseline.task_start_ns[starts[i]])
                * 1e-9,
            }
            for i in order
            if delay[i] > 0
        ]
    return out
