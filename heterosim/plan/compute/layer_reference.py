"""Reference PyTorch implementations of the zoo's layer kinds, for timing whole layers.

One transformer layer as one tensor-parallel rank runs it (Megatron-LM's block structure, the
same one :mod:`heterosim.workload.ops_layer` decomposes into ops):

- ``gpt``: LayerNorm, QKV GEMM with bias, causal fused attention
  (``scaled_dot_product_attention``), output projection, bias + dropout(0.1) + residual,
  LayerNorm, fc1 with bias, GELU (tanh), fc2, bias + dropout + residual.
- ``llama``: RMSNorm, QKV GEMM with grouped K/V heads, rotary embedding of Q and K, causal fused
  attention over grouped heads, output projection + residual, RMSNorm, gate+up GEMM, SwiGLU,
  down projection + residual. MoE layers replace the MLP by a router GEMM, softmax, top-k and
  the experts as batched GEMMs over a balanced token assignment, gathered and scattered back.

Tensor parallelism shards heads and the FFN by ``tp``. Communication is left out, as the
simulator times it on the network: without sequence parallelism the all-reduces are identities;
with it, the all-gather before QKV/fc1 and the reduce-scatter after out_proj/fc2 are replaced by
autograd functions that only place or take this rank's shard (one copy of the local shard, the
part of the collective's memory traffic that is this rank's own). Parameters accumulate their
gradients across calls as they do over the micro-batches of a step. Eager PyTorch launches one
kernel per op as Megatron-LM's modules do where they are not fused; ``torch.compile`` fuses the
elementwise chains.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from heterosim.catalog.models import ModelConfig

DROPOUT = 0.1


@dataclass(frozen=True)
class LayerShard:
    """The dimensions of one TP rank's shard of a layer."""

    arch: str
    hidden: int
    heads: int  # query heads on this rank
    kv_heads: int  # K/V heads on this rank
    head_dim: int
    ffn: int  # FFN (or expert FFN) columns on this rank
    experts: int
    top_k: int
    seq: int  # full sequence
    micro_batch: int
    tp: int
    sp: bool

    @property
    def norm_seq(self) -> int:
        """Tokens the norms, dropouts and residuals see (s / tp under sequence parallelism)."""
        return self.seq // self.tp if self.sp else self.seq


