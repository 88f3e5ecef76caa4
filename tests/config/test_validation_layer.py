"""One validation layer: every number finite and in range, YAML bounded, one-line errors."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest
import yaml

from heterosim.cli import main
from heterosim.config.experiment import load_experiment
from heterosim.config.fields import (
    MAX_YAML_DEPTH,
    MAX_YAML_NODES,
    integer_value,
    load_yaml_text,
    number_value,
    positive_int,
    rate_value,
    read_yaml_mapping,
    size_value,
    time_value,
)
from heterosim.config.limits import (
    check_sample_budget,
    check_sweep_size,
    collective_flow_floor,
    experiment_task_floor,
    framework_time_floor_ns,
    sampled_ports_floor,
    simulated_time_floor_ns,
)
from heterosim.errors import UserError
from heterosim.units import MAX_SIZE_BYTES, parse_rate, parse_size, parse_time_ns

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "tests" / "data" / "tiny_experiment.yaml"

BOMB = (
    "\n".join(
        [f"l0: &l0 [{', '.join(['x'] * 9)}]"]
        + [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, 9)]
    )
    + "\n"
)


@pytest.mark.parametrize(
    "text", [".inf", "1e400", float("inf"), float("nan"), "1e400GiB", "2PiB", "-1KiB", 10**400]
)
def test_sizes_are_finite_and_bounded(text):
    with pytest.raises(ValueError):
        parse_size(text)


def test_size_bounds_and_integers():
    assert parse_size("1024TiB") == MAX_SIZE_BYTES and parse_size("4KiB") == 4096
    with pytest.raises(ValueError, match="must not be negative"):
        parse_size("-1KiB")


@pytest.mark.parametrize("text", ["1e-30bps", "1e400Gbps", "0Gbps", "-5Gbps", "2000Tbps", "1bps"])
def test_rates_outside_physical_range(text):
    with pytest.raises(ValueError):
        parse_rate(text)


@pytest.mark.parametrize("text", ["1e30s", "2d", "-1ms", "1e400ns", "nanms"])
def test_times_outside_range(text):
    with pytest.raises(ValueError):
        parse_time_ns(text)


def test_helpers_give_one_line_errors_naming_file_and_key():
    with pytest.raises(UserError, match=r"^f.yaml: a.b: expected an integer <= 10, got 11$"):
        integer_value(11, "a.b", "f.yaml", maximum=10)
    with pytest.raises(UserError, match="expected an integer, got 1.5"):
        positive_int(1.5, "k")
    with pytest.raises(UserError, match="expected a finite number"):
        number_value(float("nan"), "k")
    with pytest.raises(UserError, match="expected a size <= 1024 bytes"):
        size_value("2KiB", "k", maximum=1024)
    with pytest.raises(UserError, match="expected a rate >= 1e\\+09 bit/s"):
        rate_value("1Mbps", "k", minimum=1e9)
    with pytest.raises(UserError, match="expected a time <= 10 ns"):
        time_value("1us", "k", maximum=10)
    assert positive_int(3, "k") == 3 and size_value("1KiB", "k") == 1024


def test_alias_bomb_is_refused_fast():
    started = time.perf_counter()
    with pytest.raises(UserError, match="expands to more than"):
        load_yaml_text(BOMB, "bomb.yaml")
    assert time.perf_counter() - started < 5  # 9^9 values never built
    assert yaml.safe_load("a: &a [1, 2]\nb: [*a, *a]") == load_yaml_text("a: &a [1, 2]\nb: [*a, *a]", "s")


def test_a_huge_file_is_refused_before_it_is_built(tmp_path):
    """Two million values (17 MB) stop in the parser's event pass, with a message about the
    file's size, not about aliases it does not have."""
    path = tmp_path / "huge.yaml"
    path.write_text("gpus: [" + ", ".join(str(i) for i in range(2 * MAX_YAML_NODES)) + "]\n")
    started = time.perf_counter()
    with pytest.raises(UserError) as raised:
        read_yaml_mapping(path)
    assert time.perf_counter() - started < 20
    assert str(raised.value) == (
        f"{path}: invalid YAML: holds more than {MAX_YAML_NODES:,} values; "
        "a configuration file this large is not expected"
    )


