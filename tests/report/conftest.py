"""Output folders of run, compare and sweep with report.html, shared by the report tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from heterosim.cli import main

REPO = Path(__file__).resolve().parents[2]
TINY_A = REPO / "workloads" / "compare" / "tiny_4gpu.yaml"
TINY_B = REPO / "workloads" / "compare" / "tiny_4gpu_400g.yaml"


@pytest.fixture(scope="session")
def report_outputs(tmp_path_factory, native_lib) -> dict[str, Path]:
    """A packet run (it has queues), a compare and a sweep of the tiny 4-GPU experiment, each
    with --report."""
    base = tmp_path_factory.mktemp("report")
    sweep = base / "sweep.yaml"
    sweep.write_text(
        f"name: tiny\nexperiment: {TINY_A}\nfidelity: flow\n"
        "grid: {cluster.host_types.h100.nic_speed: [100Gbps, 400Gbps], simulation.seed: [1, 2]}\n"
    )
    commands = {
        "run": ["run", str(TINY_A), "--fidelity", "packet"],
        "compare": ["compare", str(TINY_A), str(TINY_B)],
        "sweep": ["sweep", str(sweep), "--workers", "1"],
    }
    for kind, command in commands.items():
        assert main([*command, "--out", str(base / kind), "--quiet", "--report"]) == 0
    return {kind: base / kind for kind in commands}
