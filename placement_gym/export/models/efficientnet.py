"""MobileNet / EfficientNet-style networks: inverted residual blocks with depthwise separable convolutions
and squeeze-and-excitation (MobileNetV2, Sandler et al. 2018; Squeeze-and-Excitation, Hu et al. 2018;
EfficientNet, Tan & Le 2019).

An MBConv block: a 1x1 expansion convolution (``expand`` times the channels; none when 1), a k x k
depthwise convolution (stride 1 or 2), squeeze-and-excitation (global average pool, a 1x1 convolution to a
quarter of the block's input channels, SiLU, a 1x1 convolution back, sigmoid, a channel-wise product),
a 1x1 projection, and the identity shortcut when the shape is unchanged; every convolution is followed
by BatchNorm, all but the projection by SiLU. The stages are EfficientNet-B0's (expansion, channels,
repeats, stride, kernel): (1, 16, 1, 1, 3), (6, 24, 2, 2, 3), (6, 40, 2, 2, 5), (6, 80, 3, 2, 3),
(6, 112, 3, 1, 5), (6, 192, 4, 2, 5), (6, 320, 1, 1, 3), after a 3x3 stride-2 stem of 32 channels and
before a 1x1 head of 1,280, global pooling and a classifier. EfficientNet's compound scaling: ``depth``
multiplies the repeats (rounded up), ``width`` the channels (rounded to a multiple of 8); B0 is 1.0 and 1.0
at 224 pixels, B4 1.8 and 1.4 at 380.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

B0_STAGES: tuple[tuple[int, int, int, int, int], ...] = (
    (1, 16, 1, 1, 3), (6, 24, 2, 2, 3), (6, 40, 2, 2, 5), (6, 80, 3, 2, 3), (6, 112, 3, 1, 5),
    (6, 192, 4, 2, 5), (6, 320, 1, 1, 3),
)


def scaled_channels(channels: int, width: float, divisor: int = 8) -> int:
    """``channels * width`` rounded to a multiple of ``divisor``, never below 90% of it."""
    scaled = channels * width
    rounded = max(divisor, int(scaled + divisor / 2) // divisor * divisor)
    return rounded + divisor if rounded < 0.9 * scaled else rounded


class ConvBnAct(nn.Module):
    def __init__(self, c_in: int, c_out: int, kernel: int, stride: int = 1, groups: int = 1,
                 act: bool = True) -> None:
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, kernel, stride=stride, padding=kernel // 2, groups=groups,
                              bias=False)
        self.bn = nn.BatchNorm2d(c_out, eps=1e-3)
        self.act = act

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.bn(self.conv(x))
        return F.silu(x) if self.act else x


class SqueezeExcite(nn.Module):
    def __init__(self, channels: int, squeezed: int) -> None:
        super().__init__()
        self.reduce = nn.Conv2d(channels, squeezed, 1)
        self.expand = nn.Conv2d(squeezed, channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scale = torch.sigmoid(self.expand(F.silu(self.reduce(F.adaptive_avg_pool2d(x, 1)))))
        return x * scale


class MBConv(nn.Module):
    """Inverted residual block with squeeze-and-excitation (see the module docstring)."""

    def __init__(self, c_in: int, c_out: int, expand: int, kernel: int, stride: int) -> None:
        super().__init__()
        mid = c_in * expand
        self.expansion = ConvBnAct(c_in, mid, 1) if expand != 1 else None
        self.depthwise = ConvBnAct(mid, mid, kernel, stride, groups=mid)
        self.squeeze_excite = SqueezeExcite(mid, max(1, c_in // 4))
        self.projection = ConvBnAct(mid, c_out, 1, act=False)
        self.residual = stride == 1 and c_in == c_out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = x if self.expansion is None else self.expansion(x)
        out = self.projection(self.squeeze_excite(self.depthwise(out)))
        return out + x if self.residual else out


class EfficientNet(nn.Module):
    """Images (batch, 3, size, size) -> class logits; ``depth`` and ``width`` scale B0 (module docstring)."""

    def __init__(self, depth: float = 1.0, width: float = 1.0, classes: int = 1000) -> None:
        super().__init__()
        c_in = scaled_channels(32, width)
        self.stem = ConvBnAct(3, c_in, 3, stride=2)
        blocks: list[nn.Module] = []
        for expand, channels, repeats, stride, kernel in B0_STAGES:
            c_out = scaled_channels(channels, width)
            for index in range(math.ceil(repeats * depth)):
                blocks.append(MBConv(c_in, c_out, expand, kernel, stride if index == 0 else 1))
                c_in = c_out
        self.blocks = nn.Sequential(*blocks)
        head = scaled_channels(1280, width)
        self.head = ConvBnAct(c_in, head, 1)
        self.classifier = nn.Linear(head, classes)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = self.head(self.blocks(self.stem(images)))
        return self.classifier(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))