def layer_shard(model: ModelConfig, seq: int, micro_batch: int, tp: int, sp: bool) -> LayerShard:
    """The shard of ``model``'s layer 0 on one of ``tp`` ranks (ValueError if it does not divide)."""
    if model.heads % tp or model.ffn % tp or (sp and seq % tp):
        raise ValueError(f"{model.name}: heads, ffn{' and seq' if sp else ''} must divide by tp={tp}")
    moe = model.moe if model.is_moe_layer(0) else None
    ffn = moe.expert_ffn if moe else model.ffn
    if ffn % tp:
        raise ValueError(f"{model.name}: expert ffn must divide by tp={tp}")
    return LayerShard(
        arch=model.arch,
        hidden=model.hidden,
        heads=model.heads // tp,
        kv_heads=max(model.kv_heads // tp, 1),
        head_dim=model.head_dim,
        ffn=ffn // tp,
        experts=moe.experts if moe else 0,
        top_k=moe.top_k if moe else 0,
        seq=seq,
        micro_batch=micro_batch,
        tp=tp,
        sp=sp,
    )


def _shard_functions(torch: Any, tp: int) -> tuple[Any, Any]:
    """(gather, scatter) autograd functions standing in for SP's all-gather / reduce-scatter."""

    class Gather(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            b, s, h = x.shape
            out = x.new_empty(b, s * tp, h)
            out[:, :s].copy_(x)
            ctx.s = s
            return out

        @staticmethod
        def backward(ctx, grad):
            return grad[:, : ctx.s]

    class Scatter(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            b, s, h = x.shape
            ctx.shape = (b, s, h)
            return x[:, : s // tp].contiguous()

        @staticmethod
        def backward(ctx, grad):
            out = grad.new_empty(ctx.shape)
            out[:, : grad.shape[1]].copy_(grad)
            return out

    return Gather.apply, Scatter.apply


class ReferenceLayer:
    """Weights of one shard and its forward; backward is PyTorch autograd's."""

    def __init__(self, torch: Any, shard: LayerShard, device: str, dtype: Any) -> None:
        self.torch, self.d = torch, shard
        kw = {"device": device, "dtype": dtype}
        h, hd = shard.hidden, shard.head_dim
        gpt = shard.arch == "gpt"

        def param(*shape: int, scale: float | None = None) -> Any:
            std = scale if scale is not None else 1.0 / math.sqrt(shape[-1])
            return (torch.randn(*shape, **kw) * std).requires_grad_(True)

        qkv_out = (shard.heads + 2 * shard.kv_heads) * hd
        self.norm1_w = param(h, scale=1.0)
        self.norm2_w = param(h, scale=1.0)
        self.norm1_b = param(h, scale=0.0) if gpt else None
        self.norm2_b = param(h, scale=0.0) if gpt else None
        self.w_qkv = param(qkv_out, h)
        self.b_qkv = param(qkv_out, scale=0.0) if gpt else None
        self.w_o = param(h, shard.heads * hd)
        self.b_o = param(h, scale=0.0) if gpt else None
        fc1_out = shard.ffn * (1 if gpt else 2)
        if shard.experts:
            self.w_router = param(shard.experts, h)
            self.w1 = param(shard.experts, h, fc1_out)
            self.w2 = param(shard.experts, shard.ffn, h)
        else:
            self.w1 = param(fc1_out, h)
            self.w2 = param(h, shard.ffn)
        self.b1 = param(fc1_out, scale=0.0) if gpt and not shard.experts else None
        self.b2 = param(h, scale=0.0) if gpt and not shard.experts else None
        self.gather: Any
        self.scatter: Any
        self.gather, self.scatter = _shard_functions(torch, shard.tp) if shard.sp else (_same, _same)
        if not gpt:
            pos = torch.arange(shard.seq, device=device, dtype=torch.float32)
            inv = 1.0 / (10000.0 ** (torch.arange(0, hd, 2, device=device, dtype=torch.float32) / hd))
            angles = torch.outer(pos, inv)
            self.cos = torch.cat([angles.cos(), angles.cos()], -1).to(dtype)[None, None]
            self.sin = torch.cat([angles.sin(), angles.sin()], -1).to(dtype)[None, None]
        if shard.experts:
            tokens = shard.micro_batch * shard.seq
            slot = torch.arange(tokens * shard.top_k, device=device)
            # balanced routing: copy j of token t goes to expert (t + j) mod E
            self.route_expert = (slot // shard.top_k + slot % shard.top_k) % shard.experts
            self.route_order = torch.argsort(self.route_expert, stable=True)
            self.route_token = self.route_order // shard.top_k

    def parameters(self) -> list[Any]:
        return [v for v in vars(self).values() if getattr(v, "requires_grad", False)]

    def input(self, device: str, dtype: Any) -> Any:
        d = self.d
        return self.torch.randn(d.micro_batch, d.norm_seq, d.hidden, device=device, dtype=dtype)

    # ------------------------------------------------------------------ forward

    def forward(self, x: Any) -> Any:
        F = self.torch.nn.functional
        gpt = self.d.arch == "gpt"
        y = x + self._post(self.scatter(self._attention(self.gather(self._norm(x, 1)))), self.b_o)
        mlp_in = self.gather(self._norm(y, 2))
        mlp = self._moe(mlp_in) if self.d.experts else self._mlp(mlp_in, F, gpt)
        return y + self._post(self.scatter(mlp), self.b2)

    def _norm(self, x: Any, which: int) -> Any:
        F = self.torch.nn.functional
        w = self.norm1_w if which == 1 else self.norm2_w
        if self.d.arch == "gpt":
            return F.layer_norm(x, (self.d.hidden,), w, self.norm1_b if which == 1 else self.norm2_b)
        return F.rms_norm(x, (self.d.hidden,), w, 1e-5)

    def _post(self, x: Any, bias: Any) -> Any:
        """Megatron's bias-dropout-add before the residual (gpt); llama adds the residual only."""
        if bias is None:
            return x
        return self.torch.nn.functional.dropout(x + bias, DROPOUT, training=True)

    def _attention(self, x: Any) -> Any:
        torch, d = self.torch, self.d
        b, s, _ = x.shape
        qkv = torch.nn.functional.linear(x, self.w_qkv, self.b_qkv)
        q, k, v = qkv.split([d.heads * d.head_dim, d.kv_heads * d.head_dim, d.kv_heads * d.head_dim], -1)
        q = q.view(b, s, d.heads, d.head_dim).transpose(1, 2)
        k = k.view(b, s, d.kv_heads, d.head_dim).transpose(1, 2)
        v = v.view(b, s, d.kv_heads, d.head_dim).transpose(1, 2)
        if d.arch != "gpt":
            q, k = self._rope(q), self._rope(k)
        gqa = d.kv_heads != d.heads
        o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=gqa)
        o = o.transpose(1, 2).reshape(b, s, d.heads * d.head_dim)
        return torch.nn.functional.linear(o, self.w_o)

    def _rope(self, x: Any) -> Any:
        half = self.d.head_dim // 2
        rotated = self.torch.cat([-x[..., half:], x[..., :half]], -1)
        return x * self.cos + rotated * self.sin

    def _mlp(self, x: Any, F: Any, gpt: bool) -> Any:
        h = F.linear(x, self.w1, self.b1)
        if gpt:
            h = F.gelu(h, approximate="tanh")
        else:
            gate, up = h.chunk(2, -1)
            h = F.silu(gate) * up
        return F.linear(h, self.w2)

    def _moe(self, x: Any) -> Any:
        torch, d = self.torch, self.d
        F = torch.nn.functional
        b, s, h = x.shape
        flat = x.reshape(b * s, h)
        probs = torch.softmax(F.linear(flat, self.w_router).float(), -1)
        weights, _ = probs.topk(d.top_k, -1)
        copies = flat.index_select(0, self.route_token)
        per_expert = copies.shape[0] // d.experts
        hidden = torch.bmm(copies.view(d.experts, per_expert, h), self.w1)
        gate, up = hidden.chunk(2, -1)
        out = torch.bmm(F.silu(gate) * up, self.w2).reshape(-1, h)
        scale = weights.reshape(-1).index_select(0, self.route_order).to(out.dtype)[:, None]
        combined = torch.zeros_like(flat).index_add(0, self.route_token, out * scale)
        return combined.view(b, s, h)


def _same(x: Any) -> Any:
    return x
