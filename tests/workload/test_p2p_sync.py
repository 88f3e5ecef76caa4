"""parallel.p2p_sync: blocking makes the compute after a pipeline send wait for that send
(Megatron-LM batch_isend_irecv + torch.cuda.synchronize), with the interleaved schedule in
Megatron's combined send/receive calls; overlap (default) only waits for recvs."""

from __future__ import annotations

import numpy as np
import pytest

from heterosim.config.experiment import parse_experiment
from heterosim.errors import UserError
from heterosim.workload.generator import generate_workload
from heterosim.workload.trace import COMM_SEND_NODE, COMP_NODE, PHASES


def _workload(p2p_sync: str | None):
    par = {"tp": 1, "pp": 2, "dp": 1}
    if p2p_sync is not None:
        par["p2p_sync"] = p2p_sync
    data = {
        "model": {"arch": "gpt", "hidden": 512, "layers": 4, "heads": 8, "vocab": 4096, "seq": 256},
        "training": {"global_batch": 4, "micro_batch": 1, "seq_len": 256},
        "parallel": par,
        "cluster": {
            "host_types": {"h": {"gpu": "A100-80GB-SXM", "gpus": 2, "nics": 2, "nic_speed": "200Gbps"}},
            "hosts": [{"type": "h", "count": 1}],
        },
    }
    return generate_workload(parse_experiment(data, "t.yaml"))


def _sends_waited_for(trace) -> tuple[int, int]:
    """(sends, sends that a later compute node depends on directly)."""
    kinds = trace.node_type
    sends = set(np.flatnonzero(kinds == COMM_SEND_NODE).tolist())
    waited = set()
    for node in np.flatnonzero(kinds == COMP_NODE):
        waited |= sends.intersection(trace.parents(int(node)).tolist())
    return len(sends), len(waited)


@pytest.mark.parametrize("stage_rank", [0, 1])
def test_blocking_sends_gate_the_next_compute(stage_rank):
    overlap = _workload(None).trace(stage_rank)
    blocking = _workload("blocking").trace(stage_rank)
    n, waited = _sends_waited_for(overlap)
    assert n == 4 and waited == 0  # 4 micro-batches: one send per micro-batch and direction
    n, waited = _sends_waited_for(blocking)
    # every send but the last of the iteration gates the next step's compute; the last one gates
    # the optimizer step (through the stream tail)
    assert n == 4 and waited == 4
    assert len(blocking) == len(overlap)  # same nodes, more edges
    blocking.check()


def test_bad_p2p_sync_is_one_line():
    with pytest.raises(UserError, match="p2p_sync"):
        _workload("sometimes")


def test_scatter_gather_sends_a_tp_share_and_gathers_it_over_the_tp_group():
    from heterosim.workload.summary import trace_counts

    def workload(sg: bool, sp: bool = False):
        data = {
            "model": {"arch": "gpt", "hidden": 512, "layers": 4, "heads": 8, "vocab": 4096, "seq": 256},
            "training": {"global_batch": 4, "micro_batch": 1, "seq_len": 256},
            "parallel": {"tp": 2, "pp": 2, "dp": 1, "p2p_scatter_gather": sg, "sequence_parallel": sp},
            "cluster": {
                "host_types": {"h": {"gpu": "A100-80GB-SXM", "gpus": 4, "nics": 4, "nic_speed": "200Gbps"}},
                "hosts": [{"type": "h", "count": 1}],
            },
        }
        return generate_workload(parse_experiment(data, "t.yaml"))

    act = 256 * 512 * 2  # b*s*h bf16
    plain = trace_counts(workload(False).trace(0))
    sg = trace_counts(workload(True).trace(0))
    assert plain["send_bytes"] == 4 * act  # 4 forward sends of the whole activation
    assert sg["send_bytes"] == 4 * act // 2  # 1/tp of it
    gathers = sg["collectives"]["ALL_GATHER"]
    plain_gathers = plain["collectives"].get("ALL_GATHER", {"count": 0, "bytes": 0})
    # stage 0 receives 4 backward gradients, each re-assembled by a TP all-gather of b*s*h
    assert gathers["count"] - plain_gathers["count"] == 4
    assert gathers["bytes"] - plain_gathers["bytes"] == 4 * act
    # with sequence parallelism the activation is already split: no extra gather
    assert (
        trace_counts(workload(True, sp=True).trace(0))["collectives"]
        == trace_counts(workload(False, sp=True).trace(0))["collectives"]
    )


def _staged_workload(sg: bool, tps: tuple[int, int]):
    """An explicit two-stage plan (one replica per stage) with TP degrees ``tps``."""
    data = {
        "model": {"arch": "gpt", "hidden": 512, "layers": 4, "heads": 8, "vocab": 4096, "seq": 256},
        "training": {"global_batch": 4, "micro_batch": 1, "seq_len": 256},
        "parallel": {
            "p2p_scatter_gather": sg,
            "stages": [
                {"layers": 2, "replicas": [{"gpu": "A100-80GB-SXM", "tp": tps[0]}]},
                {"layers": 2, "replicas": [{"gpu": "A100-80GB-SXM", "tp": tps[1]}]},
            ],
        },
        "cluster": {
            "host_types": {"h": {"gpu": "A100-80GB-SXM", "gpus": 4, "nics": 4, "nic_speed": "200Gbps"}},
            "hosts": [{"type": "h", "count": 1}],
        },
    }
    return generate_workload(parse_experiment(data, "t.yaml"))


