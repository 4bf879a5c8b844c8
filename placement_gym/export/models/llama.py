"""Llama-style decoders (Touvron et al. 2023, "LLaMA" and "Llama 2").

Each layer: RMSNorm, causal self-attention with rotary position embeddings and grouped-query attention
(``kv_heads`` key/value heads shared by groups of the ``heads`` query heads; ``kv_heads == heads`` is plain
multi-head attention), RMSNorm, and a SwiGLU feed-forward block (down(SiLU(gate(x)) * up(x))). No biases;
a final RMSNorm and an untied language-model head. The feed-forward width follows Llama's rule: two
thirds of four times the width, rounded up to a multiple of 256 (4,096 -> 11,008). The rotary angles
are computed in the graph from the positions (a Range, then Cos and Sin), as a model does at run time.
Llama-2 7B: 32 layers of 4,096, 32 heads; 70B: 80 x 8,192, 64 query heads, 8 key/value heads.
Vocabulary: 32,000 tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from placement_gym.export.models.blocks import Projection, causal_mask
from placement_gym.export.models.sizes import TransformerSizes


def llama_ffn(hidden: int, multiple: int = 256) -> int:
    """Llama's feed-forward width: 8/3 of the width, rounded up to a multiple of ``multiple``."""
    width = int(2 * 4 * hidden / 3)
    return multiple * ((width + multiple - 1) // multiple)


@dataclass(frozen=True)
class LlamaConfig(TransformerSizes):
    kv_heads: int
    vocab: int = 32_000
    ffn: int = 0  # 0: `llama_ffn` of the width
    rope_base: float = 10_000.0
    eps: float = 1e-5

    @property
    def ffn_width(self) -> int:
        return self.ffn or llama_ffn(self.hidden)

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads


class RMSNorm(nn.Module):
    """x / sqrt(mean(x^2) + eps) * weight (Zhang & Sennrich 2019): no mean subtracted, no bias."""

    def __init__(self, hidden: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.empty(hidden))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotary_angles(seq: int, head_dim: int, base: float,
                  device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """(cos, sin), each (seq, head_dim): position p turns channel pair (i, i + head_dim/2) by
    p * base^(-2i/head_dim) (Su et al. 2021, RoFormer)."""
    half = head_dim // 2
    frequencies = base ** (-torch.arange(half, device=device, dtype=torch.float32) * 2.0 / head_dim)
    angles = torch.arange(seq, device=device, dtype=torch.float32)[:, None] * frequencies[None, :]
    angles = torch.cat([angles, angles], dim=1)
    return torch.cos(angles), torch.sin(angles)


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary embedding of ``x`` (batch, heads, seq, head_dim): x cos + rotate_half(x) sin."""
    half = x.shape[-1] // 2
    turned = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos + turned * sin


class GroupedQueryAttention(nn.Module):
    """Causal self-attention with ``kv_heads`` key/value heads, each shared by ``heads / kv_heads`` query
    heads."""

    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        if config.hidden % config.heads or config.heads % config.kv_heads:
            raise ValueError(f"width {config.hidden}, {config.heads} heads, {config.kv_heads} key/value "
                             "heads: the width must divide into the heads and the heads into the key/value "
                             "heads")
        self.heads, self.kv_heads, self.head_dim = config.heads, config.kv_heads, config.head_dim
        self.query = Projection(config.hidden, config.heads * self.head_dim)
        self.key = Projection(config.hidden, config.kv_heads * self.head_dim)
        self.value = Projection(config.hidden, config.kv_heads * self.head_dim)
        self.output = Projection(config.heads * self.head_dim, config.hidden)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        batch, seq, hidden = x.shape
        q = self.query(x).reshape(batch, seq, self.heads, self.head_dim).transpose(1, 2)
        k = self.key(x).reshape(batch, seq, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.value(x).reshape(batch, seq, self.kv_heads, self.head_dim).transpose(1, 2)
        q, k = rotate(q, cos, sin) * (self.head_dim ** -0.5), rotate(k, cos, sin)
        groups = self.heads // self.kv_heads
        if groups > 1:  # each key/value head serves `groups` query heads
            shape = (batch, self.kv_heads, groups, seq, self.head_dim)
            k = k[:, :, None].expand(shape).reshape(batch, self.heads, seq, self.head_dim)
            v = v[:, :, None].expand(shape).reshape(batch, self.heads, seq, self.head_dim)
        scores = torch.matmul(q, k.transpose(-1, -2))
        scores = scores.masked_fill(causal_mask(seq, seq, x.device), float("-inf"))
        context = torch.matmul(torch.softmax(scores, dim=-1), v)
        return self.output(context.transpose(1, 2).reshape(batch, seq, self.heads * self.head_dim))


class SwiGLU(nn.Module):
    """down(SiLU(gate(x)) * up(x)) (Shazeer 2020, "GLU Variants Improve Transformer")."""

    def __init__(self, hidden: int, ffn: int) -> None:
        super().__init__()
        self.gate = Projection(hidden, ffn)
        self.up = Projection(hidden, ffn)
        self.down = Projection(ffn, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(F.silu(self.gate(x)) * self.up(x))


class LlamaLayer(nn.Module):
    def __init__(self, config: LlamaConfig, feed_forward: nn.Module | None = None) -> None:
        super().__init__()
        self.attention_norm = RMSNorm(config.hidden, config.eps)
        self.attention = GroupedQueryAttention(config)
        self.ffn_norm = RMSNorm(config.hidden, config.eps)
        if feed_forward is None:
            feed_forward = SwiGLU(config.hidden, config.ffn_width)
        self.feed_forward = feed_forward

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.attention_norm(x), cos, sin)
        return x + self.feed_forward(self.ffn_norm(x))


class Llama(nn.Module):
    """Token ids (batch, seq) int64 -> next-token logits (batch, seq, vocab)."""

    def __init__(self, config: LlamaConfig, layers: list[nn.Module] | None = None) -> None:
        super().__init__()
        self.config = config
        self.token_embedding = nn.Embedding(config.vocab, config.hidden)
        self.layers = nn.ModuleList(layers if layers is not None else
                                    [LlamaLayer(config) for _ in range(config.layers)])
        self.final_norm = RMSNorm(config.hidden, config.eps)
        self.head = Projection(config.hidden, config.vocab)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        cos, sin = rotary_angles(input_ids.shape[1], self.config.head_dim, self.config.rope_base,
                                 input_ids.device)
        x = self.token_embedding(input_ids)
        for layer in self.layers:
            x = layer(x, cos, sin)
        return self.head(self.final_norm(x))
