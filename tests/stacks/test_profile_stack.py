"""The profile stack (`-c mode=profile`): one function per memory size, least privilege, cdk-nag.

Built in-process from a hand-made ProfileRun (and, for the context and nag checks, through
app.py as `cdk synth -c mode=profile` runs it); `aws_cdk.assertions` matchers and roles found
through their functions' handler and memory, never hashed logical ids.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
from pathlib import Path
from typing import Any

import pytest
from aws_cdk.assertions import Match, Template

from provisioner.catalog import read_data_json
from provisioner.profile import PROFILE_DIR
from stacks.job import ProfileStacks, add_profile_stacks
from stacks.nag import unacknowledged_findings
from stacks.profile_run import ProfileRun, profile_key
from tests.stacks.conftest import new_app
from tests.stacks.test_cfn_lint import lint_problems
from tests.stacks.test_least_privilege import grants, listing_prefixes
from tests.stacks.test_stacks import DIGITS, state_machine_definition

PROFILER = "functions.profile_task.handler"
FINALIZER = "functions.profile_task.finalize_handler"


def make_run(**overrides: Any) -> ProfileRun:
    """digits-mlp at two sizes, a few iterations: what the offline run needs."""
    _, document = read_data_json("digits-mlp", PROFILE_DIR, "profile")
    run = ProfileRun(
        job="prof", name="digits-mlp", model="mlp", local_batch=16, dataset_bytes=474408,
        memory_mb=(1024, 1769), arch="x86_64", iterations=4,
        base_profile_json=json.dumps(document, sort_keys=True),
    )  # fmt: skip
    return dataclasses.replace(run, **overrides)


def build_profile(run: ProfileRun) -> tuple[ProfileStacks, Template]:
    app = new_app()
    stacks = add_profile_stacks(app, run=run, dataset=DIGITS, nag=False)
    return stacks, Template.from_stack(stacks.profile)


@pytest.fixture(scope="module")
def built() -> tuple[ProfileRun, Template]:
    run = make_run(memory_mb=(1024, 1769, 3008))
    return run, build_profile(run)[1]


def statements_of_function(template: Template, handler: str, **match: Any) -> list[dict[str, Any]]:
    """Every policy statement of the role of the one function running `handler` (and `match`)."""
    functions = template.find_resources("AWS::Lambda::Function", {"Properties": {
        "ImageConfig": {"Command": [handler]}, **match}})  # fmt: skip
    (function,) = functions.values()
    role_id = function["Properties"]["Role"]["Fn::GetAtt"][0]
    policies = template.find_resources(
        "AWS::IAM::Policy", {"Properties": {"Roles": Match.array_with([{"Ref": role_id}])}}
    )
    return [s for p in policies.values() for s in p["Properties"]["PolicyDocument"]["Statement"]]


def test_one_profiling_function_per_memory_size_outside_any_vpc(
    built: tuple[ProfileRun, Template],
) -> None:
    run, template = built
    for memory_mb in run.memory_mb:
        template.has_resource_properties("AWS::Lambda::Function", {
            "PackageType": "Image",
            "ImageConfig": {"Command": [PROFILER]},
            "MemorySize": memory_mb,
            "Architectures": [run.arch],
            "Timeout": 900,
            "VpcConfig": Match.absent(),
            "LoggingConfig": {"LogGroup": Match.any_value()},
        })  # fmt: skip
    profilers = template.find_resources(
        "AWS::Lambda::Function", {"Properties": {"ImageConfig": {"Command": [PROFILER]}}}
    )
    assert sorted(f["Properties"]["MemorySize"] for f in profilers.values()) == [1024, 1769, 3008]
    # No parameter server and no network: profiling measures compute and start-up only.
    for kind in ("AWS::EC2::Instance", "AWS::EC2::VPC", "AWS::EC2::SecurityGroup"):
        template.resource_count_is(kind, 0)


def test_profilers_read_only_the_profile_shards(built: tuple[ProfileRun, Template]) -> None:
    run, template = built
    shards = f"{run.job}/profile-shards"
    for memory_mb in run.memory_mb:
        statements = statements_of_function(template, PROFILER, MemorySize=memory_mb)
        allowed = grants(statements)
        assert allowed == {
            "s3:GetObject": {f"arn:TOKEN:s3:::{run.job}-dataset-TOKEN/{shards}/*"},
            "s3:ListBucket": {f"arn:TOKEN:s3:::{run.job}-dataset-TOKEN"},
        }
        assert listing_prefixes(statements) == [[f"{shards}/*", shards]]


def test_finalize_writes_exactly_the_profile_and_reads_nothing(
    built: tuple[ProfileRun, Template],
) -> None:
    run, template = built
    allowed = grants(statements_of_function(template, FINALIZER))
    key = profile_key(run)
    assert key == "prof/profiles/digits-mlp-aws.json"
    assert allowed == {"s3:PutObject": {f"arn:TOKEN:s3:::{run.job}-artifacts-TOKEN/{key}"}}


def test_prepare_writes_only_the_profile_shards(built: tuple[ProfileRun, Template]) -> None:
    run, template = built
    allowed = grants(statements_of_function(template, "functions.datasets.prepare_handler"))
    shards = f"arn:TOKEN:s3:::{run.job}-dataset-TOKEN/{run.job}/profile-shards/*"
    assert allowed == {"s3:PutObject": {shards}}


def test_each_memory_size_is_a_parallel_branch_whose_failure_is_caught(
    built: tuple[ProfileRun, Template],
) -> None:
    run, template = built
    definition = state_machine_definition(template)
    sizes = definition["States"]["MemorySizes"]
    assert sizes["Type"] == "Parallel" and sizes["ResultPath"] == "$.results"
    assert len(sizes["Branches"]) == len(run.memory_mb)
    for branch, memory_mb in zip(sizes["Branches"], run.memory_mb, strict=True):
        invoke = branch["States"][f"Profile{memory_mb}"]
        assert invoke["Parameters"]["Payload"]["memory_mb"] == memory_mb
        assert invoke["Catch"] == [
            {"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": f"Failed{memory_mb}"}
        ]


def test_the_profile_stack_is_deterministic() -> None:
    run = make_run()
    first, second = (build_profile(run)[1].to_json() for _ in range(2))
    assert json.dumps(first, sort_keys=True) == json.dumps(second, sort_keys=True)


def test_profile_mode_synth_is_nag_clean_and_builds_no_training(synth: Any) -> None:
    result = synth(mode="profile", max_memory_mb="3008")
    assert result.code == 0, result.stderr
    assert unacknowledged_findings(result.app) == []
    assert sorted(name.rsplit("-", 1)[1] for name in result.templates) == ["data", "profile"]
    profilers = [
        r["Properties"]["MemorySize"]
        for r in result.template("profile")["Resources"].values()
        if r["Type"] == "AWS::Lambda::Function"
        and r["Properties"].get("ImageConfig", {}).get("Command") == [PROFILER]
    ]
    # The default sizes up to the account's cap (5,307 MB is left out), 30 iterations each.
    assert sorted(profilers) == [1024, 1769, 3008]
    assert result.stderr.splitlines()[0] == (
        "profile digits-mlp (job digits-demo): x86_64 Lambda at 1024, 1769, 3008 MB, "
        "30 timed iterations each after 5 warm-up, no PS"
    )


@pytest.mark.parametrize(
    ("context", "line"),
    [
        ({"mode": "profiling"},
         "error: mode='profiling' is not accepted; use one of profile, train"),
        ({"mode": "profile", "profile_memory": "1024,lots"},
         "error: profile_memory='1024,lots' is not accepted; use a comma list of memory sizes "
         "in MB from 128 to 10240, e.g. 1024,1769,3008"),
        ({"mode": "profile", "profile_memory": "1024,4096", "max_memory_mb": "3008"},
         "error: profile_memory='1024,4096' holds [4096] MB above max_memory_mb=3008; use sizes "
         "up to max_memory_mb"),
        ({"mode": "profile", "profile_iterations": "0"},
         "error: profile_iterations='0' is out of range; use an integer from 1 to 1000"),
        ({"mode": "profile", "max_memory_mb": "512"},
         "error: max_memory_mb=512 is below every default profile size [1024, 1769, 3008, "
         "5307]; give the sizes with -c profile_memory=..."),
    ],
)  # fmt: skip
def test_bad_profile_context_is_one_line_and_exit_2(
    synth: Any, context: dict[str, str], line: str
) -> None:
    result = synth(**context)
    assert result.code == 2
    assert line in result.stderr.splitlines(), result.stderr
    assert result.templates == {}


def test_every_handler_the_profile_stack_runs_is_in_the_image(
    built: tuple[ProfileRun, Template],
) -> None:
    _, template = built
    commands = {f["Properties"]["ImageConfig"]["Command"][0]
                for f in template.find_resources("AWS::Lambda::Function").values()
                if "ImageConfig" in f["Properties"]}  # fmt: skip
    assert commands == {PROFILER, FINALIZER, "functions.datasets.prepare_handler"}
    for command in commands:
        module, attr = command.rsplit(".", 1)
        assert module.startswith("functions.")  # the only package functions/Dockerfile copies
        assert callable(getattr(importlib.import_module(module), attr))


def test_profile_templates_lint_clean(synth: Any) -> None:
    """cfn-lint as tests/stacks/test_cfn_lint.py runs it, on an arm64 run reading a user's data."""
    result = synth(mode="profile", arch="arm64", dataset="s3://users-data/digits")
    assert result.code == 0, result.stderr
    assert unacknowledged_findings(result.app) == []
    templates = sorted(Path(result.outdir).glob("*.template.json"))
    assert [p.name for p in templates] == ["digits-demo-data.template.json",
                                           "digits-demo-profile.template.json"]  # fmt: skip
    assert lint_problems(templates) == []
