"""Run an :class:`~heterosim.plan.execution_plan.ExecutionPlan` on ns-3 with either network model.

The plan is handed to ``ns3::PlanExecutor`` (C++) in bulk, as views of its arrays (no copy);
the executor counts dependencies, runs compute tasks on per-(GPU, stream) queues, starts flows on
the chosen network when they are ready and records every task's start and end in arrays Python
owns (``PlanExecutor::BorrowTimesNarrow``: 32 bits while every time fits, 64 from then on).
Python only builds the inputs, calls the progress callback between slices of the run (about
every 0.5 s of wall time) and copies the network's results out as arrays; the run over, the
executor frees its per-task state (``PlanExecutor::ReleaseTasks``) before the network's tables
are read. The per-flow table (:class:`FlowTable`) keeps only the connection ids and what the
network measured; its other columns come from the plan and the task times when read.

Fidelities: ``flow`` is the fluid max-min model of :mod:`heterosim.engine.fluid` (see its
approximations); ``packet`` is the RDMA packet network of :mod:`heterosim.engine.packet`.
A plan that cannot finish (dependency cycle, GPU index out of range, flow without a route) is
rejected before the run with :class:`UserError`; a run that stalls (no event left, tasks left)
raises :class:`UserError` naming stuck tasks, or with ``raise_on_stall=False`` returns a partial
result whose ``error`` holds the message. Every call destroys ns-3's simulator state before and
after, so runs in one process are independent and deterministic.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from heterosim.config.choices import (
    INTRA_HOST_MODELS,
    PACKET_ACCELERATIONS,
    QUEUE_PAIR_MODELS,
    require_choice,
)
from heterosim.config.experiment import NetworkConfig, SimulationConfig
from heterosim.engine import faults as fault_models
from heterosim.engine import native
from heterosim.engine.flow_table import FlowTable
from heterosim.engine.fluid import reset_simulator
from heterosim.engine.network_model import NetworkModel, network_model
from heterosim.engine.topology import Topology, to_native
from heterosim.errors import UserError
from heterosim.plan.collectives.planes import flow_planes
from heterosim.plan.execution_plan import FLOW, ExecutionPlan, connection_ids, task_indices

PROGRESS_WALL_INTERVAL_S = 0.5
# Flow blocks (blocks a flow's kernel holds: its collective's NCCL channels) go to the
# contention model in 8 bits when none exceeds this (ComputeContention::BorrowFlowBlocksNarrow)
NARROW_BLOCKS_MAX = np.iinfo(np.uint8).max

# ns3::PlanExecutor::RunState
_FINISHED, _YIELDED, _STOPPED, _STALLED, _INVALID = 1, 2, 3, 4, 5
_INTERRUPTED = 6  # Python-side: Ctrl-C between two Resume() calls

ProgressCallback = Callable[[int, int, int, int], None]  # (sim ns, tasks done, tasks total, events)


@dataclass
class EngineResult:
    """What one execution of a plan produced (times in ns, -1 where a task did not run)."""

    task_start_ns: np.ndarray  # int64 (T,)
    task_end_ns: np.ndarray  # int64 (T,)
    makespan_ns: int
    events: int  # ns-3 events executed
    wall_s: float
    fidelity: str
    network: dict[str, int]  # flows, bytes, drops, retransmits, pfc_pause_frames, ecn_marks, cnps
    links: dict[str, np.ndarray]  # per link direction: link, direction, bytes, busy_ns, ...
    # per FLOW task: task, src, dst, bytes, start_ns, end_ns, retransmits, collective (instance,
    # -1: point-to-point), connection (queue pair shared with other flows, -1: its own),
    # out_of_order, max_reorder_depth (packet fidelity, heterosim.engine.network_model)
    flows: Mapping[str, np.ndarray]  # a FlowTable (heterosim.engine.flow_table) or a dict
    series: dict[str, Any] = field(default_factory=dict)  # progress samples (+ network tables)
    # packet fidelity with socket hosts: TCP summary, per-connection streams, cwnd samples
    # (heterosim.engine.packet.tcp_stats); empty otherwise
    tcp: dict[str, Any] = field(default_factory=dict)
    partial: bool = False  # stopped at stop_ns or stalled: some tasks did not finish
    error: str | None = None
    build_s: float = 0.0  # wall time compiling the C++ models first (not part of wall_s)
    fault_counts: list[dict[str, Any]] = field(default_factory=list)  # per fault, model counters
    # packet fidelity: simulation.packet_acceleration and the fast-forward's counters
    fast_forward: dict[str, Any] = field(default_factory=dict)
    # compute/communication contention: extra_ns and tasks_slowed per GPU (int64), the slowed
    # compute tasks (slowed_task, ascending) and each one's extra time (slowed_extra_ns), both
    # int64: no per-task array; empty when simulation.compute_contention is off
    contention: dict[str, np.ndarray] = field(default_factory=dict)


def engine_config(fidelity: str, **changes: Any) -> SimulationConfig:
    """The settings of a run without an experiment file at the ``fidelity`` its caller names: seed
    1, one iteration, no time series, every other field at its default unless ``changes`` sets it,
    e.g. ``engine_config("packet", queue_pairs="flow")``."""
    return replace(SimulationConfig(fidelity=fidelity, seed=1, iterations=1, sample_interval_ns=0), **changes)


def execute_plan(
    plan: ExecutionPlan,
    topology: Topology,
    network: NetworkConfig,
    simulation: SimulationConfig,
    *,
    stop_ns: int | None = None,
    progress: ProgressCallback | None = None,
    raise_on_stall: bool = True,
    stall_timeout_ns: int | None = None,
    faults: fault_models.FaultPlan | None = None,
    release_schedule: bool = False,
) -> EngineResult:
    """Run ``plan`` on ``topology`` with the network model ``simulation.fidelity`` names.

    From ``simulation``: ``fidelity`` (``flow`` or ``packet``), ``seed``;
    ``sample_interval_ns`` > 0 records ``series`` = {time_ns, tasks_done, flows_in_flight} every
    interval of simulated time (and the packet model's own series); ``intra_host`` (packet
    fidelity): ``flow`` runs flows between GPUs of one host in the fluid model on the host links
    while the fabric stays packet-level (see ``PacketNetwork::HostFlows``); ``queue_pairs``:
    ``connection`` sends the flows of one NCCL connection
    (:func:`heterosim.plan.execution_plan.connection_ids`) as messages on one queue pair, one
    after another (``FlowNetwork::StartFlowOnConnection``); ``flow`` makes every flow its own.
    ``packet_acceleration`` (packet fidelity): ``fast`` skips settled stretches of the fabric
    (``ns3::PacketFastForward``); ``EngineResult.fast_forward`` says how much.
    ``iterations`` and ``collective_granularity`` are the plan's business and are not read here.

    ``stop_ns`` ends the run early (``partial=True``); ``progress(sim_ns, done, total, events)``
    is called about every 0.5 s of wall time and once at the end. ``stall_timeout_ns``:
    simulated time without any task finishing that counts as a stall (0 = only an empty event
    queue). The packet network keeps timers running even when deadlocked, so its default is
    :func:`~heterosim.engine.network_model.default_stall_timeout_ns`; the fluid network's default
    is 0 (its queue empties).
    ``faults``: link faults and straggler windows (:mod:`heterosim.engine.faults`); the packet
    model's stall timeout then also covers the outages and twice the retransmission timeout.
    On a multi-plane topology every flow gets its plane as NCCL would map its channel to a NIC
    port (:func:`heterosim.plan.collectives.planes.flow_planes`, ``FlowNetwork::SetFlowPlanes``).
    ``release_schedule``: the caller runs the plan no more; its dependency lists are narrowed
    to int32 where they fit (:meth:`ExecutionPlan.narrow_dependencies`) and its schedule columns
    are freed (:meth:`ExecutionPlan.release_schedule`) once the executor has checked the plan and
    built its own children lists (``PlanExecutor::ReleaseParents``), before the task times are
    allocated, so that a plan of millions of tasks does not hold both dependency lists and the
    times at once; the columns the run still reads stay alive until it is over.
    """
    if plan.released:
        raise ValueError("execute_plan: the plan's schedule columns were released (release_schedule)")
    model, queue_pairs, acceleration = _settings(plan, topology, simulation)
    built_before = native.build_seconds()
    gbl = native.load()  # compiles ns3_modules on first use: timed apart from the simulation
    build_s = native.build_seconds() - built_before
    ns3 = gbl.ns3
    started = time.perf_counter()
    reset_simulator(gbl)
    desc = to_native(topology, gbl)
    net = model.create(gbl, desc, network, simulation)
    if stall_timeout_ns is None:
        stall_timeout_ns = model.default_stall_timeout_ns(plan, topology, network, faults)
    executor = _create_executor(ns3, net, desc, simulation.sample_interval_ns, stop_ns, stall_timeout_ns)
    if release_schedule:
        plan.narrow_dependencies()  # read once, then freed: 32-bit where they fit
    connection = connection_ids(plan) if queue_pairs == "connection" else np.full(len(plan), -1, np.int32)
    borrowed, parents = _load(executor, plan, connection)  # the executor reads these: alive until the end
    _set_planes(net, plan, topology)
    valid, contention, contention_arrays = _check_and_install_contention(
        ns3,
        executor,
        plan,
        parents,
        compute_contention=simulation.compute_contention,
        release_schedule=release_schedule,
    )
    times = _TaskTimes(executor, len(plan))  # after the set-up's temporaries (peak memory)
    schedule = fault_models.install(faults, gbl, net, executor)
    try:
        state, interruption = _run(executor, ns3, len(plan), progress, times) if valid else (_INVALID, None)
        times.widen_if_full()  # a time of the last events beyond 32 bits
        error = _run_error(executor, model, net, state, interruption, raise_on_stall)
        # the run state, then the arrays it read: memory for the readout (and the accounts)
        executor.ReleaseTasks()
        borrowed.clear()
        parents.clear()
        accounts = _release_contention(contention, contention_arrays, plan)
        result = _collect(executor, net, ns3, plan, topology, model, connection, times.wide())
        result.fault_counts = fault_models.collect(faults, schedule, net, model)
        if accounts is not None:
            result.contention = accounts
        result.partial = state != _FINISHED
        if model.accelerates:
            result.fast_forward = _fast_forward(acceleration, result, plan)
        result.error, result.build_s = error, build_s
        result.wall_s = time.perf_counter() - started
        return result
    finally:
        _dispose(gbl, executor, contention, net, schedule)


def _check_and_install_contention(
    ns3: Any,
    executor: Any,
    plan: ExecutionPlan,
    parents: list[Any],
    *,
    compute_contention: bool,
    release_schedule: bool,
) -> tuple[bool, Any, list[Any]]:
    """Check the loaded plan (``Validate`` builds the children lists), free the parents and the
    plan's schedule columns when ``release_schedule``, then install the contention model: its
    flow blocks are not held beside both dependency lists. Returns (valid, contention, arrays)."""
    terms = _compute_terms(plan) if compute_contention else None  # reads a schedule column
    valid = bool(executor.Validate())  # the parents are not read again
    if valid and release_schedule:
        executor.ReleaseParents()
        parents.clear()
        plan.release_schedule()  # the columns the run reads stay alive in the borrowed arrays and `terms`
    if terms is None:
        return valid, None, []
    contention, arrays = _install_contention(ns3, executor, plan, terms)
    return valid, contention, arrays


def _release_contention(contention: Any, arrays: list[Any], plan: ExecutionPlan) -> Any:
    """The contention accounts (None without the model), then the model's per-task state and
    the arrays it borrowed are freed."""
    accounts = _contention_accounts(contention, plan) if contention is not None else None
    if contention is not None:
        contention.ReleaseTasks()
    arrays.clear()
    return accounts


def _fast_forward(mode: str, result: EngineResult, plan: ExecutionPlan) -> dict[str, Any]:
    """results.json ``sim.packet_acceleration`` of a packet run (:func:`fast_forward_report`)."""
    flow_bytes = int(np.sum(plan.bytes, where=plan.kind == FLOW, dtype=np.int64))
    return fast_forward_report(mode, result.fast_forward, result.makespan_ns, flow_bytes)


def _settings(
    plan: ExecutionPlan, topology: Topology, simulation: SimulationConfig
) -> tuple[NetworkModel, str, str]:
    """The network model, queue-pair model and packet acceleration ``simulation`` names, checked
    (one-line :class:`UserError` for an unknown name or a plan larger than the cluster)."""
    model = network_model(simulation.fidelity)
    queue_pairs = require_choice("simulation: queue_pairs", simulation.queue_pairs, QUEUE_PAIR_MODELS)
    require_choice("simulation: intra_host", simulation.intra_host, INTRA_HOST_MODELS)
    acceleration = require_choice(
        "simulation: packet_acceleration", simulation.packet_acceleration, PACKET_ACCELERATIONS
    )
    if len(topology.gpu_node) < plan.num_gpus:
        raise UserError(
            f"execution plan: uses {plan.num_gpus} GPUs but the cluster has {len(topology.gpu_node)}"
        )
    return model, queue_pairs, acceleration


def _create_executor(
    ns3: Any, net: Any, desc: Any, sample_interval_ns: int, stop_ns: int | None, stall_timeout_ns: int
) -> Any:
    """``ns3::PlanExecutor`` on ``net`` and ``desc`` with the run's stop time, progress sampling,
    stall timeout and wall-clock yield interval."""
    executor = ns3.CreateObject[ns3.PlanExecutor]()
    if stop_ns is not None:
        executor.SetAttribute("StopTime", ns3.TimeValue(ns3.NanoSeconds(int(stop_ns))))
    if sample_interval_ns > 0:
        executor.SetAttribute("ProgressInterval", ns3.TimeValue(ns3.NanoSeconds(int(sample_interval_ns))))
    if stall_timeout_ns > 0:
        executor.SetAttribute("StallTimeout", ns3.TimeValue(ns3.NanoSeconds(int(stall_timeout_ns))))
    # Yield to Python every PROGRESS_WALL_INTERVAL_S of wall time (progress, and Ctrl-C).
    executor.SetAttribute("WallInterval", ns3.TimeValue(ns3.NanoSeconds(int(PROGRESS_WALL_INTERVAL_S * 1e9))))
    executor.SetNetwork(net)
    executor.SetTopology(desc)
    return executor


def _set_planes(net: Any, plan: ExecutionPlan, topology: Topology) -> None:
    """On a multi-plane topology, each flow's plane (``FlowNetwork::SetFlowPlanes``)."""
    gpu_host = topology.node_host[topology.gpu_node]
    planes = flow_planes(
        plan.kind, plan.gpu, plan.dst, plan.channel, plan.collective, gpu_host, topology.planes
    )
    if planes is not None:
        net.SetFlowPlanes(len(plan), _buffer(planes, np.int8))


