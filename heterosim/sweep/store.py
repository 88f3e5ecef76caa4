"""The sweep's result store: one JSON object per line, appended and fsync'd as each run finishes.

Appending a line is the moment a run counts as done, so a crash or Ctrl-C loses at most the runs
in flight. A line cut short by a crash is ignored when reading (and the next append starts on a
fresh line); when an id appears more than once the last line wins (a retried variant).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


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
