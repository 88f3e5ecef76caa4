"""The profiler databases shipped in plan/compute/data/measured/ and how the compute model uses them."""

from heterosim.plan.compute import layer_profiler as lp
from heterosim.plan.compute.database import OpDatabase, shipped_measured_databases
from heterosim.plan.compute.model import ComputeModel
from heterosim.workload import ops as wo

# ops the op lists gained after the H100 profile (timed by the H100 curves fitted to its rows)
ADDED_AFTER_PROFILE = ("rope",)


def _h100_rows():
    (path,) = [p for p in shipped_measured_databases() if p.name.startswith("h100-sxm-sustained")]
    db = OpDatabase(path)
    rows, runs = db.measurements(), db.runs()
    db.close()
    return rows, runs


def test_h100_database_is_sustained_and_covers_the_standard_layers():
    rows, runs = _h100_rows()
    assert {r["method"] for r in runs} == {"sustained"}
    assert {r["device"] for r in runs} == {"NVIDIA H100 80GB HBM3"}
    assert {m.gpu for m in rows} == {"H100-SXM"}
    have = {(m.op_kind, m.dtype, m.shape, m.shape_extra, m.bytes_moved) for m in rows}
    for spec in lp.standard_layers():
        training, parallel = spec.configs()
        ops = wo.layer_forward_ops(spec.model, training, parallel, 0)
        ops += wo.layer_backward_ops(spec.model, training, parallel, 0)
        for op in ops:
            if op.is_comm or op.label.startswith(ADDED_AFTER_PROFILE):
                continue
            assert (op.op_kind, op.dtype, op.shape, op.shape_extra, op.bytes_moved) in have, (
                spec.label,
                op.label,
            )


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
    (path,) = [p for p in shipped_measured_databases() if p.name.startswith("h200-sxm-sustained")]
    db = OpDatabase(path)
    rows, runs = db.measurements(), db.runs()
    db.close()
    assert {r["method"] for r in runs} == {"sustained"} and {r["device"] for r in runs} == {"NVIDIA H200"}
    assert {m.gpu for m in rows} == {"H200-SXM"}
    have = {(m.op_kind, m.dtype, m.shape, m.shape_extra, m.bytes_moved) for m in rows}
    for spec in lp.standard_layers():
        training, parallel = spec.configs()
        ops = wo.layer_forward_ops(spec.model, training, parallel, 0)
        ops += wo.layer_backward_ops(spec.model, training, parallel, 0)
        assert all(
            (o.op_kind, o.dtype, o.shape, o.shape_extra, o.bytes_moved) in have for o in ops if not o.is_comm
        )
    gemm = next(m for m in rows if m.op_kind == "gemm" and m.dtype == "fp8")
    args = (gemm.op_kind, gemm.dtype, gemm.shape, gemm.shape_extra, gemm.flops, gemm.bytes_moved, "H200-SXM")
    assert ComputeModel().time_op(*args) == (max(int(round(gemm.time_ns)), 1), "measured")
