"""Typed access to one YAML mapping, with errors that name the file and the dotted key.

A :class:`Section` wraps a dict read from ``source`` at ``path`` (e.g. ``parallel``). Its getters
check type and range and raise :class:`~heterosim.errors.UserError` reading
``file.yaml: parallel.tp: expected a positive integer, got 'eight'``. Unknown keys are reported
too, so a typo never passes silently.

The module-level checks (:func:`integer_value`, :func:`positive_int`, :func:`number_value`,
:func:`size_value`, :func:`rate_value`, :func:`time_value`) are the same rules for values that
do not come from a Section (command-line options, JSON files): every number finite, inside its
documented range, an integer where it must be one, and the same one-line message everywhere.

YAML is read by :func:`load_yaml_text` / :func:`read_yaml_mapping`, which bound what a file can
make the loader build: at most :data:`MAX_YAML_DEPTH` levels of nesting and
:data:`MAX_YAML_NODES` values, counted over the parser's events before any node is built and
again once aliases are expanded ("billion laughs"), and only regular files of at most
:data:`MAX_YAML_BYTES` (a FIFO or a device is refused, never read).
"""

from __future__ import annotations

import math
import os
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from heterosim.errors import UserError
from heterosim.units import parse_rate, parse_size, parse_time_ns

_MISSING = object()

MAX_INT = 2**31 - 1  # default upper bound of an integer key (counts, ids, dimensions)
MAX_YAML_DEPTH = 64
MAX_YAML_NODES = 1_000_000
MAX_YAML_BYTES = 64 << 20


def _where(source: str | None, key: str | None) -> str:
    return ": ".join(p for p in (source, key) if p)


def _fail(source: str | None, key: str | None, problem: str) -> UserError:
    where = _where(source, key)
    return UserError(f"{where}: {problem}" if where else problem)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _in_range(
    number: float,
    value: Any,
    minimum: float | None,
    maximum: float | None,
    what: str,
    source: str | None,
    key: str,
    unit: str = "",
    bound: str = "",
) -> None:
    """Fail unless ``minimum <= number <= maximum`` (either may be None), naming ``what``."""
    for op, limit, outside in (
        (">=", minimum, number < minimum if minimum is not None else False),
        ("<=", maximum, number > maximum if maximum is not None else False),
    ):
        if outside:
            raise _fail(source, key, f"expected {what} {op} {limit:{bound}}{unit}, got {_shown(value)}")


def integer_value(
    value: Any,
    key: str,
    source: str | None = None,
    *,
    minimum: int | None = None,
    maximum: int | None = MAX_INT,
) -> int:
    """``value`` as an integer in ``[minimum, maximum]`` (a bool, float or text is refused)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise _fail(source, key, f"expected an integer, got {_shown(value)}")
    _in_range(value, value, minimum, maximum, "an integer", source, key)
    return value


def positive_int(value: Any, key: str, source: str | None = None, *, maximum: int | None = MAX_INT) -> int:
    """An integer >= 1 (and <= ``maximum``)."""
    return integer_value(value, key, source, minimum=1, maximum=maximum)


def non_negative_int(
    value: Any, key: str, source: str | None = None, *, maximum: int | None = MAX_INT
) -> int:
    """An integer >= 0 (and <= ``maximum``)."""
    return integer_value(value, key, source, minimum=0, maximum=maximum)


def number_value(
    value: Any,
    key: str,
    source: str | None = None,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
) -> float:
    """``value`` as a finite float in ``[minimum, maximum]`` (inf, NaN, text, bool refused)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _fail(source, key, f"expected a number, got {_shown(value)}")
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise _fail(source, key, f"expected a finite number, got {_shown(value)}")
    _in_range(number, value, minimum, maximum, "a number", source, key)
    return number


def size_value(
    value: Any, key: str, source: str | None = None, *, minimum: int | None = None, maximum: int | None = None
) -> int:
    """Bytes from a size such as ``4KiB``, in ``[minimum, maximum]`` bytes."""
    try:
        size = parse_size(value)
    except ValueError as exc:
        raise _fail(source, key, str(exc)) from None
    _in_range(size, value, minimum, maximum, "a size", source, key, unit=" bytes")
    return size


