"""Eager host dispatch: a layer pass as a host-issues, GPU-runs pipeline (plan/compute/host_dispatch.py)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from heterosim.catalog.models import ZOO
from heterosim.config.experiment import (
    HOST_DISPATCH_NS,
    HOST_DISPATCH_PER_KERNEL_NS,
    HostDispatch,
    TrainingConfig,
    parse_experiment,
)
from heterosim.errors import UserError
from heterosim.plan.compute.host_dispatch import pipelined_pass_ns
from heterosim.plan.compute.layer_check import single_gpu_parallel
from heterosim.plan.compute.layer_gap import layer_op_lists
from heterosim.plan.compute.model import ComputeModel
from heterosim.simulate.experiment import prepare_run
from heterosim.workload.trace import COMP_NODE, PHASES

GPU = "H100-SXM"


def _prepared(framework: dict | None = None, layers: int = 4):
    return prepare_run(parse_experiment(_experiment(framework, layers), "exp.yaml"), with_topology=False)


def _pass_nodes(run, phase: str) -> np.ndarray:
    """Rank 0's compute nodes of its first layer pass of ``phase``, first micro-batch."""
    trace = run.traces[0]
    t = trace.templates
    return (
        (t.node_type[trace.template] == COMP_NODE)
        & (trace.layer == 0)
        & (trace.micro_batch == 0)
        & (t.phase[trace.template] == PHASES.index(phase))
    )


def _pass_durations(run, phase: str) -> np.ndarray:
    """Durations of rank 0's first layer pass of ``phase``, first micro-batch, in trace order."""
    trace = run.traces[0]
    return trace.templates.duration_ns[trace.template[_pass_nodes(run, phase)]].astype(np.float64)


def _pass_ns(run, phase: str) -> tuple[float, int]:
    """(summed duration, op count) of rank 0's first layer pass of ``phase``, first micro-batch."""
    d = _pass_durations(run, phase)
    return float(d.sum()), int(d.size)


def _queue_ns(gpu_ns: np.ndarray, host_ns: float) -> float:
    """One launch queue, op by op: the GPU starts op k when it is issued (k * host) and the
    previous op is done."""
    done = 0.0
    for k, g in enumerate(gpu_ns):
        done = max(done, k * host_ns) + g
    return done


def test_the_pipelined_pass_equals_a_launch_queue_run_op_by_op():
    rng = np.random.default_rng(7)
    groups = rng.integers(0, 5, 200)
    gpu = rng.exponential(50_000.0, 200) * rng.choice([0.05, 1.0, 20.0], 200)
    host = np.array([10_000.0, 40_000.0, 80_000.0, 0.0, 200_000.0])
    total, pipelined = pipelined_pass_ns(groups, gpu, host)
    for p in range(5):
        mine = gpu[groups == p]
        assert total[p] == pytest.approx(mine.sum())
        assert pipelined[p] == pytest.approx(_queue_ns(mine, host[p]))
    # short kernels first, long last: longer than both the GPU's and the host's own time
    g = np.array([1.0, 1.0, 1.0, 1.0, 1000.0, 1000.0])
    _, (t,) = pipelined_pass_ns(np.zeros(6, int), g, np.array([300.0]))
    assert t == pytest.approx(4 * 300.0 + 2000.0) and t > max(g.sum(), 6 * 300.0)
    # long kernels first: the host issues the short ones while the GPU is busy
    _, (t,) = pipelined_pass_ns(np.zeros(6, int), g[::-1].copy(), np.array([300.0]))
    assert t == pytest.approx(g.sum())


