"""``model.moe_routing``: how an MoE router spreads tokens over the experts, and what caps it.

``distribution`` is ``uniform`` (every expert gets the same share: the default, and what runs
without this key), ``zipf`` (the expert of popularity rank r gets a share proportional to
r^-skew; ``seed`` draws which experts are popular in each layer) or ``histogram`` (measured
token counts per expert from a CSV or JSON file). ``capacity_factor``, ``drop_policy`` and
``pad_to_capacity`` are Megatron-core's ``moe_expert_capacity_factor``,
``moe_token_drop_policy`` and ``moe_pad_expert_input_to_capacity``
(megatron/core/transformer/moe/moe_utils.py: ``get_capacity`` and the router's token
dropping). What the settings do to the all-to-all sizes and the expert GEMMs is in
:mod:`heterosim.workload.routing`.

A histogram file holds one row of ``experts`` non-negative integers per MoE layer (or one row
for every MoE layer): in CSV one row per line (``#`` comments and blank lines skipped); in JSON
a list of rows, a single row, or ``{"tokens": N, "counts": rows}``. A row counts the token
copies (each token counted ``top_k`` times) routed to each expert by one micro-batch of one
expert-parallel group, so it sums to ``micro_batch * seq_len * ep * top_k``; with ``tokens`` it
counts ``N`` tokens instead (it sums to ``N * top_k``) and is scaled to the run's tokens.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from heterosim.config.choices import MOE_DROP_POLICIES, MOE_ROUTING_DISTRIBUTIONS
from heterosim.config.fields import Section, read_text_file
from heterosim.errors import UserError

# Zipf exponents above 5 change nothing measurable: at s = 5 the most popular expert already
# takes 1/zeta(5) = 96.4 % of the routing choices however many experts there are (zeta(5) =
# 1.0369, Abramowitz & Stegun Table 23.3), and a token's top-k choices are capped at one per
# expert anyway (heterosim/workload/routing.py).
MAX_ZIPF_SKEW = 5.0
# An expert receives at most experts/top_k times its even share (every token), so a capacity
# factor of experts/top_k <= 4096 (models.MAX_DIMENSION["experts"]) already keeps every token;
# larger values are refused as typos.
MAX_CAPACITY_FACTOR = 4096.0
# Rows of a histogram file: one per MoE layer (models.MAX_DIMENSION["layers"]).
MAX_HISTOGRAM_ROWS = 10_000


@dataclass(frozen=True)
class MoeRouting:
    """The router's token distribution and capacity (module docstring)."""

    distribution: str = "uniform"
    skew: float = 0.0
    seed: int = 0
    histogram: tuple[tuple[int, ...], ...] = ()  # rows of token copies per expert
    histogram_tokens: int = 0  # tokens a row counts; 0: one micro-batch of one EP group
    histogram_file: str = ""  # the file, for messages
    capacity_factor: float | None = None  # None: dropless
    drop_policy: str = "probs"
    pad_to_capacity: bool = False

    @property
    def even(self) -> bool:
        """Every rank sends every peer the same share and nothing is dropped or padded: the
        trace is today's (even all-to-all, balanced expert GEMMs)."""
        return self.distribution == "uniform" and self.capacity_factor is None

    def histogram_row(self, moe_index: int) -> tuple[int, ...]:
        """The histogram row of the ``moe_index``-th MoE layer (one row serves every layer)."""
        return self.histogram[moe_index if len(self.histogram) > 1 else 0]


def parse_moe_routing(
    value: Any, source: str, key: str, experts: int, moe_layers: int, base_dir: Path | None
) -> MoeRouting:
    """``model.moe_routing`` of a model with ``experts`` experts in ``moe_layers`` MoE layers."""
    section = Section(value, source, key)
    has_file = section.has("histogram")
    distribution = section.string(
        "distribution", "histogram" if has_file else "uniform", choices=MOE_ROUTING_DISTRIBUTIONS
    )
    skew = section.number("skew", 1.0 if distribution == "zipf" else 0.0, minimum=0.0, maximum=MAX_ZIPF_SKEW)
    if section.has("skew") and distribution != "zipf":
        raise section.error("skew", f"only distribution: zipf takes a skew (distribution is {distribution})")
    seed = section.integer("seed", 0, minimum=0)
    capacity = None
    if section.has("capacity_factor"):
        capacity = section.number("capacity_factor", minimum=0.0, maximum=MAX_CAPACITY_FACTOR)
        if capacity <= 0:
            raise section.error("capacity_factor", f"expected a number > 0, got {capacity:g}")
    else:
        section.raw("capacity_factor", None)
    drop_policy = section.string("drop_policy", "probs", choices=MOE_DROP_POLICIES)
    pad = section.boolean("pad_to_capacity", False)
    if pad and capacity is None:
        raise section.error("pad_to_capacity", "padding to capacity needs a capacity_factor")
    rows: tuple[tuple[int, ...], ...] = ()
    tokens = 0
    file = ""
    if distribution == "histogram":
        if not has_file:
            raise section.error("histogram", "distribution: histogram needs a histogram file (CSV or JSON)")
        path = Path(section.string("histogram"))
        if not path.is_absolute():
            path = (base_dir or Path.cwd()) / path
        file = str(path)
        rows, tokens = read_histogram(path, section.key_path("histogram"), experts, moe_layers)
    elif has_file:
        raise section.error(
            "histogram", f"a histogram file needs distribution: histogram, not {distribution}"
        )
    section.reject_unknown()
    return MoeRouting(distribution, skew, seed, rows, tokens, file, capacity, drop_policy, pad)


