"""GPT-2 decoders of Radford et al. 2019 ("Language Models are Unsupervised Multitask Learners").

Pre-LayerNorm Transformer layers with causal self-attention and a GELU MLP of four times the width,
learned positions (1,024), a final LayerNorm and the language-model head tied to the token embedding
(the logits read the embedding table: one parameter, two consumers). GPT-2 small is 12 layers of 768
with 12 heads (124M parameters); medium 24 x 1024 x 16, large 36 x 1280 x 20, XL 48 x 1600 x 25.
Vocabulary: GPT-2's 50,257 byte-pair tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from placement_gym.export.models.blocks import PreLNBlock
from placement_gym.export.models.sizes import TransformerSizes


@dataclass(frozen=True)
class GPT2Config(TransformerSizes):
    vocab: int = 50_257
    max_positions: int = 1024


class GPT2(nn.Module):
    """Token ids (batch, seq) int64 -> next-token logits (batch, seq, vocab)."""

    def __init__(self, config: GPT2Config) -> None:
        super().__init__()
        self.config = config
        self.token_embedding = nn.Embedding(config.vocab, config.hidden)
        self.position_embedding = nn.Embedding(config.max_positions, config.hidden)
        self.layers = nn.ModuleList(
            PreLNBlock(config.hidden, config.heads, 4 * config.hidden, causal=True)
            for _ in range(config.layers)
        )
        self.final_norm = nn.LayerNorm(config.hidden)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        seq = input_ids.shape[1]
        if seq > self.config.max_positions:
            raise ValueError(f"sequence length {seq} exceeds the {self.config.max_positions} positions")
        x = self.token_embedding(input_ids) + self.position_embedding.weight[:seq]
        for layer in self.layers:
            x = layer(x)
        return torch.matmul(self.final_norm(x), self.token_embedding.weight.t())
