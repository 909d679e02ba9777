"""Log groups for CDK's own helper functions, so `cdk destroy` removes them too.

CDK's helpers (the bucket auto-delete and default-security-group providers, the dataset
upload's BucketDeployment handler) are Lambda functions without a log group of their own:
Lambda creates `/aws/lambda/<name>` on first use and it outlives the stack. Each gets an
explicit log group here, and every custom resource of the stack depends on every log group of
the stack, so on delete the custom resources (whose handlers still log, and would re-create a
deleted group) go first and the groups last.
"""

from __future__ import annotations

from aws_cdk import CfnResource, RemovalPolicy, Stack
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

PROVIDER_MARK = "CustomResourceProvider"  # in the construct path of CDK's singleton providers


def stack_log_group(scope: Construct, construct_id: str) -> logs.LogGroup:
    """Every log group of a job: kept a month and removed with its stack (the group Lambda would
    create on first use has neither)."""
    return logs.LogGroup(
        scope,
        construct_id,
        retention=logs.RetentionDays.ONE_MONTH,
        removal_policy=RemovalPolicy.DESTROY,
    )


def own_provider_log_groups(stack: Stack) -> list[logs.LogGroup]:
    """Give each provider function in `stack` an explicit log group; returns the groups."""
    resources = [c for c in stack.node.find_all() if isinstance(c, CfnResource)]
    handlers = [r for r in resources if _logs_to_an_implicit_group(r)]
    groups = []
    for handler in handlers:
        provider = handler.node.scope
        assert provider is not None
        group = stack_log_group(stack, f"{provider.node.id.replace('::', '')}Logs")
        handler.add_property_override("LoggingConfig.LogGroup", group.log_group_name)
        handler.node.add_dependency(group)
        groups.append(group)
    # Every log group of the stack, ours included (the start-training handler logs on delete).
    all_groups = [c for c in stack.node.find_all() if isinstance(c, logs.LogGroup)]
    for resource in resources:
        if resource.cfn_resource_type.startswith("Custom::"):
            for group in all_groups:
                resource.node.add_dependency(group)
    return groups


def _logs_to_an_implicit_group(resource: CfnResource) -> bool:
    """A Lambda function without a log group of its own (ours all have one)."""
    if isinstance(resource, lambda_.CfnFunction):  # L2 helpers, e.g. the BucketDeployment's
        return resource.logging_config is None
    # CDK's CustomResourceProvider writes a raw CfnResource whose properties are not readable.
    return resource.cfn_resource_type == "AWS::Lambda::Function" and PROVIDER_MARK in (
        resource.node.path
    )
