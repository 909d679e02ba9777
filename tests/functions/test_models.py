"""Models: the zoo and a user's file through one path; shapes, determinism, sizes, the flat
parameter/gradient views, and one-line errors for everything a user's file can get wrong."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from functions import models
from functions.model_spec import ModelError, file_digest, is_digest, parse_spec


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
    model = models.build(name, shape, 10, seed=0)
    assert low <= models.parameter_count(model) <= high
    out = model(torch.zeros(2, *shape))
    assert out.shape == (2, 10)
    assert not any(isinstance(m, torch.nn.modules.batchnorm._BatchNorm) for m in model.modules())


def test_same_seed_same_weights_other_seed_other_weights() -> None:
    a = models.flat_parameters(models.build("cnn", (1, 8, 8), 10, seed=7)).params
    b = models.flat_parameters(models.build("cnn", (1, 8, 8), 10, seed=7)).params
    c = models.flat_parameters(models.build("cnn", (1, 8, 8), 10, seed=8)).params
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_flat_views_share_memory_with_the_model() -> None:
    model = models.build("mlp", (1, 8, 8), 10, seed=0)
    before = torch.nn.utils.parameters_to_vector(model.parameters()).detach().clone()
    flat = models.flat_parameters(model)
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
    with pytest.raises(ModelError, match="^model 'vgg' is not accepted; use a zoo name "):
        models.build("vgg", (1, 8, 8), 10, 0)
    with pytest.raises(ModelError, match="needs image input"):
        models.build("cnn", (64,), 10, 0)


def test_zoo_names_are_short_for_the_zoo_files_functions() -> None:
    spec = parse_spec("cnn")
    assert spec.text == "functions/zoo.py:build_cnn" and spec.zoo_name == "cnn"
    a = models.flat_parameters(models.build("cnn", (1, 8, 8), 10, seed=7)).params
    b = models.flat_parameters(models.build("functions/zoo.py:build_cnn", (1, 8, 8), 10, 7)).params
    assert torch.equal(a, b)


USER_MODEL = """
import torch
from torch import nn


def build(input_shape, classes):
    return nn.Sequential(nn.Flatten(), nn.Linear(int(torch.tensor(input_shape).prod()), classes))


def loss(outputs, labels):
    return nn.functional.cross_entropy(outputs, labels, label_smoothing=0.1)