@pytest.mark.parametrize("text", ["a: " + "[" * 5000 + "]" * 5000, "&a [*a]", "a: &x {b: *x}"])
def test_deep_or_cyclic_yaml_is_one_error(text):
    with pytest.raises(UserError, match="invalid YAML"):
        load_yaml_text(text, "x.yaml")
    assert load_yaml_text("a: " + "[" * (MAX_YAML_DEPTH - 2) + "]" * (MAX_YAML_DEPTH - 2), "s")


def test_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "experiment.yaml"
    os.mkfifo(fifo)
    with pytest.raises(UserError, match="not a regular file"):
        read_yaml_mapping(fifo)


def _err(capsys) -> list[str]:
    return capsys.readouterr().err.strip().splitlines()


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (
            ["collective", "--cluster", "topologies/two_host_h100.yaml", "--size", "-1KiB"],
            "must not be negative",
        ),
        (["collective", "--cluster", "topologies/two_host_h100.yaml", "--ranks", "-1,0"], "ranks are >= 0"),
        (["collective", "--cluster", "topologies/two_host_h100.yaml", "--ranks", "0"], "at least 2 ranks"),
        (["collective", "--cluster", "topologies/two_host_h100.yaml", "--channels", "100000"], "<= 64"),
        (["collective", "--cluster", "topologies/two_host_h100.yaml", "--size", "1..1e18"], "1PiB"),
        (["collective", "--cluster", "topologies/two_host_h100.yaml", "--size", "1..2TiB"], "1TiB"),
        (["collective", "--cluster", "topologies/two_host_h100.yaml", "--seed", "4294967296"], "--seed"),
        (["run", str(TINY), "--fidelity"], "expected one argument"),
        (["run", str(TINY), "--until", "1e400s"], "finite"),
        (["run", str(TINY), "--bogus"], "unrecognized arguments"),
        (["run", str(TINY), "--out", ""], "non-empty value"),
        (["run", str(TINY), "--set", "training.global_batch=1000000000000"], "<= 10000000"),
        (["run", str(TINY), "--set", "model.layers=1000000"], "<= 10000"),
        (["run", str(TINY), "--set", "model.hidden=1073741824"], "model.hidden"),
        (["run", str(TINY), "--set", "simulation.seed=4294967296"], "simulation.seed"),
        (["run", str(TINY), "--set", "parallel.dp_bucket=0"], "dp_bucket"),
        (["run", str(TINY), "--set", "simulation.sample_interval=1ns"], "at least 1us"),
        (["run", str(TINY), "--set", "cluster.host_types.h100.nic_speed=1e-30bps"], "nic_speed"),
    ],
)
def test_cli_errors_are_one_line_exit_2(monkeypatch, capsys, argv, fragment):
    monkeypatch.chdir(REPO)
    with pytest.raises(SystemExit) as raised:
        raise SystemExit(main(argv))
    err = _err(capsys)
    assert raised.value.code == 2 and len(err) == 1, err
    assert fragment in err[0] and "Traceback" not in err[0]


def test_budget_names_the_term_that_is_too_large(monkeypatch, capsys, tmp_path):
    monkeypatch.chdir(REPO)
    code = main(
        [
            "run",
            str(TINY),
            "--out",
            str(tmp_path / "o"),
            "--set",
            "training.global_batch=2000000",
            "--set",
            "model.layers=4000",
            "--set",
            "parallel.partition=uniform",
        ]
    )
    err = _err(capsys)
    assert code == 2 and len(err) == 1, err
    assert "training.global_batch x model.layers" in err[0]
    assert "1e+06 micro-batches per replica x 2000 layers per rank" in err[0]
    assert "at most 2,147,483,647 can be simulated" in err[0]
    assert not (tmp_path / "o").exists()
    code = main(
        [
            "run",
            str(TINY),
            "--out",
            str(tmp_path / "o"),
            "--max-memory",
            "64MiB",
            "--set",
            "training.global_batch=4096",
        ]
    )
    err = _err(capsys)
    assert code == 2 and "--max-memory is 64MiB" in err[0], err


