"""Rank lists on the command line (``--ranks 0-3,8,10-11``): one parser for every command."""

from __future__ import annotations

from heterosim.errors import UserError


def parse_ranks(text: str | None, world_size: int, option: str = "--ranks") -> list[int]:
    """``0-15`` / ``0,8,16`` / ``0-7,16-23`` -> ranks in the order written; None -> all of them.

    Every rank must lie in ``0..world_size-1`` and appear once; a range ``a-b`` needs ``a <= b``.
    The order is kept (a communicator's order for ``heterosim collective``).
    """
    if text is None:
        return list(range(world_size))
    ranks: list[int] = []
    try:
        for part in str(text)[:100_000].split(","):
            part = part.strip()
            if part.startswith("-"):
                raise UserError(f"{option} {text!r}: ranks are >= 0, got {part}")
            if "-" in part:
                low, high = (int(x) for x in part.split("-", 1))
                if high < low:
                    raise ValueError
                if high >= world_size:  # before the range is built: 0-100000000 costs nothing
                    raise UserError(f"{option} {text!r}: rank {high} is outside 0..{world_size - 1}")
                ranks.extend(range(low, high + 1))
            else:
                ranks.append(int(part))
    except ValueError:
        raise UserError(f"{option} {text!r}: expected ranks like 0-15 or 0,8,16") from None
    bad = [r for r in ranks if not 0 <= r < world_size]
    if bad:
        raise UserError(f"{option} {text!r}: rank {bad[0]} is outside 0..{world_size - 1}")
    if len(set(ranks)) != len(ranks):
        twice = next(r for i, r in enumerate(ranks) if r in ranks[:i])
        raise UserError(f"{option} {text!r}: rank {twice} is listed twice")
    return ranks
