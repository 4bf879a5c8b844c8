"""Inception-V3 of Szegedy et al., CVPR 2016 ("Rethinking the Inception Architecture"), 299x299 input.

Layout of the paper's Table 1 with the module widths that the widely used reference implementations
share: stem of six conv layers and two max pools (299 -> 35x35x192), three 35x35 modules (figure 5),
a grid reduction to 17x17x768, four 17x17 modules with factorised 1x7/7x1 convolutions (figure 6),
a grid reduction to 8x8x1280, two 8x8 modules with expanded 1x3/3x1 branches (figure 7), global
average pooling and a 1000-way classifier. Every convolution is conv (no bias) + BatchNorm
(eps 0.001) + ReLU. The auxiliary classifier (a training-time regulariser) and dropout are left out.

`InceptionV3(depth=d, width=w)` scales the network for the datasets: d modules at 35x35, d + 1 at 17x17
(their middle width 128 in the first, 192 in the last, 160 between) and (d + 1) // 2 at 8x8, every
channel count times w (rounded); d = 3 and w = 1 is the paper's network.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def _scaled(channels: int, width: float) -> int:
    return max(8, int(round(channels * width)))


class ConvBnRelu(nn.Module):
    """Convolution without bias, BatchNorm (eps 0.001), ReLU: the unit every Inception branch is built of."""

    def __init__(self, c_in: int, c_out: int, kernel: int | tuple[int, int], stride: int = 1,
                 padding: int | tuple[int, int] = 0) -> None:
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, kernel, stride=stride, padding=padding, bias=False)
        self.bn = nn.BatchNorm2d(c_out, eps=0.001)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.bn(self.conv(x)))


def _avg_pool_same(x: torch.Tensor) -> torch.Tensor:
    return F.avg_pool2d(x, kernel_size=3, stride=1, padding=1)


class Module35(nn.Module):
    """35x35 module (figure 5): 1x1 | 1x1-5x5 | 1x1-3x3-3x3 | avgpool-1x1."""

    def __init__(self, c_in: int, pool_features: int, width: float = 1.0) -> None:
        super().__init__()
        c48, c64, c96 = (_scaled(c, width) for c in (48, 64, 96))
        self.b1 = ConvBnRelu(c_in, c64, 1)
        self.b5_1 = ConvBnRelu(c_in, c48, 1)
        self.b5_2 = ConvBnRelu(c48, c64, 5, padding=2)
        self.b3_1 = ConvBnRelu(c_in, c64, 1)
        self.b3_2 = ConvBnRelu(c64, c96, 3, padding=1)
        self.b3_3 = ConvBnRelu(c96, c96, 3, padding=1)
        self.bp = ConvBnRelu(c_in, pool_features, 1)
        self.out_channels = 2 * c64 + c96 + pool_features

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([
            self.b1(x),
            self.b5_2(self.b5_1(x)),
            self.b3_3(self.b3_2(self.b3_1(x))),
            self.bp(_avg_pool_same(x)),
        ], dim=1)


class Reduction35To17(nn.Module):
    """Grid reduction 35 -> 17: 3x3/2 | 1x1-3x3-3x3/2 | maxpool/2."""

    def __init__(self, c_in: int, width: float = 1.0) -> None:
        super().__init__()
        c64, c96, c384 = (_scaled(c, width) for c in (64, 96, 384))
        self.b3 = ConvBnRelu(c_in, c384, 3, stride=2)
        self.bd_1 = ConvBnRelu(c_in, c64, 1)
        self.bd_2 = ConvBnRelu(c64, c96, 3, padding=1)
        self.bd_3 = ConvBnRelu(c96, c96, 3, stride=2)
        self.out_channels = c384 + c96 + c_in

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([
            self.b3(x),
            self.bd_3(self.bd_2(self.bd_1(x))),
            F.max_pool2d(x, kernel_size=3, stride=2),
        ], dim=1)


class Module17(nn.Module):
    """17x17 module (figure 6) with n=7 factorisation: 1x1 | 1x1-1x7-7x1 | 1x1-(7x1-1x7)x2 | pool-1x1."""

    def __init__(self, c_in: int, mid: int, width: float = 1.0) -> None:
        super().__init__()
        c192 = _scaled(192, width)
        self.b1 = ConvBnRelu(c_in, c192, 1)
        self.b7_1 = ConvBnRelu(c_in, mid, 1)
        self.b7_2 = ConvBnRelu(mid, mid, (1, 7), padding=(0, 3))
        self.b7_3 = ConvBnRelu(mid, c192, (7, 1), padding=(3, 0))
        self.bd_1 = ConvBnRelu(c_in, mid, 1)
        self.bd_2 = ConvBnRelu(mid, mid, (7, 1), padding=(3, 0))
        self.bd_3 = ConvBnRelu(mid, mid, (1, 7), padding=(0, 3))
        self.bd_4 = ConvBnRelu(mid, mid, (7, 1), padding=(3, 0))
        self.bd_5 = ConvBnRelu(mid, c192, (1, 7), padding=(0, 3))
        self.bp = ConvBnRelu(c_in, c192, 1)
        self.out_channels = 4 * c192

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([
            self.b1(x),
            self.b7_3(self.b7_2(self.b7_1(x))),
            self.bd_5(self.bd_4(self.bd_3(self.bd_2(self.bd_1(x))))),
            self.bp(_avg_pool_same(x)),
        ], dim=1)


class Reduction17To8(nn.Module):
    """Grid reduction 17 -> 8: 1x1-3x3/2 | 1x1-1x7-7x1-3x3/2 | maxpool/2."""

    def __init__(self, c_in: int, width: float = 1.0) -> None:
        super().__init__()
        c192, c320 = _scaled(192, width), _scaled(320, width)
        self.b3_1 = ConvBnRelu(c_in, c192, 1)
        self.b3_2 = ConvBnRelu(c192, c320, 3, stride=2)
        self.b7_1 = ConvBnRelu(c_in, c192, 1)
        self.b7_2 = ConvBnRelu(c192, c192, (1, 7), padding=(0, 3))
        self.b7_3 = ConvBnRelu(c192, c192, (7, 1), padding=(3, 0))
        self.b7_4 = ConvBnRelu(c192, c192, 3, stride=2)
        self.out_channels = c320 + c192 + c_in

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([
            self.b3_2(self.b3_1(x)),
            self.b7_4(self.b7_3(self.b7_2(self.b7_1(x)))),
            F.max_pool2d(x, kernel_size=3, stride=2),
        ], dim=1)


class Module8(nn.Module):
    """8x8 module (figure 7): 1x1 | 1x1-(1x3,3x1) | 1x1-3x3-(1x3,3x1) | pool-1x1."""

    def __init__(self, c_in: int, width: float = 1.0) -> None:
        super().__init__()
        c192, c320, c384, c448 = (_scaled(c, width) for c in (192, 320, 384, 448))
        self.b1 = ConvBnRelu(c_in, c320, 1)
        self.b3_1 = ConvBnRelu(c_in, c384, 1)
        self.b3_2a = ConvBnRelu(c384, c384, (1, 3), padding=(0, 1))
        self.b3_2b = ConvBnRelu(c384, c384, (3, 1), padding=(1, 0))
        self.bd_1 = ConvBnRelu(c_in, c448, 1)
        self.bd_2 = ConvBnRelu(c448, c384, 3, padding=1)
        self.bd_3a = ConvBnRelu(c384, c384, (1, 3), padding=(0, 1))
        self.bd_3b = ConvBnRelu(c384, c384, (3, 1), padding=(1, 0))
        self.bp = ConvBnRelu(c_in, c192, 1)
        self.out_channels = c320 + 4 * c384 + c192

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b3 = self.b3_1(x)
        bd = self.bd_2(self.bd_1(x))
        return torch.cat([
            self.b1(x),
            self.b3_2a(b3), self.b3_2b(b3),
            self.bd_3a(bd), self.bd_3b(bd),
            self.bp(_avg_pool_same(x)),
        ], dim=1)


class InceptionV3(nn.Module):
    """Inception-V3 without the auxiliary head: 299x299x3 -> 1000 logits (``depth``, ``width``: the
    module docstring)."""

    def __init__(self, num_classes: int = 1000, depth: int = 3, width: float = 1.0) -> None:
        super().__init__()
        if depth < 1:
            raise ValueError(f"depth must be at least 1, got {depth}")
        c32, c64, c80, c192 = (_scaled(c, width) for c in (32, 64, 80, 192))
        self.stem = nn.Sequential(
            ConvBnRelu(3, c32, 3, stride=2),
            ConvBnRelu(c32, c32, 3),
            ConvBnRelu(c32, c64, 3, padding=1),
            nn.MaxPool2d(kernel_size=3, stride=2),
            ConvBnRelu(c64, c80, 1),
            ConvBnRelu(c80, c192, 3),
            nn.MaxPool2d(kernel_size=3, stride=2),
        )
        modules: list[nn.Module] = []
        c_in = c192
        for index in range(depth):
            modules.append(Module35(c_in, c32 if index == 0 else c64, width))
            c_in = modules[-1].out_channels
        modules.append(Reduction35To17(c_in, width))
        c_in = modules[-1].out_channels
        mids = [128] + [160] * (depth - 1) + [192]
        for mid in mids:
            modules.append(Module17(c_in, _scaled(mid, width), width))
            c_in = modules[-1].out_channels
        modules.append(Reduction17To8(c_in, width))
        c_in = modules[-1].out_channels
        for _ in range((depth + 1) // 2):
            modules.append(Module8(c_in, width))
            c_in = modules[-1].out_channels
        self.mixed = nn.Sequential(*modules)
        self.fc = nn.Linear(c_in, num_classes)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = self.mixed(self.stem(images))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))
