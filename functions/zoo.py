"""The model zoo: model functions in code, a module of the same kind a user writes.

Each `build_*` takes the input shape (channels, height, width for images) and the class count
and returns the model; `functions.models` loads this file as it loads a user's, names it by
spec (`functions/zoo.py:build_cnn`) or by the short names `mlp`, `cnn`, `resnet18` (ResNet-18
layout for 32×32 inputs) and `mobilenetv2` (MobileNetV2 layout for 32×32 inputs), and seeds the
build. `build_gpt2_large` (GPT-2 large's layout, too big for one Lambda function's step: the
pipelined plans' model) and its small twin `build_gpt2_tiny` take token sequences and are named
by spec (`functions/zoo.py:build_gpt2_large`).

Every model declares its blocks (functions.blocks) as the children of an nn.Sequential: a
pipelined plan cuts between them.

Normalisation is GroupNorm, not BatchNorm, on purpose: GroupNorm has no running buffers and
normalises each sample on its own, so n BSP workers with local batch b are *exactly* one process
with global batch n·b, and the whole model state is its parameter vector (what the PS holds).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
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
    """ResNet-18 (He et al. 2016) in its CIFAR form: 3×3 stem, no max-pool, [2, 2, 2, 2].

    Its blocks (functions.blocks) are the stem, each residual block and the head."""
    stem = nn.Sequential(
        nn.Conv2d(_image_channels(input_shape, "resnet18"), 64, 3, 1, 1, bias=False),
        _norm(64),
        nn.ReLU(),
    )
    residual: list[nn.Module] = []
    c_in = 64
    for c_out, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        residual += [_BasicBlock(c_in, c_out, stride), _BasicBlock(c_out, c_out, 1)]
        c_in = c_out
    head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, classes))
    return nn.Sequential(stem, *residual, head)


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
    """MobileNetV2 (Sandler et al. 2018), CIFAR form: stem and second stage at stride 1.

    Its blocks (functions.blocks) are the stem, each inverted-residual block and the head."""
    config = (
        (1, 16, 1, 1),
        (6, 24, 2, 1),
        (6, 32, 3, 2),
        (6, 64, 4, 2),
        (6, 96, 3, 1),
        (6, 160, 3, 2),
        (6, 320, 1, 1),
    )  # (expand t, channels c, repeats n, stride s)
    stem = nn.Sequential(
        nn.Conv2d(_image_channels(input_shape, "mobilenetv2"), 32, 3, 1, 1, bias=False),
        _norm(32),
        nn.ReLU6(),
    )
    inverted: list[nn.Module] = []
    c_in = 32
    for expand, c_out, repeats, stride in config:
        for i in range(repeats):
            inverted.append(_InvertedResidual(c_in, c_out, stride if i == 0 else 1, expand))
            c_in = c_out
    head = nn.Sequential(
        nn.Conv2d(c_in, 1280, 1, bias=False),
        _norm(1280),
        nn.ReLU6(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(1280, classes),
    )
    return nn.Sequential(stem, *inverted, head)


# -- GPT-2 ---------------------------------------------------------------------------------
# Tokens a sample holds. Not GPT-2's 1,024: attention's cost grows with the square of it and a
# step at 1,024 tokens would take minutes per sample on a Lambda's few vCPUs; at 256 a
# transformer block's forward + backward of one sample stays near a second on one vCPU, and
# short-context fine-tuning (classification, chat turns) fits in 256 tokens.
GPT2_SEQUENCE = 256


@dataclass(frozen=True)
class GPT2Shape:
    """A GPT-2 layout (Radford et al. 2019): its transformer blocks, width, heads, MLP width and
    position table."""

    layers: int
    d_model: int
    heads: int
    mlp: int
    positions: int


GPT2_LARGE = GPT2Shape(layers=36, d_model=1280, heads=20, mlp=5120, positions=1024)
GPT2_TINY = GPT2Shape(layers=2, d_model=64, heads=4, mlp=256, positions=GPT2_SEQUENCE)


class Embeddings(nn.Module):
    """Token + position embedding; the token ids arrive as float32 (the project's tensors are
    float) and are cast to long here."""

    def __init__(self, vocab: int, positions: int, d_model: int) -> None:
        super().__init__()
        self.token = nn.Embedding(vocab, d_model)
        self.position = nn.Embedding(positions, d_model)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        tokens = ids.long()
        return self.token(tokens) + self.position(torch.arange(tokens.shape[1]))


class TransformerBlock(nn.Module):
    """Pre-LayerNorm causal self-attention and MLP, each with its residual (GPT-2's block)."""

    def __init__(self, d_model: int, heads: int, mlp: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.ln2 = nn.LayerNorm(d_model)
        self.fc = nn.Linear(d_model, mlp)
        self.out = nn.Linear(mlp, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = (
            z.view(b, t, self.heads, d // self.heads).transpose(1, 2)
            for z in self.qkv(self.ln1(x)).split(d, dim=2)
        )
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class NextTokenHead(nn.Module):
    """Final LayerNorm and LM head at the last position only: the next token's scores."""

    def __init__(self, d_model: int, vocab: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d_model)
        self.lm = nn.Linear(d_model, vocab, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # LayerNorm is per position, so normalising the last one alone is the whole's last row
        return self.lm(self.norm(x[:, -1, :]))


def _gpt2_init(module: nn.Module) -> None:
    """GPT-2's initialisation: N(0, 0.02) weights and embeddings, zero biases."""
    if isinstance(module, nn.Linear | nn.Embedding):
        nn.init.normal_(module.weight, std=0.02)
    if isinstance(module, nn.Linear) and module.bias is not None:
        nn.init.zeros_(module.bias)


def build_gpt2(input_shape: Sequence[int], classes: int, shape: GPT2Shape) -> nn.Sequential:
    """A GPT-2 of `shape` for sequences of input_shape[0] token ids, vocabulary = `classes`.

    The project's models output (batch, classes) (functions.models.check_output), so this one
    predicts the next token at the last position: its scores over the vocabulary. Its blocks
    (functions.blocks) are the embedding, each transformer block and the head. The LM head is
    not tied to the token embedding: a pipeline stage owns its parameters, and the first and
    last blocks may sit in different stages."""
    if len(input_shape) != 1 or not 1 <= int(input_shape[0]) <= shape.positions:
        raise ValueError(
            f"gpt2 needs token input (sequence,) of 1 to {shape.positions} tokens, got "
            f"{tuple(input_shape)}"
        )
    model = nn.Sequential(
        Embeddings(classes, shape.positions, shape.d_model),
        *(TransformerBlock(shape.d_model, shape.heads, shape.mlp) for _ in range(shape.layers)),
        NextTokenHead(shape.d_model, classes),
    )
    model.apply(_gpt2_init)
    return model


def build_gpt2_large(input_shape: Sequence[int], classes: int) -> nn.Module:
    """GPT-2 large's layout (36 blocks, d_model 1280, 20 heads, MLP 5120), random weights; with
    the GPT-2 vocabulary (50,257 classes) 838,359,040 parameters: GPT-2 large's 774,030,080
    plus its LM head untied (gpt2_parameter_count)."""
    return build_gpt2(input_shape, classes, GPT2_LARGE)


def build_gpt2_tiny(input_shape: Sequence[int], classes: int) -> nn.Module:
    """The same code at a test's size (2 blocks, d_model 64, 4 heads, 256 positions)."""
    return build_gpt2(input_shape, classes, GPT2_TINY)


def gpt2_parameter_count(shape: GPT2Shape, vocab: int) -> int:
    """build_gpt2's parameter count from its shape alone, without building it."""
    d = shape.d_model
    embeddings = (vocab + shape.positions) * d
    block = 2 * 2 * d + (d * 3 * d + 3 * d) + (d * d + d) + (d * shape.mlp + shape.mlp)
    block += shape.mlp * d + d
    return embeddings + shape.layers * block + 2 * d + d * vocab
