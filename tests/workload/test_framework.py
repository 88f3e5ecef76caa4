"""Framework mechanisms (framework.*): DeepSpeed's pipeline payload and TP re-gathers, repeated
layer forwards, host time per kernel and per TP collective call; each against a hand count."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from heterosim.config.experiment import parse_experiment
from heterosim.errors import UserError
from heterosim.plan.compute.host_overhead import (
    add_host_overhead,
    collective_overhead_from_layer_forward,
    host_overhead_from_layer_forward,
)
from heterosim.simulate import run_experiment
from heterosim.workload.framework import COLLECTIVE_CALL_LABEL, attention_mask_bytes, pipeline_payload
from heterosim.workload.generator import generate_workload
from heterosim.workload.trace import COMM_COLL_NODE, COMM_RECV_NODE, COMM_SEND_NODE, COMP_NODE

H, S, B = 256, 128, 2
MODEL = {"arch": "gpt", "hidden": H, "layers": 4, "heads": 4, "ffn": 4 * H, "vocab": 1024, "seq": S}


def _experiment(parallel: dict, framework: dict | None = None, gpus: int = 4, global_batch: int = 8) -> dict:
    data = {
        "name": "fw",
        "model": dict(MODEL),
        "training": {
            "global_batch": global_batch,
            "micro_batch": B,
            "seq_len": S,
            "dtype": "fp16",
            "attention": "unfused",
        },
        "parallel": {"dp_bucket": "1GiB", **parallel},
        "cluster": {
            "host_types": {
                "t4": {
                    "gpu": "T4-16GB-PCIe",
                    "gpus": gpus,
                    "fabric": "pcie",
                    "nics": 1,
                    "nic_speed": "50Gbps",
                }
            },
            "hosts": [{"type": "t4", "count": 1}],
        },
        "simulation": {"fidelity": "flow"},
    }
    if framework is not None:
        data["framework"] = framework
    return data


def _parse(data: dict):
    return parse_experiment(data, "fw.yaml")


def _labels(trace) -> Counter:
    names = trace.templates.label_names
    return Counter(names[trace.templates.label[t]] for t in trace.template)


def test_framework_defaults_and_bad_input_name_the_key() -> None:
    fw = _parse(_experiment({"tp": 1, "pp": 1, "dp": 4})).framework
    assert (fw.name, fw.layer_forward_passes, fw.host_overhead_ns("T4-16GB-PCIe")) == ("megatron", 1, 0)
    with pytest.raises(UserError, match=r"fw.yaml: framework.name: expected one of"):
        _parse(_experiment({"tp": 1, "pp": 1, "dp": 4}, {"name": "horovod"}))
    with pytest.raises(
        UserError,
        match=r"framework.host_op_overhead.H100-SXM: no GPU of this "
        r"type in the cluster",
    ):
        _parse(_experiment({"tp": 1, "pp": 1, "dp": 4}, {"host_op_overhead": {"H100": "5us"}}))
    with pytest.raises(UserError, match=r"framework.layer_forward_passes"):
        _parse(_experiment({"tp": 1, "pp": 1, "dp": 4}, {"layer_forward_passes": 0}))
    with pytest.raises(UserError, match=r"parallel.schedule: framework deepspeed runs "):
        _parse(_experiment({"tp": 1, "pp": 2, "dp": 2, "schedule": "gpipe"}, {"name": "deepspeed"}))
    with pytest.raises(UserError, match=r"framework.colective_overhead: unknown key"):
        _parse(_experiment({"tp": 1, "pp": 1, "dp": 4}, {"colective_overhead": "1us"}))
    fw = _parse(
        _experiment(
            {"tp": 1, "pp": 1, "dp": 4},
            {"host_op_overhead": {"T4": "7us", "*": "1us"}, "collective_overhead": "300us"},
        )
    ).framework
    assert fw.host_overhead_ns("T4-16GB-PCIe") == 7000 and fw.host_overhead_ns("other") == 1000
    assert fw.tp_collective_overhead_ns("T4-16GB-PCIe") == 300_000


def test_deepspeed_payload_against_hand_count() -> None:
    act = B * S * H * 2  # b*s*h fp16
    mask = S * S * 2  # [1, 1, s, s] mask sent as fp16
    mega = pipeline_payload(_parse(_experiment({"tp": 2, "pp": 2, "dp": 1})))
    assert (mega.forward_bytes, mega.backward_bytes, mega.gather_bytes) == (act, act, 0)
    ds = _parse(_experiment({"tp": 2, "pp": 2, "dp": 1}, {"name": "deepspeed"}))
    assert attention_mask_bytes(ds) == mask
    p = pipeline_payload(ds)
    assert (p.forward_bytes, p.backward_bytes, p.gather_bytes) == (act // 2 + mask, act, act)
    p1 = pipeline_payload(_parse(_experiment({"tp": 1, "pp": 4, "dp": 1}, {"name": "deepspeed"})))
    assert (p1.forward_bytes, p1.backward_bytes, p1.gather_bytes) == (act + mask, act, 0)


def test_deepspeed_trace_regathers_partitioned_activations() -> None:
    exp = _parse(_experiment({"tp": 2, "pp": 2, "dp": 1}, {"name": "deepspeed"}))
    w = generate_workload(exp)
    m = 8 // B  # micro-batches
    first, last = w.trace(0), w.trace(2)  # stage 0 and stage 1 (tp fastest)
    assert _labels(last)["pp_partition_allgather.fwd"] == m
    assert _labels(last)["pp_partition_allgather.bwd"] == 0
    assert _labels(first)["pp_partition_allgather.bwd"] == m
    assert _labels(first)["pp_partition_allgather.fwd"] == 0
    act, mask = B * S * H * 2, S * S * 2
    for tr, kind, size in ((first, COMM_SEND_NODE, act // 2 + mask), (last, COMM_RECV_NODE, act // 2 + mask)):
        nodes = np.flatnonzero(tr.node_type == kind)
        sizes = tr.templates.comm_bytes[tr.template[nodes]]
        assert sorted(sizes.tolist()) == [size] * m
    # TrainSchedule forward step: RecvActivation, SendGrad (previous backward), LoadMicroBatch
    # (Megatron's TP broadcast of the batch: sizes, then tokens), then the forward, which starts
    # with the re-gather of the partitioned activation
    names = last.templates.label_names
    order = [names[last.templates.label[t]] for t in last.template]
    i = order.index("pp_recv.fwd", order.index("pp_send.bwd") - 2)
    assert order[i + 1 : i + 5] == [
        "pp_send.bwd",
        "load_batch.broadcast_sizes",
        "load_batch.broadcast_tokens",
        "pp_partition_allgather.fwd",
    ]
    for tr in (first, last):  # first and last stage load every micro-batch
        assert _labels(tr)["load_batch.broadcast_tokens"] == m
    tokens = next(
        t
        for t in range(len(last.templates))
        if names[last.templates.label[t]] == "load_batch.broadcast_tokens"
    )
    assert last.templates.comm_bytes[tokens] == B * (S + 1) * 8  # int64 tokens, s + 1 per row


def _instructions(trace) -> list[str]:
    """The rank's pipeline instructions in issue order: p2p calls and F/B passes with their
    micro-batch (consecutive kernels of one pass collapsed)."""
    names, phases = trace.templates.label_names, trace.templates.phase
    short = {"pp_recv.fwd": "RA", "pp_send.fwd": "SA", "pp_recv.bwd": "RG", "pp_send.bwd": "SG"}
    out: list[str] = []
    for n, t in enumerate(trace.template):
        mb = int(trace.micro_batch[n])
        label = names[trace.templates.label[t]]
        if label in short:
            out.append(f"{short[label]}{mb}")
        elif trace.templates.node_type[t] == COMP_NODE and mb >= 0:
            token = ("F" if int(phases[t]) == 0 else "B") + str(mb)
            if not out or out[-1] != token:
                out.append(token)
    return out


def test_deepspeed_instruction_order_follows_train_schedule() -> None:
    """pp 2, 3 micro-batches, by hand from DeepSpeed's TrainSchedule (schedule.py: forward of
    micro-batch i on stage s at step 2i+s, backward at 2i+2P-s-1; a forward step runs
    RecvActivation, SendGrad(previous), ForwardPass; a backward step SendActivation(previous),
    RecvGrad, BackwardPass)."""
    w = generate_workload(
        _parse(_experiment({"tp": 1, "pp": 2, "dp": 1}, {"name": "deepspeed"}, gpus=2, global_batch=3 * B))
    )
    assert _instructions(w.trace(0)) == [
        "F0",
        "SA0",
        "F1",
        "SA1",
        "RG0",
        "B0",
        "F2",
        "SA2",
        "RG1",
        "B1",
        "RG2",
        "B2",
    ]
    assert _instructions(w.trace(1)) == [
        "RA0",
        "F0",
        "B0",
        "RA1",
        "SG0",
        "F1",
        "B1",
        "RA2",
        "SG1",
        "F2",
        "B2",
        "SG2",
    ]
    # Megatron's engine sends each result right after its pass
    mega = generate_workload(_parse(_experiment({"tp": 1, "pp": 2, "dp": 1}, gpus=2, global_batch=3 * B)))
    assert _instructions(mega.trace(1))[:6] == ["RA0", "F0", "B0", "SG0", "RA1", "F1"]


def test_deepspeed_p2p_blocks_the_sender() -> None:
    """A DeepSpeed send is in the rank's chain (the next instruction waits for the transfer);
    Megatron's is not."""
    for name, blocking in (("deepspeed", True), ("megatron", False)):
        tr = generate_workload(
            _parse(_experiment({"tp": 1, "pp": 2, "dp": 1}, {"name": name}, gpus=2, global_batch=3 * B))
        ).trace(0)
        sends = set(np.flatnonzero(tr.node_type == COMM_SEND_NODE).tolist())
        assert bool(sends & set(tr.dep_idx.tolist())) == blocking, name


