"""Whole-layer profiling and the sustained method, on CPU with small shapes (skips without torch)."""

from dataclasses import replace

import pytest

from heterosim.catalog.models import ZOO
from heterosim.cli import main
from heterosim.errors import UserError
from heterosim.plan.compute import layer_profiler as lp
from heterosim.plan.compute.database import OpDatabase
from heterosim.plan.compute.layer_reference import ReferenceLayer, layer_shard
from heterosim.plan.compute.profiler import (
    MAX_INPUT_COPIES,
    SustainedTiming,
    gemm_op,
    input_copies,
    norm_op,
    profile,
)

torch = pytest.importorskip("torch")
FAST = SustainedTiming(warm_s=0.0, window_s=0.002)


@pytest.mark.parametrize("spec", lp.cpu_layers(), ids=lambda s: s.label)
def test_reference_layer_keeps_the_shard_shape_and_trains(spec):
    shard = layer_shard(spec.model, spec.seq, spec.micro_batch, spec.tp, spec.sp)
    layer = ReferenceLayer(torch, shard, "cpu", torch.float32)
    x = layer.input("cpu", torch.float32).requires_grad_(True)
    y = layer.forward(x)
    assert y.shape == (spec.micro_batch, spec.seq // (spec.tp if spec.sp else 1), spec.model.hidden)
    y.sum().backward()
    assert x.grad is not None and all(p.grad is not None for p in layer.parameters())
    # a TP shard holds 1/tp of the heads and of the FFN
    assert layer.w_o.shape[1] == spec.model.heads // spec.tp * spec.model.head_dim


def test_gqa_shard_keeps_at_least_one_kv_head():
    shard = layer_shard(ZOO["llama2-70b"], 4096, 1, 8, True)
    assert (shard.heads, shard.kv_heads, shard.norm_seq) == (8, 1, 512)
    with pytest.raises(ValueError, match="divide by tp"):
        layer_shard(ZOO["llama3-8b"], 4096, 1, 3, False)


def test_profile_layers_writes_one_row_per_layer_and_mode(tmp_path):
    out = tmp_path / "layers.db"
    specs = lp.cpu_layers()[:2]
    written = lp.profile_layers(
        out, specs, modes=("eager",), device="cpu", repeats=2, timing=FAST, log=lambda _: None
    )
    assert written == 2
    db = OpDatabase(out)
    rows = db.layers()
    (run,) = db.runs()
    db.close()
    assert [r.label for r in rows] == [s.label for s in specs]
    assert all(r.fwd_ns > 0 and r.bwd_ns >= 0 and r.mode == "eager" for r in rows)
    assert rows[1].tp == 2 and rows[1].sp and run["method"] == "sustained"


def test_layer_ops_are_the_simulators_op_list():
    spec = lp.standard_layers()[6]  # GPT-3 175B, TP 8, SP
    ops = lp.layer_ops(spec)
    kinds = {op.op_kind for op in ops}
    assert kinds == {"gemm", "attention", "norm", "elementwise"}
    gemms = [op for op in ops if op.op_kind == "gemm"]
    assert len(gemms) == 12  # four GEMMs forward, dgrad and wgrad of each backward
    assert sum(op.flops for op in gemms) == 3 * 2 * 2048 * 12 * 12288**2 // 8 * 2 // 2


def test_bad_layer_inputs_are_user_errors(tmp_path):
    bad = replace(lp.cpu_layers()[0], tp=3)
    with pytest.raises(UserError, match="tp=3"):
        bad.check()
    with pytest.raises(UserError, match="layer-modes"):
        lp.profile_layers(tmp_path / "x.db", [lp.cpu_layers()[0]], modes=("jit",), device="cpu")


def test_profile_command_times_layers_and_their_ops(tmp_path, capsys):
    out = tmp_path / "cmd.db"
    assert (
        main(["profile", "--out", str(out), "--device", "cpu", "--layers", "standard", "--repeats", "1"]) == 0
    )
    db = OpDatabase(out)
    layers, ops, runs = db.layers(), db.measurements(), db.runs()
    db.close()
    assert len(layers) == len(lp.cpu_layers())
    assert len(ops) == len(lp.distinct_layer_ops(lp.cpu_layers()))
    assert [r["method"] for r in runs] == ["sustained", "sustained"]
    assert (
        main(
            [
                "profile",
                "--out",
                str(tmp_path / "y.db"),
                "--device",
                "cpu",
                "--layer-modes",
                "x",
                "--layers",
                "standard",
            ]
        )
        == 2
    )
    assert "layer-modes" in capsys.readouterr().err
    assert not (tmp_path / "y.db").exists()  # refused before any op was timed


def test_sustained_and_burst_are_recorded(tmp_path):
    ops = [gemm_op(32, 32, 32, "fp32"), norm_op(64, 64, "fp32")]
    for method in ("sustained", "burst"):
        assert (
            profile(
                tmp_path / "m.db",
                ops,
                device="cpu",
                repeats=2,
                warmup=1,
                method=method,
                sustained=FAST,
                log=lambda _: None,
            )
            == 2
        )
    db = OpDatabase(tmp_path / "m.db")
    assert [r["method"] for r in db.runs()] == ["sustained", "burst"]
    assert all("(sustained)" in m.citation or "(burst)" in m.citation for m in db.measurements())
    db.close()
    with pytest.raises(UserError, match="--method"):
        profile(tmp_path / "m.db", ops, device="cpu", method="lazy")


def test_input_copies_cover_twice_the_l2():
    small = gemm_op(256, 256, 256, "bf16")  # 393 kB
    assert input_copies(small, 50 * 2**20) == MAX_INPUT_COPIES
    big = gemm_op(8192, 8192, 8192, "bf16")  # 402 MB
    assert input_copies(big, 50 * 2**20) == 1
    mid = gemm_op(2048, 2048, 2048, "bf16")  # 25.2 MB: 4 copies hold 100.7 MB < 2 x 52.4 MB
    assert input_copies(mid, 50 * 2**20) == 5
    assert input_copies(mid, 0) == 1


def test_old_databases_open_and_gain_the_new_tables(tmp_path):
    import sqlite3

    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    conn.executescript(
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
        "CREATE TABLE runs (run_id INTEGER PRIMARY KEY, created TEXT, device TEXT, gpu TEXT, driver TEXT,"
        " torch TEXT, cuda TEXT, repeats INTEGER, l2_flush INTEGER, note TEXT);"
        "CREATE TABLE measurements (id INTEGER PRIMARY KEY, gpu TEXT NOT NULL, op_kind TEXT NOT NULL,"
        " dtype TEXT NOT NULL, pass TEXT NOT NULL, s0 INTEGER NOT NULL, s1 INTEGER NOT NULL,"
        " s2 INTEGER NOT NULL, s3 INTEGER NOT NULL, e0 INTEGER NOT NULL, e1 INTEGER NOT NULL,"
        " flops INTEGER NOT NULL,"
        " bytes_moved INTEGER NOT NULL, time_ns REAL NOT NULL, source TEXT NOT NULL,"
        " citation TEXT NOT NULL DEFAULT '', run_id INTEGER);"
    )
    conn.close()
    db = OpDatabase(path)
    assert db.layers() == [] and db.add_run(method="burst") == 1
    assert db.runs()[0]["method"] == "burst"
    db.close()


def test_a_database_of_another_gpu_is_refused_before_any_op_is_timed(tmp_path, capsys):
    out = tmp_path / "mixed.db"
    db = OpDatabase(out, create=True)
    db.add_run(gpu="H100-SXM", device="NVIDIA H100 80GB HBM3", method="sustained")
    db.close()
    code = main(["profile", "--out", str(out), "--device", "cpu", "--repeats", "1"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "H100-SXM" in err[0] and str(out) in err[0]
    db = OpDatabase(out)
    assert len(db.runs()) == 1 and db.measurements() == []
    db.close()


def test_fp8_layers_are_refused_before_anything_is_timed(tmp_path):
    spec = replace(lp.cpu_layers()[0], dtype="fp8")
    with pytest.raises(UserError, match="Transformer Engine"):
        spec.check()
