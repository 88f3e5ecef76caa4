"""validation/workstation_shm/measurements.yaml (published nccl-tests runs on GeForce servers
without P2P) and the capacity ledger benchmarks/bench_workstation_shm.py prints beside them."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
WORKSTATIONS = REPO / "topologies" / "workstations"


def bench():
    spec = importlib.util.spec_from_file_location(
        "bench_workstation_shm", REPO / "benchmarks" / "bench_workstation_shm.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


RUNS = yaml.safe_load((REPO / "validation" / "workstation_shm" / "measurements.yaml").read_text())["runs"]


def test_run_ids_are_unique():
    ids = [run["id"] for run in RUNS]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("run", RUNS, ids=[run["id"] for run in RUNS])
def test_every_run_cites_its_thread_and_says_what_was_read(run):
    assert run["source"].startswith("https://github.com/")
    assert run["gpu"].startswith("RTX ")
    assert run["readable"].strip()
    assert run["command"].strip()
    if run["cluster"] is not None:
        assert (WORKSTATIONS / run["cluster"]).is_file()
    if run["busbw_GBps"] is not None:
        assert run["busbw_GBps"], "a mapping of GPU count to bus bandwidth"
        for gpus, busbw in run["busbw_GBps"].items():
            assert isinstance(gpus, int) and 2 <= gpus <= run["gpus"]
            assert 0 < busbw < 64  # below a PCIe Gen5 x16 link (63 GB/s each way)


def test_nccl_1639_is_transcribed_from_its_description():
    """NVIDIA/nccl #1639: '8 GPU max performance: bwbus 28GB/s', '4GPU max performance: bwbus 35GB/s'."""
    (run,) = [run for run in RUNS if run["source"] == "https://github.com/NVIDIA/nccl/issues/1639"]
    assert run["busbw_GBps"] == {8: 28.0, 4: 35.0}
    assert run["cluster"] == "rtx5090_8gpu_2socket.yaml"


def test_ledger_of_the_two_socket_ring_loads_each_socket_like_four_gpus_on_one():
    """Per byte of bus bandwidth B on the RTX 5090 preset (hand count): 8 GPUs, ring 0..7 over two
    sockets: each socket receives 4 streams (written to and read from its DRAM: 8 B) and the
    ring crosses the socket link once each way (B); 4 GPUs on socket 0: 8 B on socket 0's DRAM,
    nothing on socket 1 or the link. Every GPU link carries B each way."""
    loads = bench().ring_loads(WORKSTATIONS / "rtx5090_8gpu_2socket.yaml", 8)
    assert loads["DRAM socket 0"] == (8.0, pytest.approx(307.2))
    assert loads["DRAM socket 1"] == (8.0, pytest.approx(307.2))
    assert loads["socket link 0->1"] == (1.0, pytest.approx(128.0))
    assert loads["socket link 1->0"] == (1.0, pytest.approx(128.0))
    assert loads["PCIe per GPU, each way"][0] == 1.0
    four = bench().ring_loads(WORKSTATIONS / "rtx5090_8gpu_2socket.yaml", 4)
    assert four["DRAM socket 0"][0] == 8.0
    assert four["DRAM socket 1"][0] == 0.0
    assert four["socket link 0->1"][0] == four["socket link 1->0"][0] == 0.0
