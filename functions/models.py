"""Models are functions in Python files: the zoo's and a user's alike.

A model is named by a spec, `path/to/file.py:function`, the path relative to the project root
(the folder holding `functions/`; in the image, the Lambda task root). The function takes the
dataset's input shape (samples first dropped, e.g. (3, 32, 32)) and its class count and returns
a `torch.nn.Module` whose output is one score per class. The file may also define
`loss(outputs, labels) -> Tensor` (default: cross-entropy). The zoo is such a file
(`functions/zoo.py`); its keys (`mlp`, `cnn`, `resnet18`, `mobilenetv2`) are short names for its
specs, nothing more.

The project does everything else (sharding, the PS, checkpoints, re-invocation). Parameters are
what the PS holds: buffers (BatchNorm's running statistics) stay local to each worker.

Every problem is a ModelError with a one-line message that names the file and what is wrong.
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
import threading
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from functions.model_spec import (
    PROJECT_ROOT,
    ZOO_FILE,
    ModelError,
    ModelSpec,
    file_path,
    spec_of,
)

CHECK_BATCH = 2  # samples pushed through a fresh model to check its output shape

_LOCK = threading.Lock()  # torch's global RNG and the module cache are shared by threads
_MODULES: dict[tuple[str, str], types.ModuleType] = {}

LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
# What a user's code may raise and the project reports as the model's error. SystemExit too: a
# model file that calls sys.exit() would otherwise end the caller with its code and no word.
USER_CODE_ERRORS = (Exception, SystemExit)


def named_error(err: BaseException) -> str:
    """`Type: message` of a user's error (`SystemExit: sys.exit(0) called` for an exit)."""
    if isinstance(err, SystemExit):
        return f"SystemExit: sys.exit({err.code!r}) called"
    return f"{type(err).__name__}: {err}"


def _module(spec: ModelSpec, root: Path) -> types.ModuleType:
    path = file_path(spec, root)
    source = path.read_bytes()
    key = (str(path), hashlib.sha256(source).hexdigest())
    with _LOCK:
        if key in _MODULES:
            return _MODULES[key]
        if spec.file == ZOO_FILE and root == PROJECT_ROOT:
            from functions import zoo  # the package's own module, not a second copy

            module: types.ModuleType = zoo
        else:
            name = f"ldnn_model_{key[1][:16]}"
            loader_spec = importlib.util.spec_from_file_location(name, path)
            if loader_spec is None or loader_spec.loader is None:
                raise ModelError(f"model file {spec.file} cannot be loaded as a Python module")
            module = importlib.util.module_from_spec(loader_spec)
            # Registered first, as an import does: dataclasses, typing.get_type_hints and
            # pickle look the module up by name while it runs.
            sys.modules[name] = module
            try:
                loader_spec.loader.exec_module(module)
            except USER_CODE_ERRORS as err:  # the user's code: any error is theirs
                del sys.modules[name]
                raise ModelError(
                    f"model file {spec.file} does not import: {named_error(err)}"
                ) from None
        _MODULES[key] = module
        return module


def builder(model: str | ModelSpec, root: Path = PROJECT_ROOT) -> Callable[..., Any]:
    spec = spec_of(model)
    module = _module(spec, root)
    fn = getattr(module, spec.function, None)
    if not callable(fn):
        defined = sorted(
            k for k, v in vars(module).items() if callable(v) and not k.startswith("_")
            and getattr(v, "__module__", None) == module.__name__
        )  # fmt: skip
        raise ModelError(
            f"model file {spec.file} has no function {spec.function!r}; it defines: "
            f"{', '.join(defined) or 'no functions'}"
        )
    return fn


def loss_function(model: str | ModelSpec, root: Path = PROJECT_ROOT) -> LossFn:
    """The file's `loss(outputs, labels)` if it defines one, else cross-entropy."""
    fn = getattr(_module(spec_of(model), root), "loss", None)
    if fn is None:
        return F.cross_entropy
    if not callable(fn):
        raise ModelError(f"model file {spec_of(model).file}: 'loss' is not a function")
    return fn


