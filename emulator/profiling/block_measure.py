"""A model's blocks measured one by one: what each holds, hands on and saves for backward, and
how fast its forward + backward runs alone (the figures of a profile's `blocks`).

Runs in the block child (emulator.profiling.block_child), inside its CPU group. Blocks of the
same class, parameter shapes and input shape (GPT-2's 36 transformer layers) compute the same
arithmetic on the same shapes: the first is measured and its figures are reused for the rest,
whose input is then a tensor of the shape the first one gave (its values do not change a block's
time or sizes).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

WARMUP_STEPS = 1  # the first forward + backward allocates and picks kernels: not timed


@dataclass(frozen=True)
class BlockFigures:
    """One block's figures, per sample where named so (bytes of float32 tensors)."""

    parameter_bytes: int
    output_bytes_per_sample: int
    activation_bytes_per_sample: int
    samples_per_s: float
    output_shape: tuple[int, ...]  # the whole batch's, to stand in for a reused block's output
    output_dtype: torch.dtype


def signature(block: nn.Module, x: torch.Tensor) -> tuple[Any, ...]:
    """What makes two blocks the same work: class, parameter shapes, input shape and type."""
    shapes = tuple(tuple(p.shape) for p in block.parameters())
    return (type(block).__qualname__, shapes, tuple(x.shape), x.dtype)


def saved_bytes_forward(block: nn.Module, x: torch.Tensor) -> tuple[torch.Tensor, int]:
    """The block's output and the bytes autograd saves for its backward: each distinct storage
    once (a view saved twice is one tensor in memory), the block's own parameters left out (they
    are parameter_bytes). The block's input counts where the block saves it: a stage keeps it."""
    held = {p.untyped_storage().data_ptr() for p in block.parameters()}
    storages: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        if storage.data_ptr() not in held:
            storages[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = block(x)
    return out, sum(storages.values())


def step(block: nn.Module, x: torch.Tensor, grad_out: torch.Tensor) -> None:
    """One forward + backward of the block alone, its gradients zeroed first as a step's are
    (forward only where nothing in or before it takes a gradient: a leading Flatten)."""
    for p in block.parameters():
        if p.grad is not None:
            p.grad.zero_()
    out = block(x)
    if out.requires_grad:
        out.backward(grad_out)


def measure_block(
    block: nn.Module, x: torch.Tensor, *, input_grad: bool, min_steps: int, measure_s: float
) -> tuple[BlockFigures, torch.Tensor]:
    """The block's figures on input batch `x`, and its output (detached). With `input_grad`
    the input takes a gradient (a block after one with parameters sends one back; the dataset
    takes none); forward + backward is timed for at least `min_steps` and `measure_s` seconds."""
    batch = x.shape[0]
    x = x.detach().requires_grad_(input_grad and x.is_floating_point())
    out, saved = saved_bytes_forward(block, x)
    grad_out = torch.randn_like(out)
    if out.requires_grad:
        out.backward(grad_out)
    for _ in range(WARMUP_STEPS):
        step(block, x, grad_out)
    steps, t0 = 0, time.perf_counter()
    while steps < min_steps or time.perf_counter() - t0 < measure_s:
        step(block, x, grad_out)
        steps += 1
    elapsed_s = time.perf_counter() - t0
    figures = BlockFigures(
        parameter_bytes=sum(p.numel() * p.element_size() for p in block.parameters()),
        output_bytes_per_sample=out.numel() * out.element_size() // batch,
        activation_bytes_per_sample=saved // batch,
        samples_per_s=steps * batch / elapsed_s,
        output_shape=tuple(out.shape),
        output_dtype=out.dtype,
    )
    return figures, out.detach()


def stand_in(figures: BlockFigures) -> torch.Tensor:
    """An output of the shape and type a measured block gave, for the block after a reused one."""
    return torch.randn(figures.output_shape).to(figures.output_dtype)


def measure_blocks(
    blocks: Sequence[nn.Module], x: torch.Tensor, *, min_steps: int, measure_s: float
) -> list[tuple[BlockFigures, int]]:
    """Each block's figures and the index of the block they were measured on (itself, or the
    first block of the same signature), in order, the batch `x` fed through."""
    out: list[tuple[BlockFigures, int]] = []
    seen: dict[tuple[Any, ...], tuple[BlockFigures, int]] = {}
    input_grad = False  # until a block with parameters: no gradient flows back past it
    for i, block in enumerate(blocks):
        key = (*signature(block, x), input_grad)
        if key not in seen:
            figures, x = measure_block(
                block, x, input_grad=input_grad, min_steps=min_steps, measure_s=measure_s
            )
            seen[key] = (figures, i)
        else:
            x = stand_in(seen[key][0])
        out.append(seen[key])
        input_grad = input_grad or any(True for _ in block.parameters())
    return out
