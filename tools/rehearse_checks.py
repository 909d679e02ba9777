"""What the deploy rehearsal (tools/rehearse.py) asserts, read from moto's API with boto3.

Each check returns the problems it found, as short lines: an empty list is a PASS. Nothing
here trusts what the CDK CLI printed; a stack the CLI called deployed but moto holds in
REVIEW_IN_PROGRESS with no resources fails `as_deployed`.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tools.moto_compat import STAND_IN_TYPES

REGION = "us-east-1"
GONE = ("terminated", "shutting-down", "deleted", "deleting")  # what AWS lists for a while
Snapshot = dict[str, Any] | None  # a resource as its service reports it; None: not there


class Aws:
    """boto3 clients for one endpoint: aws("ec2"), aws("lambda"), ..."""

    def __init__(self, endpoint: str | None = None) -> None:
        import boto3

        self._session = boto3.session.Session(
            aws_access_key_id="rehearsal", aws_secret_access_key="rehearsal", region_name=REGION
        )
        self._endpoint = endpoint
        self._clients: dict[str, Any] = {}

    def __call__(self, service: str) -> Any:
        if service not in self._clients:
            self._clients[service] = self._session.client(service, endpoint_url=self._endpoint)
        return self._clients[service]


def found(call: Callable[[], Any]) -> Any:
    """call()'s answer, or None when the service says the thing does not exist."""
    from botocore.exceptions import ClientError

    try:
        return call()
    except ClientError:
        return None


def template(assembly: Path, stack: str) -> dict[str, Any]:
    """A stack's synthesized template."""
    return dict(json.loads((assembly / f"{stack}.template.json").read_text(encoding="utf-8")))


def stacks_of(assembly: Path) -> list[str]:
    """The assembly's stacks, in the manifest's order."""
    manifest = json.loads((assembly / "manifest.json").read_text(encoding="utf-8"))
    return [
        name
        for name, artifact in manifest["artifacts"].items()
        if artifact["type"] == "aws:cloudformation:stack"
    ]


def _instance(aws: Aws, instance_id: str, properties: dict[str, Any]) -> Snapshot:
    answer = found(lambda: aws("ec2").describe_instances(InstanceIds=[instance_id]))
    instances = [i for r in (answer or {}).get("Reservations", []) for i in r["Instances"]]
    if not instances or instances[0]["State"]["Name"] in GONE:
        return None
    return {key: instances[0][key] for key in ("InstanceType", "ImageId", "SubnetId")}


def _endpoint(aws: Aws, endpoint_id: str, properties: dict[str, Any]) -> Snapshot:
    answer = found(lambda: aws("ec2").describe_vpc_endpoints(VpcEndpointIds=[endpoint_id]))
    live = [e for e in (answer or {}).get("VpcEndpoints", []) if e["State"].lower() not in GONE]
    return {"ServiceName": live[0]["ServiceName"]} if live else None


def _vpc(aws: Aws, vpc_id: str, properties: dict[str, Any]) -> Snapshot:
    answer = found(lambda: aws("ec2").describe_vpcs(VpcIds=[vpc_id]))
    return {"CidrBlock": answer["Vpcs"][0]["CidrBlock"]} if answer else None


def _bucket(aws: Aws, name: str, properties: dict[str, Any]) -> Snapshot:
    return {} if found(lambda: aws("s3").head_bucket(Bucket=name)) is not None else None


def _log_group(aws: Aws, name: str, properties: dict[str, Any]) -> Snapshot:
    groups = aws("logs").describe_log_groups(logGroupNamePrefix=name)["logGroups"]
    matches = [g for g in groups if g["logGroupName"] == name]
    return {"retentionInDays": matches[0].get("retentionInDays")} if matches else None


def _function(aws: Aws, name: str, properties: dict[str, Any]) -> Snapshot:
    answer = found(lambda: aws("lambda").get_function_configuration(FunctionName=name))
    keys = ("MemorySize", "Timeout", "Architectures", "EphemeralStorage", "Environment")
    return {key: answer.get(key) for key in keys} if answer else None


def _state_machine(aws: Aws, arn: str, properties: dict[str, Any]) -> Snapshot:
    answer = found(lambda: aws("stepfunctions").describe_state_machine(stateMachineArn=arn))
    return {"definition": json.loads(answer["definition"])} if answer else None


def _role(aws: Aws, name: str, properties: dict[str, Any]) -> Snapshot:
    answer = found(lambda: aws("iam").get_role(RoleName=name))
    return {"trust": answer["Role"]["AssumeRolePolicyDocument"]} if answer else None


