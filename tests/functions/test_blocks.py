"""functions/blocks.py: a model's blocks, a stage's module, and blocks that do not compose."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from functions.blocks import block_names, check_blocks_compose, model_blocks, stage_module
from functions.model_spec import ModelError


def _mlp() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Flatten(), nn.Linear(8, 4), nn.ReLU(), nn.Linear(4, 3))


class _Declared(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(8, 5), nn.Linear(5, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(torch.relu(self.a(x)))

    def pipeline_blocks(self) -> list[nn.Module]:
        return [self.a, nn.ReLU(), self.b]


def test_a_sequential_is_its_children_and_stages_cut_them() -> None:
    model = _mlp()
    assert len(model_blocks(model)) == 4
    assert block_names(model)[1] == "1:Linear"
    x = torch.randn(3, 2, 4)
    staged = stage_module(model, 2, 4)(stage_module(model, 0, 2)(x))
    assert torch.allclose(staged, model(x))


def test_a_declared_list_composes_to_the_model() -> None:
    check_blocks_compose(_Declared(), (8,))


def test_blocks_that_do_not_compose_are_refused_in_one_line() -> None:
    class Broken(_Declared):
        def pipeline_blocks(self) -> list[nn.Module]:
            return [self.b, self.a]

    with pytest.raises(ModelError, match=r"^block 0 \(Linear\) fails .* compose in order$"):
        check_blocks_compose(Broken(), (8,))


def test_a_model_without_blocks_and_an_empty_cut_are_refused() -> None:
    with pytest.raises(ModelError, match="declares no blocks"):
        model_blocks(nn.Linear(2, 2))
    with pytest.raises(ModelError, match=r"stage blocks \[2, 2\) is not a cut of 4 blocks"):
        stage_module(_mlp(), 2, 2)
