"""The files beside the traces: ``comm_group.json`` and the ``<prefix>.<rank>.et`` listing."""

from __future__ import annotations

import json
from pathlib import Path

from heterosim.config.fields import read_text_file
from heterosim.errors import UserError
from heterosim.workload.chakra.reader import TRACE_NAME

COMM_GROUP_FILE = "comm_group.json"


def write_comm_groups(groups: dict[int, list[int]], path: str | Path) -> None:
    """Write ``{"<group id>": [ranks...]}`` (Chakra's comm_group.json), ids in order."""
    body = {str(int(g)): [int(r) for r in ranks] for g, ranks in sorted(groups.items())}
    try:
        Path(path).write_text(json.dumps(body, indent=1) + "\n")
    except OSError as exc:
        raise UserError(f"{path}: cannot write communicator groups: {exc.strerror or exc}") from exc


def read_comm_groups(path: str | Path) -> dict[int, list[int]]:
    """Read comm_group.json: group id -> member ranks."""
    path = Path(path)
    try:
        body = json.loads(read_text_file(path, "comm_group.json file"))
    except (json.JSONDecodeError, RecursionError) as exc:
        if isinstance(exc, RecursionError):
            raise UserError(f"{path}: not valid JSON: nested too deeply") from None
        raise UserError(f"{path}: not valid JSON: {exc.msg} at line {exc.lineno}") from None
    if not isinstance(body, dict):
        raise UserError(f'{path}: expected an object {{"<group id>": [ranks...]}}')
    groups: dict[int, list[int]] = {}
    for key, ranks in body.items():
        try:
            group = int(key) if len(key) <= 12 else -1
        except ValueError:
            group = -1
        if not 0 <= group < 2**31:
            raise UserError(f"{path}: {key[:40]}: a group id must be an integer in 0..2^31-1")
        if not isinstance(ranks, list) or not all(
            isinstance(r, int) and not isinstance(r, bool) and 0 <= r < 2**31 for r in ranks
        ):
            raise UserError(f"{path}: {key}: expected a list of non-negative integer ranks")
        groups[group] = list(ranks)
    return groups


def trace_files(directory: str | Path) -> dict[int, Path]:
    """The ``<prefix>.<rank>.et`` (or ``.et.gz``) files of a directory, by rank."""
    directory = Path(directory)
    if not directory.is_dir():
        raise UserError(f"{directory}: not a directory of traces")
    found: dict[int, Path] = {}
    for path in sorted(directory.iterdir()):
        match = TRACE_NAME.match(path.name)
        if not match or not path.is_file():
            continue
        rank = int(match.group("rank"))
        if rank in found:
            raise UserError(f"{directory}: two traces for rank {rank}: {found[rank].name} and {path.name}")
        found[rank] = path
    return dict(sorted(found.items()))
