"""Megatron-LM (SC'21) cases: the interleave factor is one Megatron-LM can run, the pipeline
rows carry Megatron v2's blocking combined p2p calls and scatter/gather, and the Table 1 rows take
micro-batch, DDP implementation and interleaving from the paper's artifact script."""

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


@pytest.mark.parametrize(
    ("layers", "pp", "per_chunk", "vpp"), [(60, 4, 5, 3), (80, 8, 5, 2), (105, 35, 1, 3)]
)
def test_interleave_from_layers_per_virtual_stage(layers, pp, per_chunk, vpp):
    assert _builder().interleave_of(layers, pp, per_chunk) == vpp


def test_interleave_refuses_chunks_that_do_not_divide_a_stage():
    with pytest.raises(ValueError):
        _builder().interleave_of(60, 4, 4)


# Megatron-LM examples/sc21/run_table_1.sh: (micro-batch, data-parallel sync, interleave factor)
SC21_TABLE1_SCRIPT = {
    "1p7b": (16, "overlap", 1),
    "3p6b": (16, "overlap", 1),
    "7p5b": (16, "overlap", 1),
    "18p4b": (8, "overlap", 1),
    "39p1b": (4, "after_backward", 1),
    "76p1b": (2, "after_backward", 3),
    "145p6b": (2, "after_backward", 2),
    "310p1b": (1, "after_backward", 2),
    "529p6b": (1, "after_backward", 3),
    "1008p0b": (1, "after_backward", 1),
}


def test_shipped_sc21_table1_rows_follow_the_artifact_script():
    cases = {c.id: c for c in load_cases(SHIPPED) if c.id.startswith("megatron-sc21-t1-")}
    assert sorted(cases) == sorted(f"megatron-sc21-t1-{n}" for n in SC21_TABLE1_SCRIPT)
    for name, (mbs, sync, vpp) in SC21_TABLE1_SCRIPT.items():
        exp = cases[f"megatron-sc21-t1-{name}"].experiment
        par = exp["parallel"]
        assert (exp["training"]["micro_batch"], par["grad_sync"], par["vpp"]) == (mbs, sync, vpp), name
        assert (par.get("schedule") == "interleaved") == (vpp > 1), name
        # torch DDP's bucket, Megatron's local DDP reduces everything at once after the backward
        assert par.get("dp_bucket") == ("25MiB" if sync == "overlap" else None), name
        assert exp["training"]["global_batch"] % (mbs * par["dp"]) == 0, name