def test_layer_forward_passes_repeat_the_forward_only() -> None:
    one = generate_workload(_parse(_experiment({"tp": 2, "pp": 1, "dp": 2}))).trace(0)
    two = generate_workload(
        _parse(_experiment({"tp": 2, "pp": 1, "dp": 2}, {"layer_forward_passes": 2}))
    ).trace(0)
    a, b = _labels(one), _labels(two)
    assert b["qkv_proj"] == 2 * a["qkv_proj"] and b["fc2"] == 2 * a["fc2"]
    assert b["qkv_proj.dgrad"] == a["qkv_proj.dgrad"]  # one backward
    assert b["tp_allreduce.mlp"] == 2 * a["tp_allreduce.mlp"]  # the repeat's TP all-reduces too


def test_collective_markers_precede_every_tp_collective_and_p2p_call() -> None:
    """One marker per TP collective and per DeepSpeed p2p broadcast: three per activation
    send/recv with TP > 1 (meta, slice, mask), one per gradient send/recv."""
    exp = _parse(
        _experiment({"tp": 2, "pp": 2, "dp": 1}, {"name": "deepspeed", "collective_overhead": "400us"})
    )
    payload = pipeline_payload(exp)
    assert (payload.forward_calls, payload.backward_calls) == (3, 1)
    w = generate_workload(exp)
    m = 8 // B
    for rank in range(4):
        tr = w.trace(rank)
        names = tr.templates.label_names
        order = [names[tr.templates.label[t]] for t in tr.template]
        colls = [
            i
            for i, t in enumerate(tr.template)
            if tr.templates.node_type[t] == COMM_COLL_NODE
            and order[i] not in ("dp_grad_allreduce", "embedding_grad_allreduce")
        ]
        assert colls and all(order[i - 1] == COLLECTIVE_CALL_LABEL for i in colls)
        p2p = 3 * m + 1 * m  # stage 0 sends activations, receives gradients; stage 1 the reverse
        for i, name in enumerate(order):
            if name in ("pp_send.fwd", "pp_recv.fwd"):
                assert order[i - 3 : i] == [COLLECTIVE_CALL_LABEL] * 3
            if name in ("pp_send.bwd", "pp_recv.bwd"):
                assert order[i - 1] == COLLECTIVE_CALL_LABEL
        assert order.count(COLLECTIVE_CALL_LABEL) == len(colls) + p2p


