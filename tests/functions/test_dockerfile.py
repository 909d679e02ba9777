"""The image cannot be built here (no Docker engine): check what it copies exists, its pins
match the repo's, and its entry points import."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "functions" / "Dockerfile"


def _instructions() -> list[tuple[str, str]]:
    text = DOCKERFILE.read_text().replace("\\\n", " ")
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def test_every_copy_source_exists() -> None:
    """Build arguments at their defaults (the zoo for MODEL_FILE; stacks/image.py passes a
    user's model file, which tests/stacks/test_own_model.py checks in the build context)."""
    defaults = dict(
        rest.split("=", 1) for word, rest in _instructions() if word == "ARG" and "=" in rest
    )
    assert defaults["MODEL_FILE"] == "functions/zoo.py"
    copies = [rest.split() for word, rest in _instructions() if word == "COPY"]
    assert copies, "the Dockerfile copies nothing"
    assert ["${MODEL_FILE}", "${LAMBDA_TASK_ROOT}/${MODEL_FILE}"] in copies  # same relative path
    for parts in copies:
        for source in parts[:-1]:
            for name, value in defaults.items():
                source = source.replace("${" + name + "}", value)
            assert (ROOT / source).exists(), f"COPY source {source} does not exist"


def test_base_image_cmd_and_multi_arch() -> None:
    inst = _instructions()
    assert ("ARG", "BASE_IMAGE=public.ecr.aws/lambda/python:3.11") in inst
    assert ("CMD", '["functions.worker.handler"]') in inst
    assert ("ARG", "TARGETARCH") in inst
    assert any("download.pytorch.org/whl/cpu" in rest for _, rest in inst)


def _pins(path: Path) -> dict[str, str]:
    """name → version of a requirements file and the files it includes (`-r`); a local label
    (`+cpu`) and the Linux-only marker are dropped: the image takes torch from the CPU index."""
    pins = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line.startswith("-r "):
            pins.update(_pins(path.parent / line[3:].strip()))
            continue
        match = re.match(r"^([A-Za-z0-9_.\-\[\]]+)==([^\s;+]+)", line)
        if match and 'sys_platform != "linux"' not in line:
            pins[match.group(1).split("[")[0].lower()] = match.group(2)
    return pins


def test_image_pins_match_the_repo() -> None:
    image, repo = _pins(ROOT / "functions" / "requirements.txt"), _pins(ROOT / "requirements.txt")
    assert set(image) == {"torch", "numpy", "boto3", "scikit-learn", "pillow", "pyarrow"}
    for name, version in image.items():
        assert repo[name] == version, f"{name}: image pins {version}, repo pins {repo[name]}"


def test_entry_points_import() -> None:
    worker = importlib.import_module("functions.worker")
    assert callable(worker.handler)
    for name, attr in [
        ("functions.finalize", "handler"),
        ("functions.pace", "handler"),
        ("functions.datasets", "prepare_handler"),
        ("functions.ps", "main"),
    ]:
        assert callable(getattr(importlib.import_module(name), attr))
    help_text = subprocess.run(
        [sys.executable, "-m", "functions.ps", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert help_text.returncode == 0
    for flag in (
        "--job-id",
        "--shard",
        "--shards",
        "--workers",
        "--host",
        "--port",
        "--secret-ref",
        "--model",
        "--seed",
        "--learning-rate",
        "--momentum",
        "--artifacts-bucket",
        "--checkpoint-prefix",
        "--checkpoint-every",
    ):
        assert flag in help_text.stdout


def test_functions_never_imports_aws_cdk() -> None:
    for path in (ROOT / "functions").glob("*.py"):
        imports = re.findall(r"^\s*(?:import|from)\s+aws_cdk", path.read_text(), re.M)
        assert not imports, f"{path.name} imports aws_cdk"
