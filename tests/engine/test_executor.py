"""Plan executor on ns-3: overlap, stream order, markers, infeasible plans, stalls, determinism.

Expected times are derived by hand from the plan and from the fluid model's latency formula
(heterosim.engine.fluid) with the link rates and delays of the topology.
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest

from heterosim.config.cluster import load_cluster
from heterosim.config.experiment import NetworkConfig
from heterosim.engine.executor import EngineResult, engine_config, execute_plan
from heterosim.engine.topology import LINK_KIND_NAMES, build_topology
from heterosim.errors import UserError
from heterosim.plan.execution_plan import COMPUTE, FLOW, MARKER, ExecutionPlan

pytestmark = pytest.mark.ns3

REPO = Path(__file__).resolve().parents[2]
MTU = 4096
NETWORK = NetworkConfig(cc="dcqcn", mtu_bytes=MTU, pfc=True, buffer_bytes=32 << 20, ecmp=True)
FLUID = engine_config("flow")  # the fluid network, seed 1, no time series


@pytest.fixture(scope="module")
def topo():
    return build_topology(load_cluster(REPO / "topologies" / "two_host_h100.yaml"))


def make_plan(tasks: list[dict], num_gpus: int = 16) -> ExecutionPlan:
    """tasks: dicts with kind and optional gpu, dst, bytes, dur, delay, stream, deps."""
    n = len(tasks)
    deps = [t.get("deps", []) for t in tasks]
    return ExecutionPlan(
        kind=np.array([t["kind"] for t in tasks], np.uint8),
        gpu=np.array([t.get("gpu", -1) for t in tasks], np.int32),
        dst=np.array([t.get("dst", -1) for t in tasks], np.int32),
        bytes=np.array([t.get("bytes", 0) for t in tasks], np.int64),
        duration_ns=np.array([t.get("dur", 0) for t in tasks], np.int64),
        delay_ns=np.array([t.get("delay", 0) for t in tasks], np.int64),
        stream=np.array([t.get("stream", 0) for t in tasks], np.int16),
        priority=np.zeros(n, np.uint8),
        dep_ptr=np.concatenate([[0], np.cumsum([len(d) for d in deps])]).astype(np.int64),
        dep_idx=np.array([p for d in deps for p in d], np.int64),
        rank=np.zeros(n, np.int32),
        node=np.arange(n, dtype=np.int64),
        collective=np.full(n, -1, np.int64),
        num_gpus=num_gpus,
    )


def flow_time_ns(topo, src: int, dst: int, size: int) -> int:
    """Time of a lone flow in the fluid model: transfer at the bottleneck + path latency."""
    links = topo.path_links(src, dst, 0)  # both paths used here have a single ECMP choice
    rates = [float(topo.link_rate_bps[k]) for k in links]
    packet = float(min(MTU, size))
    per_hop = [packet * 8e9 / r for r in rates]
    latency = int(sum(int(topo.link_delay_ns[k]) for k in links)) + round(sum(per_hop) - max(per_hop))
    return math.ceil(size / (min(rates) / 8e9) - 1e-6) + latency


def union_length(intervals: list[tuple[int, int]]) -> int:
    total, reach = 0, -1
    for a, b in sorted(intervals):
        if b <= reach:
            continue
        total += b - max(a, reach)
        reach = b
    return total


def overlap(compute: list[tuple[int, int]], comm: list[tuple[int, int]]) -> int:
    """Length of (union of compute) intersected with (union of comm)."""
    return union_length(compute) + union_length(comm) - union_length(compute + comm)


def dp_backward_plan(overlapped: bool, layers=3, bwd_ns=60_000, opt_ns=5_000, half=1_000_000):
    """Two data-parallel ranks (GPU 0 and GPU 8, one per host) run `layers` backward computes;
    after each, a 2-rank ring all-reduce of its gradient bucket (step 1: each rank sends half of
    the bucket to the other; step 2: each forwards the reduced half once it has received).
    overlapped=False makes every all-reduce wait for the whole backward pass."""
    tasks: list[dict] = []
    gpus = (0, 8)
    bwd = {r: [] for r in range(2)}
    for r, g in enumerate(gpus):
        for _layer in range(layers):
            deps = [bwd[r][-1]] if bwd[r] else []
            bwd[r].append(len(tasks))
            tasks.append({"kind": COMPUTE, "gpu": g, "dur": bwd_ns, "deps": deps})
    markers = []
    for layer in range(layers):
        ready = {r: [bwd[r][-1 if not overlapped else layer]] for r in range(2)}
        step1 = {}
        for r in range(2):
            step1[r] = len(tasks)
            tasks.append({"kind": FLOW, "gpu": gpus[r], "dst": gpus[1 - r], "bytes": half, "deps": ready[r]})
        step2 = []
        for r in range(2):
            step2.append(len(tasks))
            tasks.append(
                {
                    "kind": FLOW,
                    "gpu": gpus[r],
                    "dst": gpus[1 - r],
                    "bytes": half,
                    "deps": [step1[1 - r], *ready[r]],
                }
            )
        markers.append(len(tasks))
        tasks.append({"kind": MARKER, "deps": step2})
    for r, g in enumerate(gpus):
        tasks.append({"kind": COMPUTE, "gpu": g, "dur": opt_ns, "deps": [bwd[r][-1], *markers]})
    return make_plan(tasks)


def rank_overlap(plan: ExecutionPlan, result: EngineResult, gpu: int) -> tuple[int, int]:
    """(overlap of compute and sent flows, comm time not hidden behind compute) on one GPU."""
    s, e = result.task_start_ns, result.task_end_ns
    comp = [(int(s[i]), int(e[i])) for i in np.flatnonzero((plan.kind == COMPUTE) & (plan.gpu == gpu))]
    comm = [(int(s[i]), int(e[i])) for i in np.flatnonzero((plan.kind == FLOW) & (plan.gpu == gpu))]
    ov = overlap(comp, comm)
    return ov, union_length(comm) - ov


def test_dp_allreduce_overlaps_backward_exactly_as_computed_by_hand(topo):
    layers, bwd, opt, half = 3, 60_000, 5_000, 1_000_000
    t = flow_time_ns(topo, 0, 8, half)
    assert flow_time_ns(topo, 8, 0, half) == t  # mirror-image paths
    assert 2 * t < bwd  # each bucket's all-reduce fits under the next layer's backward
    plan = dp_backward_plan(True, layers, bwd, opt, half)
    result = execute_plan(plan, topo, NETWORK, FLUID)
    assert not result.partial and result.error is None

    # hand-built expectation: backward back to back; all-reduce l runs [bwd*(l+1), +2t]
    expected_start, expected_end = [], []
    for _rank in range(2):
        for layer in range(layers):
            expected_start.append(bwd * layer)
            expected_end.append(bwd * (layer + 1))
    for layer in range(layers):
        begin = bwd * (layer + 1)
        expected_start += [begin, begin, begin + t, begin + t, begin + 2 * t]
        expected_end += [begin + t, begin + t, begin + 2 * t, begin + 2 * t, begin + 2 * t]
    last = bwd * layers + 2 * t
    expected_start += [last, last]
    expected_end += [last + opt, last + opt]
    np.testing.assert_array_equal(result.task_start_ns, expected_start)
    np.testing.assert_array_equal(result.task_end_ns, expected_end)
    assert result.makespan_ns == bwd * layers + 2 * t + opt
    for gpu in (0, 8):
        # buckets 0 .. layers-2 hide behind the next backward; the last one is exposed
        assert rank_overlap(plan, result, gpu) == ((layers - 1) * 2 * t, 2 * t)

    serial = execute_plan(dp_backward_plan(False, layers, bwd, opt, half), topo, NETWORK, FLUID)
    # without overlap the three all-reduces run after the backward pass, at the same time,
    # sharing each direction's path: every flow takes the shared-rate time
    assert rank_overlap(dp_backward_plan(False), serial, 0)[0] == 0
    assert serial.makespan_ns > result.makespan_ns


def test_stream_order_is_task_index_order_among_ready_tasks(topo):
    plan = make_plan(
        [
            {"kind": COMPUTE, "gpu": 0, "dur": 100},  # 0: runs first
            {"kind": COMPUTE, "gpu": 0, "dur": 10, "deps": [4]},  # 1: ready at 0 via a marker
            {"kind": COMPUTE, "gpu": 0, "dur": 10},  # 2: ready at 0
            {"kind": COMPUTE, "gpu": 0, "dur": 7, "stream": 1},  # 3: other stream, concurrent
            {"kind": MARKER},  # 4
            {"kind": COMPUTE, "gpu": 0, "dur": 10, "delay": 50},  # 5: queued at 50, runs last
            {"kind": COMPUTE, "gpu": 1, "dur": 30},  # 6: other GPU, concurrent
        ]
    )
    result = execute_plan(plan, topo, NETWORK, FLUID)
    np.testing.assert_array_equal(result.task_start_ns, [0, 100, 110, 0, 0, 120, 0])
    np.testing.assert_array_equal(result.task_end_ns, [100, 110, 120, 7, 0, 130, 30])


def test_markers_finish_with_their_last_parent_and_long_chains_do_not_recurse(topo):
    chain = 100_000
    tasks = [
        {"kind": COMPUTE, "gpu": 0, "dur": 1000},
        {"kind": COMPUTE, "gpu": 3, "dur": 2500},
        {"kind": MARKER, "deps": [0, 1]},
    ]
    tasks += [{"kind": MARKER, "deps": [len(tasks) + i - 1]} for i in range(chain)]
    tasks.append({"kind": COMPUTE, "gpu": 0, "dur": 10, "deps": [len(tasks) - 1]})
    result = execute_plan(make_plan(tasks), topo, NETWORK, FLUID)
    assert result.task_start_ns[2] == result.task_end_ns[2] == 2500
    assert np.all(result.task_end_ns[2:-1] == 2500)
    assert result.task_end_ns[-1] == 2510 == result.makespan_ns


@pytest.mark.parametrize("after", [0, 1])
def test_times_past_2_to_the_31_ns_are_recorded_exactly(topo, after):
    """The executor records times in 32 bits while they fit and widens them (to 64) when the
    run passes 2^31 ns, mid-run (``after`` = 1: a task ends past it, another follows) or at
    its last event (``after`` = 0); the reports get int64 times either way."""
    tasks = [
        {"kind": COMPUTE, "gpu": 0, "dur": 2_000_000_000},
        {"kind": FLOW, "gpu": 0, "dst": 8, "bytes": 1 << 20, "deps": [0]},
        {"kind": COMPUTE, "gpu": 8, "dur": 1_000_000_000, "deps": [1]},
        {"kind": MARKER, "deps": [2]},
    ]
    tasks += [{"kind": COMPUTE, "gpu": 8, "dur": 500, "deps": [3]}] * after
    result = execute_plan(make_plan(tasks), topo, NETWORK, FLUID)
    flow_end = 2_000_000_000 + flow_time_ns(topo, 0, 8, 1 << 20)
    assert result.task_start_ns.dtype == result.task_end_ns.dtype == np.int64
    assert result.task_end_ns[:4].tolist() == [2_000_000_000, flow_end, flow_end + 10**9, flow_end + 10**9]
    assert result.task_start_ns[3] == flow_end + 10**9 > 2**31
    if after:
        assert result.task_start_ns[4] == flow_end + 10**9 and result.task_end_ns[4] == flow_end + 10**9 + 500
    assert result.makespan_ns == int(result.task_end_ns.max())
    assert result.flows["end_ns"].tolist() == [flow_end]


def test_dependency_cycle_is_rejected_naming_the_cycle(topo):
    plan = make_plan(
        [
            {"kind": COMPUTE, "gpu": 0, "dur": 5},
            {"kind": COMPUTE, "gpu": 0, "dur": 5, "deps": [0, 3]},
            {"kind": MARKER, "deps": [1]},
            {"kind": FLOW, "gpu": 0, "dst": 1, "bytes": 10, "deps": [2]},
        ]
    )
    with pytest.raises(
        UserError,
        match=r"dependency cycle \(3 tasks can never start\): task "
        r"(1 -> 2 -> 3 -> 1|2 -> 3 -> 1 -> 2|3 -> 1 -> 2 -> 3)",
    ):
        execute_plan(plan, topo, NETWORK, FLUID)


def test_bad_gpu_index_is_rejected_before_running(topo):
    plan = make_plan([{"kind": FLOW, "gpu": 0, "dst": 99, "bytes": 10}])
    with pytest.raises(UserError, match="task 0: flow from GPU 0 to GPU 99, but the cluster has 16"):
        execute_plan(plan, topo, NETWORK, FLUID)
    plan = make_plan([{"kind": COMPUTE, "gpu": 16, "dur": 1}])
    with pytest.raises(UserError, match="compute task on GPU 16"):
        execute_plan(plan, topo, NETWORK, FLUID)


def without_routes_to(topo, gpu: int):
    """A copy of the topology whose fabric has no route entries towards ``gpu``'s NIC."""
    import copy

    broken = copy.copy(topo)
    nic = int(topo.gpu_nic_node[gpu])
    keep = topo.route_dst != nic
    counts = np.diff(topo.route_ptr)
    broken.route_node = topo.route_node[keep]
    broken.route_dst = topo.route_dst[keep]
    broken.route_link = np.concatenate(
        [topo.route_link[topo.route_ptr[e] : topo.route_ptr[e + 1]] for e in np.flatnonzero(keep)]
    ).astype(np.int32)
    broken.route_ptr = np.concatenate([[0], np.cumsum(counts[keep])]).astype(np.int64)
    return broken


