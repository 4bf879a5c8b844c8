"""Building blocks the Transformer families share: bias-free projections, multi-head attention (self or
cross, causal or not) and the pre-LayerNorm block of GPT-2, ViT and Whisper.

Projections keep their weights as (in, out), as `placement_gym.export.models.bert.Dense` does, so that they
export as one MatMul (and an Add for a bias) with no transpose of the weight.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from placement_gym.export.models.bert import Dense


class Projection(nn.Module):
    """y = x @ W with W stored (in, out): one MatMul in the exported graph."""

    def __init__(self, d_in: int, d_out: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(d_in, d_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.matmul(x, self.weight)


def linear(d_in: int, d_out: int, bias: bool) -> nn.Module:
    """A dense layer with or without its bias."""
    return Dense(d_in, d_out) if bias else Projection(d_in, d_out)


def causal_mask(queries: int, keys: int, device: torch.device) -> torch.Tensor:
    """True where query i may not see key j (j > i): the upper triangle."""
    return torch.ones(queries, keys, dtype=torch.bool, device=device).triu(1)


class Attention(nn.Module):
    """Multi-head scaled dot-product attention over ``x`` (self) or ``memory`` (cross), with its output
    projection; ``causal``: each position sees itself and the positions before it."""

    def __init__(self, hidden: int, heads: int, *, causal: bool = False, bias: bool = True,
                 key_bias: bool = True) -> None:
        super().__init__()
        if hidden % heads:
            raise ValueError(f"hidden size {hidden} is not a multiple of the {heads} heads")
        self.heads, self.head_dim, self.causal = heads, hidden // heads, causal
        self.query = linear(hidden, hidden, bias)
        self.key = linear(hidden, hidden, bias and key_bias)
        self.value = linear(hidden, hidden, bias)
        self.output = linear(hidden, hidden, bias)

    def _split(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, _ = x.shape
        return x.reshape(batch, seq, self.heads, self.head_dim).transpose(1, 2)

    def forward(self, x: torch.Tensor, memory: torch.Tensor | None = None) -> torch.Tensor:
        batch, seq, hidden = x.shape
        source = x if memory is None else memory
        q = self._split(self.query(x) * (1.0 / math.sqrt(self.head_dim)))
        k, v = self._split(self.key(source)), self._split(self.value(source))
        scores = torch.matmul(q, k.transpose(-1, -2))
        if self.causal:
            scores = scores.masked_fill(causal_mask(seq, source.shape[1], x.device), float("-inf"))
        context = torch.matmul(torch.softmax(scores, dim=-1), v)
        return self.output(context.transpose(1, 2).reshape(batch, seq, hidden))


class MLP(nn.Module):
    """Dense, GELU, dense: the feed-forward half of a Transformer layer."""

    def __init__(self, hidden: int, ffn: int) -> None:
        super().__init__()
        self.up = Dense(hidden, ffn)
        self.down = Dense(ffn, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(F.gelu(self.up(x)))


class PreLNBlock(nn.Module):
    """x = x + Attn(LN(x)); x = x + MLP(LN(x)) (the pre-LayerNorm layer of GPT-2, ViT and Whisper)."""

    def __init__(self, hidden: int, heads: int, ffn: int, *, causal: bool = False, key_bias: bool = True,
                 eps: float = 1e-5) -> None:
        super().__init__()
        self.attention_norm = nn.LayerNorm(hidden, eps=eps)
        self.attention = Attention(hidden, heads, causal=causal, key_bias=key_bias)
        self.mlp_norm = nn.LayerNorm(hidden, eps=eps)
        self.mlp = MLP(hidden, ffn)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.attention_norm(x))
        return x + self.mlp(self.mlp_norm(x))


def sinusoids(length: int, channels: int, device: torch.device,
              max_timescale: float = 10_000.0) -> torch.Tensor:
    """Fixed sinusoidal position encodings (length, channels): sines of the first half of the channels,
    cosines of the second, at timescales geometric from 1 to ``max_timescale`` (Vaswani et al. 2017; the
    layout Whisper uses). Computed in the graph, so that they are ops and not a weight."""
    half = channels // 2
    step = math.log(max_timescale) / (half - 1)
    inverse = torch.exp(-step * torch.arange(half, device=device, dtype=torch.float32))
    angles = torch.arange(length, device=device, dtype=torch.float32)[:, None] * inverse[None, :]
    return torch.cat([torch.sin(angles), torch.cos(angles)], dim=1)
