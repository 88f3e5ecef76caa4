"""Every AMP heterogeneous-cluster trial with a time, not only the 20 validation cases.

Usage: ``PYTHONPATH=$PWD python benchmarks/bench_amp_all_trials.py HET_CLUSTER_RESULTS.txt
[--tree]`` (flow fidelity, about 1 min on 2 cores). ``HET_CLUSTER_RESULTS.txt`` is AMP's
``src/results/het_cluster_results.txt`` (github.com/DachengLi1/AMP): one line per real trial with
AMP's partition, micro-batch, tp / dp / pp and the measured iteration time (``inf``: the run failed).

Each trial is predicted as its amp-het case of the same tp / pp / dp would be (validation/cases.yaml,
built by validation/build_cases.py) with the trial's micro-batch and AMP's partition for it (the
same unit -> block mapping). ``--tree`` drops ``network.collective_algorithm: ring`` (NCCL's own
choice: the two-node tree for the two-host data-parallel all-reduces) to compare. Prints each
trial's error, then MAPE, mean error and Spearman over all trials and over those outside the open
small-micro-batch set (tp > 1, pp > 1, micro-batch <= 2). Nothing is fitted.
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import re
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from heterosim.config.experiment import parse_experiment  # noqa: E402
from heterosim.validate.cases import Case, load_cases  # noqa: E402
from heterosim.validate.predict import iteration_time_s  # noqa: E402
from heterosim.validate.stats import error_pct, mape, spearman  # noqa: E402

TRIAL = re.compile(
    r"Simulating result: None, \[([\d, ]+)\], (\d+), \{'mp_deg': tensor\(\[(\d+)\.\]\), "
    r"'dp_deg': tensor\(\[(\d+)\.\]\), 'pp_deg': tensor\(\[(\d+)\.\]\)\}.*?r_cost: (\S+)"
)


def trials(text: str) -> list[tuple[int, int, int, int, list[int], float]]:
    """(tp, pp, dp, micro-batch, unit boundaries, seconds) of every trial with a time."""
    out = []
    for m in TRIAL.finditer(text):
        bounds, mbs, tp, dp, pp, seconds = m.groups()
        if seconds != "inf":
            out.append(
                (int(tp), int(pp), int(dp), int(mbs), [int(b) for b in bounds.split(",")], float(seconds))
            )
    return out


def _builder() -> Any:
    spec = importlib.util.spec_from_file_location("build_cases", ROOT / "validation" / "build_cases.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def predict(template: Case, mbs: int, layers: list[int], tree: bool) -> float:
    data = copy.deepcopy(template.experiment)
    data["training"]["micro_batch"] = mbs
    data["parallel"]["partition"] = layers
    if tree:
        data["network"].pop("collective_algorithm", None)
    data.setdefault("simulation", {})["memory_check"] = "warn"
    exp = parse_experiment(data, f"{template.origin}.experiment", base_dir=template.base_dir)
    exp = replace(exp, simulation=replace(exp.simulation, fidelity="flow"))
    seconds, _, _ = iteration_time_s(exp)
    return seconds


def summary(label: str, rows: list[tuple[str, float, float]]) -> str:
    errors = [error_pct(p, m) for _, m, p in rows]
    rho = spearman([p for _, _, p in rows], [m for _, m, _ in rows])
    return (
        f"{label}: n {len(rows)}, MAPE {mape(errors):.1f} %, mean {sum(errors) / len(errors):+.1f} %, "
        f"Spearman {rho:.3f}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("results", help="AMP's src/results/het_cluster_results.txt")
    parser.add_argument("--cases", default=str(ROOT / "validation" / "cases.yaml"))
    parser.add_argument("--tree", action="store_true", help="NCCL's own all-reduce algorithm")
    args = parser.parse_args(argv)
    build = _builder()
    templates: dict[tuple[int, int, int], Case] = {}
    for case in load_cases(args.cases):
        if case.group == "amp-het":
            p = case.experiment["parallel"]
            templates[(p["tp"], p["pp"], p["dp"])] = case
    rows: list[tuple[str, float, float]] = []
    open_rows: set[str] = set()
    for tp, pp, dp, mbs, bounds, measured in trials(Path(args.results).read_text()):
        name = f"t{tp}p{pp}d{dp}-mbs{mbs}"
        if (tp, pp, dp) not in templates:
            print(f"{name}: no amp-het case with this plan, skipped", file=sys.stderr)
            continue
        predicted = predict(templates[tp, pp, dp], mbs, build.amp_stage_layers(bounds), args.tree)
        rows.append((name, measured, predicted))
        if tp > 1 and pp > 1 and mbs <= 2:
            open_rows.add(name)
        err = error_pct(predicted, measured)
        print(f"{name:14s} measured {measured:.2f} s predicted {predicted:.3f} s {err:+.1f} %")
    print(summary("all trials", rows))
    print(summary("without tp > 1, pp > 1, micro-batch <= 2", [r for r in rows if r[0] not in open_rows]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