def test_flow_to_an_unreachable_gpu_is_rejected_before_running(topo):
    broken = without_routes_to(topo, 8)
    plan = make_plan(
        [
            {"kind": COMPUTE, "gpu": 0, "dur": 5},
            {"kind": FLOW, "gpu": 0, "dst": 8, "bytes": 1000, "deps": [0]},
        ]
    )
    with pytest.raises(UserError, match="task 1: flow from GPU 0 to GPU 8 is unreachable"):
        execute_plan(plan, broken, NETWORK, FLUID)


def test_stall_is_reported_not_hung(topo):
    stuck = make_plan(
        [
            {"kind": COMPUTE, "gpu": 0, "dur": 5},
            {"kind": FLOW, "gpu": 0, "dst": 8, "bytes": 1000, "deps": [0]},
            {"kind": COMPUTE, "gpu": 8, "dur": 5, "deps": [1]},
        ]
    )
    dead = build_topology(load_cluster(REPO / "topologies" / "two_host_h100.yaml"))
    dead.link_rate_bps[topo.path_links(0, 8, 0)[2]] = 0.0  # the NIC's access link carries nothing
    with pytest.raises(
        UserError,
        match=r"plan stalled at 5 ns .* 2 of 3 tasks unfinished; task 1 "
        r"\(flow GPU 0 -> GPU 8, 1000 bytes\) started at 5 ns",
    ):
        execute_plan(stuck, dead, NETWORK, FLUID)
    # a stop time does not turn a stall into a timeout
    result = execute_plan(stuck, dead, NETWORK, FLUID, stop_ns=10**9, raise_on_stall=False)
    assert result.partial and "stalled" in result.error
    np.testing.assert_array_equal(result.task_end_ns, [5, -1, -1])


