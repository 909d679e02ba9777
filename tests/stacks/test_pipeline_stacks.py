"""The stacks of a pipelined plan: one worker function per stage sized by its stage, S x ps_count
PS shards, each stage's least privilege, a state machine that runs every stage's replicas at
once, and what a 2-stage plan adds to a one-stage plan's templates.

Plans are the hand-built plan with a hand-made Pipeline (tests/stacks/pipeline_plans.py);
resources are found by type and properties (a stage's function by its description), never by
hashed logical ids.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

import pytest
from aws_cdk.assertions import Match, Template

from provisioner.plan import Plan
from stacks.job import JobStacks, plan_digest
from tests.stacks.conftest import make_plan
from tests.stacks.pipeline_plans import pipelined_plan
from tests.stacks.test_least_privilege import S3_READ_ACTIONS, grants
from tests.stacks.test_s3_sync import build_app, difference, templates_of
from tests.stacks.test_stacks import state_machine_definition, training_machine

WORKER = "functions.worker.handler"
Built = tuple[Plan, JobStacks, dict[str, Template]]


def built_for(stages: int, sync: str, **overrides: Any) -> Built:
    plan = pipelined_plan(stages, sync=sync, **overrides)
    _, stacks = build_app(plan)
    return plan, stacks, templates_of(stacks)


@pytest.fixture(scope="module")
def ps2() -> Built:
    return built_for(2, "ps")


@pytest.fixture(scope="module")
def s3x3() -> Built:
    return built_for(3, "s3")


def stage_function_ids(template: Template, stages: int) -> list[str]:
    """The logical id of each stage's worker function, in stage order (by its description)."""
    functions = template.find_resources(
        "AWS::Lambda::Function", {"Properties": {"ImageConfig": {"Command": [WORKER]}}}
    )
    by_stage = {int(re.search(r", stage (\d+) ", f["Properties"]["Description"])[1]): lid
                for lid, f in functions.items()}  # fmt: skip
    assert sorted(by_stage) == list(range(stages))
    return [by_stage[s] for s in range(stages)]


def stage_statements(template: Template, function_id: str) -> list[dict[str, Any]]:
    """Every statement of every policy of the role of one function."""
    role = template.to_json()["Resources"][function_id]["Properties"]["Role"]["Fn::GetAtt"][0]
    policies = template.find_resources(
        "AWS::IAM::Policy", {"Properties": {"Roles": Match.array_with([{"Ref": role}])}}
    )
    return [s for p in policies.values() for s in p["Properties"]["PolicyDocument"]["Statement"]]


@pytest.mark.parametrize("fixture", ["ps2", "s3x3"])
def test_each_stage_has_its_own_worker_function_sized_by_its_stage(
    fixture: str,
    request: pytest.FixtureRequest,
) -> None:
    plan, _, templates = request.getfixturevalue(fixture)
    assert plan.pipeline is not None
    training = templates["training"]
    ids = stage_function_ids(training, plan.pipeline.stage_count)
    resources = training.to_json()["Resources"]
    images = set()
    for stage, lid in zip(plan.pipeline.stages, ids, strict=True):
        props = resources[lid]["Properties"]
        assert props["MemorySize"] == stage.memory_mb
        assert props["Timeout"] == plan.invocation_timeout_s
        assert props["EphemeralStorage"] == {"Size": plan.ephemeral_storage_mb}
        assert props["ReservedConcurrentExecutions"] == plan.n_workers
        assert props["Architectures"] == [plan.arch]
        assert ("VpcConfig" in props) == (plan.sync == "ps")
        images.add(json.dumps(props["Code"]))
    assert len(images) == 1  # the same image for every stage


def test_no_reserved_concurrency_for_any_stage_unless_the_plan_asks() -> None:
    plan, _, templates = built_for(2, "s3", reserve_concurrency=False)
    for lid in stage_function_ids(templates["training"], 2):
        props = templates["training"].to_json()["Resources"][lid]["Properties"]
        assert "ReservedConcurrentExecutions" not in props


