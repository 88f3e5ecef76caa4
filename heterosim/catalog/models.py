"""The model zoo: transformer dimensions of GPT-3, LLaMA, Llama-2/3 and MoE models.

Dimensions follow the papers and released configs: GPT-3 (Brown et al. 2020, Table 2.1, with
Megatron's padded vocabulary 51200), LLaMA (Touvron et al. 2023, Table 2), Llama 2 (config.json of
the released 70B: GQA with 8 KV heads), Llama 3 (Llama 3 herd paper, Table 3: 8B/70B/405B,
vocabulary 128256), Mixtral 8x7B (Jiang et al. 2024).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from heterosim.config.fields import Section
from heterosim.config.moe_routing import MoeRouting, parse_moe_routing

ARCHES = ("gpt", "llama")


@dataclass(frozen=True)
class MoEConfig:
    """Mixture-of-experts MLP: ``experts`` FFNs of size ``expert_ffn``, each token to ``top_k``."""

    experts: int
    top_k: int
    expert_ffn: int
    every: int = 1  # every n-th layer is MoE (1 = all layers)
    shared_experts: int = 0


@dataclass(frozen=True)
class ModelConfig:
    """A decoder-only transformer. ``arch`` picks the block: gpt (LayerNorm, GELU MLP, biases,
    learned positions, tied embeddings) or llama (RMSNorm, SwiGLU MLP, no biases, RoPE, untied)."""

    name: str
    arch: str
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    ffn: int
    vocab: int
    max_seq: int
    moe: MoEConfig | None = None
    published_params: float | None = None  # as stated by the source, for checks
    # the router's token distribution and capacity (None: even routing, no capacity);
    # heterosim/config/moe_routing.py
    moe_routing: MoeRouting | None = None

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_dim

    @property
    def gated_mlp(self) -> bool:
        return self.arch == "llama"

    @property
    def has_bias(self) -> bool:
        return self.arch == "gpt"

    @property
    def tied_embeddings(self) -> bool:
        return self.arch == "gpt"

    @property
    def learned_positions(self) -> bool:
        return self.arch == "gpt"

    def is_moe_layer(self, layer: int) -> bool:
        return self.moe is not None and (layer + 1) % self.moe.every == 0

    def moe_layer_index(self, layer: int) -> int:
        """Position of MoE layer ``layer`` among the model's MoE layers (0 for the first)."""
        assert self.moe is not None
        return (layer + 1) // self.moe.every - 1

    @property
    def moe_layer_count(self) -> int:
        return 0 if self.moe is None else self.layers // self.moe.every

    @property
    def uneven_routing(self) -> bool:
        """Whether MoE layers route unevenly or cap their experts (model.moe_routing)."""
        return self.moe_routing is not None and not self.moe_routing.even

    def attention_params(self) -> int:
        h = self.hidden
        weights = h * h + 2 * h * self.kv_dim + h * h
        biases = (h + 2 * self.kv_dim + h) if self.has_bias else 0
        return weights + biases

    def dense_mlp_params(self, ffn: int | None = None) -> int:
        ffn = self.ffn if ffn is None else ffn
        h = self.hidden
        if self.gated_mlp:
            return 3 * h * ffn
        return 2 * h * ffn + (ffn + h if self.has_bias else 0)

    def norm_params(self) -> int:
        return 2 * self.hidden if self.has_bias else self.hidden

    def layer_params(self, layer: int) -> int:
        """Parameters of transformer layer ``layer`` (all experts counted)."""
        mlp = self.dense_mlp_params()
        if self.is_moe_layer(layer):
            assert self.moe is not None
            experts = self.moe.experts + self.moe.shared_experts
            mlp = experts * self.dense_mlp_params(self.moe.expert_ffn) + self.hidden * self.moe.experts
        return self.attention_params() + mlp + 2 * self.norm_params()

    def embedding_params(self) -> int:
        positions = self.max_seq * self.hidden if self.learned_positions else 0
        return self.vocab * self.hidden + positions

    def head_params(self) -> int:
        """Final norm plus the output projection when it is not tied to the embedding."""
        return self.norm_params() + (0 if self.tied_embeddings else self.vocab * self.hidden)

    def param_count(self) -> int:
        return (
            self.embedding_params()
            + sum(self.layer_params(i) for i in range(self.layers))
            + self.head_params()
        )


def _moe(experts: int, top_k: int, expert_ffn: int, every: int = 1) -> MoEConfig:
    return MoEConfig(experts=experts, top_k=top_k, expert_ffn=expert_ffn, every=every)