def test_stop_time_gives_partial_results(topo):
    plan = make_plan(
        [{"kind": COMPUTE, "gpu": 0, "dur": 100, "deps": [i - 1] if i else []} for i in range(10)]
    )
    result = execute_plan(plan, topo, NETWORK, FLUID, stop_ns=450)
    assert result.partial and result.error is None
    np.testing.assert_array_equal(result.task_end_ns, [100, 200, 300, 400] + [-1] * 6)
    assert result.task_start_ns[4] == 400 and result.task_start_ns[5] == -1


def test_progress_samples_and_callback(topo):
    plan = make_plan(
        [{"kind": COMPUTE, "gpu": 0, "dur": 100, "deps": [i - 1] if i else []} for i in range(10)]
    )
    calls = []
    result = execute_plan(
        plan,
        topo,
        NETWORK,
        engine_config("flow", sample_interval_ns=250),
        progress=lambda t, done, total, events: calls.append((t, done, total)),
    )
    np.testing.assert_array_equal(result.series["time_ns"], [0, 250, 500, 750, 1000])
    np.testing.assert_array_equal(result.series["tasks_done"], [0, 2, 5, 7, 10])
    assert calls[-1] == (1000, 10, 10)


def random_plan(rng, tasks=400, gpus=16) -> ExecutionPlan:
    rows = []
    for i in range(tasks):
        parents = sorted(set(rng.integers(0, i, size=min(i, 3)).tolist())) if i else []
        kind = int(rng.choice([COMPUTE, FLOW, FLOW, MARKER]))
        src = int(rng.integers(0, gpus))
        dst = int((src + rng.integers(1, gpus)) % gpus)
        rows.append(
            {
                "kind": kind,
                "gpu": src if kind != MARKER else -1,
                "dst": dst if kind == FLOW else -1,
                "bytes": int(rng.integers(1, 4 << 20)) if kind == FLOW else 0,
                "dur": int(rng.integers(0, 50_000)),
                "stream": int(rng.integers(0, 2)),
                "deps": parents,
            }
        )
    return make_plan(rows, gpus)


