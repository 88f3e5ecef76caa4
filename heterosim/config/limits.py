"""Resource bounds checked before anything is allocated.

A configuration whose every value lies in its physical range (:mod:`heterosim.config.fields`)
can still ask for more than the machine holds: ten million sequences per step over ten thousand
layers, a terabyte all-reduce cut into 512 KiB chunks. The checks here estimate, from the
configuration alone, how many trace nodes, plan tasks and flows a run creates and how much
memory they take, and stop with a one-line error that names the term that is too large.

The estimates are **lower bounds** (each term counts only work the run certainly creates:
one forward and one backward op per layer and micro-batch, one flow per ring step and
channel, and :data:`BYTES_PER_TASK` bytes per task, the plan arrays alone), so a run that is
refused could not have fitted, and a run that fits may still be refused later by the real
allocation (reported as "out of memory" by the CLI). The memory budget is the smaller of the
memory available now, the process's address-space limit, and ``--max-memory``.
"""

from __future__ import annotations

import math
import os
import resource
from collections.abc import Sequence
from typing import Any

from heterosim.errors import UserError
from heterosim.units import format_size, parse_size

# Plan arrays per task (ExecutionPlan: kind 1, gpu 4, dst 4, bytes 8, duration 8, delay 8,
# stream 2, priority 1, collective 8, dep_ptr 8, one dependency 8 = 68 bytes); the C++ executor
# and the Python report add more, so this is a floor.
BYTES_PER_TASK = 64
MAX_TASKS = 2**31 - 1  # the executor indexes tasks with 32-bit GPU/stream fields beside them
SIMPLE_CHUNK_MAX = 4 << 20  # the largest chunk NCCL moves per ring step (Simple, 4 MiB buffer)
MAX_COLLECTIVE_BYTES = 1 << 40  # 1 TiB per collective (nccl-tests' largest sizes are 16 GiB)
MAX_CHANNELS = 64  # NCCL's MAXCHANNELS
MAX_SWEEP_VARIANTS = 10_000  # a sweep file's max_variants raises it
# Bytes per sample: the executor's progress series (time, tasks done, flows in flight; 8 bytes
# each, in C++ and again in numpy: 48) and, at packet level, one queue row per sampled port (time
# 8, port 4, queue bytes 8, tx bytes 8: PacketNetworkSampler::QueueSeries,
# ns3_modules/rdma/model/packet-network-sampler.h). Measured: the tiny 16-GPU experiment with
# framework.host_op_overhead 100ms, 4.8 M progress samples, peak RSS 0.67 GB against 0.46 GB
# without them (43 bytes per sample, report and trace.json included).
PROGRESS_SAMPLE_BYTES = 48
QUEUE_ROW_BYTES = 28

_max_memory: int | None = None


def set_max_memory(text: str | None) -> None:
    """``--max-memory 8GiB``: cap the memory budget of this process's runs."""
    global _max_memory
    if text is None:
        _max_memory = None
        return
    try:
        value = parse_size(text)
    except ValueError as exc:
        raise UserError(f"--max-memory {text}: {exc}") from None
    if value < 64 << 20:
        raise UserError(f"--max-memory {text}: expected at least 64MiB")
    _max_memory = value


def _available_bytes() -> int:
    """Memory available to new allocations now (MemAvailable), else physical memory."""
    try:
        with open("/proc/meminfo") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 1 << 40


def memory_budget_bytes() -> tuple[int, str]:
    """(bytes a run may allocate, what sets that bound) for messages."""
    budget, why = _available_bytes(), "memory available on this machine"
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY and soft < budget:
        budget, why = soft, "the process's address-space limit (ulimit -v)"
    if _max_memory is not None and _max_memory < budget:
        budget, why = _max_memory, "--max-memory"
    return budget, why


def check_budget(source: str, key: str, what: str, tasks: float) -> None:
    """Raise a one-line UserError when ``tasks`` (a lower bound) cannot fit.

    ``key`` names the term that is too large and ``what`` says how the count follows from it.
    """
    if not math.isfinite(tasks) or tasks > MAX_TASKS:
        raise UserError(
            f"{source}: {key}: {what} = at least {tasks:.3g} tasks; at most {MAX_TASKS:,} can be simulated"
        )
    needed = tasks * BYTES_PER_TASK
    budget, why = memory_budget_bytes()
    if needed > budget:
        raise UserError(
            f"{source}: {key}: {what} = at least {tasks:.3g} tasks, more than "
            f"{format_size(needed)} of memory; {why} is {format_size(budget)}"
        )


