"""WIP (branch wip-rehearsal, 2026-11-24): moto 5.2.1's server made to take `cdk deploy`.

Status, measured with tools/rehearse_try.sh.txt (bootstrap, pre-published image, deploy):
- bootstrap, `cdk deploy --all -c deadline=2h`: all three stacks CREATE_COMPLETE with the
  resource count of their templates (data 12, ps 36, training 41) and their outputs (2, 10, 6);
- redeploy unchanged: "(no changes)" for all three;
- deploy with another deadline: the data stack updates; the PS stack fails: the instance is
  replaced under a new logical id (user_data_causes_replacement) and moto's update resolves a
  Fn::GetAtt to it before creating it (`ValidationError: ... references undefined resource`);
- `cdk destroy --all --force`: training destroyed; the PS stack fails (`The vpc ... has
  dependencies`: moto deletes the VPC before what is in it); data not reached.
Next: those two, then the rehearsal script with its assertions, `make rehearse`, a CI step.
Not wired into CI.

Each stand-in names the behaviour it supplies:
- AWS::SecretsManager::Secret, AWS::S3::BucketPolicy, AWS::Lambda::EventInvokeConfig,
  AWS::EC2::SecurityGroupEgress: a resource that exists (physical id, Ref, any GetAtt) and
  does nothing.
- Custom::* (CDK's providers): answered at once with a stand-in value per attribute, instead of
  invoking the provider's Lambda in Docker (this machine has no Docker engine).
"""

from __future__ import annotations

import sys
import time
from typing import Any

from moto.cloudformation import custom_model
from moto.core.common_models import CloudFormationModel
from moto.moto_api._internal import mock_random

_STAND_INS: list[type[CloudFormationModel]] = []
STAND_IN_TYPES = (
    "AWS::SecretsManager::Secret",
    "AWS::S3::BucketPolicy",
    "AWS::Lambda::EventInvokeConfig",
    "AWS::EC2::SecurityGroupEgress",
)


def _stand_in(kind: str) -> type[CloudFormationModel]:
    class StandIn(CloudFormationModel):
        def __init__(self, name: str, account_id: str, region_name: str) -> None:
            service = kind.split("::")[1].lower()
            self.name = name
            self.arn = f"arn:aws:{service}:{region_name}:{account_id}:standin/{name}"

        @staticmethod
        def cloudformation_type() -> str:
            return kind

        @staticmethod
        def cloudformation_name_type() -> str:
            return "Name"

        @property
        def physical_resource_id(self) -> str:
            return self.arn if kind == "AWS::SecretsManager::Secret" else self.name

        @classmethod
        def has_cfn_attr(cls, attr: str) -> bool:
            return True

        def get_cfn_attribute(self, attribute_name: str) -> Any:
            return self.arn if attribute_name in ("Arn", "Id") else f"standin-{attribute_name}"

        @classmethod
        def create_from_cloudformation_json(  # type: ignore[misc]
            cls, resource_name: str, cloudformation_json: dict[str, Any], account_id: str,
            region_name: str, **kwargs: Any,
        ) -> CloudFormationModel:  # fmt: skip
            return cls(f"{resource_name}-{mock_random.get_random_hex(6)}", account_id, region_name)

    StandIn.__name__ = "StandIn" + kind.replace("::", "")
    return StandIn


def _answered_custom_resource(
    cls: Any, resource_name: str, cloudformation_json: dict[str, Any], account_id: str,
    region_name: str, **kwargs: Any,
) -> custom_model.CustomModel:  # fmt: skip
    """A CDK provider's custom resource, answered without running the provider."""
    resource = custom_model.CustomModel(region_name, "standin", kwargs["LogicalId"], resource_name)
    resource.set_data({})
    return resource


def _record_outputs_after_change_sets() -> None:
    """moto computes a stack's outputs when it creates the stack, before a change set has
    created any resource; CDK deploys by change set, so every stack had no outputs."""
    from moto.cloudformation.models import CloudFormationBackend

    original = CloudFormationBackend.execute_change_set

    def execute(self: Any, change_set_name: str, stack_name: str | None = None) -> None:
        original(self, change_set_name, stack_name)
        for change_set in self.change_sets.values():
            if change_set_name in (change_set.change_set_id, change_set.change_set_name):
                stack = self.stacks[change_set.stack_id]
                stack.template_dict = change_set.template_dict  # moto keeps the first one
                stack.output_map = stack._create_output_map()

    CloudFormationBackend.execute_change_set = execute  # type: ignore[method-assign]


