"""The sweep's result store: one JSON object per line, appended and fsync'd as each run finishes.

Appending a line is the moment a run counts as done, so a crash or Ctrl-C loses at most the runs
in flight. A line cut short by a crash is ignored when reading (and the next append starts on a
fresh line); when an id appears more than once the last line wins (a retried variant).
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from heterosim.config.fields import read_text_file
from heterosim.errors import UserError

_DAMAGED = "a damaged state file; remove it or choose another --out"


class ResultStore:
    """Append-only JSON-lines file of run records keyed by ``id``."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.malformed_lines = 0

    def exists(self) -> bool:
        return self.path.exists() and self.path.stat().st_size > 0

    def records(self) -> list[dict[str, Any]]:
        """Every well-formed record, in file order."""
        self.malformed_lines = 0
        if not self.path.exists():
            return []
        out = []
        with self.path.open("r", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                line = line.strip()
                if not line:
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    self.malformed_lines += 1
                    continue
                if isinstance(record, dict) and isinstance(record.get("id"), str):
                    out.append(record)
                else:
                    self.malformed_lines += 1
        return out

    def latest(self) -> dict[str, dict[str, Any]]:
        """The last record of each id."""
        return {record["id"]: record for record in self.records()}

    def append(self, record: dict[str, Any]) -> None:
        """Write one record as a line and fsync it before returning."""
        line = json.dumps(record, sort_keys=True, default=str)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("ab") as handle:
            if handle.tell() > 0 and not self._ends_with_newline():
                handle.write(b"\n")  # a previous writer died mid-line
            handle.write(line.encode("utf-8") + b"\n")
            handle.flush()
            os.fsync(handle.fileno())

    def _ends_with_newline(self) -> bool:
        with self.path.open("rb") as handle:
            handle.seek(-1, os.SEEK_END)
            return handle.read(1) == b"\n"


def read_manifest(path: Path, keys: dict[str, type]) -> dict[str, Any] | None:
    """The JSON object a run left in ``path`` (None when there is none), checked: an unreadable
    file, one that is not a JSON object, or a key of ``keys`` of another type is a one-line
    UserError naming the file and the key."""
    if not path.exists():
        return None
    text = read_text_file(path, "JSON state file")
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        raise UserError(f"{path}: not JSON: {_DAMAGED}") from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a JSON object, got {type(data).__name__}: {_DAMAGED}")
    for key, kind in keys.items():
        if key in data and data[key] is not None and not isinstance(data[key], kind):
            raise UserError(
                f"{path}: {key}: expected a {kind.__name__}, got {type(data[key]).__name__}: {_DAMAGED}"
            )
    return data


def _finite(value: Any, positive: bool) -> bool:
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and (value > 0 if positive else value >= 0)
    )


def check_run_record(record: dict[str, Any], path: Path) -> None:
    """A finished run's record as a plan search ranks it: ``iteration_time_s`` a finite number
    > 0, ``breakdown`` a mapping whose times (``*_s``) are finite numbers >= 0, ``network`` and
    ``sim`` mappings; anything else is a one-line UserError naming the file and the record, so a
    damaged record never ranks."""
    where = f"{path}: record {str(record.get('id'))[:60]!r}"
    if not _finite(record.get("iteration_time_s"), positive=True):
        raise UserError(
            f"{where}: iteration_time_s: expected a number > 0, got "
            f"{str(record.get('iteration_time_s'))[:60]!r}: {_DAMAGED}"
        )
    breakdown = record.get("breakdown")
    if not isinstance(breakdown, dict) or not all(
        _finite(v, positive=False) for k, v in breakdown.items() if str(k).endswith("_s")
    ):
        raise UserError(f"{where}: breakdown: expected a mapping of times >= 0: {_DAMAGED}")
    for key in ("network", "sim"):
        if not isinstance(record.get(key), dict):
            raise UserError(f"{where}: {key}: expected a mapping: {_DAMAGED}")
