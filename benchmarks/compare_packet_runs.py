"""Agreement of an accelerated packet run with the exact one, by the issue's bar.

Usage: ``python benchmarks/compare_packet_runs.py EXACT_DIR OTHER_DIR`` where each folder is a
``heterosim run`` output (results.json, collectives.csv, flows.csv, links.csv). Prints the
iteration time difference, the collectives over 3 % (and the largest difference), flow
completion time p50/p99, ECN marks / PFC pauses, events, and the total link bytes of both runs.
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import numpy as np


def _table(path: Path) -> dict[str, np.ndarray]:
    with path.open() as f:
        rows = list(csv.DictReader(f))
    out = {}
    for key in rows[0]:
        try:
            out[key] = np.array([float(r[key]) for r in rows])
        except ValueError:  # a text column (names, types)
            continue
    return out


def compare(exact_dir: Path, other_dir: Path) -> dict[str, float]:
    """The agreement figures of ``other_dir`` against ``exact_dir``."""
    a = json.loads((exact_dir / "results.json").read_text())
    b = json.loads((other_dir / "results.json").read_text())
    ca, cb = _table(exact_dir / "collectives.csv"), _table(other_dir / "collectives.csv")
    rel = np.abs(cb["time_s"] - ca["time_s"]) / np.maximum(ca["time_s"], 1e-12)
    fa, fb = _table(exact_dir / "flows.csv"), _table(other_dir / "flows.csv")
    la, lb = _table(exact_dir / "links.csv"), _table(other_dir / "links.csv")
    out = {
        "iteration_exact_ms": a["iteration_time_s"] * 1e3,
        "iteration_other_ms": b["iteration_time_s"] * 1e3,
        "iteration_rel": b["iteration_time_s"] / a["iteration_time_s"] - 1,
        "collectives": float(len(rel)),
        "collectives_over_3pct": float((rel > 0.03).sum()),
        "collective_max_rel": float(rel.max()),
        "collective_max_abs_us": float(np.abs(cb["time_s"] - ca["time_s"]).max() * 1e6),
        "fct_p50_rel": float(np.percentile(fb["fct_s"], 50) / np.percentile(fa["fct_s"], 50) - 1),
        "fct_p99_rel": float(np.percentile(fb["fct_s"], 99) / np.percentile(fa["fct_s"], 99) - 1),
        "events_exact": float(a["sim"]["events"]),
        "events_other": float(b["sim"]["events"]),
        "link_bytes_exact": float(la["bytes"].sum()),
        "link_bytes_other": float(lb["bytes"].sum()),
    }
    for key in ("ecn_marks", "pfc_pause_frames", "cnps"):
        out[f"{key}_exact"] = float(a["network"].get(key, 0))
        out[f"{key}_other"] = float(b["network"].get(key, 0))
    return out


if __name__ == "__main__":
    for name, value in compare(Path(sys.argv[1]), Path(sys.argv[2])).items():
        print(f"{name:24s} {value:.6g}")