def rate_value(
    value: Any,
    key: str,
    source: str | None = None,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
) -> float:
    """Bits per second from a rate such as ``400Gbps``, in ``[minimum, maximum]`` bit/s."""
    try:
        rate = parse_rate(value)
    except ValueError as exc:
        raise _fail(source, key, str(exc)) from None
    _in_range(rate, value, minimum, maximum, "a rate", source, key, unit=" bit/s", bound="g")
    return rate


def time_value(
    value: Any, key: str, source: str | None = None, *, minimum: int | None = None, maximum: int | None = None
) -> int:
    """Nanoseconds from a time such as ``1us``, in ``[minimum, maximum]`` ns."""
    try:
        time_ns = parse_time_ns(value)
    except ValueError as exc:
        raise _fail(source, key, str(exc)) from None
    _in_range(time_ns, value, minimum, maximum, "a time", source, key, unit=" ns")
    return time_ns


def plain_name(value: Any, key: str, source: str | None = None, *, max_length: int = 128) -> str:
    """A name that may become a file or folder name: printable, no path separator, not . or ..,
    at most ``max_length`` characters."""
    if (
        not isinstance(value, str)
        or not value
        or len(value) > max_length
        or value in (".", "..")
        or any(c in value for c in "/\\")
        or not value.isprintable()
    ):
        raise _fail(
            source,
            key,
            f"expected a plain name (printable, no / or \\, at most "
            f"{max_length} characters), got {_shown(value)}",
        )
    return value


class _YamlTooLarge(Exception):
    """Raised while reading a document nested too deep, holding too many values or expanding too
    far."""


_FastLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's parser when built
_OPENS = (yaml.SequenceStartEvent, yaml.MappingStartEvent)
_CLOSES = (yaml.SequenceEndEvent, yaml.MappingEndEvent)


def _scan_events(text: str) -> bool:
    """One pass over the parser's events before any node is built: refuse a document nested
    deeper than :data:`MAX_YAML_DEPTH` or holding more than :data:`MAX_YAML_NODES` values (a
    huge file fails here in about a second per million values instead of being composed);
    return whether it uses aliases."""
    depth = values = 0
    aliases = False
    for event in yaml.parse(text, Loader=_FastLoader):
        if isinstance(event, _OPENS):
            depth += 1
            if depth > MAX_YAML_DEPTH:
                raise _YamlTooLarge(f"nested more than {MAX_YAML_DEPTH} levels deep")
        elif isinstance(event, _CLOSES):
            depth -= 1
            continue
        elif isinstance(event, yaml.AliasEvent):
            aliases = True
        elif not isinstance(event, yaml.ScalarEvent):
            continue
        values += 1
        if values > MAX_YAML_NODES:
            raise _YamlTooLarge(
                f"holds more than {MAX_YAML_NODES:,} values; a configuration file this large is not expected"
            )
    return aliases


