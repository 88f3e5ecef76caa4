"""Write large all-numeric CSV files from numpy columns, byte for byte as :mod:`csv` would.

``csv.writer`` (excel dialect) writes an int with ``str``, a float with ``repr`` (shortest
round-trip form), separates fields with ``,`` and ends rows with ``\\r\\n``; at millions of rows
that costs several microseconds per row. Here rows are assembled in numpy, a block of rows at a
time: every field (with the comma before it) gets a fixed-width slot of whole 4-byte words in a
``uint32`` matrix, padded with NUL bytes, and the NULs are squeezed out before the block is
written. Integers become digits arithmetically, four at a time from a table; floats are formatted
with ``repr`` once per distinct bit pattern (simulation times repeat a lot: a 5.8 M-flow table
has ~25 k distinct start times) and gathered from a table.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import BinaryIO

import numpy as np

BLOCK_ROWS = 1 << 17
_POW10 = 10 ** np.arange(19, dtype=np.int64)
_LINE_END = np.frombuffer(b"\r\n\0\0", dtype=np.uint32)[0]


def write_numeric_csv(
    path: Path, header: list[str], columns: list[np.ndarray], block_rows: int = BLOCK_ROWS
) -> None:
    """Write ``header`` and the rows of ``columns`` (equal-length 1-D int or float arrays)."""
    write_numeric_csv_parts(path, header, [columns], block_rows)


def write_numeric_csv_parts(
    path: Path, header: list[str], parts: Iterable[list[np.ndarray]], block_rows: int = BLOCK_ROWS
) -> None:
    """Write ``header`` and the rows of each part in turn: a part is a list of columns as for
    :func:`write_numeric_csv`, and the file is the one the parts' rows concatenated would give
    (a large table built and written a part at a time, in bounded memory)."""
    with Path(path).open("wb") as handle:
        handle.write((",".join(header) + "\r\n").encode())
        for columns in parts:
            _write_rows(handle, header, columns, block_rows)


def _write_rows(handle: BinaryIO, header: list[str], columns: list[np.ndarray], block_rows: int) -> None:
    cols = [np.asarray(c) for c in columns]
    if len(cols) != len(header) or len({c.shape for c in cols}) > 1 or (cols and cols[0].ndim != 1):
        raise ValueError("write_numeric_csv: one 1-D column of equal length per header field")
    if any(c.dtype.kind not in "iuf" or c.dtype == np.uint64 for c in cols):
        raise ValueError("write_numeric_csv: columns must be signed/small unsigned ints or floats")
    fields = [
        _IntField(c, i > 0) if c.dtype.kind in "iu" else _FloatField(c, i > 0) for i, c in enumerate(cols)
    ]
    rows = cols[0].size if cols else 0
    block = _Block(fields, min(rows, block_rows))
    for lo in range(0, rows, block_rows):
        handle.write(block.render(lo, min(rows, lo + block_rows)))


class _Block:
    """Buffers for one block of rows, reused from block to block (every word of a row is
    rewritten each time)."""

    def __init__(self, fields: list, rows: int) -> None:
        self.fields = fields
        self.words = sum(f.words for f in fields) + 1
        self.slots = np.zeros((rows, self.words), dtype=np.uint32)
        self.keep = np.zeros(rows * self.words * 4, dtype=bool)
        self.text = np.zeros(rows * self.words * 4, dtype=np.uint8)

    def render(self, lo: int, hi: int) -> memoryview:
        """Rows ``lo:hi`` as bytes: fixed-width slots, line ends, then NUL padding removed."""
        out = self.slots[: hi - lo]
        word = 0
        for field in self.fields:
            field.fill(out, word, lo, hi)
            word += field.words
        out[:, word] = _LINE_END
        flat = out.view(np.uint8).ravel()
        keep = np.not_equal(flat, 0, out=self.keep[: flat.size])
        text = self.text[: np.count_nonzero(keep)]
        np.compress(keep, flat, out=text)
        return text.data


class _IntField:
    """``str(int)``: a word for the comma (and a minus sign), then the digits right-aligned,
    four per word from a lookup table."""

    def __init__(self, values: np.ndarray, comma: bool) -> None:
        self.values = values
        low, high = (int(values.min()), int(values.max())) if values.size else (0, 0)
        self.negative = low < 0
        self.comma = comma
        self.chunks = (len(str(max(abs(low), abs(high)))) + 3) // 4
        self.lead = int(comma or self.negative)
        self.words = self.lead + self.chunks

    def fill(self, out: np.ndarray, word: int, lo: int, hi: int) -> None:
        value = self.values[lo:hi].astype(np.int64, copy=False)
        magnitude = np.abs(value) if self.negative else value
        if self.chunks == 1:  # below 10^4: one table word, no leading zeros
            out[:, word + self.words - 1] = _DIGITS4[magnitude + 10_000]
        rest = magnitude
        for j in range(self.chunks if self.chunks > 1 else 0):
            present = rest > 0 if j else True
            rest, chunk = np.divmod(rest, 10_000)
            # 0: all four digits; 1: the leading chunk (no leading zeros); 2: nothing
            mode = 2 - np.asarray(present, dtype=np.int64) - (rest > 0)
            out[:, word + self.words - 1 - j] = _DIGITS4[chunk + 10_000 * mode]
        byte = out.view(np.uint8)
        if self.lead:
            out[:, word] = 0
        if self.comma:
            byte[:, 4 * word] = ord(",")
        if self.negative:
            rows = np.flatnonzero(value < 0)
            count = np.maximum(np.searchsorted(_POW10, magnitude[rows], side="right"), 1)
            byte[rows, 4 * (word + self.words) - 1 - count] = ord("-")


def _digit_table() -> np.ndarray:
    """Four ASCII bytes (one uint32) per chunk value 0-9999: zero-padded, then without leading
    zeros (NULs; 0 keeps one digit), then all NUL."""
    padded = np.frombuffer("".join(f"{i:04d}" for i in range(10_000)).encode(), np.uint8)
    padded = padded.reshape(10_000, 4)
    leading = padded.copy()
    value = np.arange(10_000)
    for k in range(3):  # digit k from the left is a leading zero below 10^(3-k)
        leading[value < 10 ** (3 - k), k] = 0
    table = np.concatenate([padded, leading, np.zeros_like(padded)])
    return np.ascontiguousarray(table).view(np.uint32).ravel()


_DIGITS4 = _digit_table()


class _FloatField:
    """``repr`` of each distinct float (after the comma), NUL-padded to whole words, gathered
    per row from a table."""

    def __init__(self, values: np.ndarray, comma: bool) -> None:
        # Distinct bit patterns, not values: -0.0 and 0.0 print differently.
        bits = np.ascontiguousarray(values, dtype=np.float64).view(np.int64)
        distinct, self.index = _factorize(bits)
        prefix = b"," if comma else b""
        text = [prefix + repr(v).encode() for v in distinct.view(np.float64).tolist()]
        self.words = (max((len(t) for t in text), default=1) + 3) // 4
        width = 4 * self.words
        self.table = np.frombuffer(b"".join(t.ljust(width, b"\0") for t in text), dtype=np.uint32).reshape(
            len(text), self.words
        )

    def fill(self, out: np.ndarray, word: int, lo: int, hi: int) -> None:
        out[:, word : word + self.words] = self.table[self.index[lo:hi]]


def _factorize(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct values and each value's index into them. Runs of equal neighbours are collapsed
    first, so mostly-sorted columns sort only their runs."""
    if values.size == 0:
        return values, np.zeros(0, dtype=np.int64)
    change = np.ones(values.size, dtype=bool)
    change[1:] = values[1:] != values[:-1]
    starts = np.flatnonzero(change)
    distinct, run_index = np.unique(values[starts], return_inverse=True)
    if distinct.size <= np.iinfo(np.int32).max:
        run_index = run_index.astype(np.int32)
    return distinct, np.repeat(run_index, np.diff(starts, append=values.size))
