"""The run-scoped parts: the function that opens and closes the run's interface endpoints, and
the one that waits until every PS shard greets.

Interface endpoints bill by the hour, so no stack creates them (functions/network.py says why);
the network function creates exactly the plan's set at the start of a run and deletes it at the
end. It runs outside the VPC (it calls the EC2 API) and may create endpoints only in the job's
VPC, subnets and endpoint security group, tagged with the job, and delete only endpoints so tagged.

The PS wait replaces the creation signal the PS once sent CloudFormation: the PS now boots when a
run starts it (and pulls its image once the run's endpoints exist), so the run, not the deploy,
waits for it, in a small VPC function instead of n workers billing while they retry.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import Stack
from aws_cdk import aws_iam as iam
from constructs import Construct

from functions.network import JOB_TAG
from stacks.functions import ImageFunction, VpcPlacement
from stacks.image import ImageSpec
from stacks.nag import acknowledge, nag_arn_prefix
from stacks.network import TrainingNetwork

# Neither function imports torch or holds data: boto3 calls and TCP probes.
SMALL_MEMORY_MB = 512
EPHEMERAL_MIN_MB = 512


def small_function(
    scope: Construct,
    *,
    image: ImageSpec,
    handler: str,
    description: str,
    timeout_s: int,
    placement: VpcPlacement | None = None,
) -> ImageFunction:
    """A helper function of the run: no torch, no data, so the smallest sizes do."""
    return ImageFunction(
        scope, "Function", image=image, handler=handler, description=description,
        memory_mb=SMALL_MEMORY_MB, timeout_s=timeout_s, ephemeral_storage_mb=EPHEMERAL_MIN_MB,
        placement=placement,
    )  # fmt: skip


class RunNetwork(Construct):
    """Attributes: `function`, `log_group`, `open_event` (its run id read from the training
    state), `close_event` (no run id: close removes every endpoint of the job)."""

    def __init__(self, scope: Construct, construct_id: str, *, job: str, image: ImageSpec,
                 network: TrainingNetwork, services: tuple[str, ...],
                 timeout_s: int) -> None:  # fmt: skip
        super().__init__(scope, construct_id)
        fn = small_function(self, image=image, handler="functions.network.handler",
                            description=f"Opens and closes the run's VPC endpoints of job {job}",
                            timeout_s=timeout_s)  # fmt: skip
        self.function, self.log_group = fn.function, fn.log_group
        stack = Stack.of(self)
        subnet_ids = network.vpc.select_subnets(subnet_type=network.subnets.subnet_type).subnet_ids
        group_id = network.endpoint_security_group.security_group_id
        where: dict[str, Any] = {
            "job_id": job, "vpc_id": network.vpc.vpc_id, "subnet_ids": subnet_ids,
            "security_group_id": group_id, "services": list(services),
        }  # fmt: skip
        self.open_event = {**where, "action": "open", "run_id.$": "$.run.run_id"}
        self.close_event = {**where, "action": "close"}

        def arn(resource: str, name: str) -> str:
            return stack.format_arn(service="ec2", resource=resource, resource_name=name)

        tagged = {"StringEquals": {f"aws:RequestTag/{JOB_TAG}": job}}
        for statement in (
            # The new endpoint must carry the job's tag; it may go only where the job's are.
            iam.PolicyStatement(actions=["ec2:CreateVpcEndpoint"],
                                resources=[arn("vpc-endpoint", "*")], conditions=tagged),
            iam.PolicyStatement(actions=["ec2:CreateVpcEndpoint"], resources=[
                arn("vpc", network.vpc.vpc_id), arn("security-group", group_id),
                *(arn("subnet", s) for s in subnet_ids)]),
            iam.PolicyStatement(actions=["ec2:CreateTags"], resources=[arn("vpc-endpoint", "*")],
                                conditions={"StringEquals": {
                                    "ec2:CreateAction": "CreateVpcEndpoint"}}),
            iam.PolicyStatement(actions=["ec2:DeleteVpcEndpoints"],
                                resources=[arn("vpc-endpoint", "*")],
                                conditions={"StringEquals": {f"aws:ResourceTag/{JOB_TAG}": job}}),
            # Describe has no resource-level scope; private DNS associates the VPC with the
            # endpoint service's AWS-managed hosted zone, whose id nobody knows beforehand.
            iam.PolicyStatement(actions=["ec2:DescribeVpcEndpoints",
                                         "route53:AssociateVPCWithHostedZone"], resources=["*"]),
        ):  # fmt: skip
            self.function.add_to_role_policy(statement)
        acknowledge(
            self.function,
            rule=f"AwsSolutions-IAM5[Resource::{nag_arn_prefix(self, 'ec2')}:vpc-endpoint/*]",
            reason="Endpoint ids are made at run time; create needs the job's tag on the request "
            "and delete the job's tag on the endpoint (IAM conditions).",
        )
        acknowledge(
            self.function,
            rule="AwsSolutions-IAM5[Resource::*]",
            reason="ec2:DescribeVpcEndpoints takes no resource scope; the private-DNS hosted "
            "zone is AWS-managed and unnamed before the endpoint exists.",
        )


class PsWait(Construct):
    """A VPC function that waits until every PS shard greets (functions.ps_health.wait_handler).
    Attributes: `function`, `log_group`, `event`."""

    def __init__(self, scope: Construct, construct_id: str, *, job: str, image: ImageSpec,
                 placement: VpcPlacement, ps_endpoints: list[str],
                 timeout_s: int) -> None:  # fmt: skip
        super().__init__(scope, construct_id)
        fn = small_function(self, image=image, handler="functions.ps_health.wait_handler",
                            description=f"Waits for the PS shards of job {job} to serve",
                            timeout_s=timeout_s, placement=placement)  # fmt: skip
        self.function, self.log_group = fn.function, fn.log_group
        self.event: dict[str, Any] = {"ps_endpoints": ps_endpoints}
