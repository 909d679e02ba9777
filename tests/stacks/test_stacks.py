"""The stacks built from a hand-written Plan: every sized property equals the Plan's field.

Synthesized in-process (no node CLI) with cdk.json's feature flags; `aws_cdk.assertions`
matchers only, never hashed logical ids or a count of all Lambda functions.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import numpy as np
import pytest
from aws_cdk.assertions import Match, Template

from provisioner import runaway
from provisioner.plan import Goal, Plan
from stacks.context import DatasetSource
from stacks.events import PS_PORT
from stacks.job import JobStacks, add_job_stacks, plan_digest, plan_tags
from tests.stacks.conftest import make_plan, new_app

DIGITS = DatasetSource(kind="builtin", spec="builtin:digits", name="digits")
CONTRACT_KEYS = {
    "job_id", "rank", "n_workers", "model", "dataset_bucket", "dataset_prefix",
    "artifacts_bucket", "checkpoint_prefix", "ps_endpoints", "secret_ref", "local_batch",
    "iterations", "learning_rate", "momentum", "memory_mb", "seed", "start_iteration",
    "invocation", "safety_margin_s",
}  # fmt: skip
# Actions AWS defines without resource-level permissions: the only ones allowed on "*".
UNSCOPABLE_ACTIONS = {
    "ecr:GetAuthorizationToken",
    "xray:PutTraceSegments", "xray:PutTelemetryRecords", "xray:GetSamplingRules",
    "xray:GetSamplingTargets",
    "logs:CreateLogDelivery", "logs:GetLogDelivery", "logs:UpdateLogDelivery",
    "logs:DeleteLogDelivery", "logs:ListLogDeliveries", "logs:PutResourcePolicy",
    "logs:DescribeResourcePolicies", "logs:DescribeLogGroups",
    "ec2:DescribeManagedPrefixLists",
    # The run's network function: no resource-level scope; the private-DNS hosted zone is
    # AWS-managed (stacks/run_network.py).
    "ec2:DescribeVpcEndpoints", "route53:AssociateVPCWithHostedZone",
}  # fmt: skip


def build(plan: Plan, dataset: DatasetSource = DIGITS) -> tuple[JobStacks, dict[str, Template]]:
    app = new_app()
    stacks = add_job_stacks(app, plan=plan, dataset=dataset, nag=False)
    found = {"data": stacks.data, "ps": stacks.parameter_servers, "training": stacks.training}
    # No "ps" for a plan that syncs through S3: it has no PS stack.
    templates = {name: Template.from_stack(stack) for name, stack in found.items() if stack}
    return stacks, templates


@pytest.fixture(scope="module")
def built() -> tuple[Plan, dict[str, Template]]:
    plan = make_plan()
    return plan, build(plan)[1]


def rendered(value: Any) -> Any:
    """Fn::Join of a JSON document with CloudFormation tokens → the document, tokens as 'TOKEN'."""
    parts = value["Fn::Join"][1]
    return json.loads("".join(p if isinstance(p, str) else "TOKEN" for p in parts))


def training_machine(template: Template) -> dict[str, Any]:
    """The run's state machine (not the one that stops the PS when a run is cut off)."""
    machines = template.find_resources("AWS::StepFunctions::StateMachine")
    (machine,) = [m for lid, m in machines.items() if "StopPsWhenRunEnds" not in lid]
    return machine


def state_machine_definition(template: Template) -> dict[str, Any]:
    machine = training_machine(template)
    return rendered(machine["Properties"]["DefinitionString"])  # type: ignore[no-any-return]


def main_path(definition: dict[str, Any]) -> list[str]:
    """The top-level states from StartAt along each state's Next (the path a run takes)."""
    states, order, name = definition["States"], [], definition["StartAt"]
    while name in states and "Next" in states[name]:
        order.append(name)
        name = states[name]["Next"]
    return order


def test_worker_function_is_sized_by_the_plan(built: tuple[Plan, dict[str, Template]]) -> None:
    plan, templates = built
    templates["training"].has_resource_properties("AWS::Lambda::Function", {
        "PackageType": "Image",
        "ImageConfig": {"Command": ["functions.worker.handler"]},
        "MemorySize": plan.memory_mb,
        "Architectures": [plan.arch],
        "Timeout": plan.invocation_timeout_s,
        "EphemeralStorage": {"Size": plan.ephemeral_storage_mb},
        "ReservedConcurrentExecutions": plan.n_workers,
        "VpcConfig": Match.object_like({"SubnetIds": Match.any_value()}),
        "LoggingConfig": {"LogGroup": Match.any_value()},
    })  # fmt: skip


