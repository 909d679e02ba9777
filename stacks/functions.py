"""One Lambda function from the project's image, with a log group that `cdk destroy` removes.

Lambda's implicit log group outlives the stack; an explicit one (passed as `log_group`) goes with
it. The function runs in the job's private subnets when given a VPC (workers and finalize must
reach the PS by private IP); the prepare step only talks to S3 and stays out of the VPC.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Duration, Size
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from stacks.image import ImageSpec
from stacks.nag import acknowledge
from stacks.provider_logs import stack_log_group


@dataclass(frozen=True)
class VpcPlacement:
    """Where a VPC function's ENIs go and which security group they carry."""

    vpc: ec2.IVpc
    subnets: ec2.SubnetSelection
    security_group: ec2.ISecurityGroup


class ImageFunction(Construct):
    """A DockerImageFunction sized by the caller. Attributes: `function`, `log_group`."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        image: ImageSpec,
        handler: str,
        description: str,
        memory_mb: int,
        timeout_s: int,
        ephemeral_storage_mb: int,
        reserved_concurrency: int | None = None,
        placement: VpcPlacement | None = None,
        role: iam.IRole | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.log_group = stack_log_group(self, "Logs")
        self.function = lambda_.DockerImageFunction(
            self,
            "Function",
            code=image.lambda_code(handler=handler),
            architecture=image.lambda_architecture,
            description=description,
            memory_size=memory_mb,
            timeout=Duration.seconds(timeout_s),
            ephemeral_storage_size=Size.mebibytes(ephemeral_storage_mb),
            reserved_concurrent_executions=reserved_concurrency,
            log_group=self.log_group,
            vpc=placement.vpc if placement else None,
            vpc_subnets=placement.subnets if placement else None,
            security_groups=[placement.security_group] if placement else None,
            role=role,  # None: its own (a memory variant shares its worker's)
            # Retries belong to the state machine, which knows where the worker got to.
            retry_attempts=0,
        )
        acknowledge(
            self.function,
            rule="AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/"
            "AWSLambdaBasicExecutionRole]",
            reason="AWS's minimal managed policy for writing the function's own logs.",
        )
        if placement:
            acknowledge(
                self.function,
                rule="AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/"
                "AWSLambdaVPCAccessExecutionRole]",
                reason="AWS's managed policy for the ENIs a VPC function needs; "
                "its ec2:*NetworkInterface actions have no resource-level scoping.",
            )
