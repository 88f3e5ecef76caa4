"""GPU catalogue entries: T4, the two V100 memory variants, NCCL generation mapping, errors."""

from __future__ import annotations

import pytest

from heterosim.catalog.gpus import canonical_gpu_name, gpu_spec, known_gpu_names
from heterosim.config.cluster import parse_cluster
from heterosim.errors import UserError
from heterosim.plan.collectives.commview import nccl_generation
from heterosim.plan.compute.efficiency import default_params


def test_t4_datasheet_values() -> None:
    t4 = gpu_spec("T4")
    assert t4.name == "T4-16GB-PCIe" and t4.generation == "turing"
    assert t4.peak_flops("fp16") == pytest.approx(65e12)
    assert t4.peak_flops("fp32") == pytest.approx(8.1e12)
    assert t4.memory_bytes == 15360 * 2**20 and t4.memory_bytes_per_s == pytest.approx(320e9)
    assert not t4.has_nvlink and t4.pcie_gen == 3
    with pytest.raises(UserError, match="no bf16 peak"):
        t4.peak_flops("bf16")
    assert set(t4.sources) >= {"tflops.fp16", "tflops.fp32", "memory_gb", "memory_tbps"}
    assert default_params("T4-16GB-PCIe").sm_count == 40


def test_v100_memory_variants_are_separate_entries() -> None:
    small, big = gpu_spec("V100-SXM2-16GB"), gpu_spec("V100-SXM2-32GB")
    assert small.name == "V100-SXM2-16GB" and canonical_gpu_name("v100-16gb-sxm2") == small.name
    assert small.memory_bytes == 16160 * 2**20 and big.memory_bytes == 32502 * 2**20
    assert small.peak_tflops == big.peak_tflops
    assert small.nvlink_bytes_per_s == big.nvlink_bytes_per_s == pytest.approx(150e9)
    assert canonical_gpu_name("V100") == big.name


def test_turing_takes_nccls_volta_tables() -> None:
    assert nccl_generation("turing") == "volta"


def test_t4_host_defaults_to_pcie_and_rejects_nvswitch() -> None:
    host = {"gpu": "T4-16GB-PCIe", "gpus": 4, "nics": 1, "nic_speed": "50Gbps"}
    cluster = parse_cluster({"host_types": {"g4": host}, "hosts": [{"type": "g4"}]}, "c.yaml")
    assert cluster.host(0).fabric == "pcie"
    with pytest.raises(UserError, match="has no NVLink"):
        parse_cluster(
            {"host_types": {"g4": {**host, "fabric": "nvswitch"}}, "hosts": [{"type": "g4"}]}, "c.yaml"
        )


def test_unknown_gpu_lists_the_new_entries() -> None:
    assert {"T4-16GB-PCIe", "V100-SXM2-16GB"} <= set(known_gpu_names())
    with pytest.raises(UserError, match="T4-16GB-PCIe"):
        gpu_spec("T5")


@pytest.mark.parametrize(
    "name, reported_mib",
    [("H100-SXM", 81559), ("A100-80GB-SXM", 81920), ("A100-40GB-SXM", 40960), ("L40S", 46068)],
)
def test_capacity_is_the_driver_reported_total(name: str, reported_mib: int) -> None:
    """nvidia-smi memory.total (cited in gpus.yaml): an "80 GB" HBM part holds about 80 GiB, not
    80e9 B; the datasheet figure would under-state every capacity by 7 %."""
    spec = gpu_spec(name)
    assert spec.memory_bytes == reported_mib * 2**20
    assert "nvidia-smi" in spec.sources["memory_mib"]


def test_without_a_reported_total_the_datasheet_gb_is_the_capacity() -> None:
    assert gpu_spec("H200-SXM").memory_bytes == 141 * 10**9


def test_cluster_gpu_may_give_the_reported_total() -> None:
    entry = {"tflops": {"fp16": 71}, "memory_gb": 24, "memory_mib": 24564, "memory_tbps": 1.0}
    cluster = parse_cluster(
        {
            "name": "c",
            "gpus": {"Card": entry},
            "host_types": {"h": {"gpu": "Card", "gpus": 2, "nics": 1, "nic_speed": "10Gbps"}},
            "hosts": [{"type": "h", "count": 1}],
        },
        "c.yaml",
    )
    assert cluster.gpu_spec("Card").memory_bytes == 24564 * 2**20