def test_same_inputs_give_identical_results(topo):
    plan = random_plan(np.random.default_rng(7))
    first = execute_plan(plan, topo, NETWORK, engine_config("flow", seed=3))
    second = execute_plan(plan, topo, NETWORK, engine_config("flow", seed=3))
    assert not first.partial
    np.testing.assert_array_equal(first.task_start_ns, second.task_start_ns)
    np.testing.assert_array_equal(first.task_end_ns, second.task_end_ns)
    np.testing.assert_array_equal(first.links["bytes"], second.links["bytes"])
    assert first.events == second.events and first.makespan_ns == second.makespan_ns
    # dependencies respected and every flow's bytes delivered
    for i in range(len(plan)):
        parents = plan.dep_idx[plan.dep_ptr[i] : plan.dep_ptr[i + 1]]
        assert np.all(first.task_end_ns[parents] <= first.task_start_ns[i])
    assert first.network["bytes"] == int(plan.bytes[plan.kind == FLOW].sum())
    assert first.network["flows"] == int((plan.kind == FLOW).sum())


def test_result_tables_have_the_documented_columns(topo):
    plan = make_plan([{"kind": FLOW, "gpu": 0, "dst": 8, "bytes": 4096}])
    result = execute_plan(plan, topo, NETWORK, FLUID)
    assert set(result.network) == {
        "flows",
        "bytes",
        "drops",
        "retransmits",
        "pfc_pause_frames",
        "ecn_marks",
        "cnps",
    }
    assert {"link", "direction", "bytes", "busy_ns", "utilization"} <= set(result.links)
    assert set(result.flows) == {
        "task",
        "src",
        "dst",
        "bytes",
        "start_ns",
        "end_ns",
        "retransmits",
        "collective",
        "connection",
        "out_of_order",
        "max_reorder_depth",
    }
    assert not result.flows["out_of_order"].any()  # the fluid model never reorders
    assert result.flows["end_ns"][0] == flow_time_ns(topo, 0, 8, 4096)
    assert result.fidelity == "flow" and result.events > 0


