"""Uneven expert routing: token copies per (source EP rank, expert) of one MoE layer, and what
one rank sends, receives and computes (``model.moe_routing``, heterosim/config/moe_routing.py).

Tokens: every rank of an expert-parallel (EP) group routes its micro-batch's ``tokens`` tokens
to ``top_k`` distinct experts each; EP rank j holds experts ``j*L .. (j+1)*L - 1`` (L = experts /
ep, Megatron-core's ``local_expert_indices``). ``layer_counts`` gives the (ep, experts) matrix
of token copies each source rank routes to each expert:

- ``uniform`` / ``zipf``: expert popularity p_e proportional to r_e^-skew, r_e the expert's
  popularity rank, drawn per MoE layer by a permutation seeded with (seed, MoE layer index)
  (skew 0: uniform). A token picks ``top_k`` *distinct* experts, so an expert is picked by a
  token with probability q_e = min(1, c * p_e), c such that the q_e sum to top_k (an expert
  wanted by more than every token gets every token, its excess goes to the others). Each source
  routes its expected copies ``tokens * q_e``, rounded to integers that sum to ``tokens *
  top_k``, the remainders to the largest fractions (ties in a seeded order).
- ``histogram``: a row of the file gives the EP group's copies per expert (scaled to this
  micro-batch when the file counts other tokens, largest remainders kept), dealt to the source
  ranks in turn (copy i of the expert-sorted list to source i mod ep), so every source routes
  ``tokens * top_k`` copies and an expert's copies differ by at most one between sources.
- capacity (Megatron-core ``get_capacity`` with ``num_tokens = tokens * top_k``:
  ``ceil(tokens * top_k / experts * capacity_factor)`` per expert and source rank, the router
  running on the rank's own tokens, megatron/core/transformer/moe/moe_utils.py): copies beyond
  it are dropped (either ``drop_policy``: "probs" keeps the highest-probability copies,
  "position" the earliest; both keep ``min(count, capacity)`` of them, so the traffic and the
  GEMMs are the same); ``pad_to_capacity`` sends exactly ``min(capacity, tokens)`` copies to
  every expert (Megatron's capacity mask picks ``capacity`` tokens per expert, every token when
  the capacity exceeds them). DeepSpeed computes the same capacity (``_capacity`` in
  deepspeed/moe/sharded_moe.py: ``ceil(k * tokens / experts * capacity_factor)``) and always
  pads (its dispatch tensor is experts x capacity), i.e. ``pad_to_capacity: true``.

APPROXIMATION: every micro-batch of an iteration routes the same way (the per-layer counts are
drawn once), and zipf routing uses expected counts, not sampled ones (no per-micro-batch noise).
The memory estimate (heterosim/workload/memory.py) and the partitioner's layer costs keep
balanced routing: the rank of a popular expert holds and computes more than they count.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from heterosim.catalog.models import MoEConfig
from heterosim.config.moe_routing import MoeRouting


@dataclass(frozen=True)
class RankRouting:
    """What one EP rank moves in one MoE layer, in token copies per EP peer (communicator order,
    itself included)."""

    send: tuple[int, ...]  # copies this rank dispatches to each peer's experts
    recv: tuple[int, ...]  # copies each peer dispatches to this rank's experts

    @property
    def routed(self) -> int:
        return sum(self.send)

    @property
    def received(self) -> int:
        return sum(self.recv)


def expert_selection(popularity: np.ndarray, top_k: int) -> np.ndarray:
    """Probability that a token picks each expert among its ``top_k`` distinct ones:
    ``min(1, c * popularity)`` with ``c`` such that the result sums to ``top_k``."""
    p = np.asarray(popularity, dtype=float) / float(np.sum(popularity))
    q = np.zeros_like(p)
    capped = np.zeros(p.size, dtype=bool)
    for _ in range(p.size):
        free = ~capped
        q[free] = p[free] * (top_k - capped.sum()) / p[free].sum()
        over = free & (q > 1.0)
        if not over.any():
            break
        capped |= over
        q[capped] = 1.0
    return q


def _round_to(expected: np.ndarray, total: int, cap: int, rng: np.random.Generator) -> np.ndarray:
    """Integers near ``expected`` (each <= cap) that sum to ``total``: floors, then one more for
    the largest fractions (ties in a random order)."""
    base = np.minimum(np.floor(expected).astype(np.int64), cap)
    short = total - int(base.sum())
    frac = np.where(base < cap, expected - base, -1.0)
    order = np.lexsort((rng.random(expected.size), -frac))
    base[order[:short]] += 1
    return base


def zipf_popularity(experts: int, skew: float, seed: int, moe_index: int) -> np.ndarray:
    """Popularity of each expert: rank^-skew, ranks permuted by (seed, MoE layer index)."""
    ranks = np.random.default_rng([seed, moe_index]).permutation(experts) + 1
    return ranks.astype(float) ** -skew


def layer_counts(routing: MoeRouting, moe: MoEConfig, moe_index: int, tokens: int, ep: int) -> np.ndarray:
    """(ep, experts) token copies each source EP rank sends to each expert (module docstring)."""
    k, experts = moe.top_k, moe.experts
    rng = np.random.default_rng([routing.seed, moe_index, 1])
    if routing.distribution == "histogram":
        counts = _histogram_counts(routing, moe_index, tokens, ep, k, rng)
    else:
        q = expert_selection(zipf_popularity(experts, routing.skew, routing.seed, moe_index), k)
        counts = np.stack([_round_to(tokens * q, tokens * k, tokens, rng) for _ in range(ep)])
    if routing.capacity_factor is not None:
        capacity = math.ceil(tokens * k / experts * routing.capacity_factor)
        if routing.pad_to_capacity:
            counts = np.full_like(counts, min(capacity, tokens))
        else:
            counts = np.minimum(counts, capacity)
    return counts


def _histogram_counts(
    routing: MoeRouting, moe_index: int, tokens: int, ep: int, k: int, rng: np.random.Generator
) -> np.ndarray:
    row = np.asarray(routing.histogram_row(moe_index), dtype=np.int64)
    group = tokens * ep * k
    if routing.histogram_tokens:
        row = _round_to(row * (group / float(row.sum())), group, tokens * ep, rng)
    end = np.cumsum(row)
    start = end - row
    s = np.arange(ep)[:, None]
    # copies i in [start, end) with i % ep == s
    return (end[None, :] - s + ep - 1) // ep - (start[None, :] - s + ep - 1) // ep


def pair_tokens(counts: np.ndarray, ep: int) -> np.ndarray:
    """(ep, ep) copies source rank i sends to EP rank j (the owner of experts j*L..(j+1)*L-1)."""
    return counts.reshape(ep, ep, counts.shape[1] // ep).sum(axis=2)


def rank_routing(pairs: np.ndarray, ep_index: int) -> RankRouting:
    return RankRouting(tuple(int(x) for x in pairs[ep_index]), tuple(int(x) for x in pairs[:, ep_index]))
