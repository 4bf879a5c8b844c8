"""Whisper-style speech encoders (Radford et al. 2022, "Robust Speech Recognition via Large-Scale Weak
Supervision"): the encoder half, which turns a log-Mel spectrogram into the states a decoder attends to.

Two 1-D convolutions of kernel 3 with GELU (the second of stride 2, halving the frames), fixed sinusoidal
positions (computed in the graph, not a weight), pre-LayerNorm Transformer layers (GELU MLP of four times
the width; the key projection has no bias, as in Whisper) and a final LayerNorm. 80 Mel bins; Whisper
reads 30 s of audio as 3,000 frames (1,500 positions). Whisper's encoders: tiny 4 x 384 x 6, base
6 x 512 x 8, small 12 x 768 x 12, medium 24 x 1024 x 16, large 32 x 1280 x 20.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from placement_gym.export.models.blocks import PreLNBlock, sinusoids
from placement_gym.export.models.sizes import TransformerSizes


@dataclass(frozen=True)
class WhisperConfig(TransformerSizes):
    mels: int = 80


class WhisperEncoder(nn.Module):
    """Log-Mel frames (batch, mels, frames) -> encoder states (batch, frames / 2, hidden)."""

    def __init__(self, config: WhisperConfig) -> None:
        super().__init__()
        self.conv1 = nn.Conv1d(config.mels, config.hidden, 3, padding=1)
        self.conv2 = nn.Conv1d(config.hidden, config.hidden, 3, stride=2, padding=1)
        self.layers = nn.ModuleList(
            PreLNBlock(config.hidden, config.heads, 4 * config.hidden, key_bias=False)
            for _ in range(config.layers)
        )
        self.final_norm = nn.LayerNorm(config.hidden)

    def forward(self, mel: torch.Tensor) -> torch.Tensor:
        x = F.gelu(self.conv2(F.gelu(self.conv1(mel)))).transpose(1, 2)
        x = x + sinusoids(x.shape[1], x.shape[2], x.device)
        for layer in self.layers:
            x = layer(x)
        return self.final_norm(x)