def test_a_small_layer_takes_the_hosts_time_per_pass():
    off, on = _prepared({"host_dispatch": "0us"}), _prepared()
    per_f, per_b = HOST_DISPATCH_NS["gpt"]
    gpu_b, n_b = _pass_ns(off, "bwd")
    assert gpu_b < per_b * n_b  # small enough to be host-bound
    expected_b = _queue_ns(_pass_durations(off, "bwd"), per_b)
    assert expected_b >= (n_b - 1) * per_b
    host_b, _ = _pass_ns(on, "bwd")
    assert host_b == pytest.approx(expected_b, rel=1e-4)  # the pass lasts the pipeline's time
    expected_f = _queue_ns(_pass_durations(off, "fwd"), per_f)
    assert _pass_ns(on, "fwd")[0] == pytest.approx(expected_f, rel=1e-4)
    (entry,) = on.compute_layers
    assert entry["mode"] == "host-dispatch" and entry["gpu"] == "H100-SXM"
    assert entry["backward_factor"] == pytest.approx(expected_b / gpu_b, rel=1e-4)
    assert off.compute_layers == []


def _queue_each_ns(gpu_ns: np.ndarray, host_ns: np.ndarray) -> float:
    """One launch queue with a host time per op: op k is issued once the host has issued the
    ops before it, and starts when issued and the previous op is done."""
    done = issued = 0.0
    for g, h in zip(gpu_ns, host_ns):
        done = max(done, issued) + g
        issued += h
    return done


def test_a_host_time_per_op_is_a_launch_queue_too():
    rng = np.random.default_rng(3)
    groups = rng.integers(0, 4, 120)
    gpu = rng.exponential(30_000.0, 120)
    host = rng.choice([36_000.0, 136_000.0], 120)
    total, pipelined = pipelined_pass_ns(groups, gpu, op_host=host)
    for p in range(4):
        mine = groups == p
        assert total[p] == pytest.approx(gpu[mine].sum())
        assert pipelined[p] == pytest.approx(_queue_each_ns(gpu[mine], host[mine]))


def test_context_parallel_passes_cost_the_host_one_kernel_each():
    """A CP layer's copies and merges (cp_* ops, one kernel each) are issued at the measured
    per-kernel rate, the layer's other ops at the per-op rate of the layer measurements."""

    def cp_run(framework: dict | None):
        exp = _experiment(framework)
        exp["parallel"] = {"tp": 1, "pp": 1, "dp": 1, "cp": 2}
        exp["cluster"]["host_types"]["h"]["gpus"] = 2
        return prepare_run(parse_experiment(exp, "exp.yaml"), with_topology=False)

    off, on = cp_run({"host_dispatch": "0us"}), cp_run(None)
    trace = off.traces[0]
    t = trace.templates
    labels = np.asarray(t.label_names)[t.label[trace.template[_pass_nodes(off, "bwd")]]]
    one_kernel = np.char.startswith(labels.astype(str), "cp_")
    assert one_kernel.sum() >= 4  # the K/V copy, a step copy, the dQ and dK/dV accumulations
    gpu = _pass_durations(off, "bwd")
    per_op, per_kernel = HOST_DISPATCH_NS["gpt"][1], HOST_DISPATCH_PER_KERNEL_NS[1]
    expected = _queue_each_ns(gpu, np.where(one_kernel, per_kernel, per_op))
    assert _pass_ns(on, "bwd")[0] == pytest.approx(expected, rel=1e-4)
    assert expected < _queue_ns(gpu, per_op)  # charged per op, the pass would last longer


def test_ops_outside_the_layers_and_communication_keep_their_time():
    off, on = _prepared({"host_dispatch": "0us"}), _prepared()
    t0, t1 = off.traces[0].templates, on.traces[0].templates
    in_layer = np.zeros(len(t0), bool)
    trace = on.traces[0]
    in_layer[trace.template[trace.layer >= 0]] = True
    assert np.array_equal(t0.duration_ns[~in_layer], t1.duration_ns[~in_layer])
    assert (t1.duration_ns[in_layer] >= t0.duration_ns[in_layer]).all()


