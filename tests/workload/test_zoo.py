"""Model zoo parameter counts against published sizes, and per-rank parameter bookkeeping."""

from __future__ import annotations

from dataclasses import replace

import pytest

from heterosim.catalog.models import ZOO, ModelConfig, MoEConfig
from heterosim.config.experiment import ParallelConfig
from heterosim.workload.ops import (
    layer_expert_params_on_rank,
    layer_params_on_rank,
    rank_expert_params,
    rank_params,
)

# Sizes as the sources state them: GPT-3 paper Table 2.1 (Brown et al. 2020); LLaMA paper
# Table 2 (Touvron et al. 2023); Llama 2 paper (70B); Llama 3 herd paper / model cards (8.03B shown
# as 8B, 70.6B on the 70B card, 405B); Mixtral of Experts (46.7B total parameters).
PUBLISHED = {
    "gpt3-6.7b": 6.7e9,
    "gpt3-13b": 13.0e9,
    "gpt3-175b": 175.0e9,
    "llama-7b": 6.7e9,
    "llama-13b": 13.0e9,
    "llama-65b": 65.2e9,
    "llama2-70b": 70e9,
    "llama3-8b": 8.0e9,
    "llama3-70b": 70.6e9,
    "llama3-405b": 405e9,
    "mixtral-8x7b": 46.7e9,
}

PAR = ParallelConfig(dp_bucket_bytes=40 << 20)


def test_zoo_lists_the_published_figures() -> None:
    assert set(PUBLISHED) <= set(ZOO)
    for name, size in PUBLISHED.items():
        assert ZOO[name].published_params == size, name


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_param_count_matches_published_size(name: str) -> None:
    tolerance = 0.01 if name == "gpt3-175b" else 0.02
    count = ZOO[name].param_count()
    assert abs(count / PUBLISHED[name] - 1) < tolerance, (name, count)


def test_gpt3_175b_count_by_hand() -> None:
    """12*l*h^2 + 13*l*h (weights and biases/norms per layer), V*h + s*h embeddings, final LN."""
    h, n_layers, v, s = 12288, 96, 51200, 2048
    expected = n_layers * (12 * h * h + 13 * h) + v * h + s * h + 2 * h
    assert ZOO["gpt3-175b"].param_count() == expected


@pytest.mark.parametrize("name", sorted(ZOO))
def test_rank_params_single_rank_is_the_whole_model(name: str) -> None:
    model = ZOO[name]
    assert rank_params(model, PAR, range(model.layers), True, True) == model.param_count()


@pytest.mark.parametrize("name,tp", [("gpt3-175b", 8), ("llama-65b", 8), ("llama3-8b", 4)])
def test_tp_ranks_partition_a_layer(name: str, tp: int) -> None:
    """Summed over the TP group, a layer's parameters are the layer's plus the copies of what
    Megatron replicates: norms, and for gpt the out_proj and fc2 biases."""
    model = ZOO[name]
    par = replace(PAR, tp=tp)
    replicated = 2 * model.norm_params() + (2 * model.hidden if model.has_bias else 0)
    total = tp * layer_params_on_rank(model, par, 0)
    assert total == model.layer_params(0) + (tp - 1) * replicated


def test_gqa_kv_heads_replicate_when_tp_exceeds_them() -> None:
    model = ZOO["llama3-70b"]  # 64 query heads, 8 KV heads, head_dim 128
    h, d = model.hidden, model.head_dim
    p8 = layer_params_on_rank(model, replace(PAR, tp=8), 0)
    p16 = layer_params_on_rank(model, replace(PAR, tp=16), 0)
    # tp=8: one KV head per rank; tp=16: still one (replicated), queries/out_proj/MLP halve
    q8, kv = 2 * h * (h // 8), 2 * h * d
    mlp8 = 3 * h * model.ffn // 8
    assert p8 == q8 + kv + mlp8 + 2 * h
    assert p16 == q8 // 2 + kv + mlp8 // 2 + 2 * h


def test_moe_experts_split_by_ep() -> None:
    model = ZOO["mixtral-8x7b"]
    h = model.hidden
    expert = 3 * h * model.ffn
    par = replace(PAR, dp=8, ep=4)
    assert layer_expert_params_on_rank(model, par, 0) == 2 * expert
    dense_part = model.attention_params() + 2 * model.norm_params() + h * 8  # router replicated
    assert layer_params_on_rank(model, par, 0) == dense_part + 2 * expert
    assert rank_expert_params(model, par, range(3)) == 3 * 2 * expert
    # summed over the EP group, every expert is held exactly once
    assert 4 * layer_expert_params_on_rank(model, par, 0) == 8 * expert


def test_moe_every_other_layer() -> None:
    model = ModelConfig(
        "m", "llama", 256, 4, 4, 4, 512, 1000, 128, MoEConfig(experts=4, top_k=2, expert_ffn=128, every=2)
    )
    assert [model.is_moe_layer(i) for i in range(4)] == [False, True, False, True]
    assert layer_expert_params_on_rank(model, PAR, 0) == 0
    assert layer_expert_params_on_rank(model, PAR, 1) == 4 * 3 * 256 * 128


def test_tied_embedding_copy_on_last_stage() -> None:
    """gpt ties the output layer to the word embedding: with pp > 1 the last stage holds a copy."""
    model = ZOO["gpt3-6.7b"]
    half = model.layers // 2
    first = rank_params(model, PAR, range(half), True, False)
    last = rank_params(model, PAR, range(half, model.layers), False, True)
    assert first + last == model.param_count() + model.vocab * model.hidden


def test_layer_out_of_range() -> None:
    with pytest.raises(ValueError, match="outside"):
        layer_params_on_rank(ZOO["llama3-8b"], PAR, 32)
