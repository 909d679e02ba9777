"""The id of S3's AWS-managed prefix list in the stack's region, looked up at deploy time.

Security group egress to S3 through the gateway endpoint should name that list, but
CloudFormation's gateway VPCEndpoint does not return its id and `PrefixList.from_lookup` needs
AWS credentials at synth. A custom resource asks EC2 at deploy instead, so synth stays offline,
deterministic and region-agnostic.
"""

from __future__ import annotations

from aws_cdk import Stack
from aws_cdk import aws_iam as iam
from aws_cdk import custom_resources as cr
from constructs import Construct

from stacks.nag import acknowledge
from stacks.provider_logs import stack_log_group

ID_FIELD = "PrefixLists.0.PrefixListId"


def s3_prefix_list_name(region: str) -> str:
    """AWS's name for the list of S3's address ranges in `region` (a token at synth)."""
    return f"com.amazonaws.{region}.s3"


class S3PrefixList(Construct):
    """Attributes: `prefix_list_id` (a token), `resource`, `log_group`."""

    def __init__(self, scope: Construct, construct_id: str, *,
                 region: str | None = None) -> None:  # fmt: skip
        super().__init__(scope, construct_id)
        name = s3_prefix_list_name(region or Stack.of(self).region)
        lookup = cr.AwsSdkCall(
            service="EC2",
            action="describeManagedPrefixLists",
            parameters={"Filters": [{"Name": "prefix-list-name", "Values": [name]}]},
            physical_resource_id=cr.PhysicalResourceId.of(name),
            output_paths=[ID_FIELD],  # keeps the response well under the 4 KB limit
        )
        # CDK's provider function would otherwise get a retained log group of its own.
        self.log_group = stack_log_group(self, "Logs")
        self.resource = cr.AwsCustomResource(
            self, "Lookup", on_create=lookup, on_update=lookup, install_latest_aws_sdk=False,
            log_group=self.log_group,
            policy=cr.AwsCustomResourcePolicy.from_statements([
                iam.PolicyStatement(actions=["ec2:DescribeManagedPrefixLists"], resources=["*"]),
            ]),
        )  # fmt: skip
        self.prefix_list_id = self.resource.get_response_field(ID_FIELD)
        acknowledge(
            self.resource,
            rule="AwsSolutions-IAM5[Resource::*]",
            reason="ec2:DescribeManagedPrefixLists supports no resource-level permissions; "
            "it only reads the names and ids of prefix lists.",
        )
        # The stack's singleton function that runs the call; on its role only, not the stack.
        role = self.resource.grant_principal
        assert isinstance(role, Construct), role
        acknowledge(
            role,
            rule="AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/"
            "AWSLambdaBasicExecutionRole]",
            reason="CDK's custom-resource function (looks up the prefix list) writes only its "
            "own logs with AWS's minimal managed policy.",
        )
