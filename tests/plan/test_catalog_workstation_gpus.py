"""Cloud, workstation and consumer GPUs in the catalogue: datasheet numbers, sources, curves."""

from __future__ import annotations

from importlib import resources

import pytest
import yaml

from heterosim.catalog.gpus import GPU_FIELDS, gpu_spec, known_gpu_names
from heterosim.plan.compute.efficiency import default_params
from heterosim.plan.compute.model import ComputeModel

NEW = (
    "A10G",
    "L4",
    "L40",
    "A40",
    "RTX-A6000",
    "RTX-3090",
    "RTX-4090",
    "Titan-RTX",
    "RTX-2080-Ti",
    "P100-SXM2",
    "P100-PCIe",
    "V100-PCIe-16GB",
    "MI250X",
    "T4-16GB-PCIe",
)
NUMBER_FIELDS = ("tflops", "memory_gb", "memory_tbps", "nvlink_gbps_per_dir", "pcie_gen")


def _raw() -> dict:
    return yaml.safe_load(resources.files("heterosim.catalog").joinpath("gpus.yaml").read_text())


def test_issue_list_is_covered() -> None:
    assert set(NEW) <= set(known_gpu_names())


@pytest.mark.parametrize("name", sorted(_raw()["gpus"]))
def test_every_catalogue_number_has_a_source(name: str) -> None:
    entry = _raw()["gpus"][name]
    assert set(entry) <= set(GPU_FIELDS)
    sources = entry["sources"]
    for field in NUMBER_FIELDS:
        if field == "tflops":
            given = [k for k, v in entry["tflops"].items() if v]
            assert "tflops" in sources or all(f"tflops.{k}" in sources for k in given), name
        else:
            assert field in sources and sources[field].strip(), (name, field)
    if "memory_mib" in entry:
        assert sources.get("memory_mib", "").strip(), name


@pytest.mark.parametrize(
    "name, fp16, fp32, memory_gb, memory_tbps",
    [
        ("RTX-3090", 71, 35.6, 24, 0.936),  # GA102 whitepaper appendix A
        ("RTX-4090", 165.2, 82.6, 24, 1.008),  # Ada whitepaper appendix A
        ("RTX-2080-Ti", 53.8, 13.4, 11, 0.616),  # Turing whitepaper table 1 (reference board)
        ("Titan-RTX", 130.5, 16.3, 24, 0.672),
        ("RTX-A6000", 154.8, 38.7, 48, 0.768),
        ("A40", 149.7, 37.4, 48, 0.696),
        ("L4", 121, 30.3, 24, 0.3),
        ("L40", 181, 90.5, 48, 0.864),
        ("A10G", 70, 35, 24, 0.6),
        ("P100-PCIe", 18.7, 9.3, 16, 0.732),
        ("V100-PCIe-16GB", 112, 14, 16, 0.9),
        ("MI250X", 191.5, 47.85, 64, 1.6),  # one GCD of the 383 TF / 128 GB module
    ],
)
def test_datasheet_values(name: str, fp16: float, fp32: float, memory_gb: int, memory_tbps: float) -> None:
    spec = gpu_spec(name)
    assert spec.peak_flops("fp16") == pytest.approx(fp16 * 1e12)
    assert spec.peak_flops("fp32") == pytest.approx(fp32 * 1e12)
    entry = _raw()["gpus"][spec.name]
    assert entry["memory_gb"] == memory_gb
    reported = entry.get("memory_mib")  # the driver-reported total, when the catalogue has it
    assert spec.memory_bytes == (memory_gb * 10**9 if reported is None else reported * 2**20)
    assert spec.memory_bytes_per_s == pytest.approx(memory_tbps * 1e12)


def test_geforce_tensor_peaks_are_the_fp32_accumulate_rates() -> None:
    """GA102/AD102/TU102 whitepapers: GeForce parts run fp16 x fp16 + fp32 at half the
    fp16-accumulate rate; the catalogue's fp16/bf16 are the fp32-accumulate numbers training uses,
    and the source quotes both."""
    consumer = [n for n in known_gpu_names() if gpu_spec(n).segment == "consumer"]
    assert {"RTX-3090", "RTX-4090", "RTX-2080-Ti", "A10G"} <= set(consumer)
    for name in ("RTX-3090", "RTX-4090", "RTX-2080-Ti"):
        source = gpu_spec(name).sources["tflops"]
        assert "FP32 Accumulate" in source and "FP16 accumulate" in source
    # half the professional sibling on the same die: RTX 3090 (82 SMs) vs RTX A6000 (84 SMs)
    ratio = gpu_spec("RTX-3090").peak_flops("fp16") / gpu_spec("RTX-A6000").peak_flops("fp16")
    assert ratio == pytest.approx(0.5 * 82 / 84 * 1695 / 1800, rel=0.03)


@pytest.mark.parametrize(
    "name, sm",
    [
        ("RTX-3090", 82),
        ("RTX-4090", 128),
        ("RTX-2080-Ti", 68),
        ("Titan-RTX", 72),
        ("A40", 84),
        ("MI250X", 110),
        ("P100-PCIe", 56),
        ("L4", 58),
    ],
)
def test_curves_use_each_gpus_own_sm_count(name: str, sm: int) -> None:
    assert default_params(name).sm_count == sm


def test_wave_quantization_follows_the_sm_count() -> None:
    """A GEMM of exactly 68 output tiles fills one wave on the RTX 2080 Ti (68 SMs) but leaves
    14 of 82 SMs idle on the RTX 3090: per peak FLOP the 3090 is 68/82 as efficient."""
    model = ComputeModel(include_shipped=False)
    m, n, k = 256 * 68, 128, 4096
    flops = 2 * m * n * k
    times = {
        g: model.time_op("gemm", "fp16", (m, n, k, 1), (), flops, 0, g)[0]
        for g in ("RTX-2080-Ti", "RTX-3090")
    }
    launch = default_params("RTX-3090").launch_overhead_ns
    eff = {g: flops / ((times[g] - launch) * 1e-9) / gpu_spec(g).peak_flops("fp16") for g in times}
    assert eff["RTX-3090"] / eff["RTX-2080-Ti"] == pytest.approx(68 / 82, rel=0.02)


def test_mixed_precision_gemm_never_beats_the_fp32_accumulate_peak() -> None:
    model = ComputeModel(include_shipped=False)
    m = n = k = 16384
    flops = 2 * m * n * k
    t, _ = model.time_op("gemm", "fp16", (m, n, k, 1), (), flops, 0, "RTX-4090")
    assert flops / (t * 1e-9) <= 165.2e12
    assert flops / (t * 1e-9) >= 0.5 * 165.2e12  # and not some unrelated datacenter curve
