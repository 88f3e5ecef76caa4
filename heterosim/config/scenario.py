"""Netbench scenario files: a cluster, a set of flows, network settings and run limits.

Schema (docs/config.md, "Netbench scenario")::

    name: incast-4to1
    cluster: ../../topologies/two_leaf_8hosts.yaml     # path relative to this file, or inline
    pattern: {kind: incast, senders: [0, 1, 2, 3], receiver: 4, size: 16MiB}
    # or explicit: flows: [{src: 0, dst: 4, size: 64MiB, start: 0us, priority: 3}, ...]
    network: {cc: dcqcn, pfc: true, buffer: 16MiB, mtu: 1KiB}   # same schema as experiments
    simulation: {stop: 20ms, sample_interval: 10us, seed: 1, fidelity: packet}
    compare_cc: [dcqcn, hpcc, timely, dctcp, none]             # optional: one run per CC
    fairness_flows: [0, 1, 2, 3]                               # optional: flows Jain compares

Pattern kinds (GPU indices are global, host order, as in the cluster file):

* ``incast``: every GPU in ``senders`` sends ``size`` to ``receiver``.
* ``one-to-one``: ``senders[i]`` sends to ``receivers[i]`` (or to ``receiver`` for one sender).
* ``all-to-all``: every ordered pair of distinct GPUs in ``gpus`` exchanges ``size``.
* ``permutation``: every GPU in ``gpus`` sends to exactly one other GPU of the list and receives
  from exactly one (a random derangement drawn from ``simulation.seed``).

Every pattern takes ``size``, ``start`` (default 0), ``stagger`` (flow ``i`` starts at
``start + i * stagger``, default 0) and ``priority``. A GPU list may be written as a YAML list or
a range string such as ``"0-3"``. Flow ids are the flows' positions in the generated list.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from heterosim.config.choices import (
    CC_ALGORITHMS,
    DEFAULT_FIDELITY,
    DEFAULT_PACKET_ACCELERATION,
    FIDELITIES,
    PACKET_ACCELERATIONS,
)
from heterosim.config.cluster import ClusterConfig, load_cluster, parse_cluster
from heterosim.config.degenerate import MAX_SAMPLES_REFUSED, flow_warnings, network_warnings, sample_warnings
from heterosim.config.experiment import MAX_SEED, NetworkConfig, _network, apply_overrides, sample_interval
from heterosim.config.fabric import check_load_balancing
from heterosim.config.fields import Section, plain_name, read_yaml_mapping
from heterosim.config.limits import check_scenario_budget
from heterosim.config.network_model import NetworkModel, network_model

PATTERN_KINDS = ("incast", "one-to-one", "all-to-all", "permutation")
DEFAULT_PRIORITY = 3  # the lossless RoCE class in common deployments (docs/network_models.md §3.1)
MAX_PRIORITY = 7
MAX_FLOWS = 1_000_000
MAX_FLOW_BYTES = 1 << 40  # 1 TiB per flow: minutes at 100 Gbit/s; byte counters stay far from 2^63
MAX_STOP_NS = 3600 * 10**9  # one hour of simulated time


@dataclass(frozen=True, eq=False)
class FlowSet:
    """Flows as parallel arrays; flow ``i`` has id ``i``."""

    src: np.ndarray  # int64 global GPU index
    dst: np.ndarray  # int64
    size_bytes: np.ndarray  # int64
    start_ns: np.ndarray  # int64
    priority: np.ndarray  # uint8
    explicit_priority: bool  # False: no flow named a priority (the network's default applies)

    def __len__(self) -> int:
        return int(self.src.shape[0])

    @property
    def total_bytes(self) -> int:
        return int(self.size_bytes.sum())


@dataclass(frozen=True)
class ScenarioSimulation:
    stop_ns: int
    sample_interval_ns: int  # 0: no time series
    seed: int
    fidelity: str  # packet | flow
    packet_acceleration: str = DEFAULT_PACKET_ACCELERATION  # exact | fast | memo | fast+memo

    @property
    def network_model(self) -> NetworkModel:
        """The network model :attr:`fidelity` names."""
        return network_model(self.fidelity)


@dataclass(frozen=True, eq=False)
class ScenarioConfig:
    name: str
    cluster: ClusterConfig
    flows: FlowSet
    network: NetworkConfig
    simulation: ScenarioSimulation
    compare_cc: tuple[str, ...] = ()
    fairness_flows: tuple[int, ...] | None = None  # None: all flows
    source: str = ""
    resolved: dict[str, Any] = field(default_factory=dict)  # the mapping after overrides
    warnings: tuple[str, ...] = ()  # degenerate but valid settings (heterosim.config.degenerate)


def _gpu_list(section: Section, key: str, world: int, minimum: int = 1) -> list[int]:
    value = section.raw(key)
    if isinstance(value, str):
        try:
            lo_text, _, hi_text = value.partition("-")
            lo, hi = int(lo_text), int(hi_text or lo_text)
        except ValueError:
            raise section.error(
                key, f"expected a list of GPU indices or a range 'A-B', got {value!r}"
            ) from None
        if hi < lo:
            raise section.error(key, f"empty range {value!r}")
        if lo < 0 or hi >= world:
            raise section.error(key, f"range {value!r} leaves 0..{world - 1} (the cluster has {world} GPUs)")
        value = list(range(lo, hi + 1))
    if isinstance(value, int) and not isinstance(value, bool):
        value = [value]
    if isinstance(value, list) and len(value) > world:
        raise section.error(key, f"{len(value)} GPUs listed; the cluster has {world}")
    if not isinstance(value, list) or len(value) < minimum:
        raise section.error(key, f"expected a list of at least {minimum} GPU indices, got {value!r}")
    gpus = [_gpu(section, f"{key}[{i}]", item, world) for i, item in enumerate(value)]
    if len(set(gpus)) != len(gpus):
        dup = next(g for g in gpus if gpus.count(g) > 1)
        raise section.error(key, f"GPU {dup} is listed twice")
    return gpus


def _gpu(section: Section, key: str, value: Any, world: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise section.error(key, f"expected a GPU index (integer), got {value!r}")
    if not 0 <= value < world:
        raise section.error(key, f"GPU {value} out of range 0..{world - 1} (the cluster has {world} GPUs)")
    return value


def _priority(section: Section) -> tuple[int, bool]:
    if not section.has("priority"):
        section.raw("priority", None)
        return DEFAULT_PRIORITY, False
    return section.integer("priority", minimum=0, maximum=MAX_PRIORITY), True


def _positive_size(section: Section, key: str) -> int:
    size = section.size(key, maximum=MAX_FLOW_BYTES)
    if size <= 0:
        raise section.error(key, f"expected a positive size, got {size}")
    return size


def _pattern_pairs(section: Section, kind: str, world: int, seed: int) -> list[tuple[int, int]]:
    if kind == "incast":
        senders = _gpu_list(section, "senders", world)
        receiver = _gpu(section, "receiver", section.raw("receiver"), world)
        if receiver in senders:
            raise section.error("receiver", f"GPU {receiver} is also a sender")
        return [(s, receiver) for s in senders]
    if kind == "one-to-one":
        senders = _gpu_list(section, "senders", world)
        if section.has("receiver") and not section.has("receivers"):
            if len(senders) != 1:
                raise section.error("receiver", "one-to-one with several senders needs receivers: [...]")
            receivers = [_gpu(section, "receiver", section.raw("receiver"), world)]
        else:
            receivers = _gpu_list(section, "receivers", world)
        if len(receivers) != len(senders):
            raise section.error(
                "receivers", f"expected {len(senders)} receivers (one per sender), got {len(receivers)}"
            )
        for i, (s, r) in enumerate(zip(senders, receivers, strict=True)):
            if s == r:
                raise section.error(f"receivers[{i}]", f"GPU {s} cannot send to itself")
        return list(zip(senders, receivers, strict=True))
    gpus = _gpu_list(section, "gpus", world, minimum=2)
    if kind == "all-to-all" and len(gpus) * (len(gpus) - 1) > MAX_FLOWS:
        raise section.error(
            "gpus",
            f"all-to-all over {len(gpus)} GPUs is "
            f"{len(gpus) * (len(gpus) - 1):,} flows; at most {MAX_FLOWS:,} are supported",
        )
    if kind == "all-to-all":
        return [(s, d) for s in gpus for d in gpus if s != d]
    return _derangement(gpus, seed)


def _derangement(gpus: list[int], seed: int) -> list[tuple[int, int]]:
    """A random permutation of ``gpus`` with no fixed point (rejection sampling)."""
    rng = np.random.default_rng(seed)
    order = np.arange(len(gpus))
    while True:
        perm = rng.permutation(len(gpus))
        if not np.any(perm == order):
            return [(gpus[i], gpus[int(p)]) for i, p in enumerate(perm)]


def _pattern(section: Section, world: int, seed: int) -> FlowSet:
    kind = section.string("kind", choices=PATTERN_KINDS)
    pairs = _pattern_pairs(section, kind, world, seed)
    size = _positive_size(section, "size")
    start = section.time_ns("start", 0, maximum=MAX_STOP_NS)
    stagger = section.time_ns("stagger", 0, maximum=MAX_STOP_NS)
    priority, explicit = _priority(section)
    section.reject_unknown()
    n = len(pairs)
    if n > MAX_FLOWS:
        raise section.error("kind", f"{n} flows; at most {MAX_FLOWS} are supported")
    return FlowSet(
        src=np.array([p[0] for p in pairs], dtype=np.int64),
        dst=np.array([p[1] for p in pairs], dtype=np.int64),
        size_bytes=np.full(n, size, dtype=np.int64),
        start_ns=start + stagger * np.arange(n, dtype=np.int64),
        priority=np.full(n, priority, dtype=np.uint8),
        explicit_priority=explicit,
    )


def _explicit_flows(top: Section, world: int) -> FlowSet:
    items = top.raw("flows")
    if not isinstance(items, list) or not items:
        raise top.error("flows", "expected a non-empty list of {src, dst, size, start, priority}")
    if len(items) > MAX_FLOWS:
        raise top.error("flows", f"{len(items)} flows; at most {MAX_FLOWS} are supported")
    src, dst, size, start, prio = [], [], [], [], []
    any_explicit = False
    for i, item in enumerate(items):
        flow = Section(item, top.source, f"flows[{i}]")
        s = _gpu(flow, "src", flow.raw("src"), world)
        d = _gpu(flow, "dst", flow.raw("dst"), world)
        if s == d:
            raise flow.error("dst", f"GPU {s} cannot send to itself")
        src.append(s)
        dst.append(d)
        size.append(_positive_size(flow, "size"))
        start.append(flow.time_ns("start", 0, maximum=MAX_STOP_NS))
        p, explicit = _priority(flow)
        prio.append(p)
        any_explicit |= explicit
        flow.reject_unknown()
    return FlowSet(
        src=np.array(src, dtype=np.int64),
        dst=np.array(dst, dtype=np.int64),
        size_bytes=np.array(size, dtype=np.int64),
        start_ns=np.array(start, dtype=np.int64),
        priority=np.array(prio, dtype=np.uint8),
        explicit_priority=any_explicit,
    )


def _simulation(section: Section) -> ScenarioSimulation:
    simulation = ScenarioSimulation(
        stop_ns=section.time_ns("stop", "100ms", maximum=MAX_STOP_NS),
        sample_interval_ns=sample_interval(section),
        seed=section.integer("seed", 1, minimum=0, maximum=MAX_SEED),
        fidelity=section.string("fidelity", DEFAULT_FIDELITY, choices=FIDELITIES),
        packet_acceleration=section.string(
            "packet_acceleration", DEFAULT_PACKET_ACCELERATION, choices=PACKET_ACCELERATIONS
        ),
    )
    if simulation.stop_ns <= 0:
        raise section.error("stop", "expected a positive time")
    if simulation.sample_interval_ns < 0:
        raise section.error("sample_interval", "expected a time >= 0 (0 = no time series)")
    interval = simulation.sample_interval_ns
    if interval and simulation.stop_ns // interval > MAX_SAMPLES_REFUSED:
        raise section.error(
            "sample_interval", f"more than {MAX_SAMPLES_REFUSED:,} samples per series; use a longer interval"
        )
    section.reject_unknown()
    return simulation


def _cc_list(top: Section, key: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [v.strip() for v in value.split(",") if v.strip()]
    if not isinstance(value, list) or not value:
        raise top.error(key, f"expected a list of CC algorithms from {', '.join(CC_ALGORITHMS)}")
    names: list[str] = []
    for item in value:
        name = str(item).lower()
        if name not in CC_ALGORITHMS:
            raise top.error(key, f"unknown CC {item!r}; expected one of {', '.join(CC_ALGORITHMS)}")
        if name in names:
            raise top.error(key, f"{name} is listed twice")
        names.append(name)
    return tuple(names)


def _cluster(top: Section, base_dir: Path | None) -> ClusterConfig:
    value = top.raw("cluster")
    if isinstance(value, str):
        path = Path(value)
        if not path.is_absolute():
            path = (base_dir or Path.cwd()) / path
        if not path.exists():
            raise top.error("cluster", f"cluster file not found: {path}")
        return load_cluster(path)
    if isinstance(value, dict):
        return parse_cluster(value, f"{top.source}: cluster")
    raise top.error("cluster", "expected a cluster file path or an inline cluster mapping")


def parse_scenario(data: dict[str, Any], source: str, base_dir: Path | None = None) -> ScenarioConfig:
    """Validate a scenario mapping read from ``source``."""
    top = Section(data, source)
    name = plain_name(top.string("name", Path(source).stem if source else "scenario"), "name", source)
    cluster = _cluster(top, base_dir)
    simulation = _simulation(top.section("simulation"))
    network = _network(top.section("network"))
    check_load_balancing(network, simulation.network_model)
    world = cluster.world_size
    if top.has("pattern") and top.has("flows"):
        raise top.error("flows", "give either pattern or flows, not both")
    if top.has("pattern"):
        flows = _pattern(top.section("pattern"), world, simulation.seed)
        top.raw("flows", None)
    elif top.has("flows"):
        flows = _explicit_flows(top, world)
        top.raw("pattern", None)
    else:
        raise top.error("pattern", "missing: give pattern {kind, ...} or an explicit flows list")
    if simulation.stop_ns <= int(flows.start_ns.max()):
        raise top.error(
            "simulation.stop",
            f"stops at {simulation.stop_ns} ns, before the last flow starts ({int(flows.start_ns.max())} ns)",
        )
    compare = _cc_list(top, "compare_cc", top.raw("compare_cc")) if top.has("compare_cc") else ()
    if not top.has("compare_cc"):
        top.raw("compare_cc", None)
    fairness: tuple[int, ...] | None = None
    if top.has("fairness_flows"):
        ids = top.raw("fairness_flows")
        if not isinstance(ids, list) or len(ids) < 2:
            raise top.error("fairness_flows", "expected a list of at least 2 flow ids")
        for i, fid in enumerate(ids):
            if isinstance(fid, bool) or not isinstance(fid, int) or not 0 <= fid < len(flows):
                raise top.error(
                    f"fairness_flows[{i}]", f"expected a flow id in 0..{len(flows) - 1}, got {fid!r}"
                )
        fairness = tuple(sorted(set(ids)))
    else:
        top.raw("fairness_flows", None)
    top.reject_unknown()
    warnings = [
        *network_warnings(network, cluster),
        *sample_warnings(
            simulation.sample_interval_ns if simulation.network_model.samples_flow_rates else 0,
            simulation.stop_ns,
        ),
        *flow_warnings(cluster, flows.src, flows.dst, flows.size_bytes, flows.start_ns, simulation.stop_ns),
    ]
    scenario = ScenarioConfig(
        name=name,
        cluster=cluster,
        flows=flows,
        network=network,
        simulation=simulation,
        compare_cc=compare,
        fairness_flows=fairness,
        source=source,
        resolved=copy.deepcopy(data),
        warnings=tuple(warnings),
    )
    check_scenario_budget(scenario)
    return scenario


def load_scenario(path: str | Path, overrides: list[str] | None = None) -> ScenarioConfig:
    """Read, override (``--set key=value``) and validate a netbench scenario file."""
    path = Path(path)
    data = read_yaml_mapping(path)
    data = apply_overrides(data, overrides or [], str(path))
    return parse_scenario(data, str(path), base_dir=path.parent)


def parse_cc_option(text: str) -> tuple[str, ...]:
    """``--compare-cc dcqcn,hpcc`` -> ('dcqcn', 'hpcc'), with a one-line error for bad names."""
    return _cc_list(Section({"compare_cc": text}, "--compare-cc"), "", text)


__all__ = [
    "DEFAULT_PRIORITY",
    "FlowSet",
    "PATTERN_KINDS",
    "ScenarioConfig",
    "ScenarioSimulation",
    "load_scenario",
    "parse_cc_option",
    "parse_scenario",
]
