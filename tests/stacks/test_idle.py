"""What a deployed job bills by the hour between runs: counted in the synthesized templates,
priced at the catalog's figures, equal to what the plan (and synth) says."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk.assertions import Template

from provisioner import Goal, Limits, load_catalog, load_profile, plan_job
from provisioner.idle import HOURS_PER_MONTH, idle_line
from provisioner.plan import Plan
from tests.stacks.test_stacks import build

# Resource types that bill by the hour whatever runs: none of them may appear but the two the
# plan prices (instance volumes, the secret). Interface endpoints are counted and must be none:
# each run opens its own and closes them (stacks/run_network.py).
HOURLY_TYPES_NOT_ALLOWED = (
    "AWS::EC2::NatGateway", "AWS::EC2::EIP", "AWS::ElasticLoadBalancingV2::LoadBalancer",
    "AWS::EC2::TransitGateway", "AWS::EC2::Volume", "AWS::RDS::DBInstance",
    "AWS::ElastiCache::CacheCluster", "AWS::KMS::Key",
)  # fmt: skip


def _resources(templates: dict[str, Template], kind: str) -> list[dict[str, Any]]:
    return [r for t in templates.values() for r in t.find_resources(kind).values()]


@pytest.mark.parametrize(
    ("workload", "deadline_s", "ps_count"),
    [("digits-mlp", 7200, 1), ("cifar10-resnet18", 1380, 8)],  # one PS, and eight shards
)
def test_the_idle_figure_is_what_the_templates_bill_by_the_hour(
    workload: str, deadline_s: float, ps_count: int
) -> None:
    catalog = load_catalog("lambda-2025")
    plan: Plan = plan_job(load_profile(workload), catalog, Goal(deadline_s=deadline_s),
                          Limits(), "idle").plan  # fmt: skip
    assert plan.ps_count == ps_count
    _, templates = build(plan)
    interface = [e for e in _resources(templates, "AWS::EC2::VPCEndpoint")
                 if e["Properties"].get("VpcEndpointType") == "Interface"]  # fmt: skip
    volumes_gb = sum(
        mapping["Ebs"]["VolumeSize"]
        for instance in _resources(templates, "AWS::EC2::Instance")
        for mapping in instance["Properties"]["BlockDeviceMappings"]
    )
    secrets = _resources(templates, "AWS::SecretsManager::Secret")
    for kind in HOURLY_TYPES_NOT_ALLOWED:
        assert not _resources(templates, kind), kind
    counted = (
        len(interface) * catalog.endpoint_usd_per_hour
        + volumes_gb * catalog.ebs_usd_per_gb_month / HOURS_PER_MONTH
        + len(secrets) * catalog.secret_usd_per_month / HOURS_PER_MONTH
    )
    assert (len(interface), volumes_gb, len(secrets)) == (0, 30 * ps_count, 1)
    assert plan.idle_usd_per_hour == pytest.approx(counted, rel=1e-9)
    assert idle_line(plan) == (
        f"${counted:.4f}/h until `cdk destroy` ({30 * ps_count} GB of PS volumes, 1 secret; "
        "the run's 7 interface endpoints close with it)"
    )
