"""Vision Transformers of Dosovitskiy et al., ICLR 2021 ("An Image is Worth 16x16 Words").

Images are cut into patches by a strided convolution (the patch embedding), a learned class token is
prepended and learned positions added; pre-LayerNorm Transformer layers (GELU MLP of four times the
width), a final LayerNorm and a linear classifier on the class token. ViT-B/16 is 12 layers of 768 with 12
heads (86M parameters), ViT-L/16 24 x 1024 x 16, ViT-H/14 32 x 1280 x 16.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from placement_gym.export.models.blocks import PreLNBlock
from placement_gym.export.models.sizes import TransformerSizes


@dataclass(frozen=True)
class ViTConfig(TransformerSizes):
    image: int = 224
    patch: int = 16
    classes: int = 1000

    @property
    def patches(self) -> int:
        return (self.image // self.patch) ** 2


class ViT(nn.Module):
    """Images (batch, 3, image, image) -> class logits (batch, classes)."""

    def __init__(self, config: ViTConfig) -> None:
        super().__init__()
        if config.image % config.patch:
            raise ValueError(f"image size {config.image} is not a multiple of the patch size {config.patch}")
        self.patch_embedding = nn.Conv2d(3, config.hidden, config.patch, stride=config.patch)
        self.class_token = nn.Parameter(torch.empty(1, 1, config.hidden))
        self.positions = nn.Parameter(torch.empty(1, config.patches + 1, config.hidden))
        self.layers = nn.ModuleList(
            PreLNBlock(config.hidden, config.heads, 4 * config.hidden, eps=1e-6) for _ in range(config.layers)
        )
        self.final_norm = nn.LayerNorm(config.hidden, eps=1e-6)
        self.head = nn.Linear(config.hidden, config.classes)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = self.patch_embedding(images).flatten(2).transpose(1, 2)  # (batch, patches, hidden)
        x = torch.cat([self.class_token.expand(x.shape[0], -1, -1), x], dim=1) + self.positions
        for layer in self.layers:
            x = layer(x)
        return self.head(self.final_norm(x[:, 0]))