"""


def _project(tmp_path: Path, text: str, name: str = "my_model.py") -> Path:
    (tmp_path / "models").mkdir(exist_ok=True)
    (tmp_path / "models" / name).write_text(text)
    return tmp_path


def test_a_users_file_builds_seeded_and_brings_its_loss(tmp_path: Path) -> None:
    root = _project(tmp_path, USER_MODEL)
    spec = "models/my_model.py:build"
    a = models.build(spec, (1, 8, 8), 10, seed=3, root=root)
    b = models.build(spec, (1, 8, 8), 10, seed=3, root=root)
    assert models.parameter_count(a) == 64 * 10 + 10
    assert torch.equal(models.flat_parameters(a).params, models.flat_parameters(b).params)
    models.check_output(a, spec, (1, 8, 8), 10)
    out, labels = torch.zeros(4, 10), torch.zeros(4, dtype=torch.long)
    own = models.loss_function(spec, root)(out, labels)
    assert float(own) == pytest.approx(float(torch.nn.functional.cross_entropy(out, labels)))
    assert models.loss_function("mlp") is torch.nn.functional.cross_entropy  # the default


def test_the_digest_names_the_files_bytes(tmp_path: Path) -> None:
    root = _project(tmp_path, USER_MODEL)
    first = file_digest("models/my_model.py:build", root)
    assert is_digest(first)
    _project(tmp_path, USER_MODEL + "\n# changed\n")
    assert file_digest("models/my_model.py:build", root) != first


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("my_model.py", "model 'my_model.py' is not accepted; use a zoo name (mlp, cnn, resnet18, "
         "mobilenetv2) or path/to/file.py:function"),
        ("/abs/my_model.py:build", "model '/abs/my_model.py:build': the file must be a path "
         "inside the project folder, relative to it (the image copies it from there)"),
        ("../up/my_model.py:build", "model '../up/my_model.py:build': the file must be a path "
         "inside the project folder, relative to it (the image copies it from there)"),
        ("models/my_model.py:9build", "model 'models/my_model.py:9build' is not accepted; use a "
         "zoo name (mlp, cnn, resnet18, mobilenetv2) or path/to/file.py:function"),
    ],
)  # fmt: skip
def test_bad_specs_are_refused_in_one_line(spec: str, message: str) -> None:
    with pytest.raises(ModelError) as err:
        parse_spec(spec)
    assert str(err.value) == message


@pytest.mark.parametrize(
    ("text", "spec", "message"),
    [
        ("import not_a_module_anywhere\n", "models/m.py:build",
         "model file models/m.py does not import: ModuleNotFoundError: No module named "
         "'not_a_module_anywhere'"),
        ("def make(s, c):\n    return None\n", "models/m.py:build",
         "model file models/m.py has no function 'build'; it defines: make"),
        ("def build(s, c):\n    return 42\n", "models/m.py:build",
         "model models/m.py:build returned int, expected a torch.nn.Module"),
        ("def build(s, c):\n    raise RuntimeError('no GPU here')\n", "models/m.py:build",
         "model models/m.py:build failed to build for input (1, 8, 8) and 10 classes: "
         "RuntimeError: no GPU here"),
    ],
)  # fmt: skip
def test_a_file_that_cannot_build_says_why_in_one_line(
    tmp_path: Path, text: str, spec: str, message: str
) -> None:
    root = _project(tmp_path, text, "m.py")
    with pytest.raises(ModelError) as err:
        models.build(spec, (1, 8, 8), 10, 0, root=root)
    assert str(err.value) == message
    with pytest.raises(ModelError) as err:
        models.build("models/absent.py:build", (1, 8, 8), 10, 0, root=root)
    assert str(err.value) == f"model file models/absent.py does not exist under {root}"


def test_an_output_that_does_not_match_the_labels_is_named(tmp_path: Path) -> None:
    root = _project(tmp_path, USER_MODEL)
    model = models.build("models/my_model.py:build", (1, 8, 8), 5, 0, root=root)
    with pytest.raises(ModelError) as err:
        models.check_output(model, "models/my_model.py:build", (1, 8, 8), 10)
    assert str(err.value) == (
        "model models/my_model.py:build outputs (2, 5) for a batch shaped (2, 1, 8, 8); the "
        "labels need (2, 10) (one score per class for each of 10 classes)"
    )
    with pytest.raises(ModelError, match=r"^model models/my_model.py:build fails on a batch of "
                       r"inputs shaped \(2, 3, 4, 4\): RuntimeError: "):  # fmt: skip
        models.check_output(model, "models/my_model.py:build", (3, 4, 4), 5)


def test_a_file_with_postponed_annotations_and_a_dataclass_loads_and_trains() -> None:
    """tests/fixtures/models/configured.py imports as a normal module does: the loader registers
    it in sys.modules before running it (the dataclass decorator looks it up there)."""
    import sys

    from functions import datasets

    spec = "tests/fixtures/models/configured.py:build"
    x, y, _ = datasets.load_source("builtin:digits")
    model = models.build(spec, x.shape[1:], int(y.max()) + 1, seed=0)
    models.check_output(model, spec, x.shape[1:], 10)
    flat = models.flat_parameters(model)
    inputs, labels = torch.from_numpy(x[:256]), torch.from_numpy(y[:256])
    loss_fn = models.loss_function(spec)
    losses = []
    for _ in range(20):
        flat.zero_grad()
        loss = loss_fn(model(inputs), labels)
        loss.backward()
        flat.sync_grads()
        with torch.no_grad():
            flat.params.sub_(0.5 * flat.grads)
        losses.append(float(loss.detach()))
    assert losses[-1] < 0.5 * losses[0]
    assert sys.modules[models.builder(spec).__module__].__file__.endswith("configured.py")


def test_a_file_that_fails_to_import_leaves_no_module_behind(tmp_path: Path) -> None:
    import sys

    root = _project(tmp_path, "from dataclasses import dataclass\nraise ValueError('no')\n")
    before = set(sys.modules)
    with pytest.raises(ModelError, match="does not import: ValueError: no"):
        models.build("models/my_model.py:build", (1, 8, 8), 10, 0, root=root)
    assert {k for k in set(sys.modules) - before if k.startswith("ldnn_model_")} == set()


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("tests/fixtures/models/exits_on_import.py:build",
         "model file tests/fixtures/models/exits_on_import.py does not import: SystemExit: "
         "sys.exit(0) called"),
        ("tests/fixtures/models/exits.py:build",
         "model tests/fixtures/models/exits.py:build failed to build for input (1, 8, 8) and 10 "
         "classes: SystemExit: sys.exit(0) called"),
    ],
)  # fmt: skip
def test_a_model_that_calls_sys_exit_is_a_model_error(spec: str, message: str) -> None:
    with pytest.raises(ModelError) as err:
        models.build(spec, (1, 8, 8), 10, 0)
    assert str(err.value) == message


def test_a_forward_that_calls_sys_exit_is_a_model_error() -> None:
    spec = "tests/fixtures/models/exits.py:in_forward"
    model = models.build(spec, (1, 8, 8), 10, 0)
    with pytest.raises(ModelError) as err:
        models.check_output(model, spec, (1, 8, 8), 10)
    assert str(err.value) == (
        f"model {spec} fails on a batch of inputs shaped (2, 1, 8, 8): SystemExit: sys.exit(0) "
        "called"
    )
