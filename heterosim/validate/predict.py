"""Predict one validation case in the units the source published.

End-to-end cases run the case's experiment with :func:`heterosim.simulate.run_experiment` and
convert the simulated iteration time into the published quantity:

- ``iteration_time_s``: the simulated time T;
- ``tokens_per_s_per_gpu``: global_batch * seq_len / (T * gpus) (convention-free);
- ``tflops_per_gpu`` with ``sc21-eq3-hardware``: F / (T * gpus), F = 96 B s l h^2 (1 + s/(6h) +
  V/(16 l h)) (SC'21 Eq. 3, GEMMs only, recompute forward counted), whatever the simulator's own
  FLOP count is; ``simulator``: the simulator's own count (all compute ops of the traces).

Long iterations (many micro-batches per pipeline) may be predicted from two shorter runs:
APPROXIMATION (documented in validation/README.md): with m micro-batches per pipeline, a 1F1B or
interleaved pipeline in steady state takes T(m) = a + b*m (fill/drain, optimizer and the exposed
data-parallel tail are constant; each extra micro-batch adds one slot of the slowest stage). The
two runs use m1 = 2*pp and m2 = 4*pp micro-batches (m1 = 2, m2 = 4 without pipelining) and T(M)
is extrapolated linearly. It is exact when the schedule is in steady state at m1; the DP
gradient all-reduce, overlapped with the last backward passes, is the same in both runs.
tests/validate/test_predict.py checks it against a full run.

``layer_time`` cases run the experiment with one micro-batch per replica (pp with the interleaved
schedule, which needs a multiple of pp) and read the layer's
times off the first rank's simulated timeline (:func:`layer_times_ms`): forward = from the first
forward op of layer L to the first forward op of layer L + 1, backward = from the first backward
(or recomputation) op of layer L + 1 to that of layer L, for the middle layer pair of the rank.
The layer's tensor-parallel collectives and any wait for them are part of the time, as they are in
a per-layer timer around the layer's forward or backward call.

``collective_busbw`` cases run :func:`heterosim.simulate.simulate_collective` (the collective
decomposed as NCCL would, on the case's cluster) and report nccl-tests bus bandwidth: algbw =
S / t (GB/s), busbw = algbw x 2(n-1)/n (all-reduce), (n-1)/n (all-gather, reduce-scatter,
all-to-all), 1 (broadcast, reduce, send/recv) (docs/network_models.md, "Bus bandwidth").
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from heterosim.config.choices import DEFAULT_FIDELITY, DEFAULT_PACKET_ACCELERATION
from heterosim.config.cluster import parse_cluster
from heterosim.config.experiment import ExperimentConfig, parse_experiment
from heterosim.plan.collectives.common import bus_factor
from heterosim.validate.cases import Case


@dataclass
class Prediction:
    """A predicted value in the case's units and how it was obtained."""

    value: float
    time_s: float  # simulated iteration (end to end) or collective time
    method: str  # "full", "extrapolated from m1=.., m2=.." or "collective"
    wall_s: float
    details: dict[str, Any] = field(default_factory=dict)


def sc21_eq3_flops(global_batch: int, seq: int, layers: int, hidden: int, vocab: int) -> float:
    """SC'21 Eq. (3): FLOPs per iteration (GEMMs, full recompute counted)."""
    b, s, n, h, v = global_batch, seq, layers, hidden, vocab
    return 96.0 * b * s * n * h * h * (1.0 + s / (6.0 * h) + v / (16.0 * n * h))