def _resolve_get_stack_output() -> None:
    """Fn::GetStackOutput (CDK's reference to another stack's output, same account and region
    here): the named stack's output value."""
    from moto.cloudformation import cloudformation_backends, parsing

    original = parsing.clean_json

    def clean_json(resource_json: Any, resources_map: Any) -> Any:
        if isinstance(resource_json, dict) and "Fn::GetStackOutput" in resource_json:
            spec = resource_json["Fn::GetStackOutput"]
            backend = cloudformation_backends[resources_map._account_id][
                resources_map._region_name]  # fmt: skip
            (stack,) = backend.describe_stacks(spec["StackName"])
            for output in stack.outputs or []:
                if output["OutputKey"] == spec["OutputName"]:
                    return output["OutputValue"]
            raise KeyError(f"{spec['StackName']} has no output {spec['OutputName']}")
        return original(resource_json, resources_map)

    parsing.clean_json = clean_json


def _change_sets_by_stack() -> None:
    """Every CDK change set is named `cdk-deploy-change-set`; moto looks change sets up by name
    alone and so described, executed or deleted another stack's. Resolve (name, stack) to the
    change set's ARN before moto sees the request."""
    from moto.cloudformation.responses import CloudFormationResponse

    def arn_of(response: Any) -> str:
        name = response._get_param("ChangeSetName")
        stack_name = response._get_param("StackName")
        backend = response.cloudformation_backend
        if not name or name in backend.change_sets or not stack_name:
            return str(name)
        for arn, change_set in backend.change_sets.items():
            owner = backend.stacks.get(change_set.stack_id)
            if change_set.change_set_name == name and owner is not None and stack_name in (
                owner.name, owner.stack_id):  # fmt: skip
                return str(arn)
        return str(name)

    from moto.cloudformation.exceptions import CloudFormationError
    from moto.core.responses import EmptyResult

    class ChangeSetNotFound(CloudFormationError):
        code = "ChangeSetNotFoundException"  # AWS's answer for a change set that does not exist

    for method in ("describe_change_set", "delete_change_set", "execute_change_set"):
        original = getattr(CloudFormationResponse, method)

        def by_stack(self: Any, _original: Any = original) -> Any:
            arn = arn_of(self)
            if arn not in self.cloudformation_backend.change_sets:
                if _original.__name__ == "delete_change_set":
                    return EmptyResult()  # the CLI's clean-up of a change set never made
                raise ChangeSetNotFound(f"ChangeSet [{arn}] does not exist")
            self.querystring["ChangeSetName"] = [arn]
            return _original(self)

        setattr(CloudFormationResponse, method, by_stack)


def _names_within_limits() -> None:
    """CloudFormation keeps a generated name within the type's limit; moto does so for a few
    types only, and a Step Functions state machine (80 characters) of a long stack and logical
    id failed its own validation."""
    from moto.cloudformation import parsing

    original = parsing.generate_resource_name

    def generate(resource_type: str, stack_name: str, logical_id: str) -> str:
        name = original(resource_type, stack_name, logical_id)
        if resource_type == "AWS::StepFunctions::StateMachine" and len(name) > 80:
            name = name[:67] + "-" + name[-12:]
        return name

    parsing.generate_resource_name = generate


def _previous_ssm_values_on_update() -> None:
    """On an update the CLI passes BootstrapVersion (an SSM-parameter type) with
    UsePreviousValue, and moto then looks up the previous *resolved* value ("33") as a
    parameter name. A value that names no parameter and is no path is that resolved value."""
    from moto.cloudformation import parsing
    from moto.ssm.models import ssm_backends

    original = parsing.ResourceMap.parse_ssm_parameter

    def parse(self: Any, value: str, value_type: str) -> str:
        backend = ssm_backends[self._account_id][self._region_name]
        if not value.startswith("/") and backend.get_parameter(value) is None:
            return value
        return str(original(self, value, value_type))

    parsing.ResourceMap.parse_ssm_parameter = parse  # type: ignore[method-assign]


def install() -> None:
    """Register the stand-ins before any stack is parsed."""
    _previous_ssm_values_on_update()
    _names_within_limits()
    _change_sets_by_stack()
    _record_outputs_after_change_sets()
    _resolve_get_stack_output()
    from moto.cloudformation import parsing

    # Kept here: moto finds models through __subclasses__, which holds them weakly.
    _STAND_INS.extend(_stand_in(kind) for kind in STAND_IN_TYPES)
    parsing.get_model_map.cache_clear()  # moto cached the map before these types existed
    parsing.get_name_type_map.cache_clear()
    custom_model.CustomModel.create_from_cloudformation_json = classmethod(  # type: ignore[method-assign,assignment]
        _answered_custom_resource
    )
    original = custom_model.CustomModel.get_cfn_attribute

    def attribute(self: custom_model.CustomModel, name: str) -> Any:
        return original(self, name) or f"standin-{name.replace('.', '-')}"

    custom_model.CustomModel.get_cfn_attribute = attribute  # type: ignore[method-assign]


def main() -> int:
    from moto.server import ThreadedMotoServer

    install()
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 5055
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    print(f"moto (with stand-ins) on http://localhost:{port}", flush=True)
    try:
        time.sleep(3600)
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())  # run as `python -c "from tools import moto_compat; moto_compat.main()"`
