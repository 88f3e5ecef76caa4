"""Quantities written with their units: ``400Gbps``, ``900GB/s``, ``2us``, ``4KiB``, ``1GiB``.

The one place that turns text into numbers. Internal units:

* sizes: integer bytes (``KB`` = 1000, ``KiB`` = 1024; ``b``/``bit`` are bits);
* rates: bits per second as a float (``Gbps`` = 1e9 bit/s; ``GB/s`` = 8e9 bit/s);
* times: integer nanoseconds (``s``, ``ms``, ``us``/``µs``, ``ns``).

Every parser raises :class:`ValueError` with a short reason; config loaders wrap it into a
:class:`~heterosim.errors.UserError` naming the file and key.

Every quantity must be finite and lie inside a physical range (fields narrow it further, see
:mod:`heterosim.config.fields`): sizes up to :data:`MAX_SIZE_BYTES` (1 PiB, far above any
buffer, message or memory the models handle, and safe in int64 counters), rates from
:data:`MIN_RATE_BPS` (1 kbit/s) to :data:`MAX_RATE_BPS` (1 Pbit/s), times up to
:data:`MAX_TIME_NS` (one simulated day).
"""

from __future__ import annotations

import math
import re

from heterosim.errors import UserError

MAX_SIZE_BYTES = 2**50  # 1 PiB
MIN_RATE_BPS = 1e3
MAX_RATE_BPS = 1e15
MAX_TIME_NS = 86_400 * 10**9  # one day of simulated time

_NUMBER = r"([-+]?[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)"
_QUANTITY = re.compile(rf"^\s*{_NUMBER}\s*([A-Za-zµ/]*)\s*$")

_SIZE_UNITS: dict[str, float] = {
    "": 1,
    "B": 1,
    "KB": 1e3,
    "MB": 1e6,
    "GB": 1e9,
    "TB": 1e12,
    "KiB": 2**10,
    "MiB": 2**20,
    "GiB": 2**30,
    "TiB": 2**40,
    "k": 2**10,
    "K": 2**10,
    "M": 2**20,
    "G": 2**30,
}

_RATE_UNITS: dict[str, float] = {
    "bps": 1,
    "Kbps": 1e3,
    "Mbps": 1e6,
    "Gbps": 1e9,
    "Tbps": 1e12,
    "b/s": 1,
    "Kb/s": 1e3,
    "Mb/s": 1e6,
    "Gb/s": 1e9,
    "Tb/s": 1e12,
    "B/s": 8,
    "KB/s": 8e3,
    "MB/s": 8e6,
    "GB/s": 8e9,
    "TB/s": 8e12,
    "GBps": 8e9,
    "MBps": 8e6,
    "TBps": 8e12,
}

_TIME_UNITS: dict[str, float] = {"s": 1e9, "ms": 1e6, "us": 1e3, "µs": 1e3, "ns": 1}


def _split(text: str | int | float, what: str) -> tuple[float, str]:
    if isinstance(text, bool):
        raise ValueError(f"expected a {what} with a unit, got {text!r}")
    if isinstance(text, (int, float)):
        value, unit = _finite(text, what), ""
    elif isinstance(text, str) and len(text) <= 64:
        match = _QUANTITY.match(text)
        if not match:
            raise ValueError(f"expected a {what} like {_EXAMPLE[what]}, got {text!r}")
        value, unit = _finite(match.group(1), what), match.group(2)
    else:
        shown = repr(text) if len(repr(text)) <= 40 else repr(text)[:40] + "..."
        raise ValueError(f"expected a {what} like {_EXAMPLE[what]}, got {shown}")
    return value, unit


def _finite(number: int | float | str, what: str) -> float:
    """``number`` as a finite float (ValueError for inf, NaN or one too large for a float)."""
    try:
        value = float(number)
    except OverflowError:
        value = math.inf
    if not math.isfinite(value):
        raise ValueError(f"expected a finite {what}, got {number!r}")
    return value


_EXAMPLE = {"size": "'4KiB' or '1GiB'", "rate": "'400Gbps' or '900GB/s'", "time": "'2us'"}