def test_collective_flow_floor_counts_ring_steps():
    # all-reduce over 4 ranks of 64 MiB: 2*(4-1) steps x 4 ranks x ceil(64MiB / (4 x 4MiB)) chunks
    assert collective_flow_floor("allreduce", 64 << 20, 4) == 6 * 4 * 4
    assert collective_flow_floor("allgather", 1, 8) == 7 * 8
    assert collective_flow_floor("allreduce", 1 << 20, 1) == 0
    # coarser granularities: every ring step once; one flow per connection (n - 1 at least)
    assert collective_flow_floor("allreduce", 64 << 20, 4, "step") == 6 * 4
    assert collective_flow_floor("allreduce", 64 << 20, 4, "connection") == 3


def test_budget_floor_follows_the_collective_granularity():
    # Llama 3 405B on 16,384 GPUs (about 108 M tasks at connection granularity): chunk's ring
    # steps x 4 MiB chunks are a floor above that; connection's floor stays below it
    path = REPO / "workloads/examples/llama3_405b_16k.yaml"
    connection, _, _ = experiment_task_floor(load_experiment(path))
    chunk, key, _ = experiment_task_floor(load_experiment(path, ["simulation.collective_granularity=chunk"]))
    assert connection < 108e6 < chunk and key == "cluster"


def test_sweep_grid_limit_and_names(tmp_path, capsys):
    with pytest.raises(UserError, match="24,000 variants"):
        check_sweep_size("s.yaml", [200, 2, 3, 4, 5], None)
    check_sweep_size("s.yaml", [200, 2, 3, 4, 5], 30_000)
    for name in ("../../../x", "/tmp/abs", "a/b", ".."):
        path = tmp_path / "s.yaml"
        path.write_text(
            yaml.safe_dump({"name": name, "experiment": str(TINY), "grid": {"simulation.seed": [1]}})
        )
        assert main(["sweep", str(path), "--out", str(tmp_path / "o")]) == 2
        err = _err(capsys)
        assert len(err) == 1 and "name: expected a plain folder name" in err[0]


# A model large enough that one iteration certainly takes 35 ms of GPU time on the tiny cluster.
BIG = ["model.hidden=8192", "model.ffn=32768", "model.heads=64", "training.global_batch=64"]


def _set(*overrides: str) -> list[str]:
    return [arg for o in overrides for arg in ("--set", o)]


def test_simulated_time_floor_is_the_weight_gemms_at_peak(native_lib):
    from heterosim.catalog.gpus import gpu_spec
    from heterosim.simulate import run_experiment

    experiment = load_experiment(TINY)
    # gpt-tiny: h 512, MHA (kv_dim 512), ffn 2048 (2 GEMMs), 4 layers, vocab 8192; 8 x 512 tokens
    h, ffn, layers, vocab, tokens = 512, 2048, 4, 8192, 8 * 512
    flops = 6 * tokens * (layers * (2 * h * h + 2 * h * h + 2 * h * ffn) + h * vocab)
    peak = sum(
        8 * max(v or 0 for v in gpu_spec(g).peak_tflops.values()) * 1e12
        for g in ("H100-SXM", "A100-80GB-SXM")
    )
    assert simulated_time_floor_ns(experiment) == pytest.approx(flops / peak * 1e9, rel=1e-9)
    # a floor: the simulated iteration takes longer
    assert simulated_time_floor_ns(experiment) < run_experiment(experiment).engine.makespan_ns
    assert sampled_ports_floor(experiment) == 0  # flow fidelity records only links that changed
    packet = load_experiment(TINY, ["simulation.fidelity=packet"])
    assert sampled_ports_floor(packet) == 2 * (8 + 4)  # both ends of each NIC's access link


