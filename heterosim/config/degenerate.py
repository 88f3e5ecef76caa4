"""Warnings for settings that are valid one by one but make the network model degenerate.

Each check reads the configuration only (no simulation) and returns one-line messages; the
commands print them on stderr (``heterosim: warning: ...``) and record them in results.json
(``warnings``). Checked:

* ECN marking thresholds above the switch buffer: with DCQCN or DCTCP, ``EcnKmin`` (100 KB at
  ``EcnReferenceRate`` 25 Gbit/s, scaled linearly with the port speed unless
  ``EcnScaleWithRate: false``; ns3_modules/switch/model/red-ecn-marker.cc) is 1.6 MB at
  400 Gbit/s. A queue can never grow above the buffer, so ECN never marks, the congestion
  control never slows down, and without PFC the switch drops instead.
* PFC thresholds above the buffer: with ``PfcDynamicThreshold: false`` a static ``PfcStaticXoff``
  above the buffer never pauses (switch-mmu.cc).
* A sample interval that records more than :data:`MAX_SAMPLES` samples per series (netbench: up
  to ``simulation.stop``; run: over at least the simulated time a run certainly takes,
  :func:`heterosim.config.limits.simulated_time_floor_ns`). Above :data:`MAX_SAMPLES_REFUSED`
  the configuration is refused instead (one-line error naming ``simulation.sample_interval``).
* A flow (netbench) that cannot finish before ``simulation.stop`` even alone at its NIC speed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from heterosim.units import format_rate, format_size, format_time_ns, parse_rate

ECN_CCS = ("dcqcn", "dctcp")
DEFAULT_ECN_KMIN = 100_000  # bytes, RedEcnMarker::EcnKmin
DEFAULT_ECN_REFERENCE_BPS = 25e9  # RedEcnMarker::EcnReferenceRate
DEFAULT_STATIC_XOFF = 1_000_000  # SwitchMmu::PfcStaticXoff
MAX_SAMPLES = 1_000_000  # per series: a warning above this
MAX_SAMPLES_REFUSED = 10_000_000  # per series: an error above this


def _attribute(attributes: Mapping[str, Any], cls: str, name: str) -> Any:
    """The value given for ``name`` (bare, ``Cls::name`` or ``ns3::Cls::name``), else None."""
    for key in (name, f"{cls}::{name}", f"ns3::{cls}::{name}"):
        if key in attributes:
            return attributes[key]
    return None


def _as_int(value: Any, default: int) -> int:
    try:
        return int(str(value).strip()) if value is not None else default
    except ValueError:
        return default


def _as_bool(value: Any, default: bool) -> bool:
    if value is None:
        return default
    return str(value).strip().lower() in ("true", "1", "t")


def _as_rate(value: Any, default: float) -> float:
    try:
        return parse_rate(value) if value is not None else default
    except ValueError:
        return default


def switch_port_rates(cluster: Any) -> list[float]:
    """Distinct speeds of the fabric's switch ports (NIC links and spine links), bit/s."""
    rates = {float(cluster.host(h).nic_speed_bps) for h in range(cluster.num_hosts)}
    rates.add(float(cluster.fabric.spine_speed_bps))
    return sorted(rates)


def network_warnings(network: Any, cluster: Any) -> list[str]:
    """ECN and PFC thresholds that the switch buffer can never reach."""
    attributes = network.attributes or {}
    warnings = []
    buffer = int(network.buffer_bytes)
    if network.cc in ECN_CCS:
        kmin = _as_int(_attribute(attributes, "RedEcnMarker", "EcnKmin"), DEFAULT_ECN_KMIN)
        reference = _as_rate(
            _attribute(attributes, "RedEcnMarker", "EcnReferenceRate"), DEFAULT_ECN_REFERENCE_BPS
        )
        scale = _as_bool(_attribute(attributes, "RedEcnMarker", "EcnScaleWithRate"), True)
        above = [
            rate
            for rate in switch_port_rates(cluster)
            if (kmin * rate / reference if scale else kmin) > buffer
        ]
        if above:
            rate = above[0]
            threshold = kmin * rate / reference if scale else kmin
            warnings.append(
                f"network.buffer {format_size(buffer)} is below the ECN marking threshold "
                f"EcnKmin {format_size(threshold)} of {format_rate(rate)} ports: {network.cc} never "
                f"sees a mark there"
                + ("" if network.pfc else " and the switch drops instead")
                + "; raise the buffer or lower network.attributes.EcnKmin"
            )
    if network.pfc and not _as_bool(_attribute(attributes, "SwitchMmu", "PfcDynamicThreshold"), True):
        xoff = _as_int(_attribute(attributes, "SwitchMmu", "PfcStaticXoff"), DEFAULT_STATIC_XOFF)
        if xoff > buffer:
            warnings.append(
                f"PfcStaticXoff {format_size(xoff)} is above network.buffer "
                f"{format_size(buffer)}: PFC never pauses and the switch drops instead"
            )
    return warnings


def sample_warnings(sample_interval_ns: int, stop_ns: int | None) -> list[str]:
    """A sample interval that would record more than MAX_SAMPLES samples per series."""
    if not sample_interval_ns or not stop_ns:
        return []
    samples = stop_ns // sample_interval_ns
    if samples <= MAX_SAMPLES:
        return []
    return [
        f"simulation.sample_interval {format_time_ns(sample_interval_ns)} records {samples:,} "
        f"samples per series up to {format_time_ns(stop_ns)} (more than {MAX_SAMPLES:,}); "
        "a longer interval keeps the outputs small"
    ]


def run_sample_warnings(sample_interval_ns: int, simulated_floor_ns: float) -> list[str]:
    """A run's sample interval that records more than MAX_SAMPLES samples per series over the
    simulated time the run certainly takes (a lower bound, so a run may record more)."""
    if not sample_interval_ns or simulated_floor_ns / sample_interval_ns <= MAX_SAMPLES:
        return []
    samples = simulated_floor_ns / sample_interval_ns
    return [
        f"simulation.sample_interval {format_time_ns(sample_interval_ns)} records at least "
        f"{samples:.3g} samples per series over at least {format_time_ns(simulated_floor_ns)} "
        f"simulated (more than {MAX_SAMPLES:,}); a longer interval keeps the outputs small"
    ]


def flow_warnings(
    cluster: Any, src: Any, dst: Any, size_bytes: Any, start_ns: Any, stop_ns: int
) -> list[str]:
    """Flows that cannot finish before ``stop_ns`` even alone at their NICs' line rate."""
    speeds = np.array([cluster.host(int(h)).nic_speed_bps for h in cluster.gpu_host], dtype=np.float64)
    src, dst = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
    alone = np.asarray(size_bytes, dtype=np.float64) * 8e9 / np.minimum(speeds[src], speeds[dst])
    late = np.flatnonzero(np.asarray(start_ns, dtype=np.float64) + alone > stop_ns)
    if not len(late):
        return []
    first, alone_ns = int(late[0]), float(alone[late[0]])
    return [
        f"{len(late)} flow(s) cannot finish before simulation.stop {format_time_ns(stop_ns)} even "
        f"alone at NIC speed (flow {first} needs {format_time_ns(alone_ns)}); they will be "
        "reported unfinished"
    ]
