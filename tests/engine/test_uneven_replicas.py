"""Uneven data-parallel replicas in flow fidelity: the gradient all-reduce waits for the slowest.

Two pipelines of one stage, tp 1, on different GPU types (an RTX 3090 and a cluster-defined GPU
of half its tensor peak) and with different micro-batch counts (3 and 1). With
``grad_sync: after_backward`` and one gradient bucket, each rank computes its forward and backward
passes back to back from t = 0, so by hand: the all-reduce's first flow starts at
``max over replicas of (sum of that replica's forward/backward compute durations)``; the fast
replica idles until then; the all-reduce then moves the gradient over the 25 Gb/s NICs.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

from heterosim.config.experiment import parse_experiment
from heterosim.plan.execution_plan import FLOW
from heterosim.report.run_report import results_dict
from heterosim.simulate import run_experiment
from heterosim.workload.trace import ALL_REDUCE, COMP_NODE, PHASES

CLUSTER = {
    "name": "two-types",
    "gpus": {
        "Half-3090": {
            "tflops": {"fp16": 35.5, "fp32": 17.8},
            "memory_gb": 24,
            "memory_tbps": 0.936,
            "sm_count": 82,
        }
    },
    "host_types": {
        "a": {"gpu": "RTX-3090", "gpus": 1, "nics": 1, "nic_speed": "25Gbps"},
        "b": {"gpu": "Half-3090", "gpus": 1, "nics": 1, "nic_speed": "25Gbps"},
    },
    "hosts": [{"type": "a"}, {"type": "b"}],
    "fabric": {"kind": "fat-tree"},
}


def _experiment(counts: tuple[int, int]):
    data = {
        "name": "uneven",
        "model": {"arch": "gpt", "hidden": 512, "layers": 2, "heads": 8, "ffn": 2048, "vocab": 4096},
        "training": {"global_batch": sum(counts), "micro_batch": 1, "seq_len": 512, "dtype": "fp16"},
        "parallel": {
            "grad_sync": "after_backward",
            "dp_bucket": "1GB",
            "stages": [
                {
                    "layers": 2,
                    "replicas": [
                        {"gpu": "RTX-3090", "micro_batches": counts[0]},
                        {"gpu": "Half-3090", "micro_batches": counts[1]},
                    ],
                }
            ],
        },
        "cluster": copy.deepcopy(CLUSTER),
        "simulation": {"fidelity": "flow"},
    }
    return parse_experiment(data, "uneven.yaml")


def _compute_before_sync_ns(trace) -> int:
    t = trace.templates
    rows = trace.template
    phase = np.asarray(PHASES, dtype=object)[t.phase[rows]]
    comp = (t.node_type[rows] == COMP_NODE) & np.isin(phase, ["fwd", "bwd"])
    return int(t.duration_ns[rows[comp]].astype(np.int64).sum())


@pytest.mark.parametrize("counts", [(3, 1), (1, 3)])
def test_gradient_allreduce_waits_for_the_slowest_replica(native_lib, counts) -> None:
    run = run_experiment(_experiment(counts))
    plan, engine, colls = run.tables.plan, run.engine, run.tables.collectives
    busy = [_compute_before_sync_ns(run.traces[r]) for r in range(2)]
    slowest = int(np.argmax(busy))
    # the fast replica really is faster, by more than its micro-batch ratio alone on (1, 3)
    assert busy[slowest] > 1.3 * busy[1 - slowest]
    ar = np.flatnonzero(colls["comm_type"] == ALL_REDUCE)
    assert ar.size == 1  # one bucket
    flows = np.flatnonzero((plan.kind == FLOW) & (plan.collective == ar[0]))
    start = int(engine.task_start_ns[flows].min())
    end = int(engine.task_end_ns[flows].max())
    assert start == busy[slowest]  # exactly when the slowest replica's last backward ends
    size = int(colls["size_bytes"][ar[0]])
    wire_ns = size * 8 / 25e9 * 1e9  # ring of two: each rank sends half twice = size bytes
    assert wire_ns <= end - start <= 1.5 * wire_ns + 50_000
    results = results_dict(run)
    ranks = results["ranks"]
    assert [r["gpu"] for r in ranks] == ["RTX-3090", "Half-3090"]
    assert [r["dp_replica"] for r in ranks] == [0, 1] and [r["tp"] for r in ranks] == [1, 1]
    # the iteration is the slowest replica, the all-reduce, then the optimizer
    assert results["iteration_time_s"] * 1e9 >= end
    fast = 1 - slowest
    assert ranks[fast]["busy_s"] < ranks[slowest]["busy_s"]
