"""The PS instances' AMI: the latest Amazon Linux 2023, pinned once so later deploys keep it.

`MachineImage.latest_amazon_linux2023()` alone is an SSM parameter CloudFormation resolves at
every deploy: once AWS publishes a new AMI, any deploy (a new deadline that restarts nothing
included) replaces every PS instance of a running job. With an account and region at synth
(the CDK CLI sets CDK_DEFAULT_ACCOUNT/REGION when it has credentials, as for every `cdk
deploy`), the AMI is looked up once and cached in cdk.context.json: commit that file, and a
new AMI is taken only on purpose (`cdk context --reset <key>`). Without an account (an offline
synth) there is nothing to look it up with, so the template keeps the SSM parameter and synth
says so.
"""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import Environment, Stack, Token
from aws_cdk import aws_ec2 as ec2


def deploy_env(environ: Mapping[str, str]) -> Environment | None:
    """The account and region the CDK CLI gives the app, or None (env-agnostic stacks)."""
    account, region = environ.get("CDK_DEFAULT_ACCOUNT"), environ.get("CDK_DEFAULT_REGION")
    return Environment(account=account, region=region) if account and region else None


def is_pinned(stack: Stack) -> bool:
    """True when `stack` has a concrete account and region, so lookups can be cached."""
    return not (Token.is_unresolved(stack.account) or Token.is_unresolved(stack.region))


def ps_machine_image(stack: Stack, arch: str) -> ec2.IMachineImage:
    """Latest AL2023 for `arch` ("x86_64" | "arm64"), cached in context when `is_pinned`."""
    cpu = ec2.AmazonLinuxCpuType.ARM_64 if arch == "arm64" else ec2.AmazonLinuxCpuType.X86_64
    pinned = is_pinned(stack)
    return ec2.MachineImage.latest_amazon_linux2023(cpu_type=cpu, cached_in_context=pinned)


def ami_line(env: Environment | None) -> str:
    """What synth says about the PS AMI."""
    if env is not None:
        return (
            f"PS AMI: latest Amazon Linux 2023 in {env.region}, pinned in cdk.context.json at "
            "the first deploy (commit it; `cdk context --reset` to take a newer one)"
        )
    return (
        "PS AMI: not pinned (no AWS account at synth): resolved at deploy, so a deploy after "
        "a new Amazon Linux release replaces the PS instances; `cdk deploy` pins it"
    )
