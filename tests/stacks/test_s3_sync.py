"""The app's shape for a plan that syncs through S3: no PS stack, no network, no
secret; the worker outside any VPC with exactly its S3 prefixes; an exchange that expires; a
state machine without PS steps. And what changes from the PS shape, resource by resource.

The planner does not choose S3 yet, so the S3 plan is the hand-built PS plan with the S3 fields.
Resources are found by type and properties (a function by its handler), never hashed ids.
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App
from aws_cdk.assertions import Match, Template

from functions.task import WorkerTask
from provisioner import load_catalog
from provisioner.idle import HOURS_PER_MONTH
from provisioner.plan import Plan
from stacks.context import DatasetSource
from stacks.events import run_keys, worker_event
from stacks.job import JobStacks, add_job_stacks, plan_digest
from stacks.nag import unacknowledged_findings
from tests.stacks.conftest import make_plan, new_app
from tests.stacks.test_cfn_lint import lint_problems
from tests.stacks.test_idle import HOURLY_TYPES_NOT_ALLOWED
from tests.stacks.test_least_privilege import (
    S3_READ_ACTIONS,
    grants,
    listing_prefixes,
    role_of,
    statements_of,
    text,
)
from tests.stacks.test_stacks import CONTRACT_KEYS, DIGITS, main_path, state_machine_definition

WORKER, FINALIZE = "functions.worker.handler", "functions.finalize.handler"
PS_STATES = {"OpenNetwork", "StartPs", "WaitForPs", "StopPs", "CloseNetwork",
             "StopPsAfterFailure", "CloseNetworkAfterFailure"}  # fmt: skip
S3_KEYS = {"sync", "reducers", "exchange_prefix"}


def s3_plan(reducers: int = 2, **overrides: Any) -> Plan:
    """The hand-built PS plan turned into an S3-sync one (what the planner will emit)."""
    return dataclasses.replace(make_plan(**overrides), sync="s3", reducers=reducers, ps_count=0,
                               ps_type="none", interface_endpoints=())  # fmt: skip


def build_app(plan: Plan, dataset: DatasetSource = DIGITS, **kwargs: Any) -> tuple[App, JobStacks]:
    app = new_app(**kwargs)
    return app, add_job_stacks(app, plan=plan, dataset=dataset, nag=False)


def templates_of(stacks: JobStacks) -> dict[str, Template]:
    """data, training (and ps when there is one)."""
    found = {"data": stacks.data, "ps": stacks.parameter_servers, "training": stacks.training}
    return {name: Template.from_stack(stack) for name, stack in found.items() if stack}


@pytest.fixture(scope="module")
def built() -> tuple[Plan, JobStacks, dict[str, Template]]:
    plan = s3_plan()
    _, stacks = build_app(plan)
    return plan, stacks, templates_of(stacks)


def test_an_s3_plan_has_no_ps_stack_no_network_and_no_secret(
    built: tuple[Plan, JobStacks, dict[str, Template]],
) -> None:
    _, stacks, templates = built
    assert stacks.parameter_servers is None and set(templates) == {"data", "training"}
    assert stacks.training.run_network is None and stacks.training.ps_wait is None
    for name, template in templates.items():
        types = {r["Type"] for r in template.to_json()["Resources"].values()}
        assert not [t for t in types if t.startswith("AWS::EC2::")], (name, types)
        template.resource_count_is("AWS::SecretsManager::Secret", 0)
        template.resource_count_is("AWS::Events::Rule", 0)  # nothing to stop when a run ends
        for handler in ("functions.network.handler", "functions.ps_health.wait_handler"):
            assert not template.find_resources("AWS::Lambda::Function", {
                "Properties": {"ImageConfig": {"Command": [handler]}}}), handler  # fmt: skip
        assert "ec2:" not in json.dumps(template.find_resources("AWS::IAM::Policy"))


def test_worker_and_finalize_run_outside_any_vpc(
    built: tuple[Plan, JobStacks, dict[str, Template]],
) -> None:
    plan, _, templates = built
    training = templates["training"]
    training.has_resource_properties("AWS::Lambda::Function", {
        "ImageConfig": {"Command": [WORKER]}, "MemorySize": plan.memory_mb,
        "ReservedConcurrentExecutions": plan.n_workers, "VpcConfig": Match.absent(),
    })  # fmt: skip
    training.has_resource_properties("AWS::Lambda::Function", {
        "ImageConfig": {"Command": [FINALIZE]}, "VpcConfig": Match.absent(),
    })  # fmt: skip
    for handler in (WORKER, FINALIZE):  # no ENI policy either
        _, role = role_of(training, handler)
        arns = [text(arn) for arn in role["Properties"]["ManagedPolicyArns"]]
        assert [arn.rsplit("/", 1)[1] for arn in arns] == ["AWSLambdaBasicExecutionRole"]


def test_worker_role_reads_its_shards_and_exchanges_and_checkpoints_under_their_prefixes(
    built: tuple[Plan, JobStacks, dict[str, Template]],
) -> None:
    plan, _, templates = built
    statements = statements_of(templates["training"], WORKER)
    allowed = grants(statements)
    assert set(allowed) == S3_READ_ACTIONS | {"s3:PutObject", "s3:DeleteObject"}  # no secret
    dataset = f"arn:TOKEN:s3:::{plan.job}-dataset-TOKEN"
    artifacts = f"arn:TOKEN:s3:::{plan.job}-artifacts-TOKEN"
    shards, exchange = f"{plan.job}/shards-n{plan.n_workers}", f"{plan.job}/exchange"
    checkpoints = f"{plan.job}/checkpoints"
    assert allowed["s3:GetObject"] == {f"{dataset}/{shards}/*", f"{artifacts}/{exchange}/*",
                                       f"{artifacts}/{checkpoints}/*"}  # fmt: skip
    assert allowed["s3:ListBucket"] == {dataset, artifacts}
    assert sorted(listing_prefixes(statements)) == [[f"{checkpoints}/*", checkpoints],
                                                    [f"{exchange}/*", exchange],
                                                    [f"{shards}/*", shards]]  # fmt: skip
    assert allowed["s3:PutObject"] == {f"{artifacts}/{plan.job}/runs/*",
                                       f"{artifacts}/{plan.job}/checkpoints/*",
                                       f"{artifacts}/{exchange}/*"}  # fmt: skip
    assert allowed["s3:DeleteObject"] == {f"{artifacts}/{exchange}/*",
                                          f"{artifacts}/{checkpoints}/*"}  # fmt: skip


def test_finalize_reads_the_checkpoints_and_writes_exactly_the_results_without_a_secret(
    built: tuple[Plan, JobStacks, dict[str, Template]],
) -> None:
    plan, _, templates = built
    allowed = grants(statements_of(templates["training"], FINALIZE))
    artifacts = f"arn:TOKEN:s3:::{plan.job}-artifacts-TOKEN"
    assert set(allowed) == S3_READ_ACTIONS | {"s3:PutObject"}
    assert allowed["s3:PutObject"] == {f"{artifacts}/{plan.job}/model.pt",
                                       f"{artifacts}/{plan.job}/report.json"}  # fmt: skip
    assert f"{artifacts}/{plan.job}/checkpoints/*" in allowed["s3:GetObject"]
    assert not [r for r in allowed["s3:GetObject"] if "/exchange" in r]


def test_the_exchange_prefix_expires_after_a_day_and_only_in_s3_plans(
    built: tuple[Plan, JobStacks, dict[str, Template]],
) -> None:
    plan, _, templates = built
    templates["data"].has_resource_properties("AWS::S3::Bucket", {
        "LifecycleConfiguration": {"Rules": [
            Match.object_like({"Id": "ExpireSupersededVersions"}),
            {"Id": "ExpireExchange", "Prefix": f"{plan.job}/exchange/", "Status": "Enabled",
             "ExpirationInDays": 1, "NoncurrentVersionExpiration": {"NoncurrentDays": 1}},
        ]},
    })  # fmt: skip
    _, ps_stacks = build_app(make_plan())
    assert "ExpireExchange" not in json.dumps(Template.from_stack(ps_stacks.data).to_json())


def test_the_state_machine_runs_no_ps_steps_and_its_events_carry_the_s3_keys(
    built: tuple[Plan, JobStacks, dict[str, Template]],
) -> None:
    plan, _, templates = built
    definition = state_machine_definition(templates["training"])
    states = definition["States"]
    assert main_path(definition) == ["NameRun", "PrepareDataset", "WorkerRanks", "Workers",
                                     "Finalize"]  # fmt: skip
    assert not PS_STATES & set(states)
    assert {n: s["Catch"][0]["Next"] for n, s in states.items() if "Catch" in s} == {
        "PrepareDataset": "TrainingFailed", "Workers": "TrainingFailed",
        "Finalize": "TrainingFailed"}  # fmt: skip
    event = states["Workers"]["ItemSelector"]["event"]
    finalize = states["Finalize"]["Parameters"]["Payload"]
    for payload in (event, finalize):
        assert {k: payload[k] for k in S3_KEYS | {"ps_endpoints", "secret_ref"}} == {
            "sync": "s3", "reducers": plan.reducers, "exchange_prefix": f"{plan.job}/exchange",
            "ps_endpoints": [], "secret_ref": ""}  # fmt: skip
    expected = CONTRACT_KEYS - {"rank"} | S3_KEYS | {"ephemeral_storage_mb"}
    assert set(event) - {"rank.$", "run_id.$", "run_started.$"} == expected
    assert len(templates["training"].find_resources("AWS::StepFunctions::StateMachine")) == 1


def test_the_s3_worker_event_parses_into_the_runtime_task_and_ps_events_stay_as_they_were(
    plan: Plan,
) -> None:
    s3 = s3_plan(reducers=3)
    event = worker_event(s3, rank=1, dataset_bucket="d", artifacts_bucket="a", ps_endpoints=[],
                         secret_ref="")  # fmt: skip
    task = WorkerTask.from_event({**event, **run_keys("exec-1", "2026-01-01T00:00:00Z")})
    assert task.extra == {}
    assert (task.sync, task.reducers, task.exchange_prefix) == ("s3", 3, f"{s3.job}/exchange")
    ps = worker_event(plan, rank=1, dataset_bucket="d", artifacts_bucket="a",
                      ps_endpoints=["10.0.0.1:7070"], secret_ref="arn:s")  # fmt: skip
    assert set(ps) == CONTRACT_KEYS | {"ephemeral_storage_mb"}  # no sync keys: PS defaults


def test_a_new_k_starts_a_new_run_and_ps_plans_keep_their_digest(plan: Plan) -> None:
    assert plan_digest(s3_plan(reducers=2)) != plan_digest(s3_plan(reducers=3))
    assert plan_digest(s3_plan()) != plan_digest(plan)
    # What the digest of this PS plan was before plans had `sync` (stacks/job.py RUN_FIELDS).
    assert plan_digest(plan) == plan_digest(dataclasses.replace(plan, sync="ps", reducers=0))


@pytest.mark.parametrize(
    "dataset",
    [DIGITS, DatasetSource(kind="s3", spec="s3://users-data/digits", bucket="users-data",
                           prefix="digits")],
    ids=["builtin", "imported"],
)  # fmt: skip
def test_the_s3_shape_is_nag_and_cfn_lint_clean(dataset: DatasetSource, tmp_path: Path) -> None:
    app, _ = build_app(s3_plan(), dataset, outdir=str(tmp_path))
    assert unacknowledged_findings(app) == []
    app.synth()
    templates = sorted(tmp_path.glob("*.template.json"))
    assert len(templates) == 2
    assert lint_problems(templates) == []


def test_the_s3_shape_bound_to_an_account_has_no_unacknowledged_findings() -> None:
    from tests.stacks.test_machine_image import ENV

    app = new_app()
    add_job_stacks(app, plan=s3_plan(), nag=False, env=ENV, dataset=DIGITS)
    assert unacknowledged_findings(app) == []


def hourly_usd(templates: dict[str, Template]) -> float:
    """What the templates bill by the hour whatever runs, counted as tests/stacks/test_idle.py
    counts it: interface endpoints, PS volumes, secrets."""
    catalog = load_catalog("lambda-2025")

    def resources(kind: str) -> list[dict[str, Any]]:
        return [r for t in templates.values() for r in t.find_resources(kind).values()]

    for kind in HOURLY_TYPES_NOT_ALLOWED:
        assert not resources(kind), kind
    endpoints = [e for e in resources("AWS::EC2::VPCEndpoint")
                 if e["Properties"].get("VpcEndpointType") == "Interface"]  # fmt: skip
    volumes_gb = sum(m["Ebs"]["VolumeSize"] for i in resources("AWS::EC2::Instance")
                     for m in i["Properties"]["BlockDeviceMappings"])  # fmt: skip
    return (len(endpoints) * catalog.endpoint_usd_per_hour
            + volumes_gb * catalog.ebs_usd_per_gb_month / HOURS_PER_MONTH
            + len(resources("AWS::SecretsManager::Secret")) * catalog.secret_usd_per_month
            / HOURS_PER_MONTH)  # fmt: skip


def test_the_s3_shape_bills_nothing_by_the_hour_the_ps_shape_does(
    built: tuple[Plan, JobStacks, dict[str, Template]],
) -> None:
    _, _, templates = built
    _, ps_stacks = build_app(make_plan())
    assert hourly_usd(templates) == 0.0 < hourly_usd(templates_of(ps_stacks))


# --- offline review: what a PS → S3 change does to the templates ------------------------------


def difference(before: Template, after: Template) -> dict[str, Any]:
    """Resources removed and added (by type) and changed (type → changed top-level properties
    and attributes, a count by type, and their ids), matched by logical id between the two
    templates (ids read from the templates, never written here)."""
    old, new = before.to_json()["Resources"], after.to_json()["Resources"]
    changed: dict[str, set[str]] = {}
    counts: Counter[str] = Counter()
    ids: set[str] = set()
    for lid in old.keys() & new.keys():
        a, b = old[lid], new[lid]
        keys = {
            k
            for k in a.get("Properties", {}).keys() | b.get("Properties", {}).keys()
            if a.get("Properties", {}).get(k) != b.get("Properties", {}).get(k)
        }
        keys |= {k for k in a.keys() | b.keys() if k != "Properties" and a.get(k) != b.get(k)}
        if keys:
            changed.setdefault(a["Type"], set()).update(keys)
            counts[a["Type"]] += 1
            ids.add(lid)
    return {
        "removed": Counter(old[lid]["Type"] for lid in old.keys() - new.keys()),
        "added": Counter(new[lid]["Type"] for lid in new.keys() - old.keys()),
        "changed": changed,
        "changed_counts": counts,
        "changed_ids": ids,
        "removed_ids": old.keys() - new.keys(),
    }


def handlers(template: Template, lids: set[str]) -> set[str]:
    functions = template.find_resources("AWS::Lambda::Function")
    return {f["Properties"]["ImageConfig"]["Command"][0] for lid, f in functions.items()
            if lid in lids}  # fmt: skip


def test_ps_to_s3_removes_the_network_and_ps_and_changes_only_workers_and_the_state_machine(
    built: tuple[Plan, JobStacks, dict[str, Template]],
) -> None:
    """What `cdk diff` of a PS plan's stacks against an S3 plan's shows (README, "Reviewing
    another deadline offline"): the PS stack goes whole; the data stack gains the exchange
    expiry; the training stack loses the run's network function, the PS wait and the stopper
    and changes the worker, finalize (out of the VPC, no secret) and the state machine."""
    _, _, s3 = built
    _, ps_stacks = build_app(make_plan())
    ps = templates_of(ps_stacks)
    assert {r["Type"] for r in ps["ps"].to_json()["Resources"].values()} == {
        "AWS::EC2::VPC", "AWS::EC2::Subnet", "AWS::EC2::RouteTable",
        "AWS::EC2::SubnetRouteTableAssociation", "AWS::EC2::VPCEndpoint", "AWS::EC2::FlowLog",
        "AWS::EC2::SecurityGroup", "AWS::EC2::SecurityGroupIngress",
        "AWS::EC2::SecurityGroupEgress", "AWS::EC2::Instance", "AWS::EC2::LaunchTemplate",
        "AWS::IAM::InstanceProfile", "AWS::SecretsManager::Secret", "AWS::IAM::Role",
        "AWS::IAM::Policy", "AWS::Lambda::Function", "AWS::Logs::LogGroup", "Custom::AWS",
        "Custom::VpcRestrictDefaultSG",
    }  # fmt: skip
    data = difference(ps["data"], s3["data"])
    assert (data["removed"], data["added"]) == (Counter(), Counter())
    assert data["changed"] == {"AWS::S3::Bucket": {"LifecycleConfiguration"}}
    assert data["changed_counts"] == Counter({"AWS::S3::Bucket": 1})  # the artifacts bucket

    training = difference(ps["training"], s3["training"])
    assert training["added"] == Counter()
    assert training["removed"] == Counter({
        "AWS::Lambda::Function": 2, "AWS::Lambda::EventInvokeConfig": 2,
        "AWS::IAM::Role": 4, "AWS::IAM::Policy": 3, "AWS::Logs::LogGroup": 3,
        "AWS::StepFunctions::StateMachine": 1, "AWS::Events::Rule": 1,
    })  # fmt: skip
    assert handlers(ps["training"], training["removed_ids"]) == {
        "functions.network.handler", "functions.ps_health.wait_handler"}  # fmt: skip
    assert handlers(ps["training"], training["changed_ids"]) == {WORKER, FINALIZE}
    assert training["changed"] == {
        "AWS::Lambda::Function": {"VpcConfig"},
        "AWS::IAM::Role": {"ManagedPolicyArns"},  # no AWSLambdaVPCAccessExecutionRole
        "AWS::IAM::Policy": {"PolicyDocument"},  # worker, finalize, state machine
        "AWS::StepFunctions::StateMachine": {"DefinitionString"},
        "Custom::AWS": {"Create", "Update", "DependsOn"},  # the run's start: new plan digest
    }  # fmt: skip
    assert training["changed_counts"] == Counter({
        "AWS::Lambda::Function": 2, "AWS::IAM::Role": 2, "AWS::IAM::Policy": 3,
        "AWS::StepFunctions::StateMachine": 1, "Custom::AWS": 1,
    })  # fmt: skip


def test_plan_diff_reports_a_stack_on_one_side_whole(tmp_path: Path) -> None:
    """`tools.plan_diff` on a PS → S3 change: the PS stack is on the "from" side only."""
    from tools.plan_diff import one_sided

    before, after = tmp_path / "from", tmp_path / "to"
    before.mkdir()
    after.mkdir()
    resources = {"Vpc": {"Type": "AWS::EC2::VPC"}, "A": {"Type": "AWS::EC2::Instance"},
                 "B": {"Type": "AWS::EC2::Instance"}}  # fmt: skip
    (before / "j-ps.template.json").write_text(json.dumps({"Resources": resources}))
    for side in (before, after):
        (side / "j-training.template.json").write_text(json.dumps({"Resources": {}}))
    assert one_sided(str(before), str(after), "j-ps") == (
        "removed: the whole stack (3 resources: 2 AWS::EC2::Instance, 1 AWS::EC2::VPC)"
    )
    assert (one_sided(str(after), str(before), "j-ps") or "").startswith(
        "added: the whole stack (3 "
    )
    assert one_sided(str(before), str(after), "j-training") is None


def test_synth_says_s3_sync_instead_of_the_ps_line() -> None:
    from types import SimpleNamespace

    import app as app_module

    plan = s3_plan(reducers=3)
    ctx = SimpleNamespace(deadline_s=7200.0, budget_usd=None, deadline_is_default=False, slack=0)
    lines = app_module.summary_lines(ctx, SimpleNamespace(plan=plan))  # type: ignore[arg-type]
    assert lines[0].startswith(f"plan {plan.job}: 4 x 2048 MB arm64 workers, "
                               "sync: s3 (3 reducers), no PS, timeout 900 s")  # fmt: skip
    assert "PS" not in app_module.image_line(plan).replace("no PS", "")
    assert (
        app_module.placement_line(plan, None) == "placement: no VPC and no PS instances (S3 sync)"
    )
    between = [line for line in lines if line.startswith("between runs: ")]
    assert between == ["between runs: $0.0000/h until `cdk destroy` (no PS volumes, no secret, "
                       "no endpoints: S3 storage only)"]  # fmt: skip
    ps_lines = app_module.summary_lines(ctx, SimpleNamespace(plan=make_plan()))  # type: ignore[arg-type]
    assert "PS 2 x c5.large (x86_64)" in ps_lines[0]
