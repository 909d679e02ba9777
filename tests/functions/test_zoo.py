"""Model zoo: shapes, determinism, sizes, and the flat parameter/gradient views."""

from __future__ import annotations

import pytest
import torch

from functions import zoo


@pytest.mark.parametrize(
    ("name", "shape", "low", "high"),
    [
        ("mlp", (1, 8, 8), 17_000, 17_500),
        ("cnn", (3, 32, 32), 50_000, 120_000),
        ("resnet18", (3, 32, 32), 11_000_000, 11_300_000),  # torchvision's: 11.17 M with 10 classes
        ("mobilenetv2", (3, 32, 32), 2_200_000, 2_300_000),  # 2.24 M with 10 classes
    ],
)
def test_models_build_run_and_have_their_reference_size(
    name: str, shape: tuple[int, ...], low: int, high: int
) -> None:
    model = zoo.build(name, shape, 10, seed=0)
    assert low <= zoo.parameter_count(model) <= high
    out = model(torch.zeros(2, *shape))
    assert out.shape == (2, 10)
    assert not any(isinstance(m, torch.nn.modules.batchnorm._BatchNorm) for m in model.modules())


def test_same_seed_same_weights_other_seed_other_weights() -> None:
    a = zoo.flat_parameters(zoo.build("cnn", (1, 8, 8), 10, seed=7)).params
    b = zoo.flat_parameters(zoo.build("cnn", (1, 8, 8), 10, seed=7)).params
    c = zoo.flat_parameters(zoo.build("cnn", (1, 8, 8), 10, seed=8)).params
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_flat_views_share_memory_with_the_model() -> None:
    model = zoo.build("mlp", (1, 8, 8), 10, seed=0)
    before = torch.nn.utils.parameters_to_vector(model.parameters()).detach().clone()
    flat = zoo.flat_parameters(model)
    assert torch.equal(flat.params, before)
    loss = model(torch.randn(4, 1, 8, 8)).sum()
    loss.backward()
    flat.sync_grads()
    grads = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
    assert torch.equal(flat.grads, grads) and flat.grads.abs().sum() > 0
    with torch.no_grad():
        flat.params.zero_()
    assert all(float(p.detach().abs().sum()) == 0 for p in model.parameters())


def test_unknown_model_and_bad_shape() -> None:
    with pytest.raises(ValueError, match="^unknown model 'vgg': expected one of mlp, cnn, "):
        zoo.build("vgg", (1, 8, 8), 10, 0)
    with pytest.raises(ValueError, match="needs image input"):
        zoo.build("cnn", (64,), 10, 0)
