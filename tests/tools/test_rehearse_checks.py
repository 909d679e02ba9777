"""tools/rehearse_checks.py: the rehearsal's checks pass what moto holds as synthesized, and
fail a stack that was never created, a diff the update did not follow, and leftovers."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from tools import moto_compat
from tools.rehearse_checks import (
    Aws,
    as_deployed,
    change_summary,
    diff_changes,
    leftovers,
    snapshots,
    stack_resources,
    stood_in,
    updated_as_diffed,
)

REGION = "us-east-1"
BODY = {
    "Resources": {
        "Bucket": {"Type": "AWS::S3::Bucket"},
        "Logs": {"Type": "AWS::Logs::LogGroup", "Properties": {"RetentionInDays": 7}},
    },
    "Outputs": {"Bucket": {"Value": {"Ref": "Bucket"}}},
}
# What `cdk diff` printed for the PS and training stacks of 2h -> 3m40s (abridged).
DIFF = """Stack digits-demo-ps
Resources
[-] AWS::EC2::Instance PS/Shard0 ParameterServersShard0E0686A9E4c3bb14abdf3f9da destroy
[+] AWS::EC2::Instance ParameterServers/Shard0 ParameterServersShard0E0686A9Efbbbc08910697ead
[~] AWS::IAM::Policy Worker/Function/ServiceRole/DefaultPolicy WorkerPolicy13780C49
 └─ [~] PolicyDocument
[~] Custom::AWS StartTraining/Start/Resource StartTrainingStartF4DD91DC