def test_empty_plan_finishes_at_time_zero(topo):
    result = execute_plan(make_plan([]), topo, NETWORK, FLUID)
    assert result.makespan_ns == 0 and not result.partial and result.task_end_ns.shape == (0,)


def test_unknown_fidelity_is_a_user_error(topo):
    with pytest.raises(UserError, match="fidelity"):
        execute_plan(make_plan([{"kind": MARKER}]), topo, NETWORK, engine_config(fidelity="analytic"))


PACKET_AVAILABLE = importlib.util.find_spec("heterosim.engine.packet") is not None


@pytest.mark.skipif(
    not PACKET_AVAILABLE, reason="heterosim.engine.packet (packet network) not in this checkout"
)
def test_packet_fidelity_runs_the_same_plan(topo):
    plan = dp_backward_plan(True)
    flow = execute_plan(plan, topo, NETWORK, FLUID)
    packet = execute_plan(plan, topo, NETWORK, engine_config(fidelity="packet"))
    assert not packet.partial and packet.fidelity == "packet"
    assert packet.network["bytes"] == flow.network["bytes"]
    np.testing.assert_array_equal(packet.flows["task"], flow.flows["task"])
    assert np.all(packet.flows["end_ns"] > packet.flows["start_ns"])
    # uncongested transfers: the two models agree within 5 % on the makespan
    assert abs(packet.makespan_ns - flow.makespan_ns) <= 0.05 * flow.makespan_ns


