"""Replica folding (simulation.replicas: fold): one replica simulated, its data-parallel
collectives timed on the full fabric; agreement with the full run, plan size, refusals."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import yaml

from heterosim.cli import main
from heterosim.config.experiment import load_experiment
from heterosim.config.jobs import load_any_experiment
from heterosim.errors import UserError
from heterosim.plan.collectives import decompose_collective
from heterosim.plan.execution_plan import FLOW
from heterosim.plan.fold import side_by_side
from heterosim.simulate.experiment import prepare_run, run_experiment

# 16 H100s, TP 2 x PP 2 x DP 4 with the distributed optimizer (tests/data/fold_16gpu.yaml)
SMALL = yaml.safe_load((Path(__file__).resolve().parents[1] / "data" / "fold_16gpu.yaml").read_text())
# Folded minus full iteration time, measured on this case: -3.0 % (-1.0 % without compute
# contention: the folded collectives hold no blocks against compute, heterosim/plan/fold.py);
# on the Llama 3 405B / MegaScale slices see benchmarks/README.md "Replica folding"
TOLERANCE = 0.04
TOLERANCE_NO_CONTENTION = 0.015


def _both(exp):
    full = run_experiment(exp)
    fold = run_experiment(replace(exp, simulation=replace(exp.simulation, replicas="fold")))
    return full, fold


def test_folded_iteration_agrees_with_the_full_run_and_has_one_replica_of_tasks(tmp_path, write_experiment):
    full_exp = load_experiment(write_experiment(SMALL))
    full, fold = _both(full_exp)
    t_full, t_fold = full.engine.makespan_ns, fold.engine.makespan_ns
    assert abs(t_fold - t_full) <= TOLERANCE * t_full
    # one replica's trace tasks: 1/DP of the full run's
    dp = full_exp.parallel.dp
    assert np.count_nonzero(fold.tables.plan.rank >= 0) * dp == np.count_nonzero(full.tables.plan.rank >= 0)
    assert len(fold.rank_gpu) * dp == len(full.rank_gpu)
    # its data-parallel collectives: two markers each, the end one waiting the timed duration
    summary = fold.replicas
    assert summary is not None and summary["replicas"] == dp and summary["folded"] == dp - 1
    times = {(c["op"], c["size_bytes"]): c["time_s"] for c in summary["collectives"]}
    assert {op for op, _ in times} == {"reducescatter", "allgather"}
    colls, plan = fold.tables.collectives, fold.tables.plan
    single = colls["ranks"] == 1
    assert single.any()
    assert np.all(colls["end_task"][single] - colls["start_task"][single] == 1)
    assert set(plan.delay_ns[colls["end_task"][single]].tolist()) == {round(t * 1e9) for t in times.values()}
    # the breakdown counts the folded collectives' time as communication, as the full run's flows
    from heterosim.report.run_report import results_dict

    b_full, b_fold = results_dict(full)["breakdown"], results_dict(fold)["breakdown"]
    assert b_fold["exposed_comm_s"] == pytest.approx(b_full["exposed_comm_s"], rel=0.25)
    assert b_fold["compute_s"] + b_fold["exposed_comm_s"] + b_fold["bubble_s"] == pytest.approx(t_fold * 1e-9)
    # no flow of the folded plan leaves the replica's GPUs
    flows = plan.kind == FLOW
    gpus = set(fold.rank_gpu.tolist())
    assert set(plan.gpu[flows].tolist()) <= gpus and set(plan.dst[flows].tolist()) <= gpus


def test_without_compute_contention_the_gap_is_the_fabric_alone(tmp_path, write_experiment):
    exp = load_experiment(write_experiment(SMALL), ["simulation.compute_contention=false"])
    full, fold = _both(exp)
    t_full, t_fold = full.engine.makespan_ns, fold.engine.makespan_ns
    assert abs(t_fold - t_full) <= TOLERANCE_NO_CONTENTION * t_full


def test_results_and_terminal_report_the_folding(tmp_path, capsys, write_experiment):
    import json

    out = tmp_path / "run"
    path = write_experiment(SMALL)
    assert main(["run", path, "--set", "simulation.replicas=fold", "--out", str(out), "--no-plots"]) == 0
    results = json.loads((out / "results.json").read_text())
    replicas = results["sim"]["replicas"]
    assert replicas["mode"] == "fold" and replicas["ranks_simulated"] == 4
    # each bucket size is one stage's: its TP 2 positions' groups of 4 replicas run it together
    assert all(c["communicators"] == 2 and c["ranks"] == 4 for c in replicas["collectives"])
    assert len(results["ranks"]) == 4
    assert [r["dp_replica"] for r in results["ranks"]] == [0, 0, 0, 0]
    assert "folded: 1 of 4 data-parallel replicas" in capsys.readouterr().out


def _outputs(folder: Path) -> tuple[dict, list[dict], list[dict], list[str]]:
    import csv
    import json

    results = json.loads((folder / "results.json").read_text())
    ranks = list(csv.DictReader((folder / "ranks.csv").open()))
    colls = list(csv.DictReader((folder / "collectives.csv").open()))
    events = json.loads((folder / "trace.json").read_text())
    events = events["traceEvents"] if isinstance(events, dict) else events
    names = [e["args"]["name"] for e in events if e.get("name") == "process_name"]
    return results, ranks, colls, [n for n in names if n.startswith("rank ")]


@pytest.mark.parametrize("order", ["tp-dp-pp", "dp-tp-pp"])
def test_folded_outputs_name_the_timed_replica_by_its_global_ranks(tmp_path, order, write_experiment):
    path = write_experiment(SMALL)
    sets = ["--set", f"parallel.rank_order={order}", "--no-plots"]
    fold_sets = ["--set", "simulation.replicas=fold", "--set", "simulation.fold_timing=representative"]
    assert main(["run", path, *sets, "--out", str(tmp_path / "full")]) == 0
    assert main(["run", path, *sets, *fold_sets, "--out", str(tmp_path / "fold")]) == 0
    full, full_ranks, _, full_names = _outputs(tmp_path / "full")
    results, ranks, colls, names = _outputs(tmp_path / "fold")
    # an unfolded run numbers its ranks 0..n-1 everywhere
    assert [int(r["rank"]) for r in full_ranks] == [r["rank"] for r in full["ranks"]] == list(range(16))
    assert [n.split()[1] for n in full_names] == [str(r) for r in range(16)]
    # the folded run: replica 0's ranks in the full job, on the GPUs the full run gives them
    replica = [r["rank"] for r in full["ranks"] if r["dp_replica"] == 0]
    assert len(replica) == 4 and replica != list(range(4))
    summary = results["sim"]["replicas"]
    assert summary["simulated_replica"] == 0 and summary["simulated_ranks"] == replica
    assert [int(r["rank"]) for r in ranks] == [r["rank"] for r in results["ranks"]] == replica
    assert [n.split()[1] for n in names] == [str(r) for r in replica]
    by_rank = {r["rank"]: r for r in full["ranks"]}
    keys = ("gpu_index", "host", "stage")
    for row in results["ranks"]:
        assert [row[k] for k in keys] == [by_rank[row["rank"]][k] for k in keys]
    # each timed group: one of the replica's ranks and one of each other replica; it stands for
    # `communicators` groups
    dp_of = {r["rank"]: r["dp_replica"] for r in full["ranks"]}
    for c in summary["collectives"]:
        assert 1 <= len(c["timed_groups"]) == c["timed_communicators"] <= c["communicators"]
        for group in c["timed_groups"]:
            assert sorted(dp_of[r] for r in group["ranks"]) == [0, 1, 2, 3]
            assert len(set(group["ranks"]) & set(replica)) == 1
    # collectives.csv: a folded collective counts the ranks of its whole communicator
    timed = {g["group"] for c in summary["collectives"] for g in c["timed_groups"]}
    folded = [c for c in colls if int(c["group"]) in timed]
    assert folded and all(int(c["ranks"]) == 4 and float(c["busbw_GBps"]) > 0 for c in folded)


@pytest.mark.parametrize(
    "sets, reason",
    [
        ({"parallel__dp": 1, "training__global_batch": 4}, "parallel.dp >= 2"),
        ({"parallel__cp": 2, "parallel__dp": 2, "training__global_batch": 8}, "parallel.cp > 1"),
    ],
)
def test_fold_refused_with_one_line_naming_the_key(tmp_path, capsys, sets, reason, write_experiment):
    data = yaml.safe_load(yaml.safe_dump(SMALL))
    if sets.get("parallel__dp") == 1:
        data["cluster"]["hosts"][0]["count"] = 1
    data["simulation"]["memory_check"] = "warn"
    path = write_experiment(data, **sets)
    assert main(["run", path, "--set", "simulation.replicas=fold", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "simulation.replicas: fold" in err[0] and reason in err[0] and path in err[0]


def test_fold_refused_for_several_jobs_and_faults(tmp_path, write_experiment):
    with pytest.raises(UserError, match="simulation.replicas"):
        load_any_experiment("workloads/examples/two_jobs_h4.yaml", ["simulation.replicas=fold"])
    faulty = yaml.safe_load(yaml.safe_dump(SMALL))
    faulty["faults"] = [{"at": "0ms", "gpu": 3, "slowdown": 1.3}]
    with pytest.raises(UserError, match="simulation.replicas: fold: faults"):
        load_experiment(write_experiment(faulty), ["simulation.replicas=fold"])


def test_fold_refused_for_unknown_mode(tmp_path, write_experiment):
    with pytest.raises(UserError, match="simulation.replicas"):
        load_experiment(write_experiment(SMALL), ["simulation.replicas=some"])


def test_replicas_placed_in_different_patterns_are_refused(tmp_path, write_experiment):
    exp = load_experiment(write_experiment(SMALL), ["simulation.replicas=fold"])
    prepared = prepare_run(replace(exp, simulation=replace(exp.simulation, replicas="all")))
    with pytest.raises(UserError, match="simulation.replicas: fold"):
        from heterosim.plan.fold import fold_replicas

        swapped = prepared.rank_gpu.copy()
        swapped[[0, 5]] = swapped[[5, 0]]  # one rank of replica 0 on another rail
        fold_replicas(
            prepared.workload.layout,
            {int(k): v for k, v in prepared.workload.groups.as_json().items()},
            swapped,
            exp.cluster,
            exp.source,
        )


def test_side_by_side_keeps_every_collective_whole(tmp_path, write_experiment):
    exp = load_experiment(write_experiment(SMALL))
    plans = [
        decompose_collective("allreduce", 1 << 20, g, exp.cluster) for g in ([0, 4, 8, 12], [1, 5, 9, 13])
    ]
    plan = side_by_side(plans, exp.cluster.world_size)
    plan.check()
    assert int(plan.bytes.sum()) == sum(int(p.bytes.sum()) for p in plans)
    assert len(plan) == sum(len(p) for p in plans)
    assert np.array_equal(np.bincount(plan.collective), [len(p) for p in plans])
    assert plan.dep_ptr[-1] == sum(int(p.dep_ptr[-1]) for p in plans)


def test_blocks_in_sequence_start_when_the_block_before_has_ended(tmp_path, write_experiment):
    from heterosim.engine.executor import engine_config, execute_plan
    from heterosim.engine.topology import build_topology
    from heterosim.plan.fold import in_sequence

    exp = load_experiment(write_experiment(SMALL))
    first = [
        decompose_collective("allreduce", 1 << 20, g, exp.cluster) for g in ([0, 4, 8, 12], [1, 5, 9, 13])
    ]
    second = [decompose_collective("allgather", 4 << 20, [2, 6, 10, 14], exp.cluster)]
    plan, barriers = in_sequence([first, second], exp.cluster.world_size)
    plan.check()
    topology = build_topology(exp.cluster)
    run = execute_plan(plan, topology, exp.network, engine_config("flow"))
    ends = run.task_end_ns[barriers]
    flows = np.flatnonzero(plan.kind == FLOW)
    in_second = plan.collective[flows] == len(first) + 1  # instances: first's, barrier, second's
    assert run.task_start_ns[flows[in_second]].min() >= ends[0]
    assert run.task_end_ns[flows[~in_second]].max() <= ends[0] and ends[1] == run.makespan_ns
    # the second block alone on an idle fabric lasts as long as in the sequence
    alone = execute_plan(
        side_by_side(second, exp.cluster.world_size), topology, exp.network, engine_config("flow")
    )
    assert ends[1] - ends[0] == alone.makespan_ns


def test_routes_for_gpu_pairs_are_the_full_tables_entries(tmp_path):
    from heterosim.config.cluster import parse_cluster
    from heterosim.engine.topology import build_topology

    data = yaml.safe_load(yaml.safe_dump(SMALL["cluster"]))
    data["hosts"][0]["count"] = 8
    data["fabric"]["hosts_per_leaf"] = 2  # traffic between leaves crosses the spines
    cluster = parse_cluster(data, "test")
    full = build_topology(cluster)
    pairs = np.array([[0, 9], [1, 30], [17, 4], [5, 6]])  # [5, 6]: inside one host
    part = build_topology(cluster, gpu_pairs=pairs)
    assert len(part.route_node) < len(full.route_node)
    keys = set(zip(part.route_node.tolist(), part.route_dst.tolist()))
    assert keys <= set(zip(full.route_node.tolist(), full.route_dst.tolist()))
    for node, dst in keys:
        assert part.next_hops(node, dst) == full.next_hops(node, dst)
    for src, dst in pairs.tolist():
        for flow_hash in range(16):
            assert part.path_links(src, dst, flow_hash) == full.path_links(src, dst, flow_hash)
            assert part.path_links(dst, src, flow_hash) == full.path_links(dst, src, flow_hash)  # ACKs


@pytest.mark.parametrize("order", ["tp-pp-dp", "dp-tp-pp"])
def test_other_rank_orders_fold_too(tmp_path, order, write_experiment):
    # measured: -0.15 % (tp-pp-dp) and -0.13 % (dp-tp-pp): replicas on hosts and rails of one pattern
    full, fold = _both(load_experiment(write_experiment(SMALL), [f"parallel.rank_order={order}"]))
    assert abs(fold.engine.makespan_ns - full.engine.makespan_ns) <= TOLERANCE * full.engine.makespan_ns
    assert fold.replicas is not None and fold.replicas["ranks_simulated"] == 4


def test_only_groups_of_one_rank_per_replica_at_one_place_are_folded(tmp_path, write_experiment):
    from heterosim.plan.fold import fold_replicas

    exp = load_experiment(write_experiment(SMALL))
    prepared = prepare_run(exp)
    groups = {int(k): v for k, v in prepared.workload.groups.as_json().items()}
    layout = prepared.workload.layout
    dp_groups = {g for g, m in groups.items() if len({layout.dp_index(r) for r in m}) == 4}
    skew = [layout.rank_of(tp=d % 2, dp=d, pp=0) for d in range(4)]  # TP index differs by replica
    fold = fold_replicas(layout, {**groups, 999: skew}, prepared.rank_gpu, exp.cluster, exp.source)
    assert set(fold.folded) == dp_groups - {0} and 999 in fold.spanning and 0 in fold.spanning
    assert all(len(fold.groups[g]) == 1 for g in fold.folded)
    assert sorted(fold.ranks.tolist()) == sorted(r for r in range(16) if layout.dp_index(r) == 0)
