"""The profiler databases shipped in plan/compute/data/measured/ and how the compute model uses them."""

from heterosim.plan.compute import layer_profiler as lp
from heterosim.plan.compute.database import OpDatabase, shipped_measured_databases
from heterosim.plan.compute.model import ComputeModel
from heterosim.workload import ops as wo


def _shipped(prefix: str):
    """Rows and runs of the shipped database whose file name starts with ``prefix``."""
    (path,) = [p for p in shipped_measured_databases() if p.name.startswith(prefix)]
    db = OpDatabase(path)
    rows, runs = db.measurements(), db.runs()
    db.close()
    return rows, runs


def _h100_rows():
    return _shipped("h100-sxm-sustained")


def _standard_layer_ops_missing(rows) -> list[tuple[str, str]]:
    """(layer, op) of every compute op of the standard layers that ``rows`` do not hold."""

    def key(o):
        return (o.op_kind, o.dtype, o.shape, o.shape_extra, o.bytes_moved)

    have = {key(m) for m in rows}
    missing = []
    for spec in lp.standard_layers():
        training, parallel = spec.configs()
        ops = wo.layer_forward_ops(spec.model, training, parallel, 0)
        ops += wo.layer_backward_ops(spec.model, training, parallel, 0)
        for op in ops:
            if not op.is_comm and key(op) not in have:
                missing.append((spec.label, op.label))
    return missing


def test_h100_database_is_sustained_and_covers_the_standard_layers():
    rows, runs = _h100_rows()
    assert {r["method"] for r in runs} == {"sustained"}
    assert {r["device"] for r in runs} == {"NVIDIA H100 80GB HBM3"}
    assert {m.gpu for m in rows} == {"H100-SXM"}
    assert _standard_layer_ops_missing(rows) == []


def test_model_times_a_profiled_op_by_its_row_and_publication_tables_stay_below():
    rows, _ = _h100_rows()
    gemm = next(m for m in rows if m.op_kind == "gemm" and m.dtype == "bf16")
    args = (gemm.op_kind, gemm.dtype, gemm.shape, gemm.shape_extra, gemm.flops, gemm.bytes_moved, "H100-SXM")
    assert ComputeModel().time_op(*args) == (max(int(round(gemm.time_ns)), 1), "measured")
    assert ComputeModel(profiled=False).time_op(*args)[1] != "measured"


def test_forced_attention_kernel_does_not_take_profiled_cudnn_rows():
    rows, _ = _h100_rows()
    att = next(m for m in rows if m.op_kind == "attention" and m.pass_ == "fwd")
    args = (att.op_kind, att.dtype, att.shape, att.shape_extra, att.flops, att.bytes_moved, "H100-SXM")
    assert ComputeModel().time_op(*args)[1] == "measured"
    t_triton, prov = ComputeModel(attention_impl="flash-attention-triton").time_op(*args)
    assert prov != "measured" and t_triton != int(round(att.time_ns))


def test_fp8_gemms_are_timed_with_transformer_engines_accumulation_per_pass():
    """fp8 rows come from the run that timed forward GEMMs with fast accumulation (TE's fprop)
    and gradient GEMMs with split accumulation; no fp8 row of the first runs is left."""
    rows, runs = _h100_rows()
    (run,) = [r for r in runs if "fast accumulation" in r["note"]]
    fp8 = [m for m in rows if m.dtype == "fp8"]
    assert {m.pass_ for m in fp8} == {"fwd", "bwd"}
    assert all(f"run {run['run_id']} " in m.citation for m in fp8)
    assert all(f"run {run['run_id']} " not in m.citation for m in rows if m.dtype != "fp8")


def test_h200_database_is_sustained_covers_the_standard_layers_and_is_used():
    rows, runs = _shipped("h200-sxm-sustained")
    assert {r["method"] for r in runs} == {"sustained"} and {r["device"] for r in runs} == {"NVIDIA H200"}
    assert {m.gpu for m in rows} == {"H200-SXM"}
    assert _standard_layer_ops_missing(rows) == []
    gemm = next(m for m in rows if m.op_kind == "gemm" and m.dtype == "fp8")
    args = (gemm.op_kind, gemm.dtype, gemm.shape, gemm.shape_extra, gemm.flops, gemm.bytes_moved, "H200-SXM")
    assert ComputeModel().time_op(*args) == (max(int(round(gemm.time_ns)), 1), "measured")
