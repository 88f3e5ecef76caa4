"""The example programs of ns3_modules/*/examples/ compile against the library and run."""

from __future__ import annotations

import subprocess

import pytest

from heterosim.engine import native

pytestmark = pytest.mark.ns3

RUNS = {
    "plan-executor-example.cc": (["--bytes=1000000", "--compute=10000"], "makespan"),
    "incast-example.cc": (["--cc=ns3::Hpcc", "--senders=3", "--bytes=500000"], "PFC pauses"),
}


def examples() -> list:
    return sorted(native.modules_dir().glob("*/examples/*.cc"))


def test_every_example_is_run_here():
    assert sorted(p.name for p in examples()) == sorted(RUNS)


@pytest.mark.parametrize("source", examples(), ids=lambda p: p.name)
def test_example_runs(native_lib, source):
    args, expected = RUNS[source.name]
    result = subprocess.run(
        [str(native.build_example(source)), *args], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert expected in result.stdout
    assert "did not finish" not in result.stdout


def test_a_type_that_is_no_congestion_control_is_refused(native_lib):
    source = native.modules_dir() / "rdma" / "examples" / "incast-example.cc"
    result = subprocess.run(
        [str(native.build_example(source)), "--cc=ns3::SwitchMmu"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 1 and "not a congestion-control TypeId" in result.stderr
