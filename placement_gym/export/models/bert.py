"""BERT encoders of Devlin et al., NAACL 2019 ("BERT: Pre-training of Deep Bidirectional Transformers").

BERT-base: 12 layers, hidden 768, 12 heads, feed-forward 3072 (about 110M parameters);
BERT-large: 24 layers, hidden 1024, 16 heads, feed-forward 4096 (about 340M). Both use the WordPiece
vocabulary of 30522 tokens, 512 learned positions, 2 segment types, LayerNorm eps 1e-12, GELU.

The graph is the encoder a training step runs: embeddings (word + position + segment 0) and their
LayerNorm, the post-LayerNorm Transformer layers, and the pooler (dense + tanh on the first token).
Input is token ids only: every position is attended (no padding mask) and all tokens are segment 0.
Attention is written out as MatMul/Softmax/MatMul so that heads' work shows as separate ops;
dense layers keep their weights as (in, out) so they export as MatMul + Add without a transpose.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from placement_gym.export.models.sizes import TransformerSizes


@dataclass(frozen=True)
class BertConfig(TransformerSizes):
    """Sizes of a BERT encoder (Devlin et al. 2019, section 3)."""

    ffn: int
    vocab: int = 30522
    max_positions: int = 512
    segment_types: int = 2
    layer_norm_eps: float = 1e-12


BERT_BASE = BertConfig(layers=12, hidden=768, heads=12, ffn=3072)
BERT_LARGE = BertConfig(layers=24, hidden=1024, heads=16, ffn=4096)


class Dense(nn.Module):
    """y = x @ W + b with W stored (in, out): one MatMul and one Add in the exported graph."""

    def __init__(self, d_in: int, d_out: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(d_in, d_out))
        self.bias = nn.Parameter(torch.empty(d_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.matmul(x, self.weight) + self.bias


class SelfAttention(nn.Module):
    """Multi-head scaled dot-product self-attention with its output projection."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.heads = config.heads
        self.head_dim = config.hidden // config.heads
        self.query = Dense(config.hidden, config.hidden)
        self.key = Dense(config.hidden, config.hidden)
        self.value = Dense(config.hidden, config.hidden)
        self.output = Dense(config.hidden, config.hidden)

    def _split_heads(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, _ = x.shape
        return x.reshape(batch, seq, self.heads, self.head_dim).transpose(1, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, hidden = x.shape
        # Scale the queries (B*S*D multiplies) rather than the scores (B*H*S*S).
        q = self._split_heads(self.query(x) * (1.0 / math.sqrt(self.head_dim)))
        k = self._split_heads(self.key(x))
        v = self._split_heads(self.value(x))
        scores = torch.matmul(q, k.transpose(-1, -2))
        context = torch.matmul(torch.softmax(scores, dim=-1), v)
        context = context.transpose(1, 2).reshape(batch, seq, hidden)
        return self.output(context)


class EncoderLayer(nn.Module):
    """Post-LN Transformer layer: x = LN(x + Attn(x)); x = LN(x + W2 GELU(W1 x))."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.attention = SelfAttention(config)
        self.attention_norm = nn.LayerNorm(config.hidden, eps=config.layer_norm_eps)
        self.intermediate = Dense(config.hidden, config.ffn)
        self.ffn_output = Dense(config.ffn, config.hidden)
        self.output_norm = nn.LayerNorm(config.hidden, eps=config.layer_norm_eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.attention_norm(x + self.attention(x))
        return self.output_norm(x + self.ffn_output(F.gelu(self.intermediate(x))))


class Bert(nn.Module):
    """Token ids (batch, seq) int64 -> (sequence output (batch, seq, hidden), pooled (batch, hidden))."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.config = config
        self.word_embeddings = nn.Embedding(config.vocab, config.hidden)
        self.position_embeddings = nn.Embedding(config.max_positions, config.hidden)
        self.segment_embeddings = nn.Embedding(config.segment_types, config.hidden)
        self.embedding_norm = nn.LayerNorm(config.hidden, eps=config.layer_norm_eps)
        self.layers = nn.ModuleList(EncoderLayer(config) for _ in range(config.layers))
        self.pooler = Dense(config.hidden, config.hidden)

    def forward(self, input_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        seq = input_ids.shape[1]
        if seq > self.config.max_positions:
            raise ValueError(f"sequence length {seq} exceeds the {self.config.max_positions} positions")
        # Positions 0..seq-1 and segment 0 for every token: slices of the tables, broadcast in the Add.
        x = (self.word_embeddings(input_ids)
             + self.position_embeddings.weight[:seq]
             + self.segment_embeddings.weight[0])
        x = self.embedding_norm(x)
        for layer in self.layers:
            x = layer(x)
        pooled = torch.tanh(self.pooler(x[:, 0]))
        return x, pooled