def experiment_task_floor(experiment: Any) -> tuple[float, str, str]:
    """(lower bound of plan tasks, the dominant key, how it follows) for an experiment.

    Counted: one forward and one backward op per layer, micro-batch and rank; the four
    tensor-parallel all-reduces per layer and micro-batch (Megatron: two forward, two backward)
    of ``micro_batch x seq_len x hidden`` 2-byte activations; one data-parallel all-reduce of the
    rank's 2-byte gradients; each collective as :func:`collective_flow_floor` flows at the
    experiment's collective granularity.
    """
    train, par, model = experiment.training, experiment.parallel, experiment.model
    world = experiment.cluster.world_size
    micro_batches = train.global_batch / max(1, train.micro_batch * par.dp)
    layers_per_rank = math.ceil(model.layers / max(1, par.pp))
    iterations = experiment.simulation.iterations
    ops = 2.0 * micro_batches * layers_per_rank * world
    activation_bytes = train.micro_batch * train.seq_len * model.hidden * 2
    granularity = experiment.simulation.collective_granularity
    tp_flows = (
        4.0
        * micro_batches
        * layers_per_rank
        * (world / par.tp)
        * collective_flow_floor("allreduce", activation_bytes, par.tp, granularity)
    )
    grad_bytes = 2.0 * model.hidden * model.hidden * 12 * layers_per_rank / par.tp
    dp_flows = (world / par.dp) * collective_flow_floor("allreduce", int(grad_bytes), par.dp, granularity)
    tasks = (ops + tp_flows + dp_flows) * iterations
    terms = {
        "training.global_batch": micro_batches,
        "model.layers": layers_per_rank,
        "cluster": world,
        "simulation.iterations": iterations,
    }
    key = max(terms, key=lambda k: terms[k])
    what = (
        f"{micro_batches:.3g} micro-batches per replica x {layers_per_rank} layers per rank x "
        f"{world} ranks x {iterations} iterations (ops and collective flows)"
    )
    return tasks, key, what


def check_experiment_budget(experiment: Any) -> None:
    """Stop an experiment whose plan cannot fit before its workload is generated."""
    tasks, key, what = experiment_task_floor(experiment)
    check_budget(experiment.source or "experiment", key, what, tasks)


def simulated_time_floor_ns(experiment: Any) -> float:
    """Lower bound of the simulated time of a run (all its iterations), in ns.

    Counted: the weight GEMMs alone, 2 FLOPs per multiply-add and the backward pass twice the
    forward, for ``global_batch x seq_len`` tokens: per layer the query and output projections
    (``h x h`` each), keys and values (``h x kv_dim`` each) and the MLP (2 or, gated, 3 GEMMs of
    ``h x ffn``; an MoE layer's ``top_k x expert_ffn`` when smaller), and the logits (``h x
    vocab``); spread over every GPU of the cluster running at once at its highest catalogue peak
    (any dtype). Attention scores, communication and pipeline bubbles only add, so the run takes
    at least this long unless a GPU computes faster than its datasheet peak. (Measured runs take
    10-100x longer: the default experiment 0.95 ms against 31.6 ms simulated.) Framework
    overheads per op can take longer still (:func:`framework_time_floor_ns`): the larger floor
    counts. Several jobs (``jobs:``): the latest start plus that job's own floor.
    """
    jobs = getattr(experiment, "jobs", None)
    if jobs is not None:  # several jobs: the run lasts at least as long as its longest job
        return max((job.start_ns + simulated_time_floor_ns(job.experiment) for job in jobs), default=0.0)
    return max(_gemm_time_floor_ns(experiment), framework_time_floor_ns(experiment))


def framework_time_floor_ns(experiment: Any) -> float:
    """Lower bound of the simulated time the framework's overheads alone take, in ns.

    Counted per rank, whose compute ops run one after another: one forward and one backward op
    per layer and micro-batch, each at least ``framework.host_op_overhead``, and (tensor
    parallelism) the four collective calls per layer and micro-batch, each after its
    ``framework.collective_overhead`` marker; the larger of the two sums (each is a bound on its
    own, whatever stream the markers run on), at the GPU type with the smallest overheads.
    """
    framework, train, par = getattr(experiment, "framework", None), experiment.training, experiment.parallel
    gpu_types = set(experiment.cluster.gpu_type)
    if framework is None or not gpu_types:
        return 0.0
    host_ns = min(framework.host_overhead_ns(g) for g in gpu_types)
    call_ns = min(framework.tp_collective_overhead_ns(g) for g in gpu_types) if par.tp > 1 else 0
    micro_batches = train.global_batch / max(1, train.micro_batch * par.dp)
    layers_per_rank = math.ceil(experiment.model.layers / max(1, par.pp))
    per_layer_ns = max(2.0 * host_ns, 4.0 * call_ns)
    return micro_batches * layers_per_rank * per_layer_ns * experiment.simulation.iterations


def _gemm_time_floor_ns(experiment: Any) -> float:
    model, train, cluster = experiment.model, experiment.training, experiment.cluster
    h = float(model.hidden)
    ffn = float(model.ffn)
    if model.moe is not None:
        ffn = min(ffn, float(model.moe.top_k * model.moe.expert_ffn))
    layer = 2 * h * h + 2 * h * model.kv_dim + (3 if model.gated_mlp else 2) * h * ffn
    tokens = float(train.global_batch) * float(train.seq_len)
    flops = 6.0 * tokens * (model.layers * layer + h * model.vocab) * experiment.simulation.iterations
    peak = 0.0
    for index in range(cluster.num_hosts):
        host = cluster.host(index)
        peak += host.gpus * max((v or 0.0 for v in host.spec.peak_tflops.values()), default=0.0) * 1e12
    return flops / peak * 1e9 if peak > 0 else 0.0


