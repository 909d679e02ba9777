"""cdk-nag v3 acknowledgements: CDK's native Validations API, one finding id at a time.

v3 has no blanket suppressions: each finding (e.g. `AwsSolutions-IAM5[Resource::*]`) is
acknowledged on the construct that causes it, with a reason that says why it is acceptable.
"""

from __future__ import annotations

from collections.abc import Iterable

from aws_cdk import Acknowledgment, Validations
from constructs import IConstruct


def acknowledge(construct: IConstruct, *, rule: str, reason: str) -> None:
    """Acknowledge one cdk-nag finding on `construct` (and its children)."""
    Validations.of(construct).acknowledge(Acknowledgment(id=rule, reason=reason))


def unacknowledged_findings(app: IConstruct) -> list[str]:
    """Every AwsSolutions finding left after acknowledgements, as "rule at construct/path"."""
    from cdk_nag import AwsSolutionsChecks  # imported here: only checks need it

    report = AwsSolutionsChecks(app).validate_scope(app)
    return sorted(
        f"{violation.rule_name} at {resource.construct_path}"
        for violation in report.violations
        for resource in violation.violating_resources
    )


def logical_id(construct: IConstruct) -> str:
    """The CloudFormation logical id of an L2's resource, as cdk-nag prints it in finding ids."""
    from aws_cdk import Stack  # local: keeps this module's import surface small

    resource = construct.node.default_child
    assert resource is not None, f"{construct.node.path} has no CloudFormation resource"
    return Stack.of(construct).get_logical_id(resource)  # type: ignore[arg-type]


def nag_arn_prefix(scope: IConstruct, service: str) -> str:
    """`arn:<partition>:<service>:<region>:<account>` as cdk-nag prints it in finding ids: the
    pseudo parameters of an environment-agnostic stack (`<AWS::Region>`), the values of one
    bound to an account and region (every `cdk deploy`: stacks.machine_image.deploy_env).
    Acknowledging only the first form made every real deploy's synth fail."""
    from aws_cdk import Stack, Token  # local: keeps this module's import surface small

    stack = Stack.of(scope)

    def form(value: str, pseudo: str) -> str:
        return f"<AWS::{pseudo}>" if Token.is_unresolved(value) else value

    partition = form(stack.partition, "Partition")
    return f"arn:{partition}:{service}:{form(stack.region, 'Region')}:" + form(
        stack.account, "AccountId"
    )


def executions_nag_arn(machine: IConstruct) -> str:
    """A state machine's executions ARN (without the name) as cdk-nag prints it in finding ids."""
    return (
        f'{nag_arn_prefix(machine, "states")}:execution:{{"Fn::Select":'
        f'[6,{{"Fn::Split":[":",{{"Ref":"{logical_id(machine)}"}}]}}]}}'
    )


def acknowledge_invoking_machine(machine: IConstruct, functions: Iterable[IConstruct]) -> None:
    """The findings of every state machine that invokes Lambda `functions`, with reasons (all of
    ours do), and the one of every logged, traced state machine (stacks.orchestration)."""
    for fn in functions:
        acknowledge(
            machine,
            rule=f"AwsSolutions-IAM5[Resource::<{logical_id(fn)}.Arn>:*]",
            reason="CDK's LambdaInvoke grants the function's versions/aliases (ARN:*) too.",
        )
    acknowledge(
        machine,
        rule="AwsSolutions-IAM5[Resource::*]",
        reason="X-Ray tracing and log delivery actions take no resource-level scope.",
    )