def test_no_reserved_concurrency_unless_the_plan_asks() -> None:
    plan = make_plan(reserve_concurrency=False, arch="x86_64", memory_mb=3000)
    _, templates = build(plan)
    templates["training"].has_resource_properties("AWS::Lambda::Function", {
        "ImageConfig": {"Command": ["functions.worker.handler"]},
        "MemorySize": 3000, "Architectures": ["x86_64"],
        "ReservedConcurrentExecutions": Match.absent(),
    })  # fmt: skip


def test_parameter_servers_match_the_plan(built: tuple[Plan, dict[str, Template]]) -> None:
    plan, templates = built
    ps = templates["ps"]
    ps.resource_count_is("AWS::EC2::Instance", plan.ps_count)
    ps.all_resources_properties("AWS::EC2::Instance", {
        "InstanceType": plan.ps_type,
        "KeyName": Match.absent(),
        "BlockDeviceMappings": [Match.object_like({"Ebs": Match.object_like({"Encrypted": True})})],
        "Monitoring": True,
    })  # fmt: skip
    ps.all_resources_properties("AWS::EC2::LaunchTemplate", {
        "LaunchTemplateData": Match.object_like(
            {"MetadataOptions": Match.object_like({"HttpTokens": "required"})}),
    })  # fmt: skip
    # AL2023 for the PS architecture, resolved from the public SSM parameter at deploy time.
    parameters = json.dumps(ps.to_json()["Parameters"])
    assert "al2023-ami-kernel-6.1-x86_64" in parameters and "arm64" not in parameters


def test_ps_shards_run_the_plan_in_their_boot_script(
    built: tuple[Plan, dict[str, Template]],
) -> None:
    plan, templates = built
    instances = templates["ps"].find_resources("AWS::EC2::Instance")
    scripts = ["".join(p if isinstance(p, str) else "TOKEN" for p in
                       i["Properties"]["UserData"]["Fn::Base64"]["Fn::Join"][1])
               for i in instances.values()]  # fmt: skip
    for script in scripts:
        assert f"--shards {plan.ps_count} --workers {plan.n_workers}" in script
        assert f"--port {PS_PORT}" in script and "lambdadnn-ps.service" in script
        assert "cfn-signal" not in script  # the run waits for the PS (WaitForPs), not the deploy
    assert sorted(s.split("--shard ")[1].split()[0] for s in scripts) == [
        str(i) for i in range(plan.ps_count)
    ]


def test_ps_port_open_to_the_workers_group_only(built: tuple[Plan, dict[str, Template]]) -> None:
    _, templates = built
    ps = templates["ps"].to_json()["Resources"]
    ingress = [r["Properties"] for r in ps.values()
               if r["Type"] == "AWS::EC2::SecurityGroupIngress"]  # fmt: skip
    to_ps = [r for r in ingress if r["FromPort"] == PS_PORT]
    assert len(to_ps) == 1 and to_ps[0]["ToPort"] == PS_PORT
    assert "SourceSecurityGroupId" in to_ps[0] and "CidrIp" not in to_ps[0]
    inline = [rule for r in ps.values() if r["Type"] == "AWS::EC2::SecurityGroup"
              for rule in r["Properties"].get("SecurityGroupIngress", [])]  # fmt: skip
    assert all(rule.get("CidrIp") != "0.0.0.0/0" for rule in ingress + inline)


def test_network_is_isolated_with_an_s3_gateway(built: tuple[Plan, dict[str, Template]]) -> None:
    _, templates = built
    ps = templates["ps"]
    ps.resource_count_is("AWS::EC2::NatGateway", 0)
    ps.resource_count_is("AWS::EC2::InternetGateway", 0)
    ps.has_resource_properties("AWS::EC2::VPCEndpoint", {
        "VpcEndpointType": "Gateway",
        "ServiceName": Match.object_like({"Fn::Join": Match.array_with(
            [Match.array_with([".s3"])])}),
    })  # fmt: skip
    ps.all_resources_properties("AWS::EC2::Subnet", {"MapPublicIpOnLaunch": False})