def parse_size(text: str | int | float) -> int:
    """Bytes in ``text`` (``4KiB`` -> 4096, ``1MB`` -> 1000000, a bare number is bytes)."""
    value, unit = _split(text, "size")
    if unit not in _SIZE_UNITS:
        raise ValueError(f"unknown size unit {unit!r} in {text!r}; use B, KB, MB, GB, KiB, MiB, GiB")
    result = value * _SIZE_UNITS[unit]
    if result < 0:
        raise ValueError(f"size must not be negative, got {text!r}")
    if result > MAX_SIZE_BYTES:
        raise ValueError(f"size {text!r} is above the 1PiB any model here handles")
    return int(round(result))


def parse_rate(text: str | int | float) -> float:
    """Bits per second in ``text`` (``400Gbps`` -> 4e11, ``900GB/s`` -> 7.2e12).

    A bare number is refused: a rate without a unit is too easy to misread.
    """
    value, unit = _split(text, "rate")
    if unit == "":
        raise ValueError(f"rate {text!r} needs a unit, e.g. '400Gbps' or '450GB/s'")
    if unit not in _RATE_UNITS:
        raise ValueError(f"unknown rate unit {unit!r} in {text!r}; use Gbps, Mbps, GB/s, MB/s")
    if value <= 0:
        raise ValueError(f"rate must be positive, got {text!r}")
    rate = value * _RATE_UNITS[unit]
    if not MIN_RATE_BPS <= rate <= MAX_RATE_BPS:
        raise ValueError(f"rate {text!r} is outside 1Kbps..1000Tbps")
    return rate


def parse_time_ns(text: str | int | float) -> int:
    """Integer nanoseconds in ``text`` (``2us`` -> 2000). A bare number is refused."""
    value, unit = _split(text, "time")
    if unit == "":
        raise ValueError(f"time {text!r} needs a unit, e.g. '1us' or '10ms'")
    if unit not in _TIME_UNITS:
        raise ValueError(f"unknown time unit {unit!r} in {text!r}; use s, ms, us, ns")
    if value < 0:
        raise ValueError(f"time must not be negative, got {text!r}")
    time_ns = value * _TIME_UNITS[unit]
    if time_ns > MAX_TIME_NS:
        raise ValueError(f"time {text!r} is longer than one day of simulated time")
    return int(round(time_ns))


def parse_size_range(text: str) -> list[int]:
    """Sizes in ``'1KiB..8GiB'`` (powers of two from low to high, inclusive) or one size."""
    text = str(text)[:200]
    if ".." not in text:
        return [parse_size(text)]
    low_text, high_text = text.split("..", 1)
    low, high = parse_size(low_text), parse_size(high_text)
    if low <= 0 or high < low:
        raise ValueError(f"size range {text!r} must go from a positive size up")
    sizes = []
    size = low
    while size <= high:
        sizes.append(size)
        size *= 2
    return sizes


def format_size(size_bytes: float) -> str:
    """Readable binary size: 4096 -> '4KiB', 1536 -> '1.5KiB'."""
    for unit, factor in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if size_bytes >= factor:
            value = size_bytes / factor
            return f"{value:g}{unit}" if value == int(value) else f"{value:.3g}{unit}"
    return f"{int(size_bytes)}B"


def format_rate(bits_per_s: float) -> str:
    """Readable rate: 4e11 -> '400Gbps'."""
    for unit, factor in (("Tbps", 1e12), ("Gbps", 1e9), ("Mbps", 1e6), ("Kbps", 1e3)):
        if bits_per_s >= factor:
            return f"{bits_per_s / factor:g}{unit}"
    return f"{bits_per_s:g}bps"


def format_time_ns(time_ns: float) -> str:
    """Readable time: 2000 -> '2us'."""
    for unit, factor in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if time_ns >= factor:
            return f"{time_ns / factor:.4g}{unit}"
    return f"{time_ns:g}ns"


def stop_time_ns(text: str | None, option: str = "--until") -> int | None:
    """A simulated stop time given on the command line (None when not given); a malformed or
    non-positive time is a one-line error naming ``option``."""
    if text is None:
        return None
    try:
        stop_ns = parse_time_ns(text)
    except ValueError as exc:
        raise UserError(f"{option} {text}: {exc}") from None
    if stop_ns <= 0:
        raise UserError(f"{option} {text}: expected a simulated time > 0")
    return stop_ns