Outputs
[-] Output PublishOutputRefParameterServersShard0: {"Value":{"Ref":"ParameterServersShard0"}}
"""
DIFF_IDS = {
    "ParameterServersShard0E0686A9E4c3bb14abdf3f9da",
    "ParameterServersShard0E0686A9Efbbbc08910697ead",
    "WorkerPolicy13780C49",
    "StartTrainingStartF4DD91DC",
}


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[Aws]:
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    moto_compat.install()
    try:
        with mock_aws():
            yield Aws()
    finally:
        moto_compat.uninstall()


def _deploy(aws: Aws, stack: str, body: dict[str, Any], execute: bool = True) -> None:
    cf = aws("cloudformation")
    cf.create_change_set(
        StackName=stack,
        ChangeSetName="cdk-deploy-change-set",
        TemplateBody=json.dumps(body),
        ChangeSetType="CREATE",
    )
    if execute:
        cf.execute_change_set(StackName=stack, ChangeSetName="cdk-deploy-change-set")


def test_a_stack_created_as_synthesized_passes(aws: Aws) -> None:
    _deploy(aws, "data", BODY)
    assert as_deployed(aws, "data", BODY, "CREATE_COMPLETE") == []


def test_a_stack_whose_change_set_never_ran_fails_with_what_is_missing(aws: Aws) -> None:
    _deploy(aws, "data", BODY, execute=False)
    assert as_deployed(aws, "data", BODY, "CREATE_COMPLETE") == [
        "status REVIEW_IN_PROGRESS, not CREATE_COMPLETE",
        "0/2 resources: missing ['Bucket', 'Logs'], extra -",
        "0/1 outputs: missing ['Bucket'], extra -",
    ]


def test_a_stack_that_does_not_exist_fails(aws: Aws) -> None:
    assert as_deployed(aws, "data", BODY, "CREATE_COMPLETE") == ["data does not exist"]


def test_a_resource_gone_from_its_service_fails(aws: Aws) -> None:
    _deploy(aws, "data", BODY)
    group = stack_resources(aws, "data")["Logs"]["PhysicalResourceId"]
    aws("logs").delete_log_group(logGroupName=group)
    assert as_deployed(aws, "data", BODY, "CREATE_COMPLETE") == [
        "Logs (AWS::Logs::LogGroup) is not in its service"
    ]


def test_diff_changes_reads_the_logical_ids_not_the_construct_paths() -> None:
    assert diff_changes(DIFF, DIFF_IDS) == {
        "ParameterServersShard0E0686A9E4c3bb14abdf3f9da": ("-", "AWS::EC2::Instance"),
        "ParameterServersShard0E0686A9Efbbbc08910697ead": ("+", "AWS::EC2::Instance"),
        "WorkerPolicy13780C49": ("~", "AWS::IAM::Policy"),
        "StartTrainingStartF4DD91DC": ("~", "Custom::AWS"),
    }


def test_change_summary_counts_by_action_and_type() -> None:
    assert change_summary(diff_changes(DIFF, DIFF_IDS)) == (
        "+1 (AWS::EC2::Instance) -1 (AWS::EC2::Instance) ~2 (AWS::IAM::Policy, Custom::AWS)"
    )
    assert change_summary({}) == "tags only"


def test_an_update_is_checked_against_the_diff(aws: Aws) -> None:
    _deploy(aws, "data", BODY)
    resources = stack_resources(aws, "data")
    before = snapshots(aws, resources, BODY)
    group = resources["Logs"]["PhysicalResourceId"]
    aws("logs").put_retention_policy(logGroupName=group, retentionInDays=30)
    after = snapshots(aws, resources, BODY)
    said_nothing = updated_as_diffed(aws, before, after, resources, {}, BODY)
    assert said_nothing == ["Logs (AWS::Logs::LogGroup) changed, and the diff did not say so"]
    modified = {"Logs": ("~", "AWS::Logs::LogGroup"), "Bucket": ("~", "AWS::S3::Bucket")}
    assert updated_as_diffed(aws, before, after, resources, modified, BODY) == [
        "Bucket (AWS::S3::Bucket): the diff says modified; it reads back as before"
    ]
    removed = {"Logs": ("~", "AWS::Logs::LogGroup"), "Bucket": ("-", "AWS::S3::Bucket")}
    assert updated_as_diffed(aws, before, after, resources, removed, BODY) == [
        "removed Bucket (AWS::S3::Bucket) is still in its service"
    ]


def test_leftovers_name_what_destroy_left_but_the_bootstrap_bucket(aws: Aws) -> None:
    aws("s3").create_bucket(Bucket="cdk-staging")
    assert leftovers(aws, ["data"], kept_bucket="cdk-staging") == []
    _deploy(aws, "data", BODY)
    bucket = stack_resources(aws, "data")["Bucket"]["PhysicalResourceId"]
    group = stack_resources(aws, "data")["Logs"]["PhysicalResourceId"]
    assert leftovers(aws, ["data"], kept_bucket="cdk-staging") == [
        f"left behind: stack data, bucket {bucket}, log group {group}"
    ]
    aws("cloudformation").delete_stack(StackName="data")
    assert leftovers(aws, ["data"], kept_bucket="cdk-staging") == []


def test_stood_in_names_the_stand_ins_and_the_answered_custom_resources() -> None:
    body = {
        "Resources": {
            "Secret": {"Type": "AWS::SecretsManager::Secret"},
            "Start": {"Type": "Custom::AWS"},
            "Bucket": {"Type": "AWS::S3::Bucket"},
        }
    }
    reasons = stood_in([body, body])
    assert reasons[0].startswith("model AWS::SecretsManager::Secret: 2 stand-ins")
    assert reasons[1] == (
        "run custom-resource providers (Lambda in Docker): 2 answered at once with stand-in "
        "values (2 Custom::AWS), so no training run starts"
    )
    assert stood_in([{"Resources": {"Bucket": {"Type": "AWS::S3::Bucket"}}}]) == []


def test_aws_clients_use_the_endpoint_given() -> None:
    client = Aws("http://localhost:1")("s3")
    assert client.meta.endpoint_url == "http://localhost:1"
    assert boto3.client("s3", region_name=REGION).meta.endpoint_url != "http://localhost:1"