def test_each_stage_runs_ps_count_shards_that_checkpoint_under_the_stage(ps2: Built) -> None:
    plan, stacks, templates = ps2
    instances = templates["ps"].find_resources("AWS::EC2::Instance")
    assert len(instances) == 2 * plan.ps_count
    scripts = ["".join(p if isinstance(p, str) else "TOKEN" for p in
                       i["Properties"]["UserData"]["Fn::Base64"]["Fn::Join"][1])
               for i in instances.values()]  # fmt: skip
    found = Counter(
        (re.search(r"--checkpoint-prefix (\S+)", s)[1], re.search(r"--shard (\d+) ", s)[1],
         re.search(r"SHARD=(\S+)", s)[1]) for s in scripts
    )  # fmt: skip
    assert found == Counter({(f"demo/checkpoints/stage-{s:02d}", str(k), f"stage{s}-{k}"): 1
                             for s in range(2) for k in range(plan.ps_count)})  # fmt: skip
    servers = stacks.parameter_servers
    assert servers is not None
    stage_endpoints = servers.parameter_servers.stage_endpoints
    assert [len(e) for e in stage_endpoints] == [plan.ps_count, plan.ps_count]
    assert sum(stage_endpoints, []) == servers.parameter_servers.endpoints


def test_the_map_runs_every_replica_of_every_stage_at_once(s3x3: Built) -> None:
    plan, _, templates = s3x3
    definition = state_machine_definition(templates["training"])
    items = definition["States"]["WorkerItems"]["Result"]
    assert items == [{"stage": s, "rank": r} for s in range(3) for r in range(plan.n_workers)]
    workers = definition["States"]["Workers"]
    assert workers["MaxConcurrency"] == 3 * plan.n_workers
    assert workers["ItemsPath"] == "$.items"
    states = workers["ItemProcessor"]["States"]
    for s in range(3):
        event = states[f"Stage{s}FirstEvent"]["Parameters"]["event"]
        assert event["stage"]["index"] == s and event["memory_mb"] == (1024, 1536, 2048)[s]
        assert event["exchange_prefix"] == f"demo/exchange/stage-{s:02d}"
        assert event["rank.$"] == "$.rank" and "rank" not in event
        assert states[f"Stage{s}FirstEvent"]["Next"] == f"RunStage{s}Worker"
        assert states[f"RunStage{s}Worker"]["Next"] == "WorkerDone"
    assert [c["NumericEquals"] for c in states["LinkStage"]["Choices"]] == [0, 1, 2]
    assert {c["Next"] for c in states["LinkStage"]["Choices"]} == {
        f"RunStage{s}Worker" for s in range(3)}  # fmt: skip
    assert states["NextLink"]["Next"] == states["RetryStalledLink"]["Next"] == "LinkStage"


def test_the_state_machine_may_invoke_each_stage_function(ps2: Built) -> None:
    _, _, templates = ps2
    training = templates["training"]
    role = training_machine(training)["Properties"]["RoleArn"]["Fn::GetAtt"][0]
    statements = stage_statements_of_role(training, role)
    invoked = [r for s in statements if "lambda:InvokeFunction" in s["Action"]
               for r in s["Resource"]]  # fmt: skip
    for lid in stage_function_ids(training, 2):
        assert {"Fn::GetAtt": [lid, "Arn"]} in invoked


def stage_statements_of_role(template: Template, role: str) -> list[dict[str, Any]]:
    policies = template.find_resources(
        "AWS::IAM::Policy", {"Properties": {"Roles": Match.array_with([{"Ref": role}])}}
    )
    return [s for p in policies.values() for s in p["Properties"]["PolicyDocument"]["Statement"]]


ARTIFACTS = "arn:TOKEN:s3:::demo-artifacts-TOKEN/demo"
SHARDS = "arn:TOKEN:s3:::demo-dataset-TOKEN/demo/shards-n4/*"
MANIFEST = "arn:TOKEN:s3:::demo-dataset-TOKEN/demo/shards-n4/manifest.json"  # exact: every stage


def test_each_s3_stage_reaches_only_its_boundaries_checkpoints_exchange_and_data(
    s3x3: Built,
) -> None:
    _, _, templates = s3x3
    training = templates["training"]
    boundaries = [["b00"], ["b00", "b01"], ["b01"]]
    for s, lid in enumerate(stage_function_ids(training, 3)):
        allowed = grants(stage_statements(training, lid))
        own = {f"{ARTIFACTS}/pipe/{b}/*" for b in boundaries[s]} | {
            f"{ARTIFACTS}/checkpoints/stage-{s:02d}/*",
            f"{ARTIFACTS}/exchange/stage-{s:02d}/*",
        }
        data = {SHARDS, MANIFEST} if s in (0, 2) else {MANIFEST}
        assert set(allowed) == S3_READ_ACTIONS | {"s3:PutObject", "s3:DeleteObject"}, s
        assert allowed["s3:GetObject"] == own | data, s
        assert allowed["s3:PutObject"] == own | {f"{ARTIFACTS}/runs/*"}, s
        assert allowed["s3:DeleteObject"] == own, s