def read_histogram(
    path: Path, key: str, experts: int, moe_layers: int
) -> tuple[tuple[tuple[int, ...], ...], int]:
    """(rows, tokens) of a histogram file; every problem names the file and ``key``."""
    text = read_text_file(path, "histogram file (CSV or JSON)")
    where = f"{path} ({key})"
    tokens = 0
    if path.suffix.lower() == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise UserError(f"{where}: not valid JSON: {exc.msg} at line {exc.lineno}") from None
        if isinstance(data, dict):
            unknown = sorted(set(data) - {"tokens", "counts"})
            if unknown:
                raise UserError(f"{where}: unknown key {unknown[0]!r}; expected tokens, counts")
            if "tokens" in data:
                tokens = data["tokens"]
                if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 1:
                    raise UserError(f"{where}: tokens: expected a positive integer, got {tokens!r}")
            data = data.get("counts")
        raw = data if isinstance(data, list) and data and isinstance(data[0], list) else [data]
    else:
        raw = [r for r in csv.reader(io.StringIO(text)) if r and not r[0].lstrip().startswith("#")]
    if not raw or len(raw) > MAX_HISTOGRAM_ROWS:
        raise UserError(f"{where}: expected 1 to {MAX_HISTOGRAM_ROWS} rows of token counts, got {len(raw)}")
    rows = tuple(_row(r, i, where, experts) for i, r in enumerate(raw))
    if len(rows) not in (1, moe_layers):
        raise UserError(
            f"{where}: {len(rows)} rows; expected 1 (every MoE layer) or {moe_layers} (one per MoE layer)"
        )
    return rows, tokens


def _row(values: Any, index: int, where: str, experts: int) -> tuple[int, ...]:
    if not isinstance(values, list):
        raise UserError(f"{where}: row {index + 1}: expected a list of token counts, got {values!r:.60}")
    out = []
    for value in values:
        text = value.strip() if isinstance(value, str) else value
        try:
            number = int(text) if isinstance(text, str) else text
        except ValueError:
            number = None
        if isinstance(number, bool) or not isinstance(number, int) or number < 0:
            raise UserError(f"{where}: row {index + 1}: expected non-negative integers, got {value!r:.60}")
        out.append(number)
    if len(out) != experts:
        raise UserError(f"{where}: row {index + 1}: {len(out)} counts; the model has {experts} experts")
    return tuple(out)


def check_routing_tokens(
    routing: MoeRouting, source: str, key: str, tokens_per_rank: int, ep: int, top_k: int
) -> None:
    """A histogram's rows must count the routed token copies they describe: ``tokens * top_k``
    (``tokens``: the file's own, else one micro-batch of an EP group, ``tokens_per_rank * ep``),
    each expert at most ``tokens`` (a token picks an expert once)."""
    if routing.distribution != "histogram":
        return
    tokens = routing.histogram_tokens or tokens_per_rank * ep
    what = "the file's tokens" if routing.histogram_tokens else "micro_batch * seq_len * ep"
    where = f"{routing.histogram_file} ({key}.histogram in {source})"
    for i, row in enumerate(routing.histogram):
        total = sum(row)
        if total != tokens * top_k:
            raise UserError(
                f"{where}: row {i + 1} sums to {total}; expected tokens * top_k = {tokens} * {top_k} "
                f"= {tokens * top_k} ({what})"
            )
        if max(row) > tokens:
            raise UserError(
                f"{where}: row {i + 1}: an expert gets {max(row)} of {tokens} tokens; a token "
                "picks an expert at most once"
            )
