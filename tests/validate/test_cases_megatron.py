"""Megatron-LM (SC'21) cases: the interleave factor is one Megatron-LM can run, and the pipeline
rows carry Megatron v2's blocking combined p2p calls and scatter/gather."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from heterosim.validate.cases import load_cases

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "validation" / "cases.yaml"


def _builder():
    spec = importlib.util.spec_from_file_location("build_cases", REPO / "validation" / "build_cases.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("layers", "pp", "vpp"),
    [(48, 2, 2), (60, 4, 3), (80, 8, 2), (105, 35, 3), (128, 64, 2), (96, 12, 2), (35, 5, 7)],
)
def test_smallest_interleave_divides_each_stages_layers(layers, pp, vpp):
    assert _builder().smallest_interleave(layers, pp) == vpp


@pytest.mark.parametrize(("layers", "pp"), [(105, 2), (8, 8)])
def test_smallest_interleave_refuses_what_megatron_cannot_split(layers, pp):
    with pytest.raises(ValueError):
        _builder().smallest_interleave(layers, pp)


def test_shipped_sc21_pipeline_cases_split_layers_evenly_and_block():
    cases = [c for c in load_cases(SHIPPED) if c.id.startswith("megatron-sc21-") and "zero3" not in c.id]
    piped = [c for c in cases if c.experiment and c.experiment["parallel"]["pp"] > 1]
    assert len(piped) == 12  # Table 1: 6 rows with pp > 1, Table 2: 6 PTD-P rows
    for case in piped:
        par, layers = case.experiment["parallel"], case.experiment["model"]["layers"]
        assert layers % (par["pp"] * par["vpp"]) == 0, case.id
        assert par["p2p_sync"] == "blocking" and par["p2p_scatter_gather"] is True, case.id