def test_buckets_are_private_encrypted_tls_only_and_destroyed(
    built: tuple[Plan, dict[str, Template]],
) -> None:
    _, templates = built
    data = templates["data"]
    data.resource_count_is("AWS::S3::Bucket", 3)
    data.all_resources("AWS::S3::Bucket", {"DeletionPolicy": "Delete",
                                           "UpdateReplacePolicy": "Delete",
                                           "Properties": Match.any_value()})  # fmt: skip
    data.all_resources_properties("AWS::S3::Bucket", {
        "BucketEncryption": Match.object_like({}),
        "PublicAccessBlockConfiguration": {
            "BlockPublicAcls": True, "BlockPublicPolicy": True,
            "IgnorePublicAcls": True, "RestrictPublicBuckets": True},
    })  # fmt: skip
    data.all_resources_properties("AWS::S3::BucketPolicy", {
        "PolicyDocument": {"Statement": Match.array_with([Match.object_like({
            "Effect": "Deny",
            "Condition": {"Bool": {"aws:SecureTransport": "false"}}})]),
            "Version": Match.any_value()},
    })  # fmt: skip
    data.resource_count_is("Custom::S3AutoDeleteObjects", 3)


def test_superseded_checkpoints_are_deleted_and_their_versions_expire(
    built: tuple[Plan, dict[str, Template]],
) -> None:
    plan, templates = built
    templates["data"].has_resource_properties("AWS::S3::Bucket", {
        "VersioningConfiguration": {"Status": "Enabled"},
        "LifecycleConfiguration": {"Rules": [Match.object_like({
            "NoncurrentVersionExpiration": {"NoncurrentDays": 7},
            "ExpiredObjectDeleteMarker": True, "Status": "Enabled"})]},
    })  # fmt: skip
    deleting = [s for p in templates["ps"].find_resources("AWS::IAM::Policy").values()
                for s in p["Properties"]["PolicyDocument"]["Statement"]
                if "s3:DeleteObject" in s["Action"]]  # fmt: skip
    # The PS may delete under its job's checkpoint prefix and nowhere else.
    assert len(deleting) == 1
    assert json.dumps(deleting[0]["Resource"]).endswith(f'/{plan.job}/checkpoints/*"]]}}')
    for policy in templates["training"].find_resources("AWS::IAM::Policy").values():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            assert "s3:DeleteObject" not in statement["Action"]


def test_every_log_group_goes_with_the_stack(built: tuple[Plan, dict[str, Template]]) -> None:
    _, templates = built
    total = 0
    for template in templates.values():
        groups = template.find_resources("AWS::Logs::LogGroup")
        total += len(groups)
        assert all(g["DeletionPolicy"] == "Delete" for g in groups.values())
    assert total >= 8  # 3 functions, state machine, PS containers, VPC flow logs, 2 providers


@pytest.mark.parametrize("dataset", ["builtin", "local"])
def test_every_function_logs_to_a_group_of_its_stack_deleted_after_custom_resources(
    dataset: str, tmp_path: Any
) -> None:
    """CDK's helper functions too: an implicit /aws/lambda/... group would outlive `destroy`."""
    source = DIGITS
    if dataset == "local":
        np.savez(tmp_path / "a.npz", x=np.zeros((4, 64), np.float32), y=np.zeros(4, np.int64))
        source = DatasetSource(kind="local", spec=str(tmp_path), name="a", path=str(tmp_path))
    _, templates = build(make_plan(), source)
    for name, template in templates.items():
        resources = template.to_json()["Resources"]
        groups = {lid for lid, r in resources.items() if r["Type"] == "AWS::Logs::LogGroup"}
        functions = [lid for lid, r in resources.items() if r["Type"] == "AWS::Lambda::Function"]
        customs = [lid for lid, r in resources.items() if r["Type"].startswith("Custom::")]
        assert functions or not customs, name  # a custom resource is served by a function here
        for lid in functions:
            target = resources[lid]["Properties"].get("LoggingConfig", {}).get("LogGroup", {})
            assert target.get("Ref") in groups, (name, lid)
        for lid in customs:
            assert groups <= set(resources[lid].get("DependsOn", [])), (name, lid)


def test_iam_statements_name_their_resources(built: tuple[Plan, dict[str, Template]]) -> None:
    _, templates = built
    for name, template in templates.items():
        for policy in template.find_resources("AWS::IAM::Policy").values():
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
                resources = statement["Resource"]
                resources = resources if isinstance(resources, list) else [resources]
                if "*" in resources:
                    actions = statement["Action"]
                    actions = set(actions if isinstance(actions, list) else [actions])
                    assert actions <= UNSCOPABLE_ACTIONS, (name, actions)


