"""Chakra ET trace directories as workloads: ours and another producer's (ASTRA-sim examples)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from heterosim.config.experiment import load_experiment
from heterosim.errors import UserError
from heterosim.workload.chakra import write_comm_groups, write_trace
from heterosim.workload.generator import generate_workload
from heterosim.workload.imported import load_trace_workload, trace_experiment
from heterosim.workload.trace import COMM_SEND_NODE, COMP_NODE

DATA = Path(__file__).resolve().parents[1] / "data"
INTEROP = Path(__file__).parent / "data" / "chakra_interop"
RING = INTEROP / "custom_ring_allreduce_8npus_1MB"
ALLREDUCE = INTEROP / "all_reduce_4npus_1MB"
CLUSTER8 = DATA / "byo" / "cluster_8gpu.yaml"
TINY = DATA / "tiny_experiment.yaml"


def test_foreign_ring_keeps_recorded_durations_and_is_eager() -> None:
    w = load_trace_workload(RING)
    assert w.world_size == 8 and w.keep_trace_durations and not w.p2p_rendezvous
    assert w.groups.as_json() == {"0": list(range(8))}  # no comm_group.json: group 0 = all
    assert [w.layout.pp_index(r) for r in range(8)] == [0] * 8
    assert w.partition.mode == "traces" and w.partition.chunk_layers == ()
    t = w.trace(3).templates
    comp = t.node_type == COMP_NODE
    assert set(t.duration_ns[comp].tolist()) == {7000}  # 7 us reduction kernels
    assert set(t.duration_ns[~comp].tolist()) == {0}  # the network times communication
    sends = w.trace(3).node_type == COMM_SEND_NODE
    assert int(t.comm_bytes[w.trace(3).template[sends]].sum()) == 2 * 7 * (1 << 20) // 8


def test_foreign_collectives_use_group_zero() -> None:
    w = load_trace_workload(ALLREDUCE)
    assert w.world_size == 4 and w.groups.as_json() == {"0": [0, 1, 2, 3]}


def test_our_traces_are_timed_by_the_compute_model(tmp_path: Path) -> None:
    exp = load_experiment(TINY)
    gen = generate_workload(exp)
    for r in range(gen.world_size):
        write_trace(gen.trace(r), tmp_path / f"tiny.{r}.et")
    write_comm_groups({int(k): v for k, v in gen.groups.as_json().items()}, tmp_path / "comm_group.json")
    w = load_trace_workload(tmp_path)
    assert not w.keep_trace_durations and w.p2p_rendezvous
    assert w.groups.as_json() == gen.groups.as_json()
    for r in range(gen.world_size):
        assert w.layout.pp_index(r) == gen.layout.pp_index(r)
        assert w.layout.dp_index(r) == gen.layout.dp_index(r)
    assert w.partition.chunk_layers == gen.partition.chunk_layers
    assert w.partition.replica_micro_batches == gen.partition.replica_micro_batches
    with pytest.raises(UserError, match="recorded durations"):
        load_trace_workload(RING, durations="model")
    assert load_trace_workload(tmp_path, durations="trace").keep_trace_durations


def test_trace_experiment_settings_and_world_size() -> None:
    exp = trace_experiment(RING, CLUSTER8, 8, ["network.cc=hpcc", "simulation.fidelity=flow"])
    assert exp.network.cc == "hpcc" and exp.simulation.fidelity == "flow"
    assert exp.cluster.world_size == 8 and exp.training.global_batch == 0
    with pytest.raises(UserError, match="4 rank traces but the cluster .* has 8 GPUs"):
        trace_experiment(ALLREDUCE, CLUSTER8, 4)
    with pytest.raises(UserError, match="only network"):
        trace_experiment(RING, CLUSTER8, 8, ["parallel.tp=2"])
    with pytest.raises(UserError, match="network.cc"):
        trace_experiment(RING, CLUSTER8, 8, ["network.cc=reno"])


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    for p in dst.iterdir():
        p.chmod(0o644)
    return dst


def test_bad_directories(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="not a directory"):
        load_trace_workload(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match="no Chakra traces"):
        load_trace_workload(tmp_path / "empty")
    gap = _copy(RING, tmp_path / "gap")
    (gap / "custom_allreduce.5.et").unlink()
    with pytest.raises(UserError, match="no trace for rank 5"):
        load_trace_workload(gap)
    groups = _copy(ALLREDUCE, tmp_path / "groups")
    (groups / "comm_group.json").write_text(json.dumps({"0": [0, 1, 2, 9]}))
    with pytest.raises(UserError, match="rank 9 outside"):
        load_trace_workload(groups)
    (groups / "comm_group.json").write_text(json.dumps({"0": [0, 1]}))
    with pytest.raises(UserError, match="rank 2 runs a collective on process group 0"):
        load_trace_workload(groups)
    bad = _copy(ALLREDUCE, tmp_path / "bad")
    (bad / "all_reduce.2.et").write_bytes(b"\xff\xff\xff")
    with pytest.raises(UserError, match="all_reduce.2.et"):
        load_trace_workload(bad)
    peers = _copy(RING, tmp_path / "peers")
    for p in sorted(peers.glob("*.et"))[4:]:
        p.unlink()
    with pytest.raises(
        UserError, match="custom_allreduce.0.et: node 1: send/recv peer 7 is not another rank"
    ):
        load_trace_workload(peers)


def test_durations_mode_is_checked() -> None:
    with pytest.raises(UserError, match="durations"):
        load_trace_workload(RING, durations="fast")
    assert np.array_equal(
        load_trace_workload(RING, durations="trace").trace(0).dep_ptr,
        load_trace_workload(RING).trace(0).dep_ptr,
    )