def _inline_policy(aws: Aws, physical_id: str, properties: dict[str, Any]) -> Snapshot:
    """An AWS::IAM::Policy: its document on each role that has it (moto's physical id is a
    generated name; the policy is found by the template's PolicyName)."""
    iam, name = aws("iam"), properties.get("PolicyName")
    documents = {}
    for role in iam.list_roles()["Roles"]:
        if name in iam.list_role_policies(RoleName=role["RoleName"])["PolicyNames"]:
            policy = iam.get_role_policy(RoleName=role["RoleName"], PolicyName=name)
            documents[role["RoleName"]] = policy["PolicyDocument"]
    return documents or None


# How each type is read back from its service: what the deploy configured (tags left out: a
# new deadline changes every resource's tags), or None when it is not there.
READERS: dict[str, Callable[[Aws, str, dict[str, Any]], Snapshot]] = {
    "AWS::S3::Bucket": _bucket,
    "AWS::EC2::Instance": _instance,
    "AWS::EC2::VPCEndpoint": _endpoint,
    "AWS::EC2::VPC": _vpc,
    "AWS::Logs::LogGroup": _log_group,
    "AWS::Lambda::Function": _function,
    "AWS::StepFunctions::StateMachine": _state_machine,
    "AWS::IAM::Role": _role,
    "AWS::IAM::Policy": _inline_policy,
}


def stack_resources(aws: Aws, stack: str) -> dict[str, dict[str, str]]:
    """logical id -> the stack's resource summary (type, physical id, status)."""
    pages = aws("cloudformation").get_paginator("list_stack_resources").paginate(StackName=stack)
    return {r["LogicalResourceId"]: r for page in pages for r in page["StackResourceSummaries"]}


def snapshots(
    aws: Aws, resources: dict[str, dict[str, str]], body: dict[str, Any]
) -> dict[str, Snapshot]:
    """logical id -> its READERS snapshot, for each resource of a type READERS reads."""
    return {
        logical_id: READERS[r["ResourceType"]](
            aws, r["PhysicalResourceId"], body["Resources"][logical_id].get("Properties", {})
        )
        for logical_id, r in resources.items()
        if r["ResourceType"] in READERS and logical_id in body["Resources"]
    }


def as_deployed(aws: Aws, stack: str, body: dict[str, Any], status: str) -> list[str]:
    """What is wrong with `stack` in moto against its synthesized template `body`: the status,
    the resources by logical id (each found in its service where READERS reads it), and the
    outputs (every one of the template's, each with a value)."""
    described = found(lambda: aws("cloudformation").describe_stacks(StackName=stack))
    if described is None:
        return [f"{stack} does not exist"]
    problems = []
    actual = described["Stacks"][0]
    if actual["StackStatus"] != status:
        problems.append(f"status {actual['StackStatus']}, not {status}")
    resources = stack_resources(aws, stack)
    problems += _mismatch("resources", set(resources), set(body["Resources"]))
    problems += [
        f"{logical_id} ({resources[logical_id]['ResourceType']}) is not in its service"
        for logical_id, snapshot in snapshots(aws, resources, body).items()
        if snapshot is None
    ]
    outputs = {o["OutputKey"] for o in actual.get("Outputs") or [] if o.get("OutputValue")}
    problems += _mismatch("outputs", outputs, set(body.get("Outputs", {})))
    return problems


def _mismatch(what: str, actual: set[str], wanted: set[str]) -> list[str]:
    """["3/4 outputs: missing [...], extra [...]"] when `actual` is not `wanted`."""
    if actual == wanted:
        return []
    missing, extra = sorted(wanted - actual), sorted(actual - wanted)
    return [f"{len(actual)}/{len(wanted)} {what}: missing {missing or '-'}, extra {extra or '-'}"]


def deployed_summary(aws: Aws, stack: str, body: dict[str, Any]) -> str:
    """What as_deployed counted, e.g. "12/12 resources (6 found in their services), 2/2 outputs"."""
    resources = stack_resources(aws, stack)
    read = sum(1 for r in resources.values() if r["ResourceType"] in READERS)
    outputs = len(body.get("Outputs", {}))
    return (
        f"{len(resources)}/{len(body['Resources'])} resources ({read} found in their services), "
        f"{outputs}/{outputs} outputs"
    )


Change = tuple[str, str]  # ("+" added | "-" removed | "~" modified, resource type)


def diff_changes(text: str, logical_ids: set[str]) -> dict[str, Change]:
    """logical id -> Change, from `cdk diff`'s resource lines ("[~] AWS::IAM::Policy
    Worker/Function/ServiceRole/DefaultPolicy WorkerFunctionServiceRoleDefaultPolicy13780C49");
    `logical_ids` (both templates') tells the id from the construct path."""
    changes = {}
    for action, kind, rest in re.findall(r"^\[([-+~])\] ((?:AWS|Custom)::\S+) (.*)$", text, re.M):
        ids = [token for token in rest.split() if token in logical_ids]
        if ids:
            changes[ids[-1]] = (action, kind)
    return changes


