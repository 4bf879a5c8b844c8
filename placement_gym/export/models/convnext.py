"""ConvNeXt of Liu et al., CVPR 2022 ("A ConvNet for the 2020s").

A 4x4 stride-4 patchify stem with LayerNorm, four stages of ConvNeXt blocks at widths c, 2c, 4c, 8c with
a LayerNorm and a 2x2 stride-2 convolution between stages, global average pooling, LayerNorm and a
classifier. A block: 7x7 depthwise convolution, LayerNorm over the channels, a pointwise (per-pixel
dense) layer to four times the channels, GELU, one back, a learned per-channel scale (layer scale), and
the residual. LayerNorm over channels is taken channels-last (a transpose each way around it).
ConvNeXt-T: stages of 3, 3, 9, 3 blocks at 96 channels; S 3, 3, 27, 3; B 3, 3, 27, 3 at 128.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from placement_gym.export.models.bert import Dense


class ChannelNorm(nn.Module):
    """LayerNorm over the channels of an NCHW tensor."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(channels, eps=1e-6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)


class ConvNeXtBlock(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.depthwise = nn.Conv2d(channels, channels, 7, padding=3, groups=channels)
        self.norm = nn.LayerNorm(channels, eps=1e-6)
        self.up = Dense(channels, 4 * channels)
        self.down = Dense(4 * channels, channels)
        self.scale = nn.Parameter(torch.empty(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.norm(self.depthwise(x).permute(0, 2, 3, 1))
        out = self.down(F.gelu(self.up(out))) * self.scale
        return x + out.permute(0, 3, 1, 2)


class ConvNeXt(nn.Module):
    """Images (batch, 3, size, size) -> class logits; ``depths`` blocks per stage at ``width`` times 1, 2, 4
    and 8 channels."""

    def __init__(self, depths: tuple[int, ...] = (3, 3, 9, 3), width: int = 96, classes: int = 1000) -> None:
        super().__init__()
        widths = [width * 2**stage for stage in range(len(depths))]
        self.stem = nn.Sequential(nn.Conv2d(3, width, 4, stride=4), ChannelNorm(width))
        stages: list[nn.Module] = []
        for stage, (count, channels) in enumerate(zip(depths, widths)):
            layers: list[nn.Module] = []
            if stage > 0:
                previous = widths[stage - 1]
                layers += [ChannelNorm(previous), nn.Conv2d(previous, channels, 2, stride=2)]
            layers += [ConvNeXtBlock(channels) for _ in range(count)]
            stages.append(nn.Sequential(*layers))
        self.stages = nn.Sequential(*stages)
        self.norm = nn.LayerNorm(widths[-1], eps=1e-6)
        self.head = nn.Linear(widths[-1], classes)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = self.stages(self.stem(images))
        return self.head(self.norm(x.mean(dim=(2, 3))))
