"""``heterosim collective`` options checked before anything runs: ranks, sizes, seeds, the flow
budget and the output folders."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from heterosim.config.experiment import MAX_SEED
from heterosim.config.fields import integer_value
from heterosim.config.limits import (
    MAX_CHANNELS,
    MAX_COLLECTIVE_BYTES,
    SIMPLE_CHUNK_MAX,
    check_budget,
    collective_flow_floor,
)
from heterosim.errors import UserError
from heterosim.report.staging import check_output_folder
from heterosim.units import format_size


def check_collective_request(args: Any, sizes: Sequence[int], ranks: Sequence[int], cluster: Any) -> None:
    """``heterosim collective`` options: ranges, output folders, and the flow budget."""
    world = cluster.world_size
    if len(ranks) < 2:
        raise UserError(f"--ranks {args.ranks}: a collective needs at least 2 ranks, got {len(ranks)}")
    if len(set(ranks)) != len(ranks):
        raise UserError(f"--ranks {args.ranks}: a GPU is listed twice")
    bad = [r for r in ranks if not 0 <= r < world]
    if bad:
        raise UserError(f"--ranks {args.ranks}: GPU {bad[0]} out of range 0..{world - 1}")
    integer_value(args.channels, "--channels", minimum=0, maximum=MAX_CHANNELS)
    integer_value(args.root, "--root", minimum=0, maximum=len(ranks) - 1)
    integer_value(args.seed, "--seed", minimum=0, maximum=MAX_SEED)
    for size in sizes:
        if size <= 0:
            raise UserError(f"--size {args.size}: expected sizes > 0 bytes")
        if size > MAX_COLLECTIVE_BYTES:
            raise UserError(
                f"--size {args.size}: {format_size(size)} is above the 1TiB per collective simulated here"
            )
    largest = max(sizes)
    check_budget(
        "--size",
        args.size,
        f"{args.op} of {format_size(largest)} over {len(ranks)} "
        f"ranks in chunks of at most {format_size(SIMPLE_CHUNK_MAX)}",
        collective_flow_floor(str(args.op).lower(), largest, len(ranks)),
    )
    for option in ("out", "chakra"):
        value = getattr(args, option, None)
        if value:
            check_output_folder(value, f"--{option}")
