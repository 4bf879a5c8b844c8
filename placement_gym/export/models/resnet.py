"""ResNets of He et al., CVPR 2016 ("Deep Residual Learning for Image Recognition").

- `ResNetCifar(56)`: the CIFAR-10 family of section 4.2: a 3x3 conv of 16 channels, three stages of
  n = (depth - 2) / 6 basic blocks with 16, 32, 64 channels (feature maps 32, 16, 8), global average
  pooling and a 10-way classifier. Shortcuts are option A of the paper (identity; when the shape
  changes, stride-2 subsampling and zero-padded channels), which is what gives the paper's 0.85M
  parameters for ResNet-56.
- `ResNetCifar(depth, widen=k)`: the wide ResNets of Zagoruyko & Komodakis 2016 (WRN-depth-k): the same
  network with k times the channels per stage (16k, 32k, 64k) and 1x1 projection shortcuts (convolution
  and BatchNorm) where the shape changes; WRN-28-10 is depth 28, widen 10. The blocks stay
  post-activation, as in the ResNet above (the WRN paper uses pre-activation blocks).
- `ResNet50`: the ImageNet bottleneck network of Table 1 (stages of 3, 4, 6, 3 bottleneck blocks,
  widths 64-128-256-512, expansion 4), projection shortcuts (option B) where the shape changes.
  The stride of a downsampling block sits on its 3x3 convolution (the common "v1.5" variant); the
  parameter count (about 25.6M) is the same either way.
- `ResNet152`: the same construction with stages of 3, 8, 36, 3 bottleneck blocks (Table 1; about
  60.2M parameters), the ResNet that Mirhoseini et al. 2018 place.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def _conv_bn(c_in: int, c_out: int, kernel: int, stride: int = 1) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(c_in, c_out, kernel, stride=stride, padding=kernel // 2, bias=False),
        nn.BatchNorm2d(c_out),
    )


class CifarBasicBlock(nn.Module):
    """Two 3x3 conv-BN layers with an option-A shortcut (He et al. 2016, section 4.2)."""

    def __init__(self, c_in: int, c_out: int, stride: int, projection: bool = False) -> None:
        super().__init__()
        self.branch1 = _conv_bn(c_in, c_out, 3, stride)
        self.branch2 = _conv_bn(c_out, c_out, 3)
        self.stride = stride
        self.pad_channels = c_out - c_in
        changes_shape = stride != 1 or c_in != c_out
        self.projection = _conv_bn(c_in, c_out, 1, stride) if projection and changes_shape else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.branch2(torch.relu(self.branch1(x)))
        shortcut = x
        if self.projection is not None:
            shortcut = self.projection(x)
        elif self.stride != 1 or self.pad_channels:
            # Option A: parameter-free shortcut, subsample then pad the new channels with zeros.
            shortcut = x[:, :, :: self.stride, :: self.stride]
            half = self.pad_channels // 2
            shortcut = F.pad(shortcut, (0, 0, 0, 0, half, self.pad_channels - half))
        return torch.relu(out + shortcut)


class ResNetCifar(nn.Module):
    """ResNet-(6n+2) for 32x32 images: 16/32/64 channels (times ``widen``), n basic blocks per stage."""

    def __init__(self, depth: int = 56, num_classes: int = 10, widen: int = 1) -> None:
        super().__init__()
        if (depth - 2) % 6:
            raise ValueError(f"CIFAR ResNet depth must be 6n+2 (20, 32, 44, 56, 110...), got {depth}")
        blocks = (depth - 2) // 6
        self.stem = _conv_bn(3, 16, 3)
        layers: list[nn.Module] = []
        c_in = 16
        for stage, width in enumerate((16 * widen, 32 * widen, 64 * widen)):
            for index in range(blocks):
                stride = 2 if stage > 0 and index == 0 else 1
                layers.append(CifarBasicBlock(c_in, width, stride, projection=widen > 1))
                c_in = width
        self.blocks = nn.Sequential(*layers)
        self.fc = nn.Linear(c_in, num_classes)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = self.blocks(torch.relu(self.stem(images)))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class Bottleneck(nn.Module):
    """1x1 reduce, 3x3, 1x1 expand (x4), projection shortcut when the shape changes."""

    expansion = 4

    def __init__(self, c_in: int, width: int, stride: int) -> None:
        super().__init__()
        c_out = width * self.expansion
        self.reduce = _conv_bn(c_in, width, 1)
        self.conv = _conv_bn(width, width, 3, stride)
        self.expand = _conv_bn(width, c_out, 1)
        self.projection = _conv_bn(c_in, c_out, 1, stride) if stride != 1 or c_in != c_out else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(self.reduce(x))
        out = torch.relu(self.conv(out))
        out = self.expand(out)
        shortcut = x if self.projection is None else self.projection(x)
        return torch.relu(out + shortcut)


class ResNet50(nn.Module):
    """ImageNet ResNet-50 (He et al. 2016, Table 1): 7x7 stem, stages of 3, 4, 6, 3 bottlenecks."""

    def __init__(self, num_classes: int = 1000, stages: tuple[int, ...] = (3, 4, 6, 3)) -> None:
        super().__init__()
        self.stem = _conv_bn(3, 64, 7, stride=2)
        self.pool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        layers: list[nn.Module] = []
        c_in = 64
        for stage, count in enumerate(stages):
            width = 64 * 2**stage
            for index in range(count):
                stride = 2 if stage > 0 and index == 0 else 1
                layers.append(Bottleneck(c_in, width, stride))
                c_in = width * Bottleneck.expansion
        self.blocks = nn.Sequential(*layers)
        self.fc = nn.Linear(c_in, num_classes)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = self.pool(torch.relu(self.stem(images)))
        x = self.blocks(x)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class ResNet152(ResNet50):
    """ImageNet ResNet-152 (He et al. 2016, Table 1): the ResNet-50 construction, 3, 8, 36, 3 bottlenecks."""

    def __init__(self, num_classes: int = 1000, stages: tuple[int, ...] = (3, 8, 36, 3)) -> None:
        super().__init__(num_classes, stages)
