"""Pipeline schedules: Megatron's orderings, completeness, and deadlock-freedom by simulation."""

from __future__ import annotations

import pytest

from heterosim.workload.schedule import Step, pipeline_schedule, warmup_forwards


def _forwards_before_first_backward(steps: list[Step]) -> int:
    return next(i for i, s in enumerate(steps) if s.kind == "B")


@pytest.mark.parametrize("pp,m", [(4, 8), (8, 16), (4, 2), (2, 1)])
def test_1f1b_warmup_is_pp_minus_stage_minus_one(pp: int, m: int) -> None:
    for stage in range(pp):
        steps = pipeline_schedule("1f1b", pp, stage, m)
        warm = min(pp - stage - 1, m)
        assert warmup_forwards("1f1b", pp, stage, m) == warm
        # the warm-up forwards, then (if any remain) the first steady-state forward
        assert _forwards_before_first_backward(steps) == warm + (1 if warm < m else 0)


def test_1f1b_steady_state_alternates() -> None:
    steps = pipeline_schedule("1f1b", 4, 1, 8)
    # warm-up 2 forwards, then F,B pairs, then 2 backwards
    kinds = "".join(s.kind for s in steps)
    assert kinds == "FF" + "FB" * 6 + "BB"
    assert [s.micro_batch for s in steps[:4]] == [0, 1, 2, 0]


def test_gpipe_all_forwards_first() -> None:
    steps = pipeline_schedule("gpipe", 4, 2, 5)
    assert "".join(s.kind for s in steps) == "F" * 5 + "B" * 5


def test_interleaved_matches_megatron_order() -> None:
    # pp=2, vpp=2, m=4, stage 0: warm-up (2-0-1)*2 + (2-1)*2 = 4 virtual forwards.
    steps = pipeline_schedule("interleaved", 2, 0, 4, vpp=2)
    assert warmup_forwards("interleaved", 2, 0, 4, 2) == 4
    assert steps[:4] == [Step("F", 0, 0), Step("F", 1, 0), Step("F", 0, 1), Step("F", 1, 1)]
    # steady: F(k=4) = chunk 0, micro-batch 2; B(k=0) = chunk vpp-1 = 1, micro-batch 0
    assert steps[4:8] == [Step("F", 2, 0), Step("B", 0, 1), Step("F", 3, 0), Step("B", 1, 1)]
    # last stage warms up (vpp-1)*pp = 2 virtual forwards, then one steady-state forward
    assert warmup_forwards("interleaved", 2, 1, 4, 2) == 2
    assert _forwards_before_first_backward(pipeline_schedule("interleaved", 2, 1, 4, 2)) == 3


def test_interleaved_all_warmup_when_micro_batches_equal_pp() -> None:
    steps = pipeline_schedule("interleaved", 4, 3, 4, vpp=2)
    assert _forwards_before_first_backward(steps) == 8


@pytest.mark.parametrize(
    "schedule,pp,m,vpp",
    [
        ("gpipe", 4, 6, 1),
        ("1f1b", 4, 7, 1),
        ("1f1b", 8, 3, 1),
        ("interleaved", 4, 8, 2),
        ("interleaved", 2, 6, 3),
    ],
)
def test_every_micro_batch_once_forward_then_backward(schedule, pp, m, vpp) -> None:
    for stage in range(pp):
        steps = pipeline_schedule(schedule, pp, stage, m, vpp)
        assert len(steps) == 2 * m * vpp
        assert len(set(steps)) == len(steps)
        position = {s: i for i, s in enumerate(steps)}
        for mb in range(m):
            for chunk in range(vpp):
                assert position[Step("F", mb, chunk)] < position[Step("B", mb, chunk)]


def _simulate(schedule: str, pp: int, m: int, vpp: int = 1) -> int:
    """Run every stage's steps in order with unit-time steps and pipeline dependencies;
    return the makespan (raises on deadlock)."""
    programs = [pipeline_schedule(schedule, pp, s, m, vpp) for s in range(pp)]
    done: dict[tuple[str, int, int], int] = {}  # (kind, mb, virtual stage) -> finish time
    cursor = [0] * pp
    clock = [0] * pp
    stages = pp * vpp
    progress = True
    while progress:
        progress = False
        for s in range(pp):
            while cursor[s] < len(programs[s]):
                step = programs[s][cursor[s]]
                v = step.chunk * pp + s
                needs = []
                if step.kind == "F" and v > 0:
                    needs.append(("F", step.micro_batch, v - 1))
                if step.kind == "B":
                    needs.append(("F", step.micro_batch, v))
                    if v < stages - 1:
                        needs.append(("B", step.micro_batch, v + 1))
                if not all(n in done for n in needs):
                    break
                start = max([clock[s]] + [done[n] for n in needs])
                clock[s] = start + 1
                done[(step.kind, step.micro_batch, v)] = clock[s]
                cursor[s] += 1
                progress = True
    if any(cursor[s] < len(programs[s]) for s in range(pp)):
        raise AssertionError("schedule deadlocks")
    return max(clock)


@pytest.mark.parametrize("pp,m", [(4, 8), (8, 16), (4, 4), (3, 10)])
def test_1f1b_and_gpipe_makespan_formula(pp: int, m: int) -> None:
    # with unit forward and backward, both schedules take 2 * (m + pp - 1) steps
    assert _simulate("1f1b", pp, m) == 2 * (m + pp - 1)
    assert _simulate("gpipe", pp, m) == 2 * (m + pp - 1)


@pytest.mark.parametrize("pp,m,vpp", [(4, 8, 2), (4, 4, 2), (2, 6, 3), (8, 16, 4)])
def test_interleaved_is_deadlock_free_and_shrinks_bubble(pp: int, m: int, vpp: int) -> None:
    makespan = _simulate("interleaved", pp, m, vpp)
    # the bubble is (pp-1) chunk steps per direction; at best 2*(m*vpp + pp - 1)
    assert makespan >= 2 * (m * vpp + pp - 1)
    assert makespan < 2 * vpp * (m + pp - 1)


def test_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError):
        pipeline_schedule("interleaved", 4, 0, 6, 2)
    with pytest.raises(ValueError):
        pipeline_schedule("zigzag", 4, 0, 6)
