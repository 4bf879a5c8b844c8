"""T5 encoder-decoders of Raffel et al., JMLR 2020 ("Exploring the Limits of Transfer Learning with a
Unified Text-to-Text Transformer"), version 1.0.

Encoder and decoder of ``layers`` layers each, pre-normalisation with T5's scale-only RMS LayerNorm, no
biases anywhere, ReLU feed-forward blocks, attention without the 1/sqrt(d) scaling (folded into the
initialisation in T5) and relative position biases: the distance between key and query falls into one of
32 buckets (exact up to 8 (16 one way), logarithmic up to 128), each bucket a learned bias per head, in
the first layer of the encoder and of the decoder and shared by the layers above. The decoder's
self-attention is causal and its buckets one-directional; its cross-attention reads the encoder's output.
The embedding is shared by encoder, decoder and the output layer (scaled by width^-0.5), vocabulary
32,128. T5-small: 6 + 6 layers of 512, 8 heads, feed-forward 2,048; base 12 x 768 x 12, 3,072; large
24 x 1,024 x 16, 4,096. The target is a quarter of the input's length here, as in T5's span-corruption
pre-training (512 tokens in, 114 out).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from placement_gym.export.models.blocks import Projection, causal_mask
from placement_gym.export.models.llama import RMSNorm
from placement_gym.export.models.sizes import TransformerSizes


@dataclass(frozen=True)
class T5Config(TransformerSizes):
    ffn: int
    vocab: int = 32_128
    buckets: int = 32
    max_distance: int = 128
    eps: float = 1e-6


def relative_buckets(queries: int, keys: int, buckets: int, max_distance: int, bidirectional: bool,
                     device: torch.device) -> torch.Tensor:
    """Bucket of (query i, key j) by the distance j - i: one side per half of the buckets when
    ``bidirectional``, else only keys before the query; distances below half the (side's) buckets
    each have their own bucket, larger ones share buckets spaced logarithmically up to ``max_distance``."""
    distance = (torch.arange(keys, device=device)[None, :] - torch.arange(queries, device=device)[:, None])
    bucket = torch.zeros_like(distance)
    if bidirectional:
        buckets //= 2
        bucket = bucket + (distance > 0).to(distance.dtype) * buckets
        distance = distance.abs()
    else:
        distance = (-distance).clamp(min=0)
    exact = buckets // 2
    spread = torch.log(distance.clamp(min=1).to(torch.float32) / exact) / math.log(max_distance / exact)
    far = (exact + (spread * (buckets - exact)).to(distance.dtype)).clamp(max=buckets - 1)
    return bucket + torch.where(distance < exact, distance, far)


class T5Attention(nn.Module):
    """Multi-head attention with T5's relative position bias (when it owns the bias table)."""

    def __init__(self, config: T5Config, *, relative_bias: bool, bidirectional: bool) -> None:
        super().__init__()
        self.config, self.bidirectional = config, bidirectional
        self.heads, self.head_dim = config.heads, config.hidden // config.heads
        self.query = Projection(config.hidden, config.hidden)
        self.key = Projection(config.hidden, config.hidden)
        self.value = Projection(config.hidden, config.hidden)
        self.output = Projection(config.hidden, config.hidden)
        self.relative_bias = nn.Embedding(config.buckets, config.heads) if relative_bias else None

    def position_bias(self, queries: int, keys: int, device: torch.device) -> torch.Tensor:
        """(1, heads, queries, keys) biases of the relative distances."""
        assert self.relative_bias is not None
        buckets = relative_buckets(queries, keys, self.config.buckets, self.config.max_distance,
                                   self.bidirectional, device)
        return self.relative_bias(buckets).permute(2, 0, 1)[None]

    def _split(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, _ = x.shape
        return x.reshape(batch, seq, self.heads, self.head_dim).transpose(1, 2)

    def forward(self, x: torch.Tensor, memory: torch.Tensor | None,
                bias: torch.Tensor | None) -> torch.Tensor:
        batch, seq, hidden = x.shape
        source = x if memory is None else memory
        scores = torch.matmul(self._split(self.query(x)), self._split(self.key(source)).transpose(-1, -2))
        if bias is not None:
            scores = scores + bias
        context = torch.matmul(torch.softmax(scores, dim=-1), self._split(self.value(source)))
        return self.output(context.transpose(1, 2).reshape(batch, seq, hidden))


class T5FeedForward(nn.Module):
    def __init__(self, config: T5Config) -> None:
        super().__init__()
        self.wi = Projection(config.hidden, config.ffn)
        self.wo = Projection(config.ffn, config.hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.wo(torch.relu(self.wi(x)))


class T5Layer(nn.Module):
    """Self-attention, cross-attention (decoder only), feed-forward; each pre-normalised and residual."""

    def __init__(self, config: T5Config, *, decoder: bool, first: bool) -> None:
        super().__init__()
        self.self_norm = RMSNorm(config.hidden, config.eps)
        self.self_attention = T5Attention(config, relative_bias=first, bidirectional=not decoder)
        self.cross_norm = RMSNorm(config.hidden, config.eps) if decoder else None
        self.cross_attention = (T5Attention(config, relative_bias=False, bidirectional=True)
                                if decoder else None)
        self.ffn_norm = RMSNorm(config.hidden, config.eps)
        self.feed_forward = T5FeedForward(config)

    def forward(self, x: torch.Tensor, bias: torch.Tensor,
                memory: torch.Tensor | None = None) -> torch.Tensor:
        x = x + self.self_attention(self.self_norm(x), None, bias)
        if self.cross_attention is not None and self.cross_norm is not None:
            x = x + self.cross_attention(self.cross_norm(x), memory, None)
        return x + self.feed_forward(self.ffn_norm(x))


class T5(nn.Module):
    """Source and target ids (batch, length) int64 -> target logits (batch, target length, vocab)."""

    def __init__(self, config: T5Config) -> None:
        super().__init__()
        self.config = config
        self.embedding = nn.Embedding(config.vocab, config.hidden)
        self.encoder = nn.ModuleList(T5Layer(config, decoder=False, first=i == 0)
                                     for i in range(config.layers))
        self.encoder_norm = RMSNorm(config.hidden, config.eps)
        self.decoder = nn.ModuleList(T5Layer(config, decoder=True, first=i == 0)
                                     for i in range(config.layers))
        self.decoder_norm = RMSNorm(config.hidden, config.eps)

    def forward(self, src_ids: torch.Tensor, tgt_ids: torch.Tensor) -> torch.Tensor:
        src, tgt = src_ids.shape[1], tgt_ids.shape[1]
        x = self.embedding(src_ids)
        bias = self.encoder[0].self_attention.position_bias(src, src, x.device)
        for layer in self.encoder:
            x = layer(x, bias)
        memory = self.encoder_norm(x)
        y = self.embedding(tgt_ids)
        bias = self.decoder[0].self_attention.position_bias(tgt, tgt, y.device)
        bias = bias.masked_fill(causal_mask(tgt, tgt, y.device), float("-inf"))
        for layer in self.decoder:
            y = layer(y, bias, memory)
        y = self.decoder_norm(y) * (self.config.hidden ** -0.5)
        return torch.matmul(y, self.embedding.weight.t())
