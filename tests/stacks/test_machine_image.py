"""The PS AMI is pinned: a newer "latest" Amazon Linux never replaces a running job's PS.

The lookup's cached value lives in cdk.context.json (the CDK CLI writes it at the first deploy);
here the context is given the way that file gives it, once with one AMI and once with another.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk import Environment
from aws_cdk.assertions import Template

from stacks.job import add_job_stacks
from stacks.machine_image import ami_line, deploy_env
from tests.stacks.conftest import make_plan, new_app
from tests.stacks.test_stacks import DIGITS

ENV = Environment(account="123456789012", region="us-east-1")
LOOKUP_KEY = (
    "ssm:account=123456789012:parameterName=/aws/service/ami-amazon-linux-latest/"
    "al2023-ami-kernel-6.1-x86_64:region=us-east-1"
)


def _ps_template(context: dict[str, Any], env: Environment | None) -> Template:
    app = new_app(context)
    stacks = add_job_stacks(app, plan=make_plan(), dataset=DIGITS, nag=False, env=env)
    return Template.from_stack(stacks.parameter_servers)


def _instances(template: Template) -> dict[str, Any]:
    return template.find_resources("AWS::EC2::Instance")


def test_a_deploy_pins_the_ami_so_a_newer_release_changes_no_instance() -> None:
    pinned = _ps_template({LOOKUP_KEY: "ami-0aaaaaaaaaaaaaaaa"}, ENV)
    again = _ps_template({LOOKUP_KEY: "ami-0aaaaaaaaaaaaaaaa"}, ENV)
    assert _instances(pinned) == _instances(again)
    images = {json.dumps(i["Properties"]["ImageId"]) for i in _instances(pinned).values()}
    assert images == {'"ami-0aaaaaaaaaaaaaaaa"'}  # every shard
    # No SSM parameter: CloudFormation has nothing to re-resolve at the next deploy, so AWS
    # publishing a newer AMI changes nothing until the cached value is reset on purpose.
    assert not [p for p in pinned.to_json().get("Parameters", {}) if p.startswith("SsmParameter")]


def test_without_an_account_the_ami_is_resolved_at_deploy_and_synth_says_so() -> None:
    template = _ps_template({}, None)
    for instance in _instances(template).values():
        assert "Ref" in instance["Properties"]["ImageId"]  # the SSM parameter, per deploy
    assert ami_line(None).startswith("PS AMI: not pinned (no AWS account at synth)")
    assert "pinned in cdk.context.json" in ami_line(ENV)


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({"CDK_DEFAULT_ACCOUNT": "123456789012", "CDK_DEFAULT_REGION": "eu-west-1"},
         ("123456789012", "eu-west-1")),
        ({"CDK_DEFAULT_ACCOUNT": "123456789012"}, None),
        ({}, None),
    ],
)  # fmt: skip
def test_the_environment_comes_from_the_cli(environ: dict[str, str], expected: Any) -> None:
    env = deploy_env(environ)
    assert (env if env is None else (env.account, env.region)) == expected