def sampled_ports_floor(experiment: Any) -> int:
    """Ports sampled per interval at packet level: at least both ends of every NIC's access link
    (PacketNetworkSampler samples the switch and NIC ends of access and fabric links); 0 in flow
    fidelity, which records a link only when its bytes changed."""
    if not experiment.simulation.network_model.samples_ports:
        return 0
    cluster = experiment.cluster
    return 2 * sum(cluster.host(h).nics for h in range(cluster.num_hosts))


def check_sample_budget(
    experiment: Any,
    stop_ns: int | None = None,
    *,
    floor_ns: float | None = None,
    basis: str = "",
    interval_ns: int | None = None,
) -> None:
    """Refuse a ``simulation.sample_interval`` that records more than
    :data:`~heterosim.config.degenerate.MAX_SAMPLES_REFUSED` samples per series, or whose samples
    alone exceed the memory budget, over the simulated time the run certainly takes
    (``floor_ns``, by default :func:`simulated_time_floor_ns`; ``basis`` says where a given floor
    comes from), capped by ``--until``. ``interval_ns`` replaces the experiment's interval."""
    from heterosim.config.degenerate import MAX_SAMPLES_REFUSED
    from heterosim.units import format_time_ns

    interval = experiment.simulation.sample_interval_ns if interval_ns is None else interval_ns
    if not interval:
        return
    if floor_ns is None:
        floor_ns = simulated_time_floor_ns(experiment)
    if stop_ns:
        floor_ns = min(floor_ns, float(stop_ns))
    samples = floor_ns / interval
    source = experiment.source or "experiment"
    key = f"simulation.sample_interval {format_time_ns(interval)}"
    over = f"at least {samples:.3g} samples per series over at least {format_time_ns(floor_ns)} simulated"
    over += f" ({basis})" if basis else ""
    if samples > MAX_SAMPLES_REFUSED:
        raise UserError(
            f"{source}: {key}: {over}, more than {MAX_SAMPLES_REFUSED:,}; use a longer interval "
            "(or 0 for no time series)"
        )
    ports = sampled_ports_floor(experiment)
    needed = samples * (PROGRESS_SAMPLE_BYTES + ports * QUEUE_ROW_BYTES)
    budget, why = memory_budget_bytes()
    if needed > budget:
        raise UserError(
            f"{source}: {key}: {over} x {ports} sampled ports need at least {format_size(needed)} "
            f"of memory; {why} is {format_size(budget)}; use a longer interval (or 0)"
        )


def collective_flow_floor(op: str, size_bytes: int, n: int, granularity: str = "chunk") -> float:
    """Lower bound of the flows one collective of ``size_bytes`` over ``n`` ranks becomes at
    ``simulation.collective_granularity``: ``chunk``, every ring step of every chunk is at least
    one flow (one channel, the largest NCCL chunk); ``step``, every ring step once (one loop);
    ``connection``, one flow per GPU pair that exchanges data, at least ``n - 1`` of them (every
    rank but one sends to somebody)."""
    if n < 2 or size_bytes <= 0:
        return 0.0
    if granularity == "connection":
        return float(n - 1)
    steps = 2 * (n - 1) if op == "allreduce" else n - 1
    if granularity == "step":
        return float(steps) * n
    loops = max(1, math.ceil(size_bytes / (n * SIMPLE_CHUNK_MAX)))
    return float(steps) * n * loops


def check_scenario_budget(scenario: Any) -> None:
    """Flows, and time-series samples (one per flow and interval), of a netbench scenario."""
    flows = len(scenario.flows)
    check_budget(scenario.source or "scenario", "flows", f"{flows} flows", float(flows))
    interval = scenario.simulation.sample_interval_ns
    if interval and scenario.simulation.network_model.samples_flow_rates:
        samples = scenario.simulation.stop_ns / interval
        check_budget(
            scenario.source or "scenario",
            "simulation.sample_interval",
            f"{samples:.3g} samples x {flows} flows",
            samples * flows / 4,
        )


def check_sweep_size(source: str, lengths: Sequence[int], limit: int | None) -> None:
    """Refuse a grid with more variants than ``limit`` (default :data:`MAX_SWEEP_VARIANTS`)
    before any variant is expanded."""
    limit = MAX_SWEEP_VARIANTS if limit is None else limit
    count = math.prod(lengths)
    if count > limit:
        shown = " x ".join(str(n) for n in lengths)
        raise UserError(
            f"{source}: grid: {shown} = {count:,} variants, above the limit of "
            f"{limit:,}; set max_variants: in the sweep file to run more"
        )
