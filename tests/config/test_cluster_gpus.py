"""Accelerators defined in a cluster file (``gpus:``): fields, errors, shadowing, host defaults."""

from __future__ import annotations

import copy

import pytest

from heterosim.catalog.gpus import gpu_spec
from heterosim.config.cluster import parse_cluster
from heterosim.errors import UserError
from heterosim.plan.compute.model import ComputeModel

GPU = {
    "tflops": {"fp16": 71, "bf16": 71, "fp32": 35.6},
    "memory_gb": 24,
    "memory_tbps": 0.936,
    "nvlink_gbps_per_dir": 0,
    "pcie_gen": 4,
}


def _cluster(gpus: dict, gpu: str = "MyGPU", **host) -> dict:
    return {
        "name": "c",
        "gpus": gpus,
        "host_types": {"h": {"gpu": gpu, "gpus": 4, "nics": 1, "nic_speed": "10Gbps", **host}},
        "hosts": [{"type": "h", "count": 2}],
    }


def test_cluster_defined_gpu_is_used_by_name() -> None:
    cluster = parse_cluster(_cluster({"MyGPU": {**GPU, "sm_count": 82}}, gpu="mygpu"), "c.yaml")
    spec = cluster.host(0).spec
    assert spec.name == "MyGPU" and cluster.gpu_type == ("MyGPU",) * 8
    assert spec.peak_flops("fp16") == pytest.approx(71e12)
    assert spec.memory_bytes == 24 * 10**9 and spec.memory_bytes_per_s == pytest.approx(936e9)
    assert spec.sm_count == 82 and spec.vendor == "unknown" and not spec.has_nvlink
    assert cluster.host(0).fabric == "pcie"  # no NVLink -> PCIe host
    assert cluster.gpu_spec("MYGPU") is spec
    assert cluster.gpu_spec("H100") == gpu_spec("H100-SXM")  # the catalogue stays reachable


@pytest.mark.parametrize(
    "entry, key, problem",
    [
        ({**GPU, "tflopz": 3}, "gpus.MyGPU.tflopz", "unknown key"),
        ({k: v for k, v in GPU.items() if k != "tflops"}, "gpus.MyGPU.tflops", "missing required key"),
        ({**GPU, "tflops": {"fp16": 0, "fp32": None}}, "gpus.MyGPU.tflops", "at least one positive"),
        ({**GPU, "tflops": {"fp17": 3}}, "gpus.MyGPU.tflops.fp17", "unknown dtype"),
        ({**GPU, "memory_gb": "lots"}, "gpus.MyGPU.memory_gb", "expected a number"),
        ({**GPU, "memory_mib": 0}, "gpus.MyGPU.memory_mib", ">= 1"),
        ({**GPU, "pcie_gen": 9}, "gpus.MyGPU.pcie_gen", "not tabulated"),
        ({**GPU, "segment": "gaming"}, "gpus.MyGPU.segment", "expected one of"),
    ],
)
def test_bad_gpu_entries_are_one_line_errors(entry: dict, key: str, problem: str) -> None:
    with pytest.raises(UserError) as info:
        parse_cluster(_cluster({"MyGPU": entry}), "c.yaml")
    message = str(info.value)
    assert message.startswith(f"c.yaml: {key}: ") and problem in message and "\n" not in message


def test_unknown_gpu_points_at_gpus_section() -> None:
    with pytest.raises(UserError, match=r"host_types.h.gpu: unknown GPU 'Nope'; define it under gpus:"):
        parse_cluster(_cluster({}, gpu="Nope"), "c.yaml")


def test_shadowing_a_catalogue_gpu_is_reported_not_silent() -> None:
    same = {
        **copy.deepcopy(GPU),
        "tflops": {"fp16": 71, "bf16": 71, "tf32": 35.6, "fp32": 35.6},
        "nvlink_gbps_per_dir": 56.25,
        "nvlink_bridge": True,
    }
    cluster = parse_cluster(_cluster({"RTX-3090": same}, gpu="RTX-3090"), "c.yaml")
    assert cluster.notes == ()  # same numbers as the catalogue: nothing to say
    slower = {**GPU, "tflops": {"fp16": 60, "fp32": 30}}
    cluster = parse_cluster(_cluster({"RTX-3090": slower}, gpu="RTX-3090"), "c.yaml")
    assert cluster.host(0).spec.peak_flops("fp16") == pytest.approx(60e12)
    assert (
        len(cluster.notes) == 1 and "differs from the catalogue's RTX-3090 in peak_tflops" in cluster.notes[0]
    )


def test_bridge_nvlink_defaults_to_pcie_and_rejects_switch() -> None:
    cluster = parse_cluster(_cluster({}, gpu="RTX-3090"), "c.yaml")
    assert cluster.host(0).fabric == "pcie" and cluster.host(0).spec.nvlink_bridge
    with pytest.raises(UserError, match="2-way bridge"):
        parse_cluster(_cluster({}, gpu="RTX-3090", fabric="nvswitch"), "c.yaml")
    assert parse_cluster(_cluster({}, gpu="A100"), "c.yaml").host(0).fabric == "nvswitch"


def test_compute_model_times_cluster_gpus_by_their_own_peaks() -> None:
    cluster = parse_cluster(_cluster({"MyGPU": GPU, "Half": {**GPU, "tflops": {"fp16": 35.5}}}), "c.yaml")
    model = ComputeModel(include_shipped=False, gpus=cluster.gpus)
    m = n = k = 8192
    flops = 2 * m * n * k
    fast, prov = model.time_op("gemm", "fp16", (m, n, k, 1), (), flops, 0, "MyGPU")
    slow, _ = model.time_op("gemm", "fp16", (m, n, k, 1), (), flops, 0, "Half")
    assert prov == "roofline"
    assert fast >= flops / 71e12 * 1e9  # never faster than the peak
    assert slow / fast == pytest.approx(2.0, rel=1e-3)  # same curves, half the peak
    # without sm_count no wave quantization is modelled (sm_count 1), documented in efficiency.py
    assert model.params("MyGPU").sm_count == 1
    with pytest.raises(UserError, match="unknown GPU"):
        ComputeModel(include_shipped=False).time_op("gemm", "fp16", (m, n, k, 1), (), flops, 0, "MyGPU")