def test_run_sample_interval_is_bounded_before_the_run(monkeypatch, capsys, tmp_path):
    monkeypatch.chdir(REPO)
    out = tmp_path / "o"
    # 1000 iterations of >= 35 ms at 1us: more samples per series than the netbench limit
    code = main(
        [
            "run",
            str(TINY),
            "--out",
            str(out),
            *_set(*BIG, "simulation.sample_interval=1us", "simulation.iterations=1000"),
        ]
    )
    err = _err(capsys)
    assert code == 2 and len(err) == 1, err
    assert "tiny_experiment.yaml: simulation.sample_interval 1us: at least 3.5" in err[0]
    assert "more than 10,000,000" in err[0] and not out.exists()
    # 100 iterations at packet level: 3.5 M samples x 24 sampled ports do not fit 1 GiB
    code = main(
        ["run", str(TINY), "--out", str(out), "--max-memory", "1GiB"]
        + _set(
            *BIG, "simulation.sample_interval=1us", "simulation.iterations=100", "simulation.fidelity=packet"
        )
    )
    err = _err(capsys)
    assert code == 2 and len(err) == 1, err
    assert "simulation.sample_interval 1us" in err[0] and "x 24 sampled ports" in err[0]
    assert "--max-memory is 1GiB" in err[0] and not out.exists()


def test_run_sample_warning_and_until_cap():
    many = load_experiment(TINY, [*BIG, "simulation.sample_interval=1us", "simulation.iterations=100"])
    warned = [w for w in many.warnings if "simulation.sample_interval" in w]
    assert len(warned) == 1 and "records at least 3.5" in warned[0] and "more than 1,000,000" in warned[0]
    assert "\n" not in warned[0]
    assert not [w for w in load_experiment(TINY, BIG).warnings if "sample_interval" in w]  # 10us default
    thousand = load_experiment(TINY, [*BIG, "simulation.sample_interval=1us", "simulation.iterations=1000"])
    with pytest.raises(UserError, match="more than 10,000,000"):
        check_sample_budget(thousand)
    check_sample_budget(thousand, stop_ns=1_000_000_000)  # --until 1s: at most 1 M samples
    check_sample_budget(
        load_experiment(TINY, [*BIG, "simulation.sample_interval=0s", "simulation.iterations=1000"])
    )


@pytest.mark.parametrize(
    "override, key",
    [
        ("framework.host_op_overhead=2s", "framework.host_op_overhead"),
        ("framework.collective_overhead=3600s", "framework.collective_overhead"),
        ("framework.host_op_overhead={H100: 1001ms, '*': 1us}", "framework.host_op_overhead.H100"),
    ],
)
def test_framework_overheads_are_at_most_one_second_per_op(override, key):
    with pytest.raises(UserError) as info:
        load_experiment(TINY, [override])
    text = str(info.value)
    assert text.startswith(f"{TINY}: {key}: expected at most 1s per op") and "\n" not in text
    with pytest.raises(UserError, match="framework.host_op_overhead: time must not be negative"):
        load_experiment(TINY, ["framework.host_op_overhead=-1us"])
    load_experiment(TINY, ["framework.host_op_overhead=1s", "framework.collective_overhead=1s"])


def test_framework_overheads_raise_the_simulated_time_floor():
    # tiny: 8 sequences / (micro-batch 1 x dp 2) = 4 micro-batches, 4 layers / pp 2 = 2 per rank
    host = load_experiment(TINY, ["framework.host_op_overhead=1ms"])
    assert framework_time_floor_ns(host) == 4 * 2 * 2 * 1e6  # a forward and a backward op each
    calls = load_experiment(TINY, ["framework.collective_overhead=1ms"])
    assert framework_time_floor_ns(calls) == 4 * 2 * 4 * 1e6  # tp 4: four collective calls each
    assert simulated_time_floor_ns(calls) == 32e6 > simulated_time_floor_ns(load_experiment(TINY))
    # the H100 host alone pays it: the A100 ranks bound the run by nothing
    mixed = load_experiment(TINY, ["framework.host_op_overhead={H100: 1ms}"])
    assert framework_time_floor_ns(mixed) == 0