DatasetReader = Callable[[str], Any]


def dataset_reader(model: str | ModelSpec, root: Path = PROJECT_ROOT) -> DatasetReader | None:
    """The file's `read_dataset(path) -> (x, y)`, for data in a format the project does not
    read; None when it defines none (the zoo does not)."""
    spec = spec_of(model)
    if spec.zoo_name is not None:
        return None
    fn = getattr(_module(spec, root), "read_dataset", None)
    if fn is not None and not callable(fn):
        raise ModelError(f"model file {spec.file}: 'read_dataset' is not a function")
    return fn


def build(
    model: str | ModelSpec,
    input_shape: Sequence[int],
    classes: int,
    seed: int,
    root: Path = PROJECT_ROOT,
) -> nn.Module:
    """The model, its initial weights a pure function of (file, function, shapes, seed)."""
    spec = spec_of(model)
    fn = builder(spec, root)
    shape = tuple(int(d) for d in input_shape)
    with _LOCK, torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        try:
            built = fn(shape, int(classes))
        except USER_CODE_ERRORS as err:  # the user's code: any error is theirs
            raise ModelError(
                f"model {spec.text} failed to build for input {shape} and {classes} classes: "
                f"{named_error(err)}"
            ) from None
    if not isinstance(built, nn.Module):
        raise ModelError(
            f"model {spec.text} returned {type(built).__name__}, expected a torch.nn.Module"
        )
    return built


def check_output(
    model: nn.Module, spec: str | ModelSpec, input_shape: Sequence[int], classes: int
) -> None:
    """ModelError unless a batch of inputs gives one score per class for each sample."""
    text = spec_of(spec).text
    batch = torch.zeros((CHECK_BATCH, *input_shape), dtype=torch.float32)
    try:
        with torch.no_grad():
            out = model(batch)
    except USER_CODE_ERRORS as err:  # the user's code: any error is theirs
        raise ModelError(
            f"model {text} fails on a batch of inputs shaped {tuple(batch.shape)}: "
            f"{named_error(err)}"
        ) from None
    expected = (CHECK_BATCH, int(classes))
    got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
    if got != expected:
        raise ModelError(
            f"model {text} outputs {got} for a batch shaped {tuple(batch.shape)}; the labels "
            f"need {expected} (one score per class for each of {classes} classes)"
        )


def parameter_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


@dataclass(frozen=True)
class FlatModel:
    """A model whose parameters and gradients live in two contiguous float32 vectors."""

    model: nn.Module
    params: torch.Tensor  # every parameter is a view into this vector
    grads: torch.Tensor  # every parameter's .grad is a view into this vector

    def zero_grad(self) -> None:
        self.grads.zero_()

    def sync_grads(self) -> None:
        """Autograd normally accumulates in place into the bound .grad; copy if it did not."""
        offset = 0
        for p in self.model.parameters():
            n = p.numel()
            view = self.grads[offset : offset + n]
            if p.grad is None:
                view.zero_()
            elif p.grad.data_ptr() != view.data_ptr():
                view.copy_(p.grad.reshape(-1))
                p.grad = view.view_as(p)
            offset += n


def flat_parameters(model: nn.Module) -> FlatModel:
    """Rebind parameters and gradients to contiguous vectors (values preserved)."""
    params = list(model.parameters())
    total = sum(p.numel() for p in params)
    flat = torch.empty(total, dtype=torch.float32)
    grads = torch.zeros(total, dtype=torch.float32)
    offset = 0
    with torch.no_grad():
        for p in params:
            n = p.numel()
            flat[offset : offset + n].copy_(p.reshape(-1))
            p.data = flat[offset : offset + n].view_as(p)
            p.grad = grads[offset : offset + n].view_as(p)
            offset += n
    return FlatModel(model, flat, grads)
