"""parallel.p2p_sync: blocking makes the compute after a pipeline send wait for that send
(Megatron-LM batch_isend_irecv + torch.cuda.synchronize); overlap (default) only waits for recvs."""

from __future__ import annotations

import numpy as np
import pytest

from heterosim.config.experiment import parse_experiment
from heterosim.errors import UserError
from heterosim.workload.generator import generate_workload
from heterosim.workload.trace import COMM_SEND_NODE, COMP_NODE


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


def test_blocking_with_the_interleaved_schedule_is_refused_in_one_line():
    data = {
        "model": {"arch": "gpt", "hidden": 512, "layers": 8, "heads": 8, "vocab": 4096, "seq": 256},
        "training": {"global_batch": 16, "micro_batch": 1, "seq_len": 256},
        "parallel": {"tp": 1, "pp": 2, "dp": 1, "vpp": 2, "schedule": "interleaved", "p2p_sync": "blocking"},
        "cluster": {
            "host_types": {"h": {"gpu": "A100-80GB-SXM", "gpus": 2, "nics": 2, "nic_speed": "200Gbps"}},
            "hosts": [{"type": "h", "count": 1}],
        },
    }
    with pytest.raises(UserError, match="parallel.p2p_sync: blocking is modelled for the 1f1b"):
        parse_experiment(data, "t.yaml")


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