ZOO: dict[str, ModelConfig] = {
    m.name: m
    for m in [
        ModelConfig("gpt3-6.7b", "gpt", 4096, 32, 32, 32, 16384, 51200, 2048, None, 6.7e9),
        ModelConfig("gpt3-13b", "gpt", 5120, 40, 40, 40, 20480, 51200, 2048, None, 13.0e9),
        ModelConfig("gpt3-175b", "gpt", 12288, 96, 96, 96, 49152, 51200, 2048, None, 175.0e9),
        ModelConfig("llama-7b", "llama", 4096, 32, 32, 32, 11008, 32000, 2048, None, 6.7e9),
        ModelConfig("llama-13b", "llama", 5120, 40, 40, 40, 13824, 32000, 2048, None, 13.0e9),
        ModelConfig("llama-65b", "llama", 8192, 80, 64, 64, 22016, 32000, 2048, None, 65.2e9),
        ModelConfig("llama2-70b", "llama", 8192, 80, 64, 8, 28672, 32000, 4096, None, 70e9),
        ModelConfig("llama3-8b", "llama", 4096, 32, 32, 8, 14336, 128256, 8192, None, 8.0e9),
        ModelConfig("llama3-70b", "llama", 8192, 80, 64, 8, 28672, 128256, 8192, None, 70.6e9),
        ModelConfig("llama3-405b", "llama", 16384, 126, 128, 8, 53248, 128256, 8192, None, 405e9),
        ModelConfig("mixtral-8x7b", "llama", 4096, 32, 32, 8, 14336, 32000, 32768, _moe(8, 2, 14336), 46.7e9),
    ]
}


# Upper bounds of inline model dimensions: about 8x the largest published dense and MoE models
# (Llama 3 405B: hidden 16384, 126 layers, ffn 53248, vocab 128256; DeepSeek-V3: 256 experts),
# so FLOP and byte counts stay exact in int64 and float64.
MAX_DIMENSION = {
    "hidden": 1 << 17,
    "heads": 1 << 12,
    "layers": 10_000,
    "ffn": 1 << 20,
    "vocab": 1 << 24,
    "seq": 1 << 22,
    "experts": 4096,
}


def resolve_model(value: Any, source: str, key: str = "model", base_dir: Path | None = None) -> ModelConfig:
    """A zoo name or an inline mapping of dimensions -> a validated ModelConfig (``base_dir``:
    where a ``moe_routing.histogram`` path is relative to)."""
    if isinstance(value, str):
        found = ZOO.get(value.lower())
        if found is None:
            raise Section({}, source).error(
                key, f"unknown model {value!r}; zoo: {', '.join(ZOO)} (or give inline dims)"
            )
        return found
    section = Section(value, source, key)
    if section.has("base"):
        base_name = section.string("base")
        if base_name.lower() not in ZOO:
            raise section.error("base", f"unknown model {base_name!r}; zoo: {', '.join(ZOO)}")
        base = ZOO[base_name.lower()]
    else:
        base = None

    def dim(name: str) -> int:
        maximum = MAX_DIMENSION[name]
        if base is None:
            return section.integer(name, minimum=1, maximum=maximum)
        return section.integer(name, getattr(base, name), minimum=1, maximum=maximum)

    arch = section.string("arch", base.arch if base else "gpt", choices=ARCHES)
    hidden = dim("hidden")
    heads = dim("heads")
    kv_heads = section.integer(
        "kv_heads", base.kv_heads if base else heads, minimum=1, maximum=MAX_DIMENSION["heads"]
    )
    layers = dim("layers")
    ffn = section.integer("ffn", base.ffn if base else 4 * hidden, minimum=1, maximum=MAX_DIMENSION["ffn"])
    vocab = section.integer("vocab", base.vocab if base else 51200, minimum=1, maximum=MAX_DIMENSION["vocab"])
    max_seq = section.integer("seq", base.max_seq if base else 2048, minimum=1, maximum=MAX_DIMENSION["seq"])
    name = section.string("name", base.name if base else "custom")
    if hidden % heads:
        raise section.error("heads", f"hidden {hidden} is not divisible by heads {heads}")
    if heads % kv_heads:
        raise section.error("kv_heads", f"heads {heads} is not divisible by kv_heads {kv_heads}")
    moe = base.moe if base else None
    if section.has("moe"):
        moe_section = section.section("moe")
        experts = moe_section.integer("experts", minimum=1, maximum=MAX_DIMENSION["experts"])
        top_k = moe_section.integer("top_k", 2, minimum=1, maximum=experts)
        moe = MoEConfig(
            experts=experts,
            top_k=top_k,
            expert_ffn=moe_section.integer("expert_ffn", ffn, minimum=1, maximum=MAX_DIMENSION["ffn"]),
            every=moe_section.integer("every", 1, minimum=1, maximum=MAX_DIMENSION["layers"]),
            shared_experts=moe_section.integer(
                "shared_experts", 0, minimum=0, maximum=MAX_DIMENSION["experts"]
            ),
        )
        moe_section.reject_unknown()
    routing = None
    if section.has("moe_routing"):
        if moe is None:
            raise section.error("moe_routing", "routing needs a model with moe layers (model.moe)")
        routing = parse_moe_routing(
            section.raw("moe_routing"),
            source,
            section.key_path("moe_routing"),
            moe.experts,
            layers // moe.every,
            base_dir,
        )
    else:
        section.raw("moe_routing", None)
    section.reject_unknown()
    model = ModelConfig(name, arch, hidden, layers, heads, kv_heads, ffn, vocab, max_seq, moe)
    if base is not None and model == replace(base, published_params=None):
        model = base
    return model if routing is None else replace(model, moe_routing=routing)
