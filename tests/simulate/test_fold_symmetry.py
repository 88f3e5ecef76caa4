"""simulation.fold_timing: representative: folded collectives timed on one of each set of
interchangeable link-disjoint components (heterosim/simulate/fold_symmetry.py)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import yaml

from heterosim.cli import main
from heterosim.config.experiment import load_experiment
from heterosim.config.jobs import load_any_experiment
from heterosim.engine.topology import build_topology
from heterosim.errors import UserError
from heterosim.plan.collectives import decompose_collective
from heterosim.simulate.experiment import run_experiment
from heterosim.simulate.fold_symmetry import gpu_leaves, representatives

# 16 H100s, 4 hosts x 4 on 4 rails; TP 4 x PP 2 x DP 2: every data-parallel group has one GPU
# on each of two hosts, all on the rail of its TP rank (4 rails, one leaf each)
BASE = yaml.safe_load((Path(__file__).resolve().parents[1] / "data" / "fold_16gpu.yaml").read_text())
RAILS = {
    **BASE,
    "name": "fold-rails",
    "training": {**BASE["training"], "global_batch": 8},
    "parallel": {**BASE["parallel"], "tp": 4, "dp": 2},
    "simulation": {**BASE["simulation"], "replicas": "fold"},
}


def _both(exp):
    every = run_experiment(exp)
    some = run_experiment(replace(exp, simulation=replace(exp.simulation, fold_timing="representative")))
    return every.replicas["collectives"], some.replicas["collectives"], every, some


@pytest.mark.parametrize("fidelity, tolerance", [("flow", 0.0), ("packet", 0.005)])
def test_one_rail_of_four_gives_the_time_of_all_four(tmp_path, fidelity, tolerance, write_experiment):
    # flow: rails share no link, so one rail alone runs exactly as beside the others; packet:
    # they share the spines' buffers (nothing queues there at 100G: 4 rails, one leaf each)
    exp = load_experiment(write_experiment(RAILS), [f"simulation.fidelity={fidelity}"])
    every, some, full, rep = _both(exp)
    assert len(every) == len(some) >= 4
    for a, b in zip(every, some):
        assert (b["communicators"], b["timed_communicators"], b["components"], b["classes"]) == (4, 1, 4, 1)
        assert b["flows"] == a["flows"] == 4 * b["timed_flows"]
        assert abs(b["time_s"] - a["time_s"]) <= tolerance * a["time_s"]
    assert abs(rep.engine.makespan_ns - full.engine.makespan_ns) <= tolerance * full.engine.makespan_ns
    assert rep.replicas["fold_timing"] == "representative" and "fold_timing" not in full.replicas


def test_groups_sharing_hosts_or_leaves_are_one_component(tmp_path, write_experiment):
    # TP 2 on 4-GPU hosts: two replicas' ranks on each host (flows inside hosts couple the groups)
    exp = load_experiment(
        write_experiment(RAILS), ["parallel.tp=2", "parallel.dp=4", "training.global_batch=16"]
    )
    every, some, full, rep = _both(exp)
    assert all(b["components"] == 1 and b["timed_communicators"] == b["communicators"] for b in some)
    assert [b["time_s"] for b in some] == [a["time_s"] for a in every]
    assert rep.engine.makespan_ns == full.engine.makespan_ns
    # a fat-tree puts every NIC of a host under one leaf: all groups meet there
    exp = load_experiment(write_experiment(RAILS), ["cluster.fabric.kind=fat-tree"])
    _, some, _, _ = _both(exp)
    assert all(b["components"] == 1 and b["timed_communicators"] == 4 for b in some)


def test_components_differ_by_bytes_shape_or_host_type_are_separate_classes(tmp_path, write_experiment):
    exp = load_experiment(write_experiment(RAILS), ["cluster.fabric.hosts_per_leaf=2"])
    topo = build_topology(exp.cluster)
    leaves = gpu_leaves(topo)
    assert leaves.shape == (16, 1) and len(set(leaves.ravel().tolist())) == 8  # 4 rails x 2 leaves
    gpu_host = exp.cluster.gpu_host
    one_type = np.zeros(4, np.int64)

    def ring(size, gpus):
        return decompose_collective("allreduce", size, gpus, exp.cluster)

    mib = 1 << 20
    # rails 0..3 of hosts 0 and 2 (leaves g0, g1 of each rail): 4 components, one class
    same = [ring(mib, [r, 8 + r]) for r in range(4)]
    assert representatives(same, topo, gpu_host, one_type).timed == [0]
    # another size on rail 1, other hosts on rail 3 (hosts 0, 1: one leaf), rail 2 as rail 0
    mixed = [ring(mib, [0, 8]), ring(2 * mib, [1, 9]), ring(mib, [2, 10]), ring(mib, [3, 7])]
    chosen = representatives(mixed, topo, gpu_host, one_type)
    assert (chosen.components, chosen.classes, chosen.timed) == (4, 3, [0, 1, 3])
    # two groups on the same leaves of one rail are one component
    shared = [ring(mib, [0, 8]), ring(mib, [4, 12]), ring(mib, [1, 9])]
    chosen = representatives(shared, topo, gpu_host, one_type)
    assert (chosen.components, chosen.classes, chosen.timed) == (2, 2, [0, 1, 2])
    # other hosts under other leaves, the same shape: one class, unless the hosts' types differ
    moved = [ring(mib, [0, 4]), ring(mib, [9, 13])]  # hosts 0, 1 (rail 0, g0); 2, 3 (rail 1, g1)
    assert representatives(moved, topo, gpu_host, one_type).timed == [0]
    two_types = np.array([0, 0, 1, 1])
    assert representatives(moved, topo, gpu_host, two_types).timed == [0, 1]


@pytest.mark.parametrize(
    "sets, reason",
    [
        (["simulation.replicas=all"], "needs simulation.replicas: fold"),
        (["cluster.fabric.kind=rail-only"], "rail-only"),
    ],
)
def test_refused_with_one_line_naming_the_key(tmp_path, capsys, sets, reason, write_experiment):
    path = write_experiment(RAILS)
    argv = ["run", path, "--set", "simulation.fold_timing=representative", "--out", str(tmp_path / "o")]
    for s in sets:
        argv += ["--set", s]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "simulation.fold_timing: representative" in err[0] and reason in err[0]
    assert path in err[0]


def test_unknown_value_and_several_jobs_are_refused(tmp_path, write_experiment):
    with pytest.raises(UserError, match="simulation.fold_timing"):
        load_experiment(write_experiment(RAILS), ["simulation.fold_timing=some"])
    with pytest.raises(UserError, match="simulation.fold_timing"):
        load_any_experiment("workloads/examples/two_jobs_h4.yaml", ["simulation.fold_timing=representative"])