def test_stall_timeout_reports_runs_that_make_no_progress(topo):
    # the watchdog stops a run in which no task finishes for stall_timeout_ns of simulated time
    # (the packet network's timers keep its event queue from ever emptying)
    plan = make_plan([{"kind": COMPUTE, "gpu": 0, "dur": 10_000}, {"kind": MARKER, "deps": [0]}])
    with pytest.raises(
        UserError,
        match=r"no task finished during the last 1000 ns \(StallTimeout\); "
        r"plan stalled at 1000 ns: 2 of 2 tasks unfinished; task 0",
    ):
        execute_plan(plan, topo, NETWORK, FLUID, stall_timeout_ns=1000)
    assert execute_plan(plan, topo, NETWORK, FLUID, stall_timeout_ns=20_000).makespan_ns == 10_000


def test_fluid_link_series_has_rows_only_where_bytes_moved_and_ends_at_each_links_total(topo):
    """Two 1 MB transfers GPU 0 -> 8, the second 200 us after the first: the NIC direction has a
    row at each sample while a transfer runs, one row once it has ended, none while idle, rows
    again for the second; cumulative bytes rise and end at the bytes the link carried."""
    plan = make_plan(
        [
            {"kind": FLOW, "gpu": 0, "dst": 8, "bytes": 1_000_000},
            {"kind": COMPUTE, "gpu": 1, "dur": 200_000},
            {"kind": FLOW, "gpu": 0, "dst": 8, "bytes": 1_000_000, "deps": [1]},
        ]
    )
    interval = 1_000
    result = execute_plan(plan, topo, NETWORK, engine_config("flow", sample_interval_ns=interval))
    link = result.series["link"]
    assert np.all(np.diff(link["time_ns"]) >= 0) and np.all(link["time_ns"] % interval == 0)
    node, nic, direction = int(topo.gpu_node[0]), -1, -1
    for k in topo.path_links(0, 8, 0):  # the first access link on the path: the NIC's uplink
        if nic < 0 and topo.link_kind[k] == LINK_KIND_NAMES.index("access"):
            nic, direction = int(k), 2 * int(k) + (0 if int(topo.link_a[k]) == node else 1)
        node = topo.other_end(int(k), node)
    rows = link["direction"] == direction
    times, carried = link["time_ns"][rows], link["bytes"][rows].astype(np.int64)
    assert np.all(np.diff(carried) > 0)  # a row only where the bytes changed
    first_end, second_start = int(result.task_end_ns[0]), int(result.task_start_ns[2])
    idle = (times > first_end + interval) & (times < second_start)
    assert not idle.any()
    assert (times <= first_end + interval).sum() >= 20 and (times >= second_start).sum() >= 20
    links = result.links
    total = int(links["bytes"][(links["link"] == nic) & (links["direction"] == direction % 2)][0])
    assert carried[-1] == total == 2_000_000
