"""AMP heterogeneous cluster (validation group amp-het): which mechanism moved each case.

Usage: ``PYTHONPATH=$PWD python benchmarks/bench_amp_mechanisms.py [--out TABLE.md]``
(flow fidelity, about 1-2 min on 2 cores).

Runs every amp-het case with the framework mechanisms added one at a time, in this order, and
prints the error of each step, then the per-case table (points of error each mechanism moved),
MAPE and Spearman (heterosim.validate.stats) per step:

0. before: no ``framework`` section and the T4 at its datasheet peak (no sustained envelope);
1. T4 sustained fp16 GEMM envelope at the 70 W power cap (published_kernels.yaml);
2. ``framework.name: deepspeed`` (p2p payload with the attention mask, TP-partitioned
   activations and their re-gathers, TrainSchedule instruction order, blocking p2p);
3. ``framework.layer_forward_passes: 2``;
4. ``framework.host_op_overhead`` (the cases' values);
5. ``framework.collective_overhead`` (the cases' values): the cases as shipped.

The values of steps 4 and 5 are those of validation/cases.yaml (derived from AMP's layer profile
by validation/build_cases.py); steps 0-3 drop them. Nothing is fitted here.
"""

from __future__ import annotations

import argparse
import copy
import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from heterosim.config.experiment import parse_experiment  # noqa: E402
from heterosim.plan.compute import efficiency  # noqa: E402
from heterosim.validate.cases import load_cases  # noqa: E402
from heterosim.validate.predict import iteration_time_s  # noqa: E402
from heterosim.validate.stats import error_pct, mape, spearman  # noqa: E402

STEPS = (
    "before",
    "T4 power-cap GEMM envelope",
    "DeepSpeed pipeline engine",
    "layer forward x2",
    "host time per kernel",
    "cost per communication call",
)


def _without_t4_envelope():
    """published_kernels() without the T4 sustained row (step 0)."""
    table = copy.deepcopy(efficiency.published_kernels())
    table["gemm_envelopes"] = [r for r in table["gemm_envelopes"] if r["gpu"] != "T4-16GB-PCIe"]
    return table


def _framework(shipped: dict, step: int) -> dict | None:
    if step < 2:
        return None
    fw = {"name": "deepspeed"}
    if step >= 3:
        fw["layer_forward_passes"] = shipped["layer_forward_passes"]
    if step >= 4:
        fw["host_op_overhead"] = shipped["host_op_overhead"]
    if step >= 5:
        fw["collective_overhead"] = shipped["collective_overhead"]
    return fw


def run_step(case, step: int) -> float:
    data = copy.deepcopy(case.experiment)
    shipped = data.pop("framework")
    fw = _framework(shipped, step)
    if fw is not None:
        data["framework"] = fw
    data.setdefault("simulation", {})["memory_check"] = "warn"
    exp = parse_experiment(data, f"{case.origin}.experiment", base_dir=case.base_dir)
    exp = replace(exp, simulation=replace(exp.simulation, fidelity="flow"))
    t, _, _ = iteration_time_s(exp)
    return t


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cases", default=str(ROOT / "validation" / "cases.yaml"))
    parser.add_argument("--out", default=None, help="also write the Markdown table here")
    args = parser.parse_args(argv)
    cases = [c for c in load_cases(args.cases) if c.group == "amp-het"]
    preds: dict[str, list[float]] = {c.id: [] for c in cases}
    original = efficiency.published_kernels
    patched = _without_t4_envelope()
    for step in range(len(STEPS)):
        efficiency.published_kernels = (  # type: ignore[assignment]
            (lambda: patched) if step == 0 else original
        )
        for case in cases:
            preds[case.id].append(run_step(case, step))
            print(f"step {step} {case.id}: {preds[case.id][-1]:.3f} s", file=sys.stderr)
    efficiency.published_kernels = original  # type: ignore[assignment]
    lines = [
        "| case | measured s | " + " | ".join(f"{i}. {s}" for i, s in enumerate(STEPS)) + " |",
        "|---|---:|" + "---:|" * len(STEPS),
    ]
    for case in cases:
        errs = [error_pct(p, case.measured) for p in preds[case.id]]
        moved = [f"{errs[0]:+.1f}"] + [
            f"{errs[i]:+.1f} ({errs[i] - errs[i - 1]:+.1f})" for i in range(1, len(errs))
        ]
        lines.append(
            f"| {case.id.removeprefix('amp-het-gpt2-')} | {case.measured:g} | " + " | ".join(moved) + " |"
        )
    measured = [c.measured for c in cases]
    row_mape = ["MAPE %", ""] + [
        f"{mape([error_pct(preds[c.id][i], c.measured) for c in cases]):.1f}" for i in range(len(STEPS))
    ]
    row_rho = ["Spearman", ""] + [
        f"{spearman([preds[c.id][i] for c in cases], measured):.3f}" for i in range(len(STEPS))
    ]
    lines += ["| " + " | ".join(row_mape) + " |", "| " + " | ".join(row_rho) + " |"]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
