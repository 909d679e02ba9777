"""Least privilege on the synthesized templates: each function role allows exactly what its handler
does, and the workers' and PS security groups reach only the PS port, the interface endpoints and
S3's prefix list.

Roles are found through the function that runs a handler (`ImageConfig.Command`), security groups
through their description: never hashed logical ids.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk.assertions import Match, Template

from provisioner.plan import Plan
from stacks.events import PS_PORT
from tests.stacks.conftest import make_plan
from tests.stacks.test_stacks import build

S3_READ_ACTIONS = {"s3:GetObject", "s3:ListBucket"}
LAMBDA_MANAGED_POLICIES = ("AWSLambdaBasicExecutionRole", "AWSLambdaVPCAccessExecutionRole")


@pytest.fixture(scope="module")
def built() -> tuple[Plan, dict[str, Template]]:
    plan = make_plan()
    return plan, build(plan)[1]


def text(value: Any) -> str:
    """A string, a Fn::Join of one, or one token; CloudFormation tokens shown as 'TOKEN'."""
    if isinstance(value, str):
        return value
    if "Fn::Join" not in value:
        return "TOKEN"
    return "".join(p if isinstance(p, str) else "TOKEN" for p in value["Fn::Join"][1])


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def role_of(template: Template, handler: str) -> tuple[str, dict[str, Any]]:
    """(logical id, resource) of the role of the one function that runs `handler`."""
    functions = template.find_resources(
        "AWS::Lambda::Function", {"Properties": {"ImageConfig": {"Command": [handler]}}}
    )
    (function,) = functions.values()
    role_id = function["Properties"]["Role"]["Fn::GetAtt"][0]
    return role_id, template.to_json()["Resources"][role_id]


def statements_of(template: Template, handler: str) -> list[dict[str, Any]]:
    """Every statement of every policy attached to the role of `handler`'s function."""
    role_id, _ = role_of(template, handler)
    policies = template.find_resources(
        "AWS::IAM::Policy", {"Properties": {"Roles": Match.array_with([{"Ref": role_id}])}}
    )
    return [s for p in policies.values() for s in p["Properties"]["PolicyDocument"]["Statement"]]


def grants(statements: list[dict[str, Any]]) -> dict[str, set[str]]:
    """Action → the resources it is allowed on (as text); fails on anything but plain Allow."""
    found: dict[str, set[str]] = {}
    for statement in statements:
        assert statement["Effect"] == "Allow" and "NotAction" not in statement, statement
        assert "NotResource" not in statement, statement
        for action in as_list(statement["Action"]):
            found.setdefault(action, set()).update(text(r) for r in as_list(statement["Resource"]))
    return found


def listing_prefixes(statements: list[dict[str, Any]]) -> list[list[str]]:
    """The s3:prefix condition of each s3:ListBucket statement (None if unconditioned)."""
    return [
        s.get("Condition", {}).get("StringLike", {}).get("s3:prefix")
        for s in statements
        if "s3:ListBucket" in as_list(s["Action"])
    ]


def test_worker_role_reads_its_shards_and_the_secret_and_writes_only_its_link_records(
    built: tuple[Plan, dict[str, Template]],
) -> None:
    plan, templates = built
    statements = statements_of(templates["training"], "functions.worker.handler")
    allowed = grants(statements)
    assert set(allowed) == S3_READ_ACTIONS | {"s3:PutObject", "secretsmanager:GetSecretValue"}
    shards = f"{plan.job}/shards-n{plan.n_workers}"
    assert allowed["s3:GetObject"] == {f"arn:TOKEN:s3:::{plan.job}-dataset-TOKEN/{shards}/*"}
    assert allowed["s3:ListBucket"] == {f"arn:TOKEN:s3:::{plan.job}-dataset-TOKEN"}
    assert listing_prefixes(statements) == [[f"{shards}/*", shards]]
    # Link records (functions.runs.link_record_key), never checkpoints or results.
    artifacts = f"arn:TOKEN:s3:::{plan.job}-artifacts-TOKEN"
    assert allowed["s3:PutObject"] == {f"{artifacts}/{plan.job}/runs/*"}
    secrets = [s["Resource"] for s in statements if "secretsmanager:GetSecretValue" in s["Action"]]
    assert len(secrets) == 1 and "JobSecret" in json.dumps(secrets)  # the job's own secret only


