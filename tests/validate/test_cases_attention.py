"""Attention implementation of the shipped cases: sources older than FlashAttention run the
unfused (Megatron-LM v1-v2) attention, newer Megatron-Core ones flash, each stated as an
assumption with its reason."""

from __future__ import annotations

from pathlib import Path

from heterosim.validate.cases import load_cases
from heterosim.validate.predict import case_experiment

SHIPPED = Path(__file__).resolve().parents[2] / "validation" / "cases.yaml"
PRE_FLASH = (
    "megatron-readme2020",
    "megatron-sc21-t1",
    "megatron-sc21-t2",  # 2020-2021
    "megatron-mlsys23",  # 2022
    "amp-het",
)  # DeepSpeed + Megatron-LM v1.1.5
FLASH = ("nemo2407", "mbridge", "torchtitan")  # 2024-2026: Megatron-Core + TE, PyTorch SDPA


def test_pre_flashattention_sources_run_unfused_attention() -> None:
    seen = set()
    for case in load_cases(SHIPPED):
        if case.experiment is None:
            continue
        expected = "unfused" if case.group in PRE_FLASH else "flash"
        assert case.group in PRE_FLASH + FLASH, case.group
        assert case_experiment(case).training.attention == expected, case.id
        assumed = case.assumed["training.attention"]
        assert assumed["value"] == expected and assumed["why"], case.id
        seen.add(case.group)
    assert seen == set(PRE_FLASH + FLASH)