def case_experiment(
    case: Case,
    fidelity: str | None = None,
    granularity: str | None = None,
    intra_host: str | None = None,
    queue_pairs: str | None = None,
    packet_acceleration: str | None = None,
    compute_contention: bool | None = None,
) -> ExperimentConfig:
    """The case's experiment, validated (a problem is a one-line error naming the case).

    The published measurement proves the configuration ran, so unless the case sets
    ``simulation.memory_check`` itself, an estimated peak above the GPU's memory is reported
    (``details.memory_warnings``, mark MEM) instead of stopping the case: it is an error of the
    memory estimate, not a reason to skip the time prediction. ``granularity`` overrides
    ``simulation.collective_granularity``, ``intra_host`` ``simulation.intra_host``,
    ``queue_pairs`` ``simulation.queue_pairs``, ``packet_acceleration``
    ``simulation.packet_acceleration``, ``compute_contention`` ``simulation.compute_contention``.
    """
    if case.experiment is None:
        raise ValueError(f"{case.id} is not an end-to-end case")
    data = case.experiment
    if "memory_check" not in (data.get("simulation") or {}):
        data = {**data, "simulation": {**(data.get("simulation") or {}), "memory_check": "warn"}}
    exp = parse_experiment(data, f"{case.origin}.experiment", base_dir=case.base_dir)
    if fidelity is not None:
        exp = replace(exp, simulation=replace(exp.simulation, fidelity=fidelity))
    if granularity is not None:
        exp = replace(exp, simulation=replace(exp.simulation, collective_granularity=granularity))
    if intra_host is not None:
        exp = replace(exp, simulation=replace(exp.simulation, intra_host=intra_host))
    if queue_pairs is not None:
        exp = replace(exp, simulation=replace(exp.simulation, queue_pairs=queue_pairs))
    if packet_acceleration is not None:
        exp = replace(exp, simulation=replace(exp.simulation, packet_acceleration=packet_acceleration))
    if compute_contention is not None:
        exp = replace(exp, simulation=replace(exp.simulation, compute_contention=compute_contention))
    return exp


def with_micro_batches(exp: ExperimentConfig, micro_batches: int) -> ExperimentConfig:
    """The same experiment with ``micro_batches`` per data-parallel replica."""
    gb = micro_batches * exp.training.micro_batch * exp.parallel.dp
    return replace(exp, training=replace(exp.training, global_batch=gb))


def reduced_points(exp: ExperimentConfig) -> tuple[int, int] | None:
    """(m1, m2) for the two-run extrapolation, or None when a full run is as cheap."""
    pp = exp.parallel.pp
    m1, m2 = 2 * pp, 4 * pp
    if exp.micro_batches_per_replica <= m2:
        return None
    return m1, m2


def simulate_iteration_s(
    exp: ExperimentConfig, databases: Sequence[str] = ()
) -> tuple[float, dict[str, Any]]:
    """Simulated iteration time of ``exp`` (compute timed from ``databases`` first, as
    ``heterosim run --db``) and a few breakdown numbers."""
    from heterosim.report.run_report import results_dict
    from heterosim.simulate import run_experiment

    run = run_experiment(exp, databases=list(databases) or None)
    res = results_dict(run)
    details = {
        "breakdown": {k: v for k, v in res["breakdown"].items() if k != "definition"},
        "simulator_tflops_per_gpu": res["throughput"]["tflops_per_gpu"],
        "compute_provenance": res["compute_provenance"],
        "events": res["sim"]["events"],
        "tasks": res["sim"]["tasks"],
        "memory_warnings": res["partition"].get("memory_warnings", []),
        "collective_granularity": exp.simulation.collective_granularity,
        "queue_pairs": exp.simulation.queue_pairs,
        "fidelity": exp.simulation.fidelity,
        "network": res["network"],
        "contention_s": float(res.get("contention", {}).get("lost_s_mean", 0.0)),
    }
    model = exp.simulation.network_model
    if model.models_intra_host:
        details["intra_host"] = exp.simulation.intra_host
    if model.accelerates:
        details["packet_acceleration"] = res["sim"].get("packet_acceleration", {"mode": "exact"})
    return float(res["iteration_time_s"]), details


def iteration_time_s(
    exp: ExperimentConfig, *, extrapolate: bool = True, databases: Sequence[str] = ()
) -> tuple[float, str, dict[str, Any]]:
    """Iteration time of ``exp``: one full run, or two shorter runs extrapolated linearly."""
    points = reduced_points(exp) if extrapolate else None
    if points is None:
        t, details = simulate_iteration_s(exp, databases)
        return t, "full", details
    m1, m2 = points
    t1, details1 = simulate_iteration_s(with_micro_batches(exp, m1), databases)
    t2, details = simulate_iteration_s(with_micro_batches(exp, m2), databases)
    big = exp.micro_batches_per_replica
    t = t1 + (t2 - t1) * (big - m1) / (m2 - m1)
    details = {
        **details,
        "extrapolation": {
            "m1": m1,
            "t1_s": t1,
            "m2": m2,
            "t2_s": t2,
            "m": big,
            "breakdown1": details1["breakdown"],
            "contention_s": details1.get("contention_s", 0.0),
        },
        "simulator_tflops_per_gpu": None,
    }
    return t, f"extrapolated from {m1} and {m2} micro-batches to {big}", details