def test_a_large_layer_is_gpu_bound_and_not_scaled():
    compute = ComputeModel()
    model = ZOO["gpt3-175b"]
    training = TrainingConfig(global_batch=1, micro_batch=1, seq_len=2048, dtype="bf16", recompute="none")
    fwd, bwd = layer_op_lists(model, training, single_gpu_parallel())
    per_f, per_b = HOST_DISPATCH_NS["gpt"]
    gpu = [
        sum(
            compute.time_op(o.op_kind, o.dtype, o.shape, o.shape_extra, o.flops, o.bytes_moved, GPU)[0]
            for o in ops
        )
        for ops in (fwd, bwd)
    ]
    assert gpu[0] > per_f * len(fwd) and gpu[1] > per_b * len(bwd)


def test_a_gpu_bound_pass_keeps_its_gpu_time_whatever_its_order():
    """The host runs ahead through GPU-bound passes: however short the first ops are, a pass
    whose host time is below its GPU time is not stretched."""
    big = _experiment(None, layers=2)
    big["model"].update(hidden=4096, heads=32, ffn=16384)
    big["training"]["seq_len"] = 2048
    off = _prepared_from(big, {"host_dispatch": "0us"})
    on = _prepared_from(big, None)
    for phase in ("fwd", "bwd"):
        assert np.array_equal(_pass_durations(on, phase), _pass_durations(off, phase))
    assert on.compute_layers == []


def _prepared_from(exp: dict, framework: dict | None):
    exp = {**exp}
    if framework is None:
        exp.pop("framework", None)
    else:
        exp["framework"] = framework
    return prepare_run(parse_experiment(exp, "exp.yaml"), with_topology=False)


def test_the_host_rate_is_per_architecture_and_overridable():
    assert HostDispatch().per_op_ns("llama") == HOST_DISPATCH_NS["llama"]
    assert HostDispatch().per_op_ns("gpt") == HOST_DISPATCH_NS["gpt"]
    assert HostDispatch(10_000, None).per_op_ns("llama") == (10_000, HOST_DISPATCH_NS["llama"][1])
    assert not HostDispatch(0, 0).enabled
    # a slower host stretches the host-bound pass by its own rate
    off = _pass_durations(_prepared({"host_dispatch": "0us"}), "bwd")
    slow, fast = _prepared({"host_dispatch": "400us"}), _prepared({"host_dispatch": "200us"})
    assert _pass_ns(slow, "bwd")[0] == pytest.approx(_queue_ns(off, 400_000), rel=1e-4)
    assert _pass_ns(fast, "bwd")[0] == pytest.approx(_queue_ns(off, 200_000), rel=1e-4)
    assert _pass_ns(slow, "bwd")[0] > 1.9 * _pass_ns(fast, "bwd")[0]


def _experiment(framework: dict | None, layers: int = 4) -> dict:
    exp = {
        "name": "gpt2-medium-1gpu",
        "model": {
            "arch": "gpt",
            "hidden": 1024,
            "layers": layers,
            "heads": 16,
            "ffn": 4096,
            "vocab": 50304,
            "seq": 1024,
            "name": "gpt2-medium-4l",
        },
        "training": {"global_batch": 2, "micro_batch": 1, "seq_len": 1024, "dtype": "bf16"},
        "parallel": {"tp": 1, "pp": 1, "dp": 1},
        "cluster": {
            "name": "one-h100",
            "host_types": {
                "h": {"gpu": "H100-SXM", "gpus": 1, "fabric": "nvswitch", "nics": 1, "nic_speed": "400Gbps"}
            },
            "hosts": [{"type": "h", "count": 1}],
        },
        "simulation": {"fidelity": "flow"},
    }
    if framework is not None:
        exp["framework"] = framework
    return exp