def test_stop_instances_is_scoped_to_the_ps_instances(
    built: tuple[Plan, dict[str, Template]],
) -> None:
    plan, templates = built
    statements = [s for p in templates["training"].find_resources("AWS::IAM::Policy").values()
                  for s in p["Properties"]["PolicyDocument"]["Statement"]
                  if "ec2:StopInstances" in s["Action"]]  # fmt: skip
    assert len(statements) == 2  # the run's own stop steps, and the stop when a run is cut off
    for statement in statements:
        assert len(statement["Resource"]) == plan.ps_count
        assert all(":instance/" in json.dumps(r) for r in statement["Resource"])


def test_state_machine_fans_out_n_workers_and_stops_the_ps(
    built: tuple[Plan, dict[str, Template]],
) -> None:
    plan, templates = built
    definition = state_machine_definition(templates["training"])
    states = definition["States"]
    assert main_path(definition) == [
        "NameRun", "OpenNetwork", "StartPs", "PrepareDataset", "WaitForPs",
        "WorkerRanks", "Workers", "Finalize", "StopPs", "CloseNetwork"]  # fmt: skip
    workers = states["Workers"]
    assert workers["MaxConcurrency"] == plan.n_workers
    assert workers["ItemProcessor"]["ProcessorConfig"]["Mode"] == "DISTRIBUTED"
    assert states["WorkerRanks"]["Result"] == list(range(plan.n_workers))
    event = workers["ItemSelector"]["event"]
    # The run comes from the execution, read once into the state by the first state.
    assert {event.pop("run_id.$"), event.pop("run_started.$")} == {
        "$.run.run_id",
        "$.run.run_started",
    }
    assert states["NameRun"]["Parameters"] == {
        "run_id.$": "$$.Execution.Name",
        "run_started.$": "$$.Execution.StartTime",
    }
    assert set(event) - {"rank.$", "ephemeral_storage_mb"} == CONTRACT_KEYS - {"rank"}
    assert event["rank.$"] == "$$.Map.Item.Value"
    assert (event["memory_mb"], event["iterations"]) == (plan.memory_mb, plan.training.iterations)
    assert len(event["ps_endpoints"]) == plan.ps_count
    loop = workers["ItemProcessor"]["States"]
    assert loop["RunWorker"]["ResultSelector"]["event.$"] == "$.Payload.next_event"
    assert loop["WorkerDone"]["Default"] == "NextLink"  # re-invoke until done ...
    assert loop["NextLink"]["Next"] == "RunWorker"
    rules = {rule["Next"]: rule for rule in loop["WorkerDone"]["Choices"]}
    # ... while links advance (one that does not is re-invoked once), up to the plan's link cap
    assert rules["StalledBefore"]["NumericLessThanEqualsPath"] == "$.event.start_iteration"
    (stalled_twice,) = loop["StalledBefore"]["Choices"]
    assert stalled_twice == {"Variable": "$.stalled", "IsPresent": True,
                             "Next": "LinkMadeNoProgress"}  # fmt: skip
    assert loop["StalledBefore"]["Default"] == "RetryStalledLink"
    assert loop["RetryStalledLink"]["Parameters"] == {"event.$": "$.link.event", "stalled": True}
    assert loop["RetryStalledLink"]["Next"] == "RunWorker"
    assert rules["TooManyLinks"]["NumericGreaterThanEquals"] == runaway.max_links(
        plan.invocations_per_worker
    )
    assert loop["WorkerFinished"]["OutputPath"] == "$.link.done"  # n results stay far below 256 KB
    assert definition["TimeoutSeconds"] == runaway.plan_bounds(plan)[1]
    # Every failure stops the PS, then closes the endpoints (even if the stop failed).
    catches = {n: s["Catch"][0]["Next"] for n, s in states.items() if "Catch" in s}
    assert catches.pop("StopPsAfterFailure") == "CloseNetworkAfterFailure"
    assert catches.pop("CloseNetworkAfterFailure") == "TrainingFailed"
    assert set(catches.values()) == {"StopPsAfterFailure"}
    assert {"OpenNetwork", "StartPs", "PrepareDataset", "WaitForPs", "Workers",
            "Finalize"} <= set(catches)  # fmt: skip
    assert states["StopPsAfterFailure"]["Next"] == "CloseNetworkAfterFailure"


