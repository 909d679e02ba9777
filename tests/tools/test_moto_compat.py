"""tools/moto_compat.py against in-process moto: each fix supplies the behaviour it names.

The deploy rehearsal (`make rehearse`) runs the whole app through these fixes; these tests pin
each one on a small template, so a fix that stops working fails here first.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from tools import moto_compat
from tools.moto_compat import dependency_order, references

REGION = "us-east-1"
CUSTOM = {"Type": "Custom::Thing", "Properties": {"ServiceToken": "arn:aws:lambda:x", "P": "1"}}


@pytest.fixture
def cf(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    moto_compat.install()
    try:
        with mock_aws():
            yield boto3.client("cloudformation", region_name=REGION)
    finally:
        moto_compat.uninstall()


def _deploy(cf: Any, stack: str, body: dict[str, Any], kind: str = "CREATE") -> None:
    """What the CDK CLI does: a change set named cdk-deploy-change-set, then execute it."""
    cf.create_change_set(
        StackName=stack,
        ChangeSetName="cdk-deploy-change-set",
        TemplateBody=json.dumps(body),
        ChangeSetType=kind,
    )
    cf.execute_change_set(StackName=stack, ChangeSetName="cdk-deploy-change-set")


def _stack(cf: Any, name: str) -> dict[str, Any]:
    return dict(cf.describe_stacks(StackName=name)["Stacks"][0])


def _outputs(cf: Any, name: str) -> dict[str, str]:
    return {o["OutputKey"]: o["OutputValue"] for o in _stack(cf, name).get("Outputs", [])}


def _logical_ids(cf: Any, name: str) -> set[str]:
    summaries = cf.list_stack_resources(StackName=name)["StackResourceSummaries"]
    return {r["LogicalResourceId"] for r in summaries}


def test_references_are_refs_getatts_subs_and_depends_on_among_the_resources() -> None:
    resource = {
        "Properties": {
            "A": {"Ref": "Bucket"},
            "B": {"Fn::GetAtt": ["Role", "Arn"]},
            "C": {"Fn::GetAtt": "Queue.Arn"},
            "D": {"Fn::Sub": "arn:${AWS::Partition}:s3:::${Topic.Name}/x"},
            "E": {"Fn::Sub": ["${X}", {"X": {"Ref": "Key"}}]},
            "F": {"Ref": "AWS::Region"},
        },
        "DependsOn": ["Vpc"],
    }
    ids = {"Bucket", "Role", "Queue", "Topic", "Key", "Vpc", "Unused"}
    assert references(resource, ids) == ids - {"Unused"}
    assert references({"DependsOn": "Vpc"}, ids) == {"Vpc"}


def test_dependency_order_puts_each_resource_after_what_it_refers_to() -> None:
    resources = {
        "Endpoint": {"Properties": {"RouteTableIds": [{"Ref": "Table"}], "V": {"Ref": "Vpc"}}},
        "Table": {"Properties": {"VpcId": {"Ref": "Vpc"}}},
        "Vpc": {},
        "Loop": {"DependsOn": "Loop"},
    }
    order = dependency_order(resources)
    assert sorted(order) == sorted(resources)
    assert order.index("Vpc") < order.index("Table") < order.index("Endpoint")


def test_stand_ins_hold_the_place_of_types_moto_does_not_model(cf: Any) -> None:
    body = {
        "Resources": {
            "Bucket": {"Type": "AWS::S3::Bucket"},
            "Policy": {
                "Type": "AWS::S3::BucketPolicy",
                "Properties": {"Bucket": {"Ref": "Bucket"}, "PolicyDocument": {}},
            },
            "Secret": {"Type": "AWS::SecretsManager::Secret"},
        },
        "Outputs": {"Secret": {"Value": {"Ref": "Secret"}}},
    }
    _deploy(cf, "s", body)
    assert _stack(cf, "s")["StackStatus"] == "CREATE_COMPLETE"
    assert _logical_ids(cf, "s") == {"Bucket", "Policy", "Secret"}
    assert _outputs(cf, "s")["Secret"].startswith("arn:aws:secretsmanager:us-east-1:")


def test_custom_resources_are_answered_without_running_their_provider(cf: Any) -> None:
    body = {
        "Resources": {"Thing": CUSTOM},
        "Outputs": {"Value": {"Value": {"Fn::GetAtt": ["Thing", "Result.Id"]}}},
    }
    _deploy(cf, "c", body)
    assert _stack(cf, "c")["StackStatus"] == "CREATE_COMPLETE"
    assert _outputs(cf, "c") == {"Value": "standin-Result-Id"}


def test_change_sets_of_one_name_are_told_apart_by_stack(cf: Any) -> None:
    for name in ("first", "second"):
        body = {
            "Resources": {f"{name}Bucket": {"Type": "AWS::S3::Bucket"}},
            "Outputs": {"Name": {"Value": {"Ref": f"{name}Bucket"}}},
        }
        cf.create_change_set(
            StackName=name,
            ChangeSetName="cdk-deploy-change-set",
            TemplateBody=json.dumps(body),
            ChangeSetType="CREATE",
        )
    for name in ("first", "second"):
        change_set = cf.describe_change_set(StackName=name, ChangeSetName="cdk-deploy-change-set")
        assert change_set["StackName"] == name
        cf.execute_change_set(StackName=name, ChangeSetName="cdk-deploy-change-set")
    for name in ("first", "second"):
        assert _stack(cf, name)["StackStatus"] == "CREATE_COMPLETE"
        assert _logical_ids(cf, name) == {f"{name}Bucket"}
        assert _outputs(cf, name)["Name"].startswith(f"{name}-")  # recorded after execution


def test_a_change_set_that_does_not_exist_is_not_found_and_deleting_it_is_a_no_op(cf: Any) -> None:
    _deploy(cf, "s", {"Resources": {"Bucket": {"Type": "AWS::S3::Bucket"}}})
    with pytest.raises(cf.exceptions.ChangeSetNotFoundException):
        cf.describe_change_set(StackName="s", ChangeSetName="never-made")
    cf.delete_change_set(StackName="s", ChangeSetName="never-made")


def test_a_change_set_that_fails_fails_its_stack_with_the_reason(cf: Any) -> None:
    function = {
        "Type": "AWS::Lambda::Function",
        "Properties": {
            "Code": {"S3Bucket": "no-such-bucket", "S3Key": "code.zip"},
            "Handler": "x.handler",
            "Role": "arn:aws:iam::123456789012:role/r",
            "Runtime": "python3.12",
        },
    }
    _deploy(cf, "f", {"Resources": {"Function": function}})
    assert _stack(cf, "f")["StackStatus"] == "CREATE_FAILED"
    reasons = [
        e.get("ResourceStatusReason", "")
        for e in cf.describe_stack_events(StackName="f")["StackEvents"]
    ]
    assert "moto: <InvalidParameterValueException" in " ".join(reasons)


def test_an_update_keeps_what_moto_cannot_update_and_updates_bucket_tags(cf: Any) -> None:
    def body(version: str) -> dict[str, Any]:
        thing = {**CUSTOM, "Properties": {**CUSTOM["Properties"], "P": version}}
        bucket = {
            "Type": "AWS::S3::Bucket",
            "Properties": {"Tags": [{"Key": "deadline", "Value": version}]},
        }
        return {
            "Resources": {"Bucket": bucket, "Thing": thing},
            "Outputs": {
                "Thing": {"Value": {"Fn::GetAtt": ["Thing", "Id"]}},
                "Bucket": {"Value": {"Ref": "Bucket"}},
            },
        }

    _deploy(cf, "u", body("1"))
    _deploy(cf, "u", body("2"), kind="UPDATE")
    assert _stack(cf, "u")["StackStatus"] == "UPDATE_COMPLETE"
    assert _logical_ids(cf, "u") == {"Bucket", "Thing"}
    outputs = _outputs(cf, "u")
    assert outputs["Thing"] == "standin-Id"
    tags = boto3.client("s3", region_name=REGION).get_bucket_tagging(Bucket=outputs["Bucket"])
    assert {"Key": "deadline", "Value": "2"} in tags["TagSet"]


def test_an_update_passes_the_bootstrap_version_from_before(cf: Any) -> None:
    boto3.client("ssm", region_name=REGION).put_parameter(
        Name="/cdk-bootstrap/hnb659fds/version", Value="33", Type="String"
    )
    parameter = {
        "BootstrapVersion": {
            "Type": "AWS::SSM::Parameter::Value<String>",
            "Default": "/cdk-bootstrap/hnb659fds/version",
        }
    }

    def body(version: str) -> str:
        resources = {
            "Bucket": {
                "Type": "AWS::S3::Bucket",
                "Properties": {"Tags": [{"Key": "v", "Value": version}]},
            }
        }
        return json.dumps({"Parameters": parameter, "Resources": resources})

    cf.create_stack(StackName="b", TemplateBody=body("1"))
    cf.create_change_set(
        StackName="b",
        ChangeSetName="cdk-deploy-change-set",
        TemplateBody=body("2"),
        ChangeSetType="UPDATE",
        Parameters=[{"ParameterKey": "BootstrapVersion", "UsePreviousValue": True}],
    )
    cf.execute_change_set(StackName="b", ChangeSetName="cdk-deploy-change-set")
    assert _stack(cf, "b")["StackStatus"] == "UPDATE_COMPLETE"


def test_fn_get_stack_output_is_the_other_stacks_output(cf: Any) -> None:
    _deploy(
        cf,
        "producer",
        {
            "Resources": {"Bucket": {"Type": "AWS::S3::Bucket"}},
            "Outputs": {"Name": {"Value": {"Ref": "Bucket"}}},
        },
    )
    reference = {
        "Fn::GetStackOutput": {"StackName": "producer", "OutputName": "Name", "Region": REGION}
    }
    _deploy(
        cf,
        "consumer",
        {
            "Resources": {"Queue": {"Type": "AWS::SQS::Queue"}},
            "Outputs": {"Bucket": {"Value": reference}},
        },
    )
    assert _outputs(cf, "consumer")["Bucket"] == _outputs(cf, "producer")["Name"]


def test_generated_state_machine_names_stay_within_80_characters() -> None:
    from moto.cloudformation import parsing

    moto_compat.install()
    try:
        name = parsing.generate_resource_name(
            "AWS::StepFunctions::StateMachine", "a-long-job-name-training", "Orchestration" * 6
        )
    finally:
        moto_compat.uninstall()
    assert len(name) <= 80


def test_destroy_removes_the_vpc_and_every_part_in_it(cf: Any) -> None:
    vpc = {"Ref": "Vpc"}
    body = {
        "Resources": {
            "Vpc": {"Type": "AWS::EC2::VPC", "Properties": {"CidrBlock": "10.0.0.0/16"}},
            "Subnet": {
                "Type": "AWS::EC2::Subnet",
                "Properties": {"VpcId": vpc, "CidrBlock": "10.0.0.0/24"},
            },
            "Table": {"Type": "AWS::EC2::RouteTable", "Properties": {"VpcId": vpc}},
            "Link": {
                "Type": "AWS::EC2::SubnetRouteTableAssociation",
                "Properties": {"SubnetId": {"Ref": "Subnet"}, "RouteTableId": {"Ref": "Table"}},
            },
            "S3": {
                "Type": "AWS::EC2::VPCEndpoint",
                "Properties": {
                    "VpcId": vpc,
                    "ServiceName": "com.amazonaws.us-east-1.s3",
                    "VpcEndpointType": "Gateway",
                    "RouteTableIds": [{"Ref": "Table"}],
                },
            },
            "Logs": {"Type": "AWS::Logs::LogGroup"},
            "FlowLog": {
                "Type": "AWS::EC2::FlowLog",
                "Properties": {
                    "ResourceId": vpc,
                    "ResourceType": "VPC",
                    "TrafficType": "REJECT",
                    "LogGroupName": {"Ref": "Logs"},
                    "DeliverLogsPermissionArn": "arn:aws:iam::123456789012:role/flow-logs",
                },
            },
        }
    }
    _deploy(cf, "net", body)
    ec2 = boto3.client("ec2", region_name=REGION)
    assert len(ec2.describe_flow_logs()["FlowLogs"]) == 1
    cf.delete_stack(StackName="net")
    assert [v for v in ec2.describe_vpcs()["Vpcs"] if not v["IsDefault"]] == []
    endpoints = ec2.describe_vpc_endpoints()["VpcEndpoints"]
    assert [e["State"].lower() for e in endpoints] == ["deleted"]
    assert ec2.describe_flow_logs()["FlowLogs"] == []
    assert boto3.client("logs", region_name=REGION).describe_log_groups()["logGroups"] == []


def test_install_refuses_another_moto_version(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(moto_compat, "version", lambda package: "5.0.0")
    with pytest.raises(RuntimeError, match="written for moto 5.2.1, found 5.0.0"):
        moto_compat.install()


def test_uninstall_puts_moto_back() -> None:
    from moto.cloudformation import parsing

    original = parsing.clean_json
    moto_compat.install()
    assert "AWS::S3::BucketPolicy" in parsing.get_model_map()
    moto_compat.uninstall()
    assert parsing.clean_json is original
    assert "AWS::S3::BucketPolicy" not in parsing.get_model_map()