def test_config_parses_one_time_or_both_passes_and_refuses_bad_values():
    fw = parse_experiment(_experiment({"host_dispatch": "20us"}), "exp.yaml").framework
    assert fw.host_dispatch == HostDispatch(20_000, 20_000)
    fw = parse_experiment(_experiment({"host_dispatch": {"backward": "0us"}}), "exp.yaml").framework
    assert fw.host_dispatch.per_op_ns("gpt") == (HOST_DISPATCH_NS["gpt"][0], 0)
    fw = parse_experiment(_experiment(None), "exp.yaml").framework
    assert fw.pipelined_host_dispatch.enabled
    # a serial host overhead given by the user replaces the pipelined model
    fw = parse_experiment(_experiment({"host_op_overhead": "5us"}), "exp.yaml").framework
    assert not fw.pipelined_host_dispatch.enabled
    with pytest.raises(UserError, match=r"exp.yaml: framework.host_dispatch.forward: .*"):
        parse_experiment(_experiment({"host_dispatch": {"forward": "-3us"}}), "exp.yaml")
    with pytest.raises(
        UserError, match=r"framework.host_dispatch.sideways: unknown key; expected one of: backward, forward"
    ):
        parse_experiment(_experiment({"host_dispatch": {"sideways": "3us"}}), "exp.yaml")
    with pytest.raises(UserError, match=r"framework.host_dispatch: expected at most 1s"):
        parse_experiment(_experiment({"host_dispatch": "2s"}), "exp.yaml")


def test_a_run_reports_the_dispatch_scale_and_slows_by_it():
    from heterosim.simulate.experiment import run_experiment

    on = run_experiment(parse_experiment(_experiment(None), "exp.yaml"))
    off = run_experiment(parse_experiment(_experiment({"host_dispatch": "0us"}), "exp.yaml"))
    assert [entry["mode"] for entry in on.compute_layers] == ["host-dispatch"]
    assert off.compute_layers == []
    assert on.engine.makespan_ns > off.engine.makespan_ns
    entry = on.compute_layers[0]
    # 4 layers x 2 micro-batches x the backward gap (the host-bound pass) at the least
    assert on.engine.makespan_ns - off.engine.makespan_ns >= 8 * entry["backward_gap_us"] * 1e3 * 0.99


def test_the_model_is_documented_as_an_approximation():
    import heterosim.plan.compute.host_dispatch as module

    assert "APPROXIMATION" in (module.__doc__ or "")
    assert replace(HostDispatch(), forward_ns=0).enabled  # backward still on


def test_every_layer_of_uneven_routing_is_stretched_apart():
    """Zipf routing gives each MoE layer its own expert GEMMs (own templates): each host-bound
    layer pass lasts at least the host's time to issue it, not only the first layer's."""
    exp = _experiment(None, layers=3)
    exp["model"] = {
        "base": "mixtral-8x7b",
        "hidden": 256,
        "heads": 8,
        "kv_heads": 2,
        "ffn": 512,
        "layers": 3,
        "vocab": 4096,
        "moe_routing": {"distribution": "zipf", "skew": 1.5, "seed": 3},
    }
    exp["model"].pop("arch", None)
    exp["training"]["seq_len"] = 256
    exp["parallel"] = {"tp": 1, "pp": 1, "dp": 2, "ep": 2}
    exp["cluster"]["host_types"]["h"]["gpus"] = 2
    run = prepare_run(parse_experiment(exp, "exp.yaml"), with_topology=False)
    per_f, per_b = HOST_DISPATCH_NS["llama"]
    trace = run.traces[0]
    t = trace.templates
    kernel = t.node_type[trace.template] == COMP_NODE
    for layer in range(3):
        for phase, rate in (("fwd", per_f), ("bwd", per_b)):
            nodes = kernel & (trace.layer == layer) & (trace.micro_batch == 0)
            nodes &= t.phase[trace.template] == PHASES.index(phase)
            rows = trace.template[nodes]
            assert rows.size > 0
            assert t.duration_ns[rows].sum() >= 0.999 * rate * (rows.size - 1), (layer, phase)
