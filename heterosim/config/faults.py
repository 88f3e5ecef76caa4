"""``faults:``: events at simulated times (README.md, "Faults: a failing link, a degraded link,
a straggler GPU"; docs/config.md).

Each entry is one fault::

    {at: 5ms, link: "h3.nic0-leaf0", down: 2ms}     # link down for 2 ms (down: true = to the end)
    {at: 0ms, link: "leaf0-spine1", rate: 100Gbps}  # degraded rate (optional until: 8ms)
    {at: 0ms, link: "h5.nic2-leaf1", loss: 1e-4}    # random frame loss (optional until)
    {at: 0ms, gpu: 17, slowdown: 1.3}               # a straggler GPU (optional until)

Links are named by their two ends as in links.csv (``a->b`` or ``a-b``, either order: both
directions of the link); only fabric links (NIC to leaf, leaf to spine) can fail. What a name
refers to, and whether a GPU exists, is checked against the topology in
:mod:`heterosim.engine.faults`; this module checks the shape and the values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from heterosim.config.fields import Section
from heterosim.errors import UserError

FAULT_KINDS = ("down", "rate", "loss", "slowdown")
MAX_FAULTS = 1000
MIN_SLOWDOWN, MAX_SLOWDOWN = 0.01, 1000.0  # one straggler's factor, and that of overlapping ones


@dataclass(frozen=True)
class FaultSpec:
    """One fault as written in the experiment (times in ns; ``until_ns`` None = to the end)."""

    index: int
    kind: str  # down | rate | loss | slowdown
    at_ns: int
    until_ns: int | None
    link: str | None = None  # link name as written
    gpu: int | None = None
    rate_bps: float = 0.0
    loss: float = 0.0
    slowdown: float = 1.0
    where: str = ""  # "file: faults[i]" for messages

    @property
    def target(self) -> str:
        return self.link if self.link is not None else f"gpu {self.gpu}"


def parse_faults(value: Any, source: str) -> tuple[FaultSpec, ...]:
    """Validate the ``faults`` list of an experiment read from ``source``."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise UserError(f"{source}: faults: expected a list of fault entries, got {value!r:.60}")
    if len(value) > MAX_FAULTS:  # before any entry is read (overlaps are checked pair by pair)
        raise UserError(f"{source}: faults: {len(value):,} entries; at most {MAX_FAULTS:,}")
    return tuple(_fault(entry, source, i) for i, entry in enumerate(value))


def _fault(entry: Any, source: str, index: int) -> FaultSpec:
    section = Section(entry, source, f"faults[{index}]")
    where = f"{source}: faults[{index}]"
    kinds = [k for k in FAULT_KINDS if section.has(k)]
    if len(kinds) != 1:
        raise section.error(
            "", f"expected exactly one of {', '.join(FAULT_KINDS)}, got {', '.join(kinds) or 'none'}"
        )
    kind = kinds[0]
    at_ns = section.time_ns("at")
    if at_ns < 0:
        raise section.error("at", f"expected a time >= 0, got {at_ns} ns")
    link = gpu = None
    if kind == "slowdown":
        gpu = section.integer("gpu", minimum=0)
    else:
        link = section.string("link")
    until_ns: int | None = None
    rate_bps, loss, slowdown = 0.0, 0.0, 1.0
    if kind == "down":
        down = section.raw("down")
        if down is True:
            until_ns = None
        elif down is False:
            raise section.error("down", "expected a duration (e.g. 2ms) or true (to the end of the run)")
        else:
            duration = section.time_ns("down")
            if duration <= 0:
                raise section.error("down", f"expected a duration > 0, got {duration} ns")
            until_ns = at_ns + duration
    else:
        if kind == "rate":
            rate_bps = section.rate("rate", minimum=1e8, maximum=1e14)  # 100 Mbit/s .. 100 Tbit/s
            if rate_bps <= 0:
                raise section.error("rate", "expected a rate > 0 (a link at 0 is down: use down:)")
        elif kind == "loss":
            loss = section.number("loss", minimum=0.0, maximum=0.5)
            if loss <= 0:
                raise section.error("loss", f"expected a probability in (0, 0.5], got {loss}")
        else:
            slowdown = section.number("slowdown", minimum=MIN_SLOWDOWN, maximum=MAX_SLOWDOWN)
        if section.has("until"):
            until_ns = section.time_ns("until")
            if until_ns <= at_ns:
                raise section.error("until", f"expected a time after at ({at_ns} ns), got {until_ns} ns")
    section.reject_unknown()
    return FaultSpec(
        index=index,
        kind=kind,
        at_ns=at_ns,
        until_ns=until_ns,
        link=link,
        gpu=gpu,
        rate_bps=rate_bps,
        loss=loss,
        slowdown=slowdown,
        where=where,
    )


def fault_warnings(faults: tuple[FaultSpec, ...]) -> list[str]:
    """Faults that are valid but surely not meant: a straggler "slowdown" below 1 makes its GPU
    faster than its datasheet."""
    return [
        f"{spec.where}: slowdown: {spec.slowdown:g} is below 1: GPU {spec.gpu} runs "
        f"{1 / spec.slowdown:g}x faster, not slower (a straggler is slowdown > 1)"
        for spec in faults
        if spec.kind == "slowdown" and spec.slowdown < 1
    ]