def change_kinds(kinds: Counter[str]) -> str:
    """ "5 AWS::IAM::Policy, Custom::AWS": each type with its count, most first."""
    return ", ".join(f"{n} {kind}" if n > 1 else kind for kind, n in kinds.most_common())


def change_summary(changes: dict[str, Change]) -> str:
    """The diff in a few words: "+1 (AWS::EC2::Instance) -1 (AWS::EC2::Instance)",
    "~8 (5 AWS::IAM::Policy, ...)", or "tags only"."""
    parts = []
    for action in "+-~":
        kinds = Counter(kind for a, kind in changes.values() if a == action)
        if kinds:
            parts.append(f"{action}{sum(kinds.values())} ({change_kinds(kinds)})")
    return " ".join(parts) or "tags only"


def updated_as_diffed(
    aws: Aws,
    before: dict[str, Snapshot],
    after: dict[str, Snapshot],
    resources: dict[str, dict[str, str]],
    changes: dict[str, Change],
    old_body: dict[str, Any],
) -> list[str]:
    """What the update did that the diff did not say: a removed resource still in its service,
    a modified one that reads back unchanged, any other that reads back changed. `resources`
    and `old_body` are the stack before the update; `before`/`after` its snapshots."""
    problems = []
    for logical_id, resource in resources.items():
        action, kind = changes.get(logical_id, ("", resource["ResourceType"]))
        if kind not in READERS:
            continue
        if action == "-":
            properties = old_body["Resources"][logical_id].get("Properties", {})
            if READERS[kind](aws, resource["PhysicalResourceId"], properties) is not None:
                problems.append(f"removed {logical_id} ({kind}) is still in its service")
        elif action == "~" and before.get(logical_id) == after.get(logical_id):
            problems.append(
                f"{logical_id} ({kind}): the diff says modified; it reads back as before"
            )
        elif not action and before.get(logical_id) != after.get(logical_id):
            problems.append(f"{logical_id} ({kind}) changed, and the diff did not say so")
    return problems


def leftovers(aws: Aws, stacks: list[str], kept_bucket: str) -> list[str]:
    """What is left in moto after `cdk destroy --all` of `stacks` (the bootstrap's bucket is
    kept: destroy does not remove the bootstrap stack)."""
    cf, ec2 = aws("cloudformation"), aws("ec2")

    def exists(stack: str) -> bool:
        return found(lambda: cf.describe_stacks(StackName=stack)) is not None

    left = [f"stack {stack}" for stack in stacks if exists(stack)]
    buckets = [b["Name"] for b in aws("s3").list_buckets()["Buckets"]]
    left += [f"bucket {name}" for name in buckets if name != kept_bucket]
    instances = [i for r in ec2.describe_instances()["Reservations"] for i in r["Instances"]]
    left += [f"instance {i['InstanceId']}" for i in instances if i["State"]["Name"] not in GONE]
    endpoints = ec2.describe_vpc_endpoints()["VpcEndpoints"]
    left += [f"endpoint {e['VpcEndpointId']}" for e in endpoints if e["State"].lower() not in GONE]
    left += [
        f"log group {g['logGroupName']}" for g in aws("logs").describe_log_groups()["logGroups"]
    ]
    left += [f"VPC {v['VpcId']}" for v in ec2.describe_vpcs()["Vpcs"] if not v["IsDefault"]]
    left += [f"function {f['FunctionName']}" for f in aws("lambda").list_functions()["Functions"]]
    machines = aws("stepfunctions").list_state_machines()["stateMachines"]
    left += [f"state machine {m['name']}" for m in machines]
    return [f"left behind: {', '.join(left)}"] if left else []


def stood_in(bodies: list[dict[str, Any]]) -> list[str]:
    """What moto only stands in for in these templates, one `moto cannot` reason per kind."""
    kinds = [r["Type"] for body in bodies for r in body["Resources"].values()]
    stand_ins = Counter(k for k in kinds if k in STAND_IN_TYPES)
    custom = Counter(k for k in kinds if k.startswith("Custom::"))
    reasons = []
    if stand_ins:
        reasons.append(
            f"model {', '.join(sorted(stand_ins))}: {sum(stand_ins.values())} stand-ins hold "
            "their place (a physical id, Ref and Fn::GetAtt) and do nothing"
        )
    if custom:
        reasons.append(
            f"run custom-resource providers (Lambda in Docker): {sum(custom.values())} answered "
            f"at once with stand-in values ({change_kinds(custom)}), so no training run starts"
        )
    return reasons
