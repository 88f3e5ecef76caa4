"""Typed access to one YAML mapping, with errors that name the file and the dotted key.

A :class:`Section` wraps a dict read from ``source`` at ``path`` (e.g. ``parallel``). Its getters
check type and range and raise :class:`~heterosim.errors.UserError` reading
``file.yaml: parallel.tp: expected a positive integer, got 'eight'``. Unknown keys are reported
too, so a typo never passes silently.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from heterosim.errors import UserError
from heterosim.units import parse_rate, parse_size, parse_time_ns

_MISSING = object()


def read_yaml_mapping(path: str | Path) -> dict[str, Any]:
    """Load a YAML file that must hold a mapping; every problem is a one-line UserError."""
    path = Path(path)
    if not path.exists():
        raise UserError(f"{path}: file not found")
    if path.is_dir():
        raise UserError(f"{path}: is a directory, expected a YAML file")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else "?"
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise UserError(f"{path}: {where}: invalid YAML: {problem}") from None
    except UnicodeDecodeError:
        raise UserError(f"{path}: not a text file") from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a mapping at the top level, got {type(data).__name__}")
    return data


class Section:
    """A mapping from a config file, read key by key with checked types."""

    def __init__(self, data: Any, source: str, path: str = "") -> None:
        self.source = source
        self.path = path
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise self.error("", f"expected a mapping, got {type(data).__name__} {data!r}")
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
        value = self.raw(key, default)
        if value is default and default is not _MISSING:
            return value
        if not isinstance(value, str):
            raise self.error(key, f"expected a string, got {value!r}")
        if choices is not None:
            options = list(choices)
            if value.lower() not in [c.lower() for c in options]:
                raise self.error(key, f"expected one of {', '.join(options)}, got {value!r}")
            value = value.lower()
        return value

    def integer(
        self, key: str, default: Any = _MISSING, minimum: int | None = None,
        maximum: int | None = None,
    ) -> int:
        value = self.raw(key, default)
        if value is default and default is not _MISSING:
            return value
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(key, f"expected an integer, got {value!r}")
        if minimum is not None and value < minimum:
            raise self.error(key, f"expected an integer >= {minimum}, got {value}")
        if maximum is not None and value > maximum:
            raise self.error(key, f"expected an integer <= {maximum}, got {value}")
        return value

    def number(self, key: str, default: Any = _MISSING, minimum: float | None = None,
               maximum: float | None = None) -> float:
        value = self.raw(key, default)
        if value is default and default is not _MISSING:
            return value
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.error(key, f"expected a number, got {value!r}")
        if minimum is not None and value < minimum:
            raise self.error(key, f"expected a number >= {minimum}, got {value}")
        if maximum is not None and value > maximum:
            raise self.error(key, f"expected a number <= {maximum}, got {value}")
        return float(value)

    def boolean(self, key: str, default: Any = _MISSING) -> bool:
        value = self.raw(key, default)
        if not isinstance(value, bool):
            raise self.error(key, f"expected true or false, got {value!r}")
        return value

    def size(self, key: str, default: Any = _MISSING) -> int:
        """Bytes from a size such as ``4KiB``."""
        value = self.raw(key, default)
        if value is default and not isinstance(default, str):
            return default
        try:
            return parse_size(value)
        except ValueError as exc:
            raise self.error(key, str(exc)) from None

    def rate(self, key: str, default: Any = _MISSING) -> float:
        """Bits per second from a rate such as ``400Gbps`` or ``450GB/s``."""
        value = self.raw(key, default)
        if value is default and not isinstance(default, str):
            return default
        try:
            return parse_rate(value)
        except ValueError as exc:
            raise self.error(key, str(exc)) from None

    def time_ns(self, key: str, default: Any = _MISSING) -> int:
        """Nanoseconds from a time such as ``1us``."""
        value = self.raw(key, default)
        if value is default and not isinstance(default, str):
            return default
        try:
            return parse_time_ns(value)
        except ValueError as exc:
            raise self.error(key, str(exc)) from None

    def reject_unknown(self, extra_allowed: Iterable[str] = ()) -> None:
        """Raise for any key that no getter asked for (typos, misplaced keys)."""
        allowed = self._read | set(extra_allowed)
        unknown = [k for k in self.data if k not in allowed]
        if unknown:
            known = ", ".join(sorted(allowed)) or "none"
            raise self.error(unknown[0], f"unknown key; expected one of: {known}")