def convert(case: Case, exp: ExperimentConfig, t_s: float, details: dict[str, Any]) -> float:
    """Simulated iteration time -> the case's published quantity."""
    gpus = exp.cluster.world_size
    train, model = exp.training, exp.model
    if case.quantity == "iteration_time_s":
        return t_s
    if case.quantity == "tokens_per_s_per_gpu":
        return train.global_batch * train.seq_len / (t_s * gpus)
    if case.quantity == "tflops_per_gpu" and case.flop_convention == "sc21-eq3-hardware":
        flops = sc21_eq3_flops(train.global_batch, train.seq_len, model.layers, model.hidden, model.vocab)
        return flops / (t_s * gpus) / 1e12
    if case.quantity == "tflops_per_gpu" and case.flop_convention == "simulator":
        value = details.get("simulator_tflops_per_gpu")
        if value is None:
            raise ValueError(f"{case.id}: the simulator's FLOP count needs a full run")
        return float(value)
    raise ValueError(f"{case.id}: cannot predict {case.quantity}")


def predict_end_to_end(
    case: Case,
    fidelity: str | None = None,
    *,
    extrapolate: bool = True,
    granularity: str | None = None,
    intra_host: str | None = None,
    queue_pairs: str | None = None,
    packet_acceleration: str | None = None,
    databases: Sequence[str] = (),
    compute_contention: bool | None = None,
) -> Prediction:
    start = time.perf_counter()
    exp = case_experiment(
        case, fidelity, granularity, intra_host, queue_pairs, packet_acceleration, compute_contention
    )
    t_s, method, details = iteration_time_s(exp, extrapolate=extrapolate, databases=databases)
    if method != "full" and case.flop_convention == "simulator":
        t_s, method, details = iteration_time_s(exp, extrapolate=False, databases=databases)
    value = convert(case, exp, t_s, details)
    return Prediction(value, t_s, method, time.perf_counter() - start, details)


