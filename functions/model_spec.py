"""Model specs: which Python file and function build a model (pure: no torch, for synth too).

A model is named `path/to/file.py:function`, the path relative to the project root (the folder
holding `functions/`; in the image, the Lambda task root, where the image copies the file to the
same relative path). The zoo is such a file: `mlp`, `cnn`, `resnet18` and `mobilenetv2` are
short names for `functions/zoo.py:build_<name>`. `functions.models` loads and builds them; the
planner and the stacks only need the spec and the file's digest, from here.
"""

from __future__ import annotations

import ast
import hashlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

PROJECT_ROOT = Path(__file__).resolve().parent.parent
ZOO_FILE = "functions/zoo.py"
ZOO = {
    "mlp": "build_mlp",
    "cnn": "build_cnn",
    "resnet18": "build_resnet18",
    "mobilenetv2": "build_mobilenetv2",
}
SPEC_FORMS = "a zoo name (mlp, cnn, resnet18, mobilenetv2) or path/to/file.py:function"


class ModelError(ValueError):
    """A model spec, file or builder that cannot be used; one-line message."""


@dataclass(frozen=True)
class ModelSpec:
    """A model function: `file` relative to the project root (POSIX), `function` in it."""

    file: str
    function: str

    @property
    def text(self) -> str:
        return f"{self.file}:{self.function}"

    @property
    def zoo_name(self) -> str | None:
        """The zoo's short name for this spec, if it is one of the zoo's."""
        if self.file != ZOO_FILE:
            return None
        return next((k for k, f in ZOO.items() if f == self.function), None)


def parse_spec(text: str) -> ModelSpec:
    """A zoo name or `path/to/file.py:function` (relative, inside the project, a .py file)."""
    text = str(text).strip()
    if text in ZOO:
        return ModelSpec(ZOO_FILE, ZOO[text])
    file, sep, function = text.rpartition(":")
    if not sep or not file.endswith(".py") or not function.isidentifier():
        raise ModelError(f"model {text!r} is not accepted; use {SPEC_FORMS}")
    path = PurePosixPath(file.replace("\\", "/"))
    if path.is_absolute() or ".." in path.parts or path.parts[:1] == ("~",):
        raise ModelError(
            f"model {text!r}: the file must be a path inside the project folder, relative to it "
            "(the image copies it from there)"
        )
    return ModelSpec(str(path), function)


def spec_of(model: str | ModelSpec) -> ModelSpec:
    return model if isinstance(model, ModelSpec) else parse_spec(model)


def file_path(model: str | ModelSpec, root: Path = PROJECT_ROOT) -> Path:
    spec = spec_of(model)
    path = root / spec.file
    if not path.is_file():
        raise ModelError(f"model file {spec.file} does not exist under {root}")
    return path


def file_digest(model: str | ModelSpec, root: Path = PROJECT_ROOT) -> str:
    """`sha256:<hex>` of the model file's bytes: a profile and a plan name what they measured."""
    return "sha256:" + hashlib.sha256(file_path(model, root).read_bytes()).hexdigest()


def defines_function(model: str | ModelSpec, name: str, root: Path = PROJECT_ROOT) -> bool:
    """Does the model file define a top-level function `name`? Read, not imported: synth needs
    no torch (a file that does not parse defines nothing; building it will say why)."""
    try:
        tree = ast.parse(file_path(model, root).read_bytes())
    except (ModelError, SyntaxError, ValueError):
        return False
    return any(
        isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name
        for node in tree.body
    )


def is_digest(text: object) -> bool:
    """`sha256:` and 64 lowercase hex digits."""
    if not isinstance(text, str) or not text.startswith("sha256:"):
        return False
    hex_part = text[len("sha256:") :]
    return len(hex_part) == 64 and all(c in "0123456789abcdef" for c in hex_part)