def _run_error(
    executor: Any, model: NetworkModel, net: Any, state: int, interruption: str | None, raise_on_stall: bool
) -> str | None:
    """The error of a run that ended in ``state``: None when it finished or stopped; raises
    :class:`UserError` for an invalid plan, and for a stall if ``raise_on_stall``."""
    if state == _INVALID:
        raise UserError(f"execution plan: {executor.GetError()}")
    error = interruption if state == _INTERRUPTED else None
    if state == _STALLED:
        error = str(executor.GetError())
        error += model.stall_note(net)
        if raise_on_stall:
            raise UserError(f"execution plan: {error}")
    return error


def _dispose(gbl: Any, executor: Any, contention: Any, net: Any, schedule: Any) -> None:
    """Dispose of the run's ns-3 objects and reset the simulator (after any run, even a failed one)."""
    executor.Dispose()
    if contention is not None:
        contention.Dispose()
    reset_simulator(gbl)
    net.Dispose()
    if schedule is not None:
        schedule.Dispose()


def _load(
    executor: Any, plan: ExecutionPlan, connection: np.ndarray
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Hand the plan to the executor without a copy (``PlanExecutor::BorrowPlan``); return the
    arrays it reads, which must stay alive and unchanged until ``ReleaseTasks``, and apart
    the dependency lists, which must until ``ReleaseParents``."""
    narrow = plan.bytes.dtype == np.int32  # the three amounts: 32 bits together or not at all
    amount = np.int32 if narrow else np.int64
    null = native.null_pointer()
    # GPU ids in 16 bits (ExecutionPlan.endpoint_columns): given apart, BorrowEndpointsNarrow
    ids = [_buffer(plan.gpu, np.int16), _buffer(plan.dst, np.int16)] if plan.gpu.dtype == np.int16 else []
    arrays = [
        _buffer(plan.kind, np.uint8),
        *([null, null] if ids else [_buffer(plan.gpu, np.int32), _buffer(plan.dst, np.int32)]),
        _buffer(plan.bytes, amount),
        _buffer(plan.duration_ns, amount),
        _buffer(plan.delay_ns, amount),
        _buffer(plan.stream, np.int16),
        _buffer(plan.priority, np.uint8),
    ]
    if plan.dep_ptr.dtype == np.int32:  # ExecutionPlan.narrow_dependencies
        parents = [_buffer(plan.dep_ptr, np.int32), _buffer(plan.dep_idx, np.int32)]
        (executor.BorrowPlanNarrow if narrow else executor.BorrowPlan)(len(plan), *arrays, null, null)
        executor.BorrowParentsNarrow(len(plan), *parents)
    else:
        parents = [_buffer(plan.dep_ptr, np.int64), _buffer(plan.dep_idx, np.int64)]
        (executor.BorrowPlanNarrow if narrow else executor.BorrowPlan)(len(plan), *arrays, *parents)
    if ids:
        executor.BorrowEndpointsNarrow(len(plan), *ids)
    arrays = [a for a in arrays if isinstance(a, np.ndarray)] + ids
    if np.any(connection >= 0):
        if connection.dtype == np.int32:
            arrays.append(_buffer(connection, np.int32))
            executor.BorrowConnectionsNarrow(len(plan), arrays[-1])
        else:
            arrays.append(_buffer(connection, np.int64))
            executor.BorrowConnections(len(plan), arrays[-1])
    return arrays, parents


def _buffer(values: np.ndarray, dtype: type) -> np.ndarray:
    """``values`` as a contiguous array of ``dtype`` for cppyy (one element when empty: cppyy
    needs a buffer)."""
    out: np.ndarray = np.ascontiguousarray(values, dtype=dtype)
    return out if out.size else np.zeros(1, dtype)


def _compute_terms(plan: ExecutionPlan) -> list[np.ndarray]:
    """The plan's contention terms per task as ``ComputeContention::BorrowComputeTerms`` reads
    them (``plan.contention_*``: the plan's own arrays where the dtypes match)."""
    return [
        _buffer(plan.contention_wave, np.float64),
        _buffer(plan.contention_share, np.float64),
        _buffer(plan.contention_above, np.int32),
    ]


def _install_contention(
    ns3: Any, executor: Any, plan: ExecutionPlan, terms: list[np.ndarray]
) -> tuple[Any, list[np.ndarray]]:
    """``ns3::ComputeContention`` for the plan's compute ``terms`` (:func:`_compute_terms`) and
    flow blocks (:func:`heterosim.plan.compute.contention.flow_blocks`; in 8 bits where every
    count fits, ``BorrowFlowBlocksNarrow``), attached to the executor;
    it reads the arrays returned with it in place, which must stay alive until its
    ``ReleaseTasks``."""
    from heterosim.plan.compute.contention import flow_blocks

    n = len(plan)
    blocks = flow_blocks(plan)
    narrow = blocks.size == 0 or int(blocks.max()) <= NARROW_BLOCKS_MAX
    arrays = [
        *terms,
        _buffer(blocks, np.uint8 if narrow else np.int32),
        _buffer(_instances32(plan), np.int32),
    ]
    del blocks
    model = ns3.CreateObject[ns3.ComputeContention]()
    model.BorrowComputeTerms(n, *arrays[:3])
    (model.BorrowFlowBlocksNarrow if narrow else model.BorrowFlowBlocks)(n, *arrays[3:])
    model.SetGpuCount(int(plan.num_gpus))
    executor.SetComputeContention(model)
    return model, arrays


def _instances32(plan: ExecutionPlan) -> np.ndarray:
    """The plan's collective instance per task as ``ComputeContention`` reads it (int32; the
    plan's own column whenever the ids fit, :func:`~heterosim.plan.execution_plan.index_column`)."""
    if plan.collective.dtype != np.int32:
        raise UserError(
            f"execution plan: collective instance ids up to {int(plan.collective.max()):,} do not fit "
            "the compute-contention model's 32-bit ids; set simulation.compute_contention: false"
        )
    return plan.collective


def _contention_accounts(model: Any, plan: ExecutionPlan) -> dict[str, np.ndarray]:
    """``EngineResult.contention``: the per-GPU accounts, and the slowed tasks with their extra
    time (a compute task not slowed has none: no array of every task)."""
    gpus = max(int(plan.num_gpus), 1)
    extra, slowed = np.zeros(gpus, np.int64), np.zeros(gpus, np.uint64)
    count = int(model.GetNSlowedTasks())
    tasks, task_extra = np.zeros(max(count, 1), np.uint32), np.zeros(max(count, 1), np.int64)
    model.CopyAccounts(extra, slowed, tasks, task_extra)
    return {
        "extra_ns": extra,
        "tasks_slowed": slowed.astype(np.int64),
        "slowed_task": tasks[:count].astype(np.int64),
        "slowed_extra_ns": task_extra[:count],
    }


def _run(
    executor: Any, ns3: Any, total: int, progress: ProgressCallback | None, times: _TaskTimes
) -> tuple[int, str | None]:
    """Run to the end; return the executor's state and, if interrupted, why. ``times`` are
    widened to 64 bits when a time stops fitting 32."""
    if not executor.Start():
        return _INVALID, None
    while True:
        try:
            state = int(executor.Resume())
            times.widen_if_full()
            if progress is not None:
                progress(
                    int(ns3.Simulator.Now().GetNanoSeconds()),
                    int(executor.GetTasksDone()),
                    total,
                    int(ns3.Simulator.GetEventCount()),
                )
        except KeyboardInterrupt as exc:
            # Ctrl-C (or a signal the command turned into one): stop cleanly; what is known is
            # reported as partial
            return _INTERRUPTED, str(exc) or "interrupted by the user (Ctrl-C)"
        if state != _YIELDED:
            return state, None


class _TaskTimes:
    """Start and end of every task (ns; -1 where a task did not start / finish), arrays the
    executor fills as the run goes (no copy of its own): in int32 while every time fits
    (``PlanExecutor::BorrowTimesNarrow``: 8 bytes per task less during the run), widened to
    int64 when the run passes 2^31 ns (:meth:`widen_if_full`, ``PlanExecutor::WidenTimes``)
    and for the reports once it is over (:meth:`wide`). Each 32-bit array is the first half of
    the int64 array it becomes, widened in place from its last value down: untouched, the
    second half takes no memory (a fresh mapping, heterosim/engine/process_memory.py), and
    widening makes no second copy of the times."""

    def __init__(self, executor: Any, n: int) -> None:
        self.executor, self.n = executor, n
        self.buffers = [np.empty(max(n, 1), np.int64), np.empty(max(n, 1), np.int64)]
        self.narrow = True
        start, end = (b.view(np.int32)[: max(n, 1)] for b in self.buffers)
        executor.BorrowTimesNarrow(n, start, end)  # Start() sets them to -1

    def widen_if_full(self) -> None:
        """If a time did not fit 32 bits, let the executor widen every time so far in place (it
        records the rest of the run in 64 bits)."""
        if self.narrow and self.executor.NarrowTimesFull():
            self.executor.WidenTimes(self.n, *self.buffers)
            self.narrow = False

    def wide(self) -> tuple[np.ndarray, np.ndarray]:
        """The times in int64, as the reports read them (after the run, widened in place if the
        run never passed 2^31 ns)."""
        if self.narrow:
            for values in self.buffers:
                widen_in_place(values, self.n)
            self.narrow = False
        start, end = (b[: self.n] for b in self.buffers)
        return start, end


def widen_in_place(values: np.ndarray, n: int, block: int = 1 << 20) -> None:
    """Turn the ``n`` int32 values held in the first half of int64 array ``values`` into its
    first ``n`` int64 values, a block of ``block`` values at a time from the last down (value i in
    64 bits covers 32-bit values 2i and 2i + 1, both read by then): no copy of them all."""
    narrow = values.view(np.int32)
    for hi in range(n, 0, -block):
        lo = max(hi - block, 0)
        values[lo:hi] = narrow[lo:hi].astype(np.int64)


def _collect(
    executor: Any,
    net: Any,
    ns3: Any,
    plan: ExecutionPlan,
    topology: Topology,
    model: NetworkModel,
    connection: np.ndarray,
    times: tuple[np.ndarray, np.ndarray],
) -> EngineResult:
    start, end = times
    series: dict[str, Any] = dict(_samples(executor))
    makespan = int(executor.GetMakespanNs())
    events = int(ns3.Simulator.GetEventCount())
    sim_end = max(makespan, int(ns3.Simulator.Now().GetNanoSeconds()))
    flow_tasks = task_indices(plan.kind == FLOW)  # int32 where they fit: the flow table keeps them
    readout = model.read(net, topology, flow_tasks, sim_end, events)
    series.update(readout.series)
    measured = {
        "retransmits": readout.retransmits,
        "out_of_order": readout.out_of_order,
        "max_reorder_depth": readout.max_reorder_depth,
    }
    flows = FlowTable(plan, flow_tasks, start, end, connection, measured)
    return EngineResult(
        task_start_ns=start,
        task_end_ns=end,
        makespan_ns=makespan,
        events=readout.events,
        wall_s=0.0,
        fidelity=model.name,
        network=readout.counters,
        links=readout.links,
        flows=flows,
        series=series,
        tcp=readout.tcp,
        fast_forward=readout.fast_forward,
    )


def fast_forward_report(
    mode: str, counters: dict[str, int], makespan_ns: int, flow_bytes: int
) -> dict[str, Any]:
    """results.json ``sim.packet_acceleration``: the mode, the share of simulated time and of
    flow bytes the fast-forward skipped, its episodes, and why it fell back to exact
    simulation (counts of checks; ``not_supported`` 1: never skipped); with memo, ``memo``:
    the episode cache's lookups, hits, hit rate, key, interrupted replays and frames avoided."""
    out: dict[str, Any] = {"mode": mode}
    if "memo" in mode.split("+") and "memo" in counters:
        out["memo"] = counters["memo"]
    if "fast" not in mode.split("+"):
        return out
    skipped_ns = int(counters.get("skipped_ns", 0))
    skipped_bytes = int(counters.get("skipped_bytes", 0))
    out.update(
        {
            "episodes": int(counters.get("episodes", 0)),
            "congested_episodes": int(counters.get("congested_episodes", 0)),
            "congested_skipped_ns": int(counters.get("congested_skipped_ns", 0)),
            "skipped_ns": skipped_ns,
            "time_share": skipped_ns / makespan_ns if makespan_ns > 0 else 0.0,
            "skipped_bytes": skipped_bytes,
            "bytes_share": skipped_bytes / flow_bytes if flow_bytes > 0 else 0.0,
            "checks": int(counters.get("checks", 0)),
            "fallback": {
                k: int(counters.get(k, 0))
                for k in (
                    "not_settled",
                    "congestion_or_losses",
                    "next_change_too_close",
                    "after_fault",
                    "not_supported",
                )
            },
        }
    )
    return out


def _samples(executor: Any) -> dict[str, np.ndarray]:
    count = int(executor.GetNSamples())
    if count == 0:
        return {}
    times = np.empty(count, np.int64)
    done = np.empty(count, np.uint64)
    in_flight = np.empty(count, np.uint64)
    executor.CopySamples(times, done, in_flight)
    return {
        "time_ns": times,
        "tasks_done": done.astype(np.int64),
        "flows_in_flight": in_flight.astype(np.int64),
    }
