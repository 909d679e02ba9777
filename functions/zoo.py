"""The model zoo: model functions in code, a module of the same kind a user writes.

Each `build_*` takes the input shape (channels, height, width for images) and the class count
and returns the model; `functions.models` loads this file as it loads a user's, names it by
spec (`functions/zoo.py:build_cnn`) or by the short names `mlp`, `cnn`, `resnet18` (ResNet-18
layout for 32×32 inputs) and `mobilenetv2` (MobileNetV2 layout for 32×32 inputs), and seeds the
build.

Normalisation is GroupNorm, not BatchNorm, on purpose: GroupNorm has no running buffers and
normalises each sample on its own, so n BSP workers with local batch b are *exactly* one process
with global batch n·b, and the whole model state is its parameter vector (what the PS holds).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn


def _groups(channels: int) -> int:
    """GroupNorm groups: 32 as in Wu & He (2018) when it divides the channels, else fewer."""
    for g in (32, 16, 8, 4, 2, 1):
        if channels % g == 0:
            return g
    return 1


def _norm(channels: int) -> nn.GroupNorm:
    return nn.GroupNorm(_groups(channels), channels)


def build_mlp(input_shape: Sequence[int], classes: int) -> nn.Module:
    features = 1
    for d in input_shape:
        features *= int(d)
    return nn.Sequential(
        nn.Flatten(),
        nn.Linear(features, 128),
        nn.ReLU(),
        nn.Linear(128, 64),
        nn.ReLU(),
        nn.Linear(64, classes),
    )


def _image_channels(input_shape: Sequence[int], model: str) -> int:
    if len(input_shape) != 3:
        raise ValueError(
            f"{model} needs image input (channels, height, width), got {tuple(input_shape)}"
        )
    return int(input_shape[0])


def build_cnn(input_shape: Sequence[int], classes: int) -> nn.Module:
    channels = _image_channels(input_shape, "cnn")
    return nn.Sequential(
        nn.Conv2d(channels, 32, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(32, 64, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(64, 64, 3, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(2),
        nn.Flatten(),
        nn.Linear(64 * 4, 128),
        nn.ReLU(),
        nn.Linear(128, classes),
    )


class _BasicBlock(nn.Module):
    def __init__(self, c_in: int, c_out: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False)
        self.n1 = _norm(c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False)
        self.n2 = _norm(c_out)
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or c_in != c_out:
            self.shortcut = nn.Sequential(
                nn.Conv2d(c_in, c_out, 1, stride, bias=False), _norm(c_out)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(self.n1(self.conv1(x)))
        out = self.n2(self.conv2(out))
        return torch.relu(out + self.shortcut(x))


def build_resnet18(input_shape: Sequence[int], classes: int) -> nn.Module:
    """ResNet-18 (He et al. 2016) in its CIFAR form: 3×3 stem, no max-pool, [2, 2, 2, 2]."""
    layers: list[nn.Module] = [
        nn.Conv2d(_image_channels(input_shape, "resnet18"), 64, 3, 1, 1, bias=False),
        _norm(64),
        nn.ReLU(),
    ]
    c_in = 64
    for c_out, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        layers += [_BasicBlock(c_in, c_out, stride), _BasicBlock(c_out, c_out, 1)]
        c_in = c_out
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, classes)]
    return nn.Sequential(*layers)


class _InvertedResidual(nn.Module):
    def __init__(self, c_in: int, c_out: int, stride: int, expand: int) -> None:
        super().__init__()
        hidden = c_in * expand
        self.use_residual = stride == 1 and c_in == c_out
        layers: list[nn.Module] = []
        if expand != 1:
            layers += [nn.Conv2d(c_in, hidden, 1, bias=False), _norm(hidden), nn.ReLU6()]
        layers += [
            nn.Conv2d(hidden, hidden, 3, stride, 1, groups=hidden, bias=False),
            _norm(hidden),
            nn.ReLU6(),
            nn.Conv2d(hidden, c_out, 1, bias=False),
            _norm(c_out),
        ]
        self.block = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.block(x)
        return x + out if self.use_residual else out


def build_mobilenetv2(input_shape: Sequence[int], classes: int) -> nn.Module:
    """MobileNetV2 (Sandler et al. 2018), CIFAR form: stem and second stage at stride 1."""
    config = (
        (1, 16, 1, 1),
        (6, 24, 2, 1),
        (6, 32, 3, 2),
        (6, 64, 4, 2),
        (6, 96, 3, 1),
        (6, 160, 3, 2),
        (6, 320, 1, 1),
    )  # (expand t, channels c, repeats n, stride s)
    layers: list[nn.Module] = [
        nn.Conv2d(_image_channels(input_shape, "mobilenetv2"), 32, 3, 1, 1, bias=False),
        _norm(32),
        nn.ReLU6(),
    ]
    c_in = 32
    for expand, c_out, repeats, stride in config:
        for i in range(repeats):
            layers.append(_InvertedResidual(c_in, c_out, stride if i == 0 else 1, expand))
            c_in = c_out
    layers += [
        nn.Conv2d(c_in, 1280, 1, bias=False),
        _norm(1280),
        nn.ReLU6(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(1280, classes),
    ]
    return nn.Sequential(*layers)