def test_scatter_gather_on_an_explicit_plan_with_one_tp_degree():
    """DeepSpeed's PipelineEngine (Sailor's runtime) partitions activations and gradients over TP."""
    from heterosim.workload.summary import trace_counts

    act = 256 * 512 * 2  # b*s*h bf16
    plain = trace_counts(_staged_workload(False, (2, 2)).trace(0))
    sg = trace_counts(_staged_workload(True, (2, 2)).trace(0))
    assert plain["send_bytes"] == 4 * act and sg["send_bytes"] == 4 * act // 2
    extra = (
        sg["collectives"]["ALL_GATHER"]["count"]
        - plain["collectives"].get("ALL_GATHER", {"count": 0})["count"]
    )
    assert extra == 4  # every received gradient is all-gathered over the TP group
    last = trace_counts(_staged_workload(True, (2, 2)).trace(2))  # stage 1, TP rank 0
    assert last["send_bytes"] == 4 * act // 2  # the gradients go back sliced too
    # stages of different TP degrees keep whole-tensor transfers: the pieces would not line up
    mixed_sg = trace_counts(_staged_workload(True, (2, 1)).trace(0))
    mixed = trace_counts(_staged_workload(False, (2, 1)).trace(0))
    assert mixed_sg["send_bytes"] == mixed["send_bytes"] == 4 * act
    assert mixed_sg["collectives"] == mixed["collectives"]


def _interleaved(p2p_sync: str, global_batch: int = 8, pp: int = 2):
    data = {
        "model": {"arch": "gpt", "hidden": 512, "layers": 8, "heads": 8, "vocab": 4096, "seq": 256},
        "training": {"global_batch": global_batch, "micro_batch": 1, "seq_len": 256},
        "parallel": {"tp": 1, "pp": pp, "dp": 1, "vpp": 2, "schedule": "interleaved", "p2p_sync": p2p_sync},
        "cluster": {
            "host_types": {"h": {"gpu": "A100-80GB-SXM", "gpus": 1, "nics": 1, "nic_speed": "25Gbps"}},
            "hosts": [{"type": "h", "count": pp}],
        },
        "simulation": {"fidelity": "flow"},
    }
    return parse_experiment(data, "t.yaml")


def _labels(trace) -> list[str]:
    t = trace.templates
    return [t.label_names[int(t.label[int(k)])] for k in trace.template]


def _phase_before(trace, node: int) -> str:
    """Phase (fwd / bwd) of the kernel a p2p node waits for, through framework call markers."""
    labels, kinds, t = _labels(trace), trace.node_type, trace.templates
    while True:
        parents = trace.parents(node)
        assert len(parents) == 1
        node = int(parents[0])
        if kinds[node] == COMP_NODE and not labels[node].startswith("collective_call"):
            return PHASES[int(t.phase[int(trace.template[node])])]


@pytest.mark.parametrize("global_batch", [2, 4, 8])  # 2: every micro-batch in the warm-up (m == pp)
def test_interleaved_blocking_follows_megatrons_combined_calls(global_batch):
    """Megatron's interleaved schedule sends a steady-state forward's output in the combined call
    after the paired backward; warm-up forwards send right after themselves. Stage 0 of pp = 2,
    vpp = 2 holds virtual stages 0 and 2, both of which send forward: 2 m sends, of which the
    m * vpp - warm-up steady-state ones follow a backward (overlap: none)."""
    pp, vpp, m = 2, 2, global_batch
    blocking = generate_workload(_interleaved("blocking", global_batch)).trace(0)
    overlap = generate_workload(_interleaved("overlap", global_batch)).trace(0)
    blocking.check()
    warm = m * vpp if m == pp else (pp - 1) * 2 + (vpp - 1) * pp  # Megatron's warm-up of stage 0
    for trace, steady in ((blocking, m * vpp - warm), (overlap, 0)):
        sends = [i for i, label in enumerate(_labels(trace)) if label == "pp_send.fwd"]
        assert len(sends) == m * vpp
        assert sum(_phase_before(trace, i) == "bwd" for i in sends) == steady
    assert len(blocking) == len(overlap)  # same nodes, different edges
    n, waited = _sends_waited_for(blocking)
    # every send gates the next compute (stage 0's last backward, virtual stage 0, sends nothing)
    assert waited == n


@pytest.mark.ns3
def test_blocking_1f1b_runs_and_is_never_faster(native_lib):
    from heterosim.report.run_report import results_dict
    from heterosim.simulate import run_experiment

    times = {}
    for sync, schedule in (
        ("overlap", "1f1b"),
        ("blocking", "1f1b"),
        ("overlap", "gpipe"),
        ("blocking", "gpipe"),
    ):
        data = {
            "model": {"arch": "gpt", "hidden": 512, "layers": 8, "heads": 8, "vocab": 4096, "seq": 256},
            "training": {"global_batch": 16, "micro_batch": 1, "seq_len": 256},
            "parallel": {"tp": 1, "pp": 4, "dp": 1, "p2p_sync": sync, "schedule": schedule},
            "cluster": {
                "host_types": {"h": {"gpu": "A100-80GB-SXM", "gpus": 1, "nics": 1, "nic_speed": "25Gbps"}},
                "hosts": [{"type": "h", "count": 4}],
            },
            "simulation": {"fidelity": "flow"},
        }
        times[sync, schedule] = results_dict(run_experiment(parse_experiment(data, "t.yaml")))[
            "iteration_time_s"
        ]
    for schedule in ("1f1b", "gpipe"):
        assert times["blocking", schedule] >= times["overlap", schedule] > 0
    for global_batch in (4, 8, 16):
        blocking, overlap = (
            results_dict(run_experiment(_interleaved(sync, global_batch, pp=4)))["iteration_time_s"]
            for sync in ("blocking", "overlap")
        )
        assert blocking >= overlap > 0
