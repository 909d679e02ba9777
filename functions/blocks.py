"""A model as a sequence of blocks: the units a pipelined plan cuts into stages.

A model declares its blocks in one of two ways: it is an `nn.Sequential` (its top-level
children, in order), or it has a `pipeline_blocks()` method returning the modules that, applied
in order, compute the model's forward. Stage s of a plan holds blocks [first, stop); its forward
is those blocks in order (`stage_module`). `check_blocks_compose` runs a batch through the
blocks one by one and against the whole model, so a declaration that does not compute the model
is refused before a plan is made from it.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from functions.model_spec import ModelError


def model_blocks(model: nn.Module) -> list[nn.Module]:
    """The model's blocks in order; ModelError if it declares none."""
    declared = getattr(model, "pipeline_blocks", None)
    if callable(declared):
        blocks = list(declared())
        if not blocks or not all(isinstance(b, nn.Module) for b in blocks):
            raise ModelError(
                f"{type(model).__name__}.pipeline_blocks() returned {len(blocks)} items that are "
                "not all torch.nn.Module; return a non-empty list of modules applied in order"
            )
        return blocks
    if isinstance(model, nn.Sequential):
        return list(model.children())
    raise ModelError(
        f"model {type(model).__name__} declares no blocks; make it an nn.Sequential or give it "
        "a pipeline_blocks() method returning its modules in order"
    )


def block_names(model: nn.Module) -> list[str]:
    """A name per block: its index and class (`3:TransformerBlock`)."""
    return [f"{i}:{type(b).__name__}" for i, b in enumerate(model_blocks(model))]


def stage_module(model: nn.Module, first: int, stop: int) -> nn.Sequential:
    """Blocks [first, stop) as one module; ModelError for an empty or out-of-range cut."""
    blocks = model_blocks(model)
    if not 0 <= first < stop <= len(blocks):
        raise ModelError(
            f"stage blocks [{first}, {stop}) is not a cut of {len(blocks)} blocks; use "
            f"0 ≤ first < stop ≤ {len(blocks)}"
        )
    return nn.Sequential(*blocks[first:stop])


def check_blocks_compose(model: nn.Module, input_shape: Sequence[int], batch: int = 2) -> None:
    """ModelError unless the blocks, applied in order, compute the model's own forward."""
    x = torch.zeros((batch, *input_shape), dtype=torch.float32)
    blocks = model_blocks(model)
    with torch.no_grad():
        whole = model(x)
        y = x
        for i, block in enumerate(blocks):
            try:
                y = block(y)
            except (RuntimeError, ValueError, TypeError) as err:
                raise ModelError(
                    f"block {i} ({type(block).__name__}) fails on the previous block's output "
                    f"shaped {tuple(y.shape)}: {str(err).splitlines()[0]}; the blocks must "
                    "compose in order"
                ) from None
    if y.shape != whole.shape or not torch.allclose(y, whole, atol=1e-5, rtol=1e-4):
        raise ModelError(
            f"the blocks applied in order give {tuple(y.shape)}, the model {tuple(whole.shape)}"
            " (or other values); pipeline_blocks() must compute the model's forward"
        )
