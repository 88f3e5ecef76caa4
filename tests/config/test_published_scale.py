"""The published-size examples state the runs they cite: Llama 3 405B on 16,384 H100 (Dubey et al.,
arXiv:2407.21783, Table 4) and MegaScale's 175B on 12,288 GPUs (Jiang et al., NSDI 2024, Table 2)."""

from __future__ import annotations

from pathlib import Path

from heterosim.config.experiment import load_experiment

REPO = Path(__file__).resolve().parents[2]


def test_llama3_405b_is_the_8k_pretraining_layout() -> None:
    exp = load_experiment(REPO / "workloads/examples/llama3_405b_16k.yaml")
    p, t = exp.parallel, exp.training
    assert (p.tp, p.cp, p.pp, p.dp) == (8, 1, 16, 128)
    assert exp.cluster.world_size == p.tp * p.cp * p.pp * p.dp == 16_384
    assert t.seq_len == 8192 and t.global_batch * t.seq_len == 16 * 2**20  # 16M tokens per batch
    assert t.global_batch // (p.dp * t.micro_batch) == 16  # sequences per DP replica
    assert exp.model.layers == 126 and exp.model.hidden == 16384


def test_long_context_overrides_keep_the_gpu_count_and_tokens() -> None:
    sets = ["parallel.cp=16", "parallel.dp=8", "training.seq_len=131072", "training.global_batch=128"]
    exp = load_experiment(REPO / "workloads/examples/llama3_405b_16k.yaml", sets)
    p, t = exp.parallel, exp.training
    assert p.tp * p.cp * p.pp * p.dp == exp.cluster.world_size == 16_384
    assert t.global_batch * t.seq_len == 16 * 2**20


def test_megascale_175b_is_12288_gpus_batch_6144() -> None:
    exp = load_experiment(REPO / "workloads/examples/megascale_175b_12k.yaml")
    p, t = exp.parallel, exp.training
    assert p.tp * p.pp * p.dp == exp.cluster.world_size == 12_288
    assert (t.global_batch, t.seq_len) == (6144, 2048)
    assert exp.model.hidden == 12288 and exp.model.layers == 96


def test_published_examples_can_be_folded() -> None:
    from heterosim.config.replicas import fold_refusal

    for name in ("llama3_405b_16k.yaml", "megascale_175b_12k.yaml"):
        exp = load_experiment(REPO / "workloads/examples" / name, ["simulation.replicas=fold"])
        assert exp.simulation.replicas == "fold" and fold_refusal(exp) is None
