"""ParallelConfig's field defaults are the defaults of a file's parallel section (one definition)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import yaml

from heterosim.config.experiment import PARALLEL_DEFAULTS, ParallelConfig, parse_experiment

WORKLOADS = Path(__file__).resolve().parents[2] / "workloads"


def test_a_parallel_section_naming_only_dp_gets_the_dataclass_defaults():
    data = yaml.safe_load((WORKLOADS / "default.yaml").read_text())
    data["parallel"] = {"dp": 16}  # 16 GPUs in topologies/mixed_16gpu.yaml
    data["training"]["global_batch"] = 16
    experiment = parse_experiment(data, "default.yaml", base_dir=WORKLOADS)
    # tp_backward_overlap's default, auto, is resolved for the file's framework (megatron)
    resolved = dataclasses.replace(PARALLEL_DEFAULTS, dp=16, tp_backward_overlap=True)
    assert experiment.parallel == resolved
    assert PARALLEL_DEFAULTS.tp_backward_overlap is None and PARALLEL_DEFAULTS.backward_overlap("megatron")
    assert PARALLEL_DEFAULTS == ParallelConfig()
    assert PARALLEL_DEFAULTS.dp_bucket_bytes == 40 * 10**6  # parallel.dp_bucket: 40MB
