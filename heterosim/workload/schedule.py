"""Pipeline schedules: the order in which one pipeline rank runs its forward and backward steps.

A step is ``(kind, micro_batch, chunk)`` with kind ``"F"`` or ``"B"``; ``chunk`` is the model
chunk (virtual stage index on this rank, 0 unless interleaved). Schedules follow Megatron-LM:

- ``gpipe``: all forwards, then all backwards (micro-batches in order).
- ``1f1b`` (PipeDream-flush): ``min(pp - stage - 1, m)`` warm-up forwards, then alternating one
  forward / one backward, then the remaining backwards (cool-down).
- ``interleaved``: Megatron's virtual-pipeline 1F1B. Virtual micro-batch ``k`` (of ``m * vpp``)
  runs model chunk ``(k mod (pp*vpp)) // pp`` (reversed for backward) on micro-batch
  ``(k mod pp) + (k // (pp*vpp)) * pp``; warm-up is ``(pp - stage - 1) * 2 + (vpp - 1) * pp``
  virtual steps (all of them when ``m == pp``). ``m`` must be a multiple of ``pp``.

The micro-batch count ``m`` is per data-parallel replica and may differ between replicas.
"""

from __future__ import annotations

from typing import NamedTuple

SCHEDULES = ("gpipe", "1f1b", "interleaved")


class Step(NamedTuple):
    kind: str  # "F" or "B"
    micro_batch: int
    chunk: int


def warmup_forwards(schedule: str, pp: int, stage: int, micro_batches: int, vpp: int = 1) -> int:
    """Forward steps a rank runs before its first backward (in virtual steps if interleaved)."""
    if schedule == "gpipe":
        return micro_batches
    if schedule == "1f1b":
        return min(pp - stage - 1, micro_batches)
    total = micro_batches * vpp
    if micro_batches == pp:
        return total
    return min((pp - stage - 1) * 2 + (vpp - 1) * pp, total)


def _interleaved_chunk(virtual_step: int, pp: int, vpp: int, forward: bool) -> int:
    chunk = (virtual_step % (pp * vpp)) // pp
    return chunk if forward else vpp - chunk - 1


def _interleaved_micro_batch(virtual_step: int, pp: int, vpp: int) -> int:
    group = virtual_step // (pp * vpp)
    return virtual_step % pp + group * pp


def pipeline_schedule(schedule: str, pp: int, stage: int, micro_batches: int, vpp: int = 1) -> list[Step]:
    """The ordered steps of pipeline stage ``stage`` for ``micro_batches`` micro-batches."""
    if schedule not in SCHEDULES:
        raise ValueError(f"unknown schedule {schedule!r}; known: {', '.join(SCHEDULES)}")
    if not 0 <= stage < pp:
        raise ValueError(f"stage {stage} out of range for pp={pp}")
    if micro_batches < 1:
        raise ValueError("at least one micro-batch is needed")
    m = micro_batches
    if schedule == "gpipe":
        return [Step("F", i, 0) for i in range(m)] + [Step("B", i, 0) for i in range(m)]
    if schedule == "1f1b":
        warm = warmup_forwards("1f1b", pp, stage, m)
        steps = [Step("F", i, 0) for i in range(warm)]
        for i in range(m - warm):
            steps.append(Step("F", warm + i, 0))
            steps.append(Step("B", i, 0))
        steps.extend(Step("B", i, 0) for i in range(m - warm, m))
        return steps
    if m % pp:
        raise ValueError(f"interleaved 1F1B needs micro-batches ({m}) to be a multiple of pp={pp}")
    total = m * vpp
    warm = warmup_forwards("interleaved", pp, stage, m, vpp)

    def fwd(k: int) -> Step:
        mb = _interleaved_micro_batch(k, pp, vpp)
        return Step("F", mb, _interleaved_chunk(k, pp, vpp, True))

    def bwd(k: int) -> Step:
        mb = _interleaved_micro_batch(k, pp, vpp)
        return Step("B", mb, _interleaved_chunk(k, pp, vpp, False))

    steps = [fwd(k) for k in range(warm)]
    for k in range(total - warm):
        steps.append(fwd(warm + k))
        steps.append(bwd(k))
    steps.extend(bwd(k) for k in range(total - warm, total))
    return steps