def test_add_host_overhead_and_derivations_by_hand() -> None:
    tr = generate_workload(
        _parse(_experiment({"tp": 2, "pp": 1, "dp": 2}, {"collective_overhead": "1us"}))
    ).trace(0)
    t = tr.templates
    base = np.full(len(t), 1000, dtype=np.int64)
    base[t.node_type != COMP_NODE] = 0
    out = add_host_overhead(base, t, 70, 400)
    marker = np.array([t.label_names[x] == COLLECTIVE_CALL_LABEL for x in t.label])
    compute = t.node_type == COMP_NODE
    assert marker.any()
    assert (out[compute & ~marker] == 1070).all() and (out[marker] == 400).all()
    assert (out[~compute] == 0).all()
    # measured 4 ms for two passes over 10 ops of 100 us of GPU time: (2000 - 1000) / 10
    assert host_overhead_from_layer_forward(4e6, 2, [100_000] * 10) == 100_000
    assert host_overhead_from_layer_forward(1e6, 2, [100_000] * 10) == 0
    # per pass 3 ms - 1 ms GPU - 10 x 50 us host - 2 x 250 us transfer = 1 ms over 2 collectives
    assert (
        collective_overhead_from_layer_forward(6e6, 2, [100_000] * 10, 50_000, [250_000, 250_000]) == 500_000
    )


