"""SimAI/AICB workload files: strict parsing and the experiment read from them."""

from __future__ import annotations

from pathlib import Path

import pytest

from heterosim.config.experiment import parse_experiment
from heterosim.errors import UserError
from heterosim.workload.aicb import aicb_experiment, read_aicb

AICB = Path(__file__).resolve().parents[1] / "data" / "aicb_interop"
MICRO = AICB / "microAllReduce.txt"
ANALYTICAL = AICB / "workload_analytical.txt"
HEADER = (
    "HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 8 ep: 1 pp: 1 vpp: 8 ga: 1 "
    "all_gpus: 8 checkpoints: 0 checkpoint_initiates: 0"
)
LINE = "embedding_layer     -1 556000  ALLREDUCE   16777216      1       NONE 0        1      NONE   0      1"


def test_micro_allreduce_file() -> None:
    w = read_aicb(MICRO)
    assert (w.tp, w.ep, w.pp, w.vpp, w.ga, w.all_gpus, w.dp) == (8, 1, 1, 8, 1, 8, 1)
    assert w.pp_comm is None and len(w.lines) == 2
    assert [ln.fwd_bytes for ln in w.lines] == [16777216, 67108864]
    assert [ln.fwd_ns for ln in w.lines] == [556000, 556000]
    assert {ln.fwd_comm for ln in w.lines} == {"ALLREDUCE"}
    exp, notes = aicb_experiment(w)
    m, t, p = exp["model"], exp["training"], exp["parallel"]
    # 2 * micro_batch * seq_len * hidden = 16 MiB (first embedding all-reduce) at seq 4096
    assert 2 * t["micro_batch"] * t["seq_len"] * m["hidden"] == 16777216
    assert m["hidden"] == 2048 and m["layers"] == 8  # vpp: layers per stage, pp 1
    assert (p["tp"], p["pp"], p["dp"]) == (8, 1, 1) and "ep" not in p
    assert t["global_batch"] == 1 and "moe" not in m
    assert any("67108864" in n for n in notes)  # the disagreeing second line is reported
    assert exp["cluster"]["hosts"] == [{"type": "h100", "count": 1}]
    parse_experiment(exp, "micro.yaml")  # loads


def test_analytical_moe_file() -> None:
    w = read_aicb(ANALYTICAL)
    assert (w.tp, w.ep, w.pp, w.vpp, w.ga, w.all_gpus) == (2, 16, 12, 8, 24, 9216)
    assert w.pp_comm == 50331648 and len(w.lines) == 1789 and w.dp == 384
    exp, notes = aicb_experiment(w)
    m, t, p = exp["model"], exp["training"], exp["parallel"]
    # 192 attention_column lines over 24 embedding passes = 8 layers per stage, x pp 12
    assert m["layers"] == 8 * 12
    assert p["sequence_parallel"] is True  # attention_row forward is a REDUCESCATTER
    # pp_comm = 2*b*s*h/tp under sequence parallelism
    assert 2 * t["micro_batch"] * t["seq_len"] * m["hidden"] // p["tp"] == 50331648
    assert m["hidden"] == 12288 and m["heads"] * 128 == m["hidden"]
    assert (p["tp"], p["pp"], p["dp"], p["ep"]) == (2, 12, 384, 16)
    assert p["distributed_optimizer"] is True
    assert t["global_batch"] == t["micro_batch"] * 24 * 384
    # ALLTOALL_EP 100663296 bytes = top_k * per-TP-rank activations (50331648)
    assert m["moe"]["top_k"] == 2 and m["moe"]["experts"] % 16 == 0
    assert exp["simulation"]["fidelity"] == "flow"
    assert sum(h["count"] for h in exp["cluster"]["hosts"]) * 8 == 9216
    loaded = parse_experiment(exp, "analytical.yaml")
    assert loaded.cluster.world_size == 9216
    with pytest.raises(UserError, match="multiple of 2\\*micro_batch\\*seq_len"):
        aicb_experiment(w, seq_len=4095)
    exp2, _ = aicb_experiment(w, seq_len=2048)
    assert exp2["model"]["hidden"] == 24576


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "w.txt"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "expected a header line and a line count"),
        (
            "DATA model_parallel_NPU_group: 1 all_gpus: 8\n1\n" + LINE,
            ":1: parallelism policy DATA is not supported",
        ),
        ("FOO model_parallel_NPU_group: 1\n0\n", ":1: unknown parallelism policy 'FOO'"),
        (HEADER + " colour: 3\n1\n" + LINE, ":1: unknown header field 'colour:'"),
        (HEADER.replace("ga: 1", "ga: x") + "\n1\n" + LINE, ":1: ga: expected an integer"),
        (HEADER + " mode: 1\n1\n" + LINE, ":1: mode: 1 is an inference workload"),
        (HEADER.replace("all_gpus: 8", "all_gpus: 12") + "\n1\n" + LINE, ":1: all_gpus 12 is not divisible"),
        (HEADER + "\n2\n" + LINE, ":2: says 2 layer lines but 1 follow"),
        (
            HEADER + "\n1\n" + LINE.replace("ALLREDUCE", "ALLSHUFFLE"),
            ":3: forward_comm: unknown collective 'ALLSHUFFLE'",
        ),
        (HEADER + "\n1\n" + LINE + " 7", ":3: expected 12 fields"),
        (HEADER + "\n1\n" + LINE.replace("556000", "5.5"), ":3: forward_compute_time: expected an integer"),
        (HEADER + "\n1\nembedding_layer -1 1 NONE 0 1 NONE 0 1 NONE 0 1", "cannot infer the hidden size"),
    ],
)
def test_bad_files(tmp_path: Path, text: str, message: str) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(UserError) as info:
        aicb_experiment(read_aicb(path))
    assert message in str(info.value) and "\n" not in str(info.value)
    assert str(path) in str(info.value)


def test_broadcast_is_ignored_like_simai(tmp_path: Path) -> None:
    path = _write(tmp_path, HEADER + "\n2\n" + LINE + "\nnorm -1 1 BROADCAST 16384 1 NONE 0 1 NONE 0 1\n")
    w = read_aicb(path)
    assert w.lines[1].fwd_comm == "NONE" and "BROADCAST" in w.ignored[0]