def test_training_starts_by_itself_after_deploy(built: tuple[Plan, dict[str, Template]]) -> None:
    _, templates = built
    (start,) = templates["training"].find_resources("Custom::AWS").values()
    for event in ("Create", "Update"):  # Update: a changed Plan starts a new run
        call = json.dumps(start["Properties"][event])
        assert '\\"service\\":\\"SFN\\"' in call and "startExecution" in call
    # Delete (destroy, or a superseded run after a Plan change) stops the run it started.
    assert "stopExecution" in json.dumps(start["Properties"]["Delete"])
    statements = [s for p in templates["training"].find_resources("AWS::IAM::Policy").values()
                  for s in p["Properties"]["PolicyDocument"]["Statement"]
                  if s["Action"] == "states:StopExecution"]  # fmt: skip
    assert len(statements) == 1 and ":execution:" in json.dumps(statements[0]["Resource"])


def test_outputs_tell_the_user_how_to_follow_the_run(
    built: tuple[Plan, dict[str, Template]],
) -> None:
    _, templates = built
    outputs = templates["training"].to_json()["Outputs"]
    assert {"StateMachineArn", "ExecutionArn", "FollowRun", "WorkerLogGroup", "Results"} <= set(
        outputs
    )
    assert "PsLogGroup" in templates["ps"].to_json()["Outputs"]


def test_every_taggable_resource_carries_the_plan_tags(
    built: tuple[Plan, dict[str, Template]],
) -> None:
    plan, templates = built
    expected = plan_tags(plan)
    assert expected["predicted-cost"] == f"{plan.cost.total_usd:.4f} USD"
    tagged = 0
    for template in templates.values():
        for resource in template.to_json()["Resources"].values():
            tags = resource.get("Properties", {}).get("Tags")
            if isinstance(tags, list):
                found = {t["Key"]: t["Value"] for t in tags}
                assert {k: found.get(k) for k in expected} == expected, resource["Type"]
                tagged += 1
            elif isinstance(tags, dict):  # e.g. SSM parameters, state machine map form
                assert {k: tags.get(k) for k in expected} == expected, resource["Type"]
                tagged += 1
    assert tagged >= 10


def test_imported_dataset_bucket_is_read_not_created() -> None:
    dataset = DatasetSource(
        kind="s3", spec="s3://users-data/cifar", bucket="users-data", prefix="cifar"
    )
    _, templates = build(make_plan(), dataset)
    templates["data"].resource_count_is("AWS::S3::Bucket", 3)  # ours only; never theirs
    assert "users-data" not in json.dumps(templates["data"].to_json())
    policies = json.dumps(templates["training"].find_resources("AWS::IAM::Policy"))
    assert ":s3:::users-data/cifar/*" in policies
    definition = state_machine_definition(templates["training"])
    assert definition["States"]["PrepareDataset"]["Parameters"]["Payload"]["source"] == (
        "s3://users-data/cifar"
    )


def test_a_different_plan_changes_exactly_the_sized_properties() -> None:
    small = make_plan()
    big = dataclasses.replace(
        small,
        n_workers=12,
        memory_mb=4096,
        ps_count=3,
        ps_type="c5n.large",
        ephemeral_storage_mb=2048,
    )
    _, templates = build(big)
    templates["training"].has_resource_properties("AWS::Lambda::Function", {
        "ImageConfig": {"Command": ["functions.worker.handler"]},
        "MemorySize": 4096, "ReservedConcurrentExecutions": 12,
        "EphemeralStorage": {"Size": 2048},
    })  # fmt: skip
    templates["ps"].resource_count_is("AWS::EC2::Instance", 3)
    templates["ps"].all_resources_properties("AWS::EC2::Instance", {"InstanceType": "c5n.large"})
    assert (
        state_machine_definition(templates["training"])["States"]["Workers"]["MaxConcurrency"] == 12
    )


def test_plan_digest_is_stable_and_follows_the_plan() -> None:
    plan = make_plan()
    assert plan_digest(plan) == plan_digest(make_plan())
    assert plan_digest(plan) != plan_digest(dataclasses.replace(plan, n_workers=5))
    assert plan_digest(plan) != plan_digest(
        dataclasses.replace(plan, training=dataclasses.replace(plan.training, learning_rate=0.1))
    )
    # A new deadline the same configuration still meets must not restart the run.
    same_run = dataclasses.replace(
        plan,
        goal=Goal(deadline_s=60.0),
        notes=("other",),
        cost=dataclasses.replace(plan.cost, total_usd=9.0),
    )
    assert plan_digest(same_run) == plan_digest(plan)