def layer_times_ms(run: Any) -> dict[str, Any]:
    """Forward, backward and total time of one transformer layer on rank 0 (micro-batch 0).

    The layer pair (L, L + 1) is the middle one of the rank's pairs of consecutive layers (with
    interleaving, pairs within one model chunk); ValueError when the rank holds no such pair (a
    layer's time is measured between consecutive layers)."""
    import numpy as np

    from heterosim.workload.trace import PHASES

    trace = run.traces[0]
    first = int(run.tables.node_task_offset[0])
    start = run.engine.task_start_ns[first : first + len(trace)]
    phase = trace.templates.phase[trace.template]
    forward = (phase == PHASES.index("fwd")) & (trace.micro_batch == 0)
    backward = np.isin(phase, (PHASES.index("bwd"), PHASES.index("recompute"))) & (trace.micro_batch == 0)
    layers = set(np.unique(trace.layer[forward & (trace.layer >= 0)]).tolist())
    pairs = sorted(layer for layer in layers if layer + 1 in layers)  # consecutive, same chunk
    if not pairs:
        raise ValueError("a layer time needs at least two consecutive transformer layers on the first rank")
    lo = int(pairs[(len(pairs) - 1) // 2])
    hi = lo + 1

    def first_start(mask: Any, layer: int) -> float:
        chosen = start[mask & (trace.layer == layer)]
        if chosen.size == 0 or chosen.min() < 0:
            raise ValueError(f"layer {layer} did not run on the first rank")
        return float(chosen.min())

    fwd_ms = (first_start(forward, hi) - first_start(forward, lo)) / 1e6
    bwd_ms = (first_start(backward, lo) - first_start(backward, hi)) / 1e6
    return {
        "layer_forward_ms": fwd_ms,
        "layer_backward_ms": bwd_ms,
        "layer_total_ms": fwd_ms + bwd_ms,
        "layers_measured": [lo, hi],
    }


def predict_layer(case: Case, exp: ExperimentConfig, databases: Sequence[str] = ()) -> Prediction:
    """A layer_time case on its experiment (:func:`case_experiment`, options applied)."""
    from heterosim.simulate import run_experiment

    start = time.perf_counter()
    # one micro-batch per replica; the interleaved schedule needs a multiple of pp (Megatron too)
    micro = exp.parallel.pp if exp.parallel.schedule == "interleaved" else 1
    run = run_experiment(with_micro_batches(exp, micro), databases=list(databases) or None)
    times = layer_times_ms(run)
    details = {
        **times,
        "published": dict(case.measured_all),
        "fidelity": exp.simulation.fidelity,
        "collective_granularity": exp.simulation.collective_granularity,
        "compute_provenance": run.compute_provenance,
    }
    value = float(times[case.quantity])
    return Prediction(
        value, value / 1e3, "layer on rank 0, one micro-batch", time.perf_counter() - start, details
    )


def predict_collective(
    case: Case,
    fidelity: str | None = None,
    intra_host: str | None = None,
    queue_pairs: str | None = None,
    packet_acceleration: str | None = None,
) -> Prediction:
    from heterosim.simulate import CollectiveSpec, engine_config, simulate_collective

    start = time.perf_counter()
    assert case.collective is not None and case.cluster is not None
    cluster = parse_cluster(case.cluster, f"{case.origin}.cluster")
    n, size = int(case.collective["ranks"]), int(case.collective["size"])
    if n > cluster.world_size:
        raise ValueError(f"{case.id}: {n} ranks > {cluster.world_size} GPUs")
    spec = CollectiveSpec(case.collective["op"], tuple(range(n)), algorithm=case.collective["algorithm"])
    simulation = engine_config(
        fidelity=fidelity or DEFAULT_FIDELITY,  # a collective case has no file to name one
        intra_host=intra_host or "packet",
        queue_pairs=queue_pairs or "connection",
        packet_acceleration=packet_acceleration or DEFAULT_PACKET_ACCELERATION,
    )
    result = simulate_collective(cluster, spec, size, simulation)
    tuning_busbw = size / result.predicted_time_s / 1e9 * bus_factor(result.op, n)
    details = {
        "algorithm": result.algorithm,
        "protocol": result.protocol,
        "channels": result.channels,
        "nccl_tuning_model_busbw_GBps": tuning_busbw,
        "fidelity": result.fidelity,
        "network": result.network,
        "queue_pairs": simulation.queue_pairs,
    }
    return Prediction(result.busbw_GBps, result.time_s, "collective", time.perf_counter() - start, details)


def predict(
    case: Case,
    fidelity: str | None = None,
    granularity: str | None = None,
    intra_host: str | None = None,
    queue_pairs: str | None = None,
    packet_acceleration: str | None = None,
    databases: Sequence[str] = (),
    compute_contention: bool | None = None,
) -> Prediction:
    """Predict ``case`` at ``fidelity`` (None: the case's own, :data:`DEFAULT_FIDELITY` for a
    collective case, as for a file that names none; ``heterosim validate`` passes one);
    ``granularity`` applies to end-to-end cases: collectives.csv-level flows, see collective_granularity;
    ``intra_host`` to packet fidelity: see simulation.intra_host; ``queue_pairs``: see
    simulation.queue_pairs; ``packet_acceleration``: see simulation.packet_acceleration;
    ``databases``: operation databases that time compute before the shipped data, as
    ``heterosim run --db``; a collective case has no compute; ``compute_contention``: see
    simulation.compute_contention)."""
    if case.kind == "collective_busbw":
        return predict_collective(case, fidelity, intra_host, queue_pairs, packet_acceleration)
    if case.kind == "layer_time":
        options = (granularity, intra_host, queue_pairs, packet_acceleration, compute_contention)
        return predict_layer(case, case_experiment(case, fidelity, *options), databases)
    return predict_end_to_end(
        case,
        fidelity,
        granularity=granularity,
        intra_host=intra_host,
        queue_pairs=queue_pairs,
        packet_acceleration=packet_acceleration,
        databases=databases,
        compute_contention=compute_contention,
    )