def test_function_roles_carry_only_lambdas_minimal_managed_policies(
    built: tuple[Plan, dict[str, Template]],
) -> None:
    _, templates = built
    for handler in ("functions.worker.handler", "functions.finalize.handler",
                    "functions.datasets.prepare_handler"):  # fmt: skip
        _, role = role_of(templates["training"], handler)
        assert "Policies" not in role["Properties"], handler  # no inline policy either
        for arn in role["Properties"]["ManagedPolicyArns"]:
            assert text(arn).endswith(LAMBDA_MANAGED_POLICIES), (handler, text(arn))


def test_finalize_writes_exactly_the_model_and_the_report(
    built: tuple[Plan, dict[str, Template]],
) -> None:
    plan, templates = built
    statements = statements_of(templates["training"], "functions.finalize.handler")
    allowed = grants(statements)
    assert set(allowed) == S3_READ_ACTIONS | {"s3:PutObject", "secretsmanager:GetSecretValue"}
    artifacts = f"arn:TOKEN:s3:::{plan.job}-artifacts-TOKEN"
    assert allowed["s3:PutObject"] == {f"{artifacts}/{plan.job}/model.pt",
                                       f"{artifacts}/{plan.job}/report.json"}  # fmt: skip
    shards = f"{plan.job}/shards-n{plan.n_workers}"
    assert allowed["s3:GetObject"] == {
        f"arn:TOKEN:s3:::{plan.job}-dataset-TOKEN/{shards}/*",
        f"{artifacts}/{plan.job}/checkpoints/*",
        f"{artifacts}/{plan.job}/runs/*",
    }
    assert sorted(listing_prefixes(statements)) == sorted(
        [[f"{shards}/*", shards], [f"{plan.job}/checkpoints/*", f"{plan.job}/checkpoints"],
         [f"{plan.job}/runs/*", f"{plan.job}/runs"]]
    )  # fmt: skip


def test_prepare_writes_its_shards_and_reads_nothing_of_ours(
    built: tuple[Plan, dict[str, Template]],
) -> None:
    plan, templates = built
    allowed = grants(statements_of(templates["training"], "functions.datasets.prepare_handler"))
    shards = f"{plan.job}/shards-n{plan.n_workers}"
    assert allowed == {"s3:PutObject": {f"arn:TOKEN:s3:::{plan.job}-dataset-TOKEN/{shards}/*"}}


def egress_by_group(template: Template) -> dict[str, set[tuple[str, int, int, str]]]:
    """Security group description → its egress rules as (protocol, from, to, destination), the
    destination a CIDR, the description of the destination group, or "prefix list <id>" with
    the logical id of the resource that returns it; inline rules and AWS::EC2::SecurityGroupEgress
    resources alike."""
    resources = template.to_json()["Resources"]
    groups = template.find_resources("AWS::EC2::SecurityGroup")
    names = {lid: g["Properties"]["GroupDescription"] for lid, g in groups.items()}

    def destination(r: dict[str, Any]) -> str:
        if "DestinationSecurityGroupId" in r:
            return names[r["DestinationSecurityGroupId"]["Fn::GetAtt"][0]]
        if "DestinationPrefixListId" in r:
            return f"prefix list {r['DestinationPrefixListId']['Fn::GetAtt'][0]}"
        return r.get("CidrIp") or r.get("CidrIpv6") or str(r)

    def rule(r: dict[str, Any]) -> tuple[str, int, int, str]:
        return (r["IpProtocol"], r.get("FromPort", -1), r.get("ToPort", -1), destination(r))

    rules = {names[lid]: {rule(r) for r in g["Properties"].get("SecurityGroupEgress", [])}
             for lid, g in groups.items()}  # fmt: skip
    for r in resources.values():
        if r["Type"] == "AWS::EC2::SecurityGroupEgress":
            owner = r["Properties"]["GroupId"]["Fn::GetAtt"][0]
            rules[names[owner]].add(rule(r["Properties"]))
    return rules


