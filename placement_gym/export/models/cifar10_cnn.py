"""The CIFAR-10 convnet of the TensorFlow tutorial, the CNN benchmark of Spotlight (Gao et al., ICML 2018).

Structure of the tutorial's `cifar10.inference`: two 5x5 convolutions of 64 channels, each followed by a
3x3 stride-2 max pool and a local response normalisation (depth radius 4, bias 1, alpha 0.001/9,
beta 0.75), then fully connected layers of 384 and 192 units and a 10-way linear classifier.
The tutorial crops images to 24x24; the bundled graph takes full 32x32 CIFAR-10 images, so the first
fully connected layer reads 8x8x64 = 4096 features.
TensorFlow's 'SAME' pooling pads one pixel at the bottom/right only; symmetric padding of 1 gives the
same output sizes and the same cost, which is all a placement graph needs.
"""

from __future__ import annotations

import torch
from torch import nn

# TF tutorial LRN: sum over depth_radius=4 neighbours each side (window 9), alpha=0.001/9 per element.
# torch's LocalResponseNorm divides alpha by the window size, so alpha_torch = 0.001 / 9 * 9.
_LRN_SIZE = 9
_LRN_ALPHA = 0.001
_LRN_BETA = 0.75
_LRN_BIAS = 1.0


class Cifar10Cnn(nn.Module):
    """conv-pool-norm, conv-norm-pool, fc384, fc192, linear 10 (TensorFlow CIFAR-10 tutorial)."""

    def __init__(self, num_classes: int = 10, image_size: int = 32) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, kernel_size=5, padding=2)
        self.pool1 = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.norm1 = nn.LocalResponseNorm(_LRN_SIZE, alpha=_LRN_ALPHA, beta=_LRN_BETA, k=_LRN_BIAS)
        self.conv2 = nn.Conv2d(64, 64, kernel_size=5, padding=2)
        self.norm2 = nn.LocalResponseNorm(_LRN_SIZE, alpha=_LRN_ALPHA, beta=_LRN_BETA, k=_LRN_BIAS)
        self.pool2 = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        features = 64 * (image_size // 4) ** 2
        self.local3 = nn.Linear(features, 384)
        self.local4 = nn.Linear(384, 192)
        self.softmax_linear = nn.Linear(192, num_classes)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = self.norm1(self.pool1(torch.relu(self.conv1(images))))
        x = self.pool2(self.norm2(torch.relu(self.conv2(x))))
        x = torch.relu(self.local3(x.flatten(1)))
        x = torch.relu(self.local4(x))
        return self.softmax_linear(x)
