"""Compare ``heterosim plan``'s ranking on the AMP cluster with AMP's cost model and the measured
times of the public amp-het cases (validation/cases.yaml).

    heterosim plan workloads/examples/plan_amp_het.yaml --max-candidates 64 --out out/plan/amp
    python3 benchmarks/plan_amp_compare.py out/plan/amp/results.json

For every public amp-het case (tp, pp, dp, micro-batch) the script looks up the plan search's
simulated time of the same layout (its own speed-aware partition, ``partition: auto``, not AMP's
layer boundaries) and prints it beside the measured time and AMP's predicted cost
(``extra.amp_predicted_s``), then each ranking's Spearman correlation with the measured times and
the measured time of each one's pick among these layouts.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import yaml

REPO = Path(__file__).resolve().parent.parent


def spearman(a: list[float], b: list[float]) -> float:
    ra = np.argsort(np.argsort(a)).astype(float)
    rb = np.argsort(np.argsort(b)).astype(float)
    return float(np.corrcoef(ra, rb)[0, 1])


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("results", help="results.json of heterosim plan on plan_amp_het.yaml")
    parser.add_argument("--cases", default=str(REPO / "validation" / "cases.yaml"))
    args = parser.parse_args()
    results = json.loads(Path(args.results).read_text())
    sim: dict[tuple, float] = {}
    for row in results["candidates"]:
        par = row["parallel"]
        if (
            row["kind"] == "uniform"
            and par.get("partition") == "auto"
            and row.get("iteration_time_s") is not None
        ):
            sim[(par["tp"], par["pp"], par["dp"], row["micro_batch"])] = row["iteration_time_s"]
    cases = [
        c
        for c in yaml.safe_load(Path(args.cases).read_text())["cases"]
        if c["group"] == "amp-het" and not (c.get("extra") or {}).get("run_failed")
    ]
    rows = []
    for case in cases:
        par, train = case["experiment"]["parallel"], case["experiment"]["training"]
        key = (par["tp"], par["pp"], par["dp"], train["micro_batch"])
        if key not in sim:
            print(f"{case['id']}: not simulated by the plan search (raise --max-candidates)", file=sys.stderr)
            continue
        rows.append(
            (case["id"], case["measured"]["iteration_time_s"], case["extra"]["amp_predicted_s"], sim[key])
        )
    rows.sort(key=lambda r: r[1])
    print(f"{'case':<28} {'measured s':>10} {'AMP model s':>11} {'plan sim s':>10}")
    for case_id, measured, amp, ours in rows:
        print(f"{case_id:<28} {measured:>10.2f} {amp:>11.3f} {ours:>10.3f}")
    measured = [r[1] for r in rows]
    for name, column in (("AMP cost model", 2), ("heterosim plan", 3)):
        values = [r[column] for r in rows]
        pick = rows[int(np.argmin(values))]
        print(
            f"{name}: Spearman vs measured {spearman(values, measured):.3f} over {len(rows)} "
            f"layouts; its pick {pick[0]} measured {pick[1]:.2f} s (best measured "
            f"{min(measured):.2f} s)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
