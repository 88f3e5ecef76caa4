"""Ranking: a cheap analytic pre-rank to choose what to simulate, the order of simulated
candidates, and a one-line "why" from a run's breakdown.

The pre-rank (:func:`analytic_estimate`) is approximate and used only to pick which candidates
to simulate when there are more than ``--max-candidates``: a 1F1B pipeline beat per replica
``(m_r + pp - 1) x max over stages (stage compute + its TP all-reduces + a boundary send and
receive)``, each stage's compute timed by the same compute model the simulation uses (the
partitioner's per-stage times), plus the slowest stage's ring all-reduce of its gradients over
the slowest per-GPU bandwidth of its data-parallel group (NVLink/PCIe inside a host, the host's
NIC share across hosts; a pipeline boundary's sends share the host's NICs with the other
pipelines'), less one micro-batch's backward when the reduction overlaps backward
(``grad_sync: overlap``). It ignores contention and collective latency; the simulated time is
what ranks. Measured against the simulated times of every candidate: Spearman 0.90 on H2 and
0.81 on the AMP cluster (benchmarks/README.md, "Plan search").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from heterosim.search.prune import Assessment

GRAD_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2}
ACT_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 2}
OVERLAP_SHARE = 2 / 3  # backward's share of a micro-batch's forward+backward (2 of 3 GEMM passes)


def _per_gpu_bandwidth(cluster: Any, host: int, remote: bool) -> float:
    """Bytes/s one GPU of ``host`` gets: its share of the host's NICs (all GPUs sending at once)
    or its NVLink/PCIe link."""
    h = cluster.host(host)
    if remote:
        return h.nic_speed_bps * h.nics / h.gpus / 8
    return (h.nvlink_effective_bps if h.fabric == "nvswitch" else h.pcie_bps) / 8


def _group_bandwidth(cluster: Any, gpus: Sequence[int]) -> float:
    """Slowest per-GPU bandwidth of a group's ring: inside one host its link, else the NIC share."""
    hosts = {int(cluster.gpu_host[g]) for g in gpus}
    return min(_per_gpu_bandwidth(cluster, h, len(hosts) > 1) for h in hosts)


def analytic_estimate(assessment: Assessment) -> float:
    """Approximate iteration seconds of a surviving candidate (module docstring)."""
    exp, workload = assessment.experiment, assessment.workload
    assert exp is not None and workload is not None
    part, layout, cluster = workload.partition, workload.layout, exp.cluster
    train, model = exp.training, exp.model
    act = ACT_BYTES.get(train.dtype, 2) * train.micro_batch * train.seq_len * model.hidden
    pipeline = 0.0
    for r in range(layout.dp):
        ranks = layout.replica_ranks(r)
        hosts = {int(cluster.gpu_host[workload.gpu_of(k)]) for k in ranks}
        p2p = 0.0
        if part.pp > 1 and len(hosts) > 1:  # the dp pipelines' boundaries share a host's NICs
            nic = min(cluster.host(h).nic_speed_bps * cluster.host(h).nics / 8 for h in hosts)
            p2p = 2 * act * layout.dp / nic
        beat = 0.0
        for s in range(part.pp):
            cell = [k for k in ranks if layout.pp_index(k) == s]
            tp = layout.cell_tp(r, s)
            layers = sum(len(rng) for rng in part.stage_layers(s))
            intra = min(
                _per_gpu_bandwidth(cluster, int(cluster.gpu_host[workload.gpu_of(k)]), False) for k in cell
            )
            tp_comm = 4 * layers * 2 * (tp - 1) / tp * act / intra if tp > 1 else 0.0
            compute = min(part.chunk_time_s[s], 1.0 / part.replica_speed[r])
            beat = max(beat, compute + tp_comm + p2p)
        pipeline = max(pipeline, (part.replica_micro_batches[r] + part.pp - 1) * beat)
    dp = layout.dp
    allreduce = 0.0
    if dp > 1:
        reduce_dtype = (
            train.grad_reduce_dtype
            if train.grad_reduce_dtype != "auto"
            else ("fp16" if train.dtype == "fp16" else "fp32")
        )
        for s in range(part.pp):
            grads = assessment.stage_params[s] * GRAD_BYTES.get(reduce_dtype, 4)
            bw = _group_bandwidth(cluster, [workload.gpu_of(k) for k in layout.stage_ranks(s)])
            allreduce = max(allreduce, 2 * (dp - 1) / dp * grads / bw)
        if exp.parallel.grad_sync == "overlap":  # buckets reduce during the last backward
            allreduce = max(0.0, allreduce - OVERLAP_SHARE / max(part.replica_speed))
    return pipeline + allreduce


def select(
    assessments: Sequence[Assessment], estimates: dict[str, float], max_candidates: int
) -> list[Assessment]:
    """The candidates to simulate: the default and the layout as written always, then the rest
    by ascending estimate (ties by id) up to ``max_candidates`` in all."""
    alive = [a for a in assessments if a.ok]
    forced = [a for a in alive if a.candidate.default or a.candidate.kind == "as-written"]
    rest = sorted(
        (a for a in alive if a not in forced), key=lambda a: (estimates[a.candidate.id], a.candidate.id)
    )
    return forced + rest[: max(0, max_candidates - len(forced))]


def order(rows: Sequence[dict[str, Any]], key: str = "iteration_time_s") -> list[dict[str, Any]]:
    """Simulated rows by ascending ``key``, ties by the analytic estimate and then id."""
    done = [r for r in rows if r.get(key) is not None]
    return sorted(done, key=lambda r: (r[key], r.get("estimate_s") or 0.0, r["id"]))


def why(breakdown: dict[str, float], iteration_s: float) -> str:
    """The bottleneck from a run's breakdown: the largest of compute, exposed communication and
    bubble, with the three shares (and the inter-host part of the communication)."""
    if not iteration_s:
        return "no time simulated"
    shares = {
        "compute": breakdown.get("compute_s", 0.0) / iteration_s,
        "exposed comm": breakdown.get("exposed_comm_s", 0.0) / iteration_s,
        "bubble": breakdown.get("bubble_s", 0.0) / iteration_s,
    }
    top = max(shares, key=lambda k: shares[k])
    meaning = {
        "compute": "compute-bound",
        "exposed comm": "communication-bound",
        "bubble": "pipeline bubble / waiting on slower peers",
    }[top]
    parts = ", ".join(f"{k} {v:.0%}" for k, v in shares.items())
    inter = breakdown.get("inter_host_comm_s", 0.0)
    return f"{meaning} ({parts}; inter-host comm {inter * 1e3:.1f} ms per rank)"