def test_no_stack_creates_an_interface_endpoint_each_run_opens_the_plans(
    built: tuple[Plan, dict[str, Template]],
) -> None:
    """Interface endpoints bill by the hour: the run opens the plan's set and closes it."""
    from functions.network import JOB_TAG
    from stacks.network import INTERFACE_ENDPOINTS

    plan, templates = built
    for template in templates.values():
        assert not template.find_resources("AWS::EC2::VPCEndpoint", {
            "Properties": {"VpcEndpointType": "Interface"}})  # fmt: skip
    expected = list(getattr(plan, "interface_endpoints", ())) or list(INTERFACE_ENDPOINTS)
    states = state_machine_definition(templates["training"])["States"]
    for name, action in (("OpenNetwork", "open"), ("CloseNetwork", "close"),
                         ("CloseNetworkAfterFailure", "close")):  # fmt: skip
        payload = states[name]["Parameters"]["Payload"]
        assert (payload["action"], payload["services"], payload["job_id"]) == (
            action,
            expected,
            plan.job,
        )
    # The network function may create endpoints only tagged with the job, delete only those.
    statements = [st for policy in templates["training"].find_resources("AWS::IAM::Policy").values()
                  for st in policy["Properties"]["PolicyDocument"]["Statement"]]  # fmt: skip
    create = [st for st in statements if st["Action"] == "ec2:CreateVpcEndpoint"]
    delete = [st for st in statements if st["Action"] == "ec2:DeleteVpcEndpoints"]
    conditioned = [st for st in create if "Condition" in st]
    assert conditioned and all(
        st["Condition"] == {"StringEquals": {f"aws:RequestTag/{JOB_TAG}": plan.job}}
        for st in conditioned)  # fmt: skip
    assert [st["Condition"] for st in delete] == [
        {"StringEquals": {f"aws:ResourceTag/{JOB_TAG}": plan.job}}
    ]


def test_a_run_cut_off_by_its_timeout_or_a_user_stops_the_ps_unless_another_run_goes(
    built: tuple[Plan, dict[str, Template]],
) -> None:
    """A timed-out or stopped execution runs no catch: a rule on its end stops the PS and
    closes the endpoints."""
    _, templates = built
    training = templates["training"]
    (rule,) = training.find_resources("AWS::Events::Rule").values()
    pattern = rule["Properties"]["EventPattern"]
    # FAILED too: an error no catch takes (States.DataLimitExceeded) skips the stop step.
    assert pattern["detail"]["status"] == ["TIMED_OUT", "ABORTED", "FAILED"]
    assert pattern["detail"]["stateMachineArn"] == [
        {"Ref": logical_id_of(training_machine(training), training)}
    ]
    (stopper,) = [m for lid, m in training.find_resources("AWS::StepFunctions::StateMachine")
                  .items() if "StopPsWhenRunEnds" in lid]  # fmt: skip
    states = rendered(stopper["Properties"]["DefinitionString"])["States"]
    # A redeploy starts the new run before it stops the old one: the PS stays up for it.
    assert states["RunningExecutions"]["Parameters"]["StatusFilter"] == "RUNNING"
    assert states["AnotherRunGoing"]["Choices"][0]["Next"] == "LeavePsRunning"
    assert states["AnotherRunGoing"]["Default"] == "StopPs"
    # ... and after the stop the run's interface endpoints go too.
    assert states["StopPs"]["Next"] == "CloseNetwork"
    assert states["CloseNetwork"]["Parameters"]["Payload"]["action"] == "close"


def logical_id_of(resource: dict[str, Any], template: Template) -> str:
    (lid,) = [k for k, v in template.to_json()["Resources"].items() if v == resource]
    return lid


def test_the_vpc_goes_to_the_availability_zone_the_user_picks() -> None:
    """Not every AZ offers every PS type: -c az= puts the VPC (and the PS) where one does."""
    app = new_app()
    stacks = add_job_stacks(app, plan=make_plan(), dataset=DIGITS, nag=False, az="us-east-1d")
    subnets = Template.from_stack(stacks.parameter_servers).find_resources("AWS::EC2::Subnet")
    assert [s["Properties"]["AvailabilityZone"] for s in subnets.values()] == ["us-east-1d"]
