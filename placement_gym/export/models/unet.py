"""U-Net of Ronneberger et al., MICCAI 2015 ("U-Net: Convolutional Networks for Biomedical Image
Segmentation"), with the padded convolutions and batch normalisation that common reimplementations use.

An encoder of ``levels`` downsampling steps (2x2 max pool, then ``convs`` 3x3 convolutions, each with
BatchNorm and ReLU, doubling the channels), a bottleneck, and a decoder that mirrors it: a 2x2 stride-2
transposed convolution halving the channels, concatenation with the encoder's features of that
resolution (the skip connection), and ``convs`` convolutions. A 1x1 convolution gives the per-pixel class
scores. The paper's network: 4 levels, 64 channels at the top, 2 convolutions per level.
"""

from __future__ import annotations

import torch
from torch import nn


class ConvBlock(nn.Module):
    """``convs`` times: 3x3 convolution (padded), BatchNorm, ReLU."""

    def __init__(self, c_in: int, c_out: int, convs: int) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        for index in range(convs):
            layers += [nn.Conv2d(c_in if index == 0 else c_out, c_out, 3, padding=1, bias=False),
                       nn.BatchNorm2d(c_out), nn.ReLU()]
        self.layers = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


class UNet(nn.Module):
    """Images (batch, channels, size, size) -> class scores (batch, classes, size, size)."""

    def __init__(self, levels: int = 4, width: int = 64, convs: int = 2, channels: int = 3,
                 classes: int = 2) -> None:
        super().__init__()
        self.levels = levels
        widths = [width * 2**level for level in range(levels + 1)]
        self.down = nn.ModuleList(
            ConvBlock(channels if level == 0 else widths[level - 1], widths[level], convs)
            for level in range(levels + 1)
        )
        self.pool = nn.MaxPool2d(2)
        self.upsample = nn.ModuleList(
            nn.ConvTranspose2d(widths[level + 1], widths[level], 2, stride=2)
            for level in reversed(range(levels))
        )
        self.up = nn.ModuleList(ConvBlock(2 * widths[level], widths[level], convs)
                                for level in reversed(range(levels)))
        self.classifier = nn.Conv2d(width, classes, 1)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        if images.shape[-1] % 2**self.levels or images.shape[-2] % 2**self.levels:
            raise ValueError(f"image sides must be multiples of 2^{self.levels}, "
                             f"got {tuple(images.shape[-2:])}")
        skips = []
        x = images
        for level, block in enumerate(self.down):
            x = block(x if level == 0 else self.pool(x))
            skips.append(x)
        skips.pop()  # the bottleneck's own output
        for upsample, block in zip(self.upsample, self.up):
            x = block(torch.cat([skips.pop(), upsample(x)], dim=1))
        return self.classifier(x)