def test_each_ps_stage_reads_the_secret_and_its_boundaries_and_no_checkpoints(
    ps2: Built,
) -> None:
    _, _, templates = ps2
    training = templates["training"]
    for lid in stage_function_ids(training, 2):
        allowed = grants(stage_statements(training, lid))
        boundary = {f"{ARTIFACTS}/pipe/b00/*"}
        assert set(allowed) == S3_READ_ACTIONS | {"s3:PutObject", "s3:DeleteObject",
                                                  "secretsmanager:GetSecretValue"}  # fmt: skip
        assert allowed["s3:GetObject"] == boundary | {SHARDS, MANIFEST}  # both ends of the cut
        assert allowed["s3:DeleteObject"] == boundary


def test_a_middle_stage_reads_the_manifest_by_its_exact_key_and_no_shard(s3x3: Built) -> None:
    _, _, templates = s3x3
    middle = stage_function_ids(templates["training"], 3)[1]
    statements = stage_statements(templates["training"], middle)
    dataset = {a: {r for r in rs if "demo-dataset" in r} for a, rs in grants(statements).items()}
    assert {a: rs for a, rs in dataset.items() if rs} == {"s3:GetObject": {MANIFEST}}


def test_boundary_objects_expire_and_stage_exchanges_sit_under_the_expiring_prefix(
    s3x3: Built,
    ps2: Built,
) -> None:
    for built, rules in (
        (s3x3, {"ExpireExchange": "demo/exchange/", "ExpireBoundary": "demo/pipe/"}),
        (ps2, {"ExpireBoundary": "demo/pipe/"}),
    ):
        buckets = built[2]["data"].find_resources("AWS::S3::Bucket")
        found = {r["Id"]: r.get("Prefix") for b in buckets.values()
                 for r in b["Properties"].get("LifecycleConfiguration", {}).get("Rules", [])
                 if r["Id"] != "ExpireSupersededVersions"}  # fmt: skip
        assert found == rules


def test_each_stage_has_its_log_group_output(ps2: Built) -> None:
    outputs = ps2[2]["training"].to_json()["Outputs"]
    assert {"Stage0WorkerLogGroup", "Stage1WorkerLogGroup"} <= set(outputs)
    assert "WorkerLogGroup" not in outputs


def test_a_new_cut_starts_a_new_run_and_one_stage_plans_keep_their_digest() -> None:
    two, other = pipelined_plan(2), pipelined_plan(2, micro_batches=8)
    assert plan_digest(two) != plan_digest(other) != plan_digest(make_plan())
    assert "pipeline" not in make_plan().to_dict()


def test_what_a_two_stage_plan_adds_to_the_one_stage_templates(ps2: Built) -> None:
    """A `cdk diff` from the one-stage plan to its 2-stage cut: the worker becomes two stage
    functions (each with its log group, role, policy, invoke config); the PS stack gets ps_count
    more instances (each with its launch template and instance profile); the artifacts bucket
    the boundary expiry."""
    plan, _, cut = ps2
    _, one = build_app(make_plan())
    whole = templates_of(one)
    training = difference(whole["training"], cut["training"])
    assert training["added"] - training["removed"] == Counter({
        "AWS::Lambda::Function": 1, "AWS::Lambda::EventInvokeConfig": 1,
        "AWS::IAM::Role": 1, "AWS::IAM::Policy": 1, "AWS::Logs::LogGroup": 1})  # fmt: skip
    ps = difference(whole["ps"], cut["ps"])
    assert ps["added"] - ps["removed"] == Counter({
        "AWS::EC2::Instance": plan.ps_count, "AWS::EC2::LaunchTemplate": plan.ps_count,
        "AWS::IAM::InstanceProfile": plan.ps_count})  # fmt: skip
    data = difference(whole["data"], cut["data"])
    assert data["changed"] == {"AWS::S3::Bucket": {"LifecycleConfiguration"}}