def s3_prefix_list_lookup(template: Template) -> tuple[str, dict[str, Any]]:
    """(logical id, SDK call with the region as "REGION") of the one custom resource that looks
    up S3's managed prefix list."""
    lookups = {
        lid: json.loads(with_region(r["Properties"]["Create"]))
        for lid, r in template.find_resources("Custom::AWS").items()
        if "describeManagedPrefixLists" in json.dumps(r["Properties"]["Create"])
    }
    ((lid, call),) = lookups.items()
    return lid, call


def with_region(value: Any) -> str:
    """A Fn::Join whose only tokens are the stack's region, with "REGION" in their place."""
    if isinstance(value, str):
        return value
    parts = value["Fn::Join"][1]
    assert all(isinstance(p, str) or p == {"Ref": "AWS::Region"} for p in parts), parts
    return "".join(p if isinstance(p, str) else "REGION" for p in parts)


def one(names: Any, start: str) -> str:
    (name,) = [n for n in names if n.startswith(start)]
    return name


def test_workers_and_ps_reach_only_the_ps_port_the_endpoints_and_s3(
    built: tuple[Plan, dict[str, Template]],
) -> None:
    _, templates = built
    egress = egress_by_group(templates["ps"])
    workers, ps = one(egress, "Training workers"), one(egress, "Parameter servers")
    endpoints = one(egress, "Interface endpoints")
    lookup, _ = s3_prefix_list_lookup(templates["ps"])
    s3 = ("tcp", 443, 443, f"prefix list {lookup}")
    assert egress[workers] == {("tcp", PS_PORT, PS_PORT, ps), ("tcp", 443, 443, endpoints), s3}
    assert egress[ps] == {("tcp", 443, 443, endpoints), s3}
    for rules in egress.values():  # no group anywhere may send all traffic
        assert not [r for r in rules if r[0] == "-1"], rules


def test_no_egress_rule_anywhere_goes_to_the_whole_internet(
    built: tuple[Plan, dict[str, Template]],
) -> None:
    _, templates = built
    for name, template in templates.items():
        for rules in egress_by_group(template).values():
            assert not [r for r in rules if r[3] in ("0.0.0.0/0", "::/0")], (name, rules)


def test_the_s3_prefix_list_is_looked_up_by_name_in_the_stacks_region(
    built: tuple[Plan, dict[str, Template]],
) -> None:
    _, templates = built
    lookup, call = s3_prefix_list_lookup(templates["ps"])
    assert (call["service"], call["action"]) == ("EC2", "describeManagedPrefixLists")
    assert call["parameters"] == {
        "Filters": [{"Name": "prefix-list-name", "Values": ["com.amazonaws.REGION.s3"]}]
    }
    assert call["outputPaths"] == ["PrefixLists.0.PrefixListId"]
    depends_on = set(templates["ps"].to_json()["Resources"][lookup]["DependsOn"])
    policies = templates["ps"].find_resources("AWS::IAM::Policy")
    (policy,) = [p for lid, p in policies.items() if lid in depends_on]  # the call's own policy
    assert policy["Properties"]["PolicyDocument"]["Statement"] == [
        {"Action": "ec2:DescribeManagedPrefixLists", "Effect": "Allow", "Resource": "*"}
    ]


def test_the_vpc_has_no_route_out_but_the_s3_gateway(
    built: tuple[Plan, dict[str, Template]],
) -> None:
    """Defence in depth under the egress rules: no route out but the VPC's own and the endpoint."""
    _, templates = built
    ps = templates["ps"]
    for kind in ("AWS::EC2::Route", "AWS::EC2::InternetGateway", "AWS::EC2::NatGateway",
                 "AWS::EC2::EgressOnlyInternetGateway", "AWS::EC2::TransitGatewayAttachment",
                 "AWS::EC2::VPNGateway", "AWS::EC2::VPCPeeringConnection"):  # fmt: skip
        ps.resource_count_is(kind, 0)
    ps.has_resource_properties("AWS::EC2::VPCEndpoint", {
        "VpcEndpointType": "Gateway", "RouteTableIds": Match.any_value(),
    })  # fmt: skip