def _expanded_nodes(node: yaml.Node) -> int:
    """Nodes of the document once every alias is expanded (shared nodes counted per use)."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()  # on the current path: an alias back to one is a cycle
    stack: list[tuple[yaml.Node, bool]] = [(node, False)]
    while stack:
        current, children_done = stack.pop()
        if id(current) in sizes:
            continue
        if not children_done and id(current) in open_nodes:
            raise _YamlTooLarge("an alias refers to the value that contains it")
        if isinstance(current, yaml.ScalarNode):
            sizes[id(current)] = 1
            continue
        children = (
            [x for pair in current.value for x in pair]
            if isinstance(current, yaml.MappingNode)
            else list(current.value)
        )
        if children_done:
            total = 1 + sum(sizes.get(id(c), 1) for c in children)
            sizes[id(current)] = min(total, MAX_YAML_NODES + 1)
            open_nodes.discard(id(current))
            continue
        open_nodes.add(id(current))
        stack.append((current, True))
        stack.extend((c, False) for c in children if id(c) not in sizes)
    return sizes[id(node)]


def load_yaml_text(text: str, source: str) -> Any:
    """Parse YAML ``text`` (from ``source``, for messages) with nesting, size and alias expansion
    bounded; every problem is a one-line UserError."""
    loader = None
    try:
        aliases = _scan_events(text)
        loader = _FastLoader(text)
        node = loader.get_single_node()
        if node is None:
            return None
        if aliases and _expanded_nodes(node) > MAX_YAML_NODES:
            raise _YamlTooLarge(
                f"expands to more than {MAX_YAML_NODES:,} values (aliases referring to aliases)"
            )
        return loader.construct_document(node)
    except _YamlTooLarge as exc:
        raise UserError(f"{source}: invalid YAML: {exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f": line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or getattr(exc, "reason", None) or "not YAML"
        raise UserError(f"{source}{where}: invalid YAML: {problem}") from None
    except (RecursionError, ValueError, TypeError, OverflowError) as exc:
        raise UserError(f"{source}: invalid YAML: {str(exc).splitlines()[0] if str(exc) else exc}") from None
    finally:
        if loader is not None:
            loader.dispose()


def parse_override_value(text: str, source: str) -> Any:
    """The value of a ``--set KEY=VALUE`` (YAML, bounded like a file; text that is not valid
    YAML stays a string)."""
    if len(text) > 1 << 16:
        raise UserError(f"{source}: value of {len(text)} characters; at most 65536")
    try:
        return load_yaml_text(text, source)
    except UserError as exc:
        if any(s in str(exc) for s in ("expands to", "nested more than", "refers to the value")):
            raise
        return text


def read_text_file(path: str | Path, what: str = "file", max_bytes: int = MAX_YAML_BYTES) -> str:
    """The text of a regular file; a missing path, folder, FIFO, device, binary or oversized
    file is a one-line UserError (and a FIFO is never opened, so nothing blocks)."""
    path = Path(path)
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise UserError(f"{path}: file not found") from None
    except OSError as exc:
        raise UserError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if stat.S_ISDIR(info.st_mode):
        raise UserError(f"{path}: is a directory, expected a {what}")
    if not stat.S_ISREG(info.st_mode):
        raise UserError(f"{path}: not a regular file (a pipe, socket or device), expected a {what}")
    if info.st_size > max_bytes:
        raise UserError(
            f"{path}: {info.st_size} bytes; a {what} of at most {max_bytes >> 20} MiB is expected"
        )
    try:
        with open(path, "rb") as handle:
            data = handle.read(max_bytes + 1)
    except OSError as exc:
        raise UserError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if b"\0" in data:
        raise UserError(f"{path}: not a text file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise UserError(f"{path}: not a text file (not UTF-8)") from None


def read_yaml_mapping(path: str | Path) -> dict[str, Any]:
    """Load a YAML file that must hold a mapping; every problem is a one-line UserError."""
    path = Path(path)
    data = load_yaml_text(read_text_file(path, "YAML file"), str(path))
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a mapping at the top level, got {type(data).__name__}")
    return data


class UnknownKeyError(UserError):
    """A key no reader asked for; ``source`` and ``key_path`` (``jobs[0].bogus``) say where, so a
    caller can tell a misplaced key from a bad value (a sweep's grid key that no variant can use)."""

    def __init__(self, message: str, source: str, key_path: str) -> None:
        super().__init__(message)
        self.source = source
        self.key_path = key_path


class Section:
    """A mapping from a config file, read key by key with checked types."""

    def __init__(self, data: Any, source: str, path: str = "") -> None:
        self.source = source
        self.path = path
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise self.error("", f"expected a mapping, got {type(data).__name__} {_shown(data)}")
        self.data: dict[str, Any] = data
        self._read: set[str] = set()

    def key_path(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path and key else (self.path or key)

    def error(self, key: str, problem: str) -> UserError:
        parts = [p for p in (self.source, self.key_path(key)) if p]
        return UserError(": ".join([*parts, problem]))

    def has(self, key: str) -> bool:
        return key in self.data and self.data[key] is not None

    def raw(self, key: str, default: Any = _MISSING) -> Any:
        self._read.add(key)
        if key not in self.data or self.data[key] is None:
            if default is _MISSING:
                raise self.error(key, "missing required key")
            return default
        return self.data[key]

    def section(self, key: str, required: bool = False) -> Section:
        value = self.raw(key, _MISSING if required else {})
        return Section(value, self.source, self.key_path(key))

    def string(self, key: str, default: Any = _MISSING, choices: Iterable[str] | None = None) -> str:
        if choices is not None and key in self.data and self.data[key] is None:
            # a closed set has no "nothing": null is a mistake, not the default
            raise self.error(key, f"expected one of {', '.join(choices)}, got null")
        value = self.raw(key, default)
        if value is default and default is not _MISSING:
            return value
        if not isinstance(value, str):
            raise self.error(key, f"expected a string, got {_shown(value)}")
        if choices is not None:
            options = list(choices)
            if value.lower() not in [c.lower() for c in options]:
                raise self.error(key, f"expected one of {', '.join(options)}, got {_shown(value)}")
            value = value.lower()
        return value

    def integer(
        self, key: str, default: Any = _MISSING, minimum: int | None = None, maximum: int | None = MAX_INT
    ) -> int:
        value = self.raw(key, default)
        if value is default and default is not _MISSING:
            return value
        return integer_value(value, self.key_path(key), self.source, minimum=minimum, maximum=maximum)

    def number(
        self, key: str, default: Any = _MISSING, minimum: float | None = None, maximum: float | None = None
    ) -> float:
        value = self.raw(key, default)
        if value is default and default is not _MISSING:
            return value
        return number_value(value, self.key_path(key), self.source, minimum=minimum, maximum=maximum)

    def boolean(self, key: str, default: Any = _MISSING) -> bool:
        value = self.raw(key, default)
        if not isinstance(value, bool):
            raise self.error(key, f"expected true or false, got {_shown(value)}")
        return value

    def boolean_or_auto(self, key: str) -> bool | None:
        """true or false, or None for ``auto`` (also when the key is absent)."""
        value = self.raw(key, "auto")
        if value == "auto":
            return None
        if not isinstance(value, bool):
            raise self.error(key, f"expected true, false or auto, got {_shown(value)}")
        return value

    def size(
        self, key: str, default: Any = _MISSING, minimum: int | None = None, maximum: int | None = None
    ) -> int:
        """Bytes from a size such as ``4KiB``, in ``[minimum, maximum]``."""
        value = self.raw(key, default)
        if value is default and not isinstance(default, str):
            return default
        return size_value(value, self.key_path(key), self.source, minimum=minimum, maximum=maximum)

    def rate(
        self, key: str, default: Any = _MISSING, minimum: float | None = None, maximum: float | None = None
    ) -> float:
        """Bits per second from a rate such as ``400Gbps`` or ``450GB/s``, in range."""
        value = self.raw(key, default)
        if value is default and not isinstance(default, str):
            return default
        return rate_value(value, self.key_path(key), self.source, minimum=minimum, maximum=maximum)

    def time_ns(
        self, key: str, default: Any = _MISSING, minimum: int | None = None, maximum: int | None = None
    ) -> int:
        """Nanoseconds from a time such as ``1us``, in ``[minimum, maximum]``."""
        value = self.raw(key, default)
        if value is default and not isinstance(default, str):
            return default
        return time_value(value, self.key_path(key), self.source, minimum=minimum, maximum=maximum)

    def reject_unknown(self, extra_allowed: Iterable[str] = ()) -> None:
        """Raise for any key that no getter asked for (typos, misplaced keys)."""
        allowed = self._read | set(extra_allowed)
        unknown = [k for k in self.data if k not in allowed]
        if unknown:
            known = ", ".join(sorted(allowed)) or "none"
            message = str(self.error(unknown[0], f"unknown key; expected one of: {known}"))
            raise UnknownKeyError(message, self.source, self.key_path(str(unknown[0])))