def _iteration_ns(data: dict) -> tuple[int, object]:
    run = run_experiment(_parse(data))
    return run.engine.makespan_ns, run


def test_host_overhead_adds_its_time_to_every_kernel_of_a_single_gpu() -> None:
    """One GPU, no communication: the iteration is the serial sum of its kernels, so it grows by
    exactly (compute nodes) x overhead."""
    base = _experiment({"tp": 1, "pp": 1, "dp": 1}, gpus=1, global_batch=4)
    # the base without any host cost: a given host_op_overhead replaces the pipelined dispatch
    t0, run = _iteration_ns({**base, "framework": {"host_dispatch": "0us"}})
    t1, _ = _iteration_ns({**base, "framework": {"host_op_overhead": "50us"}})
    nodes = sum(int((tr.node_type == COMP_NODE).sum()) for tr in run.traces)
    assert t1 - t0 == nodes * 50_000


def test_collective_overhead_delays_each_tp_call_once() -> None:
    """Two TP ranks in lock step: every TP collective starts later by the call cost on both, so
    the iteration grows by (TP collectives per rank) x cost."""
    base = _experiment({"tp": 2, "pp": 1, "dp": 1}, gpus=2, global_batch=4)
    base["framework"] = {"host_dispatch": "0us"}  # the call cost alone
    t0, run = _iteration_ns(base)
    t1, run1 = _iteration_ns({**base, "framework": {"host_dispatch": "0us", "collective_overhead": "300us"}})
    tr = run1.traces[0]
    calls = _labels(tr)[COLLECTIVE_CALL_LABEL]
    assert calls == int((tr.node_type == COMM_COLL_NODE).sum())
    assert t1 - t0 == pytest.approx(calls * 300_000, abs=calls * 5_000)  # + the marker's launch


@pytest.mark.parametrize("parallel", [{"tp": 2, "pp": 4, "dp": 1}, {"tp": 1, "pp": 4, "dp": 2}])
def test_deepspeed_sends_match_recvs_and_traces_are_valid(parallel) -> None:
    w = generate_workload(
        _parse(
            _experiment(
                parallel, {"name": "deepspeed", "collective_overhead": "100us"}, gpus=8, global_batch=16
            )
        )
    )
    sends, recvs = Counter(), Counter()
    for tr in w.traces:
        tr.check()
        for i in np.flatnonzero(tr.node_type == COMM_SEND_NODE):
            sends[
                (tr.rank, int(tr.peer[i]), int(tr.tag[i]), int(tr.templates.comm_bytes[tr.template[i]]))
            ] += 1
        for i in np.flatnonzero(tr.node_type == COMM_RECV_NODE):
            recvs[
                (int(tr.peer[i]), tr.rank, int(tr.tag[i]), int(tr.templates.comm_bytes[tr.template[i]]))
            ] += 1
    assert sends and sends == recvs and max(sends.values()) == 1


def test_deepspeed_with_an_explicit_stage_plan_is_a_one_line_error() -> None:
    data = _experiment(
        {
            "stages": [
                {"layers": 2, "replicas": [{"gpu": "T4", "tp": 1}]},
                {"layers": 2, "replicas": [{"gpu": "T4", "tp": 1}]},
            ]
        },
        {"name": "deepspeed"},
        gpus=2,
    )
    with pytest.raises(
        UserError,
        match=r"framework.name: deepspeed models DeepSpeed's engine on "
        r"a tp/pp/dp grid",
    ):
        _parse(data)
    data["framework"] = {"name": "megatron", "collective_overhead": "100us"}
    w = generate_workload(_parse(data))  # the Megatron path runs staged plans, markers included
    assert _labels(w.trace(0))[COLLECTIVE_CALL_LABEL] > 0