@pytest.mark.ns3
def test_a_plan_of_hours_of_host_overheads_is_refused_before_the_engine(monkeypatch, capsys, tmp_path):
    """1 s per op: the configuration's floor (2 ops per layer, 16 s) allows the default 10us
    samples; the built plan's busiest stream (every op, 440 s) does not."""
    from heterosim.plan.budget import plan_time_floor_ns
    from heterosim.simulate import run_experiment
    from heterosim.simulate.experiment import prepare_run

    monkeypatch.chdir(REPO)
    out = tmp_path / "o"
    argv = ["run", str(TINY), "--out", str(out), "--quiet", "--max-memory", "2GiB"]
    assert main([*argv, *_set("framework.host_op_overhead=1s")]) == 2
    err = [line for line in _err(capsys) if not line.startswith(("heterosim: warning", "heterosim: note"))]
    assert len(err) == 1 and re.search(
        r"simulation.sample_interval 10us: at least 4\.\d+e\+07 samples", err[0]
    ), err
    assert "busiest GPU's compute stream" in err[0] and not out.exists()
    # the plan's floor is a floor: the run it refuses takes longer (10 ms per op here)
    experiment = load_experiment(TINY, ["framework.host_op_overhead=10ms"])
    floor_ns = plan_time_floor_ns(prepare_run(experiment).tables.plan)
    assert 0.9 * 4.4e9 < floor_ns <= run_experiment(experiment).engine.makespan_ns


@pytest.mark.ns3
def test_max_memory_holds_for_a_long_simulated_run(tmp_path):
    """48 s simulated (100 ms of host time per op), 4.8 M progress samples every 10 us: the run,
    its report and trace.json stay under a 2 GiB address-space limit (the fuzz harness's)."""
    import resource
    import subprocess
    import sys

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))

    out = tmp_path / "o"
    command = [sys.executable, "-m", "heterosim.cli", "run", str(TINY), "--out", str(out), "--quiet"]
    command += ["--max-memory", "2GiB", "--no-plots", *_set("framework.host_op_overhead=100ms")]
    env = dict(os.environ, PYTHONPATH=str(REPO))
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, preexec_fn=limit)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (out / "trace.json").stat().st_size < 100 << 20  # counters only where they change


def test_several_jobs_sample_interval_is_bounded_too(monkeypatch, capsys, tmp_path):
    """A jobs experiment runs at least until its last job's start plus that job's own floor."""
    data = yaml.safe_load((REPO / "workloads/examples/two_jobs_h4.yaml").read_text())
    data["cluster"] = str(REPO / "topologies/h4_32gpu.yaml")
    data["jobs"][1]["start"] = "20s"
    data["simulation"]["sample_interval"] = "1us"
    path = tmp_path / "jobs.yaml"
    path.write_text(yaml.safe_dump(data))
    out = tmp_path / "o"
    assert main(["run", str(path), "--out", str(out), "--quiet"]) == 2
    err = _err(capsys)
    assert len(err) == 1 and "jobs.yaml: simulation.sample_interval 1us: at least 2e+07 samples" in err[0], (
        err
    )
    assert not out.exists()


def test_plan_budget_counts_one_replica_when_folded(monkeypatch):
    """``simulation.replicas: fold`` keeps one replica's ranks and turns each data-parallel
    collective into a start and an end marker per rank: the published 12,288-GPU run fits."""
    from heterosim.config import limits
    from heterosim.plan.budget import check_plan_budget, estimate_plan_tasks

    monkeypatch.setattr(limits, "_max_memory", None)  # another test's --max-memory

    path = REPO / "workloads/examples/megascale_175b_12k.yaml"
    full = load_experiment(path, [])
    folded = load_experiment(path, ["simulation.replicas=fold"])
    every, one = estimate_plan_tasks(full), estimate_plan_tasks(folded)
    dp = full.parallel.dp
    assert one["compute"] == pytest.approx(every["compute"] / dp)
    assert one["tensor_parallel"] == pytest.approx(every["tensor_parallel"] / dp)
    ranks = full.cluster.world_size // dp
    assert one["data_parallel"] % (2 * ranks) == 0 and one["data_parallel"] < every["data_parallel"] / dp
    check_plan_budget(folded)  # about 1.2 M tasks: no refusal
