"""moto's server made to take `cdk bootstrap`, `cdk deploy` and `cdk destroy` of this app.

    python -m tools.moto_compat [--port N]  # prints its URL; serves until stdin closes

The deploy rehearsal (tools/rehearse.py, `make rehearse`) runs the CDK CLI against it. Written
against one moto version, MOTO_VERSION (pinned in requirements-dev.txt); `install()` refuses any
other. Each fix below wraps or replaces one moto function and its docstring names the
CloudFormation behaviour it supplies; `uninstall()` puts moto back (the tests use both).

What the layer cannot supply, the rehearsal reports as "moto cannot":
- STAND_IN_TYPES: types moto does not model; a stand-in holds the resource's place (a physical
  id, Ref and any Fn::GetAtt) and does nothing.
- Custom::* (CDK's providers: S3 auto-delete, the default security group's rules, the custom
  resource that starts training): answered at once with a stand-in value per attribute, instead
  of moto invoking the provider's Lambda in Docker.
"""

from __future__ import annotations

import argparse
import gc
import re
import sys
from collections.abc import Callable, Collection
from importlib.metadata import version
from typing import Any

MOTO_VERSION = "5.2.1"
STAND_IN_TYPES = (
    "AWS::SecretsManager::Secret",
    "AWS::S3::BucketPolicy",
    "AWS::Lambda::EventInvokeConfig",
    "AWS::EC2::SecurityGroupEgress",
)
_MODEL_GROUP = "moto_compat"  # moto files each model under its module's second part
_STAND_INS: list[type] = []  # moto finds models through __subclasses__, which holds them weakly
_UNDO: list[tuple[Any, str, Any]] = []


def _patch(owner: Any, name: str, value: Any) -> None:
    """owner.name = value, the original kept for uninstall()."""
    _UNDO.append((owner, name, vars(owner)[name]))
    setattr(owner, name, value)


def _stand_in(kind: str) -> type:
    """A CloudFormation model for `kind` that exists and does nothing."""
    from moto.core.common_models import CloudFormationModel
    from moto.moto_api._internal import mock_random

    class StandIn(CloudFormationModel):
        __module__ = f"tools.{_MODEL_GROUP}"  # also when run as __main__

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
        def physical_resource_id(self) -> str:  # a secret's Ref is its ARN
            return self.arn if kind == "AWS::SecretsManager::Secret" else self.name

        @classmethod
        def has_cfn_attr(cls, attr: str) -> bool:
            return True

        def get_cfn_attribute(self, attribute_name: str) -> Any:
            return self.arn if attribute_name in ("Arn", "Id") else f"standin-{attribute_name}"

        @classmethod
        def create_from_cloudformation_json(
            cls,
            resource_name: str,
            cloudformation_json: Any,
            account_id: str,
            region_name: str,
            **kwargs: Any,
        ) -> StandIn:
            return cls(f"{resource_name}-{mock_random.get_random_hex(6)}", account_id, region_name)

    StandIn.__name__ = "StandIn" + kind.replace("::", "")
    return StandIn


def _answer_custom_resources() -> None:
    """A custom resource gets its provider's answer (moto would invoke the provider's Lambda
    in Docker and wait for it): answered at once, each attribute a stand-in value."""
    from moto.cloudformation import custom_model

    model = custom_model.CustomModel

    def create(
        cls: Any,
        /,
        resource_name: str,
        cloudformation_json: Any,
        account_id: str,
        region_name: str,
        **kwargs: Any,
    ) -> Any:
        # moto builds its CustomModel the same way (the abstract methods are CloudFormation's)
        resource = model(region_name, "standin", kwargs["LogicalId"], resource_name)  # type: ignore[abstract]
        resource.set_data({})
        return resource

    _patch(model, "create_from_cloudformation_json", classmethod(create))
    original = model.get_cfn_attribute

    def attribute(self: Any, name: str) -> Any:
        return original(self, name) or f"standin-{name.replace('.', '-')}"

    _patch(model, "get_cfn_attribute", attribute)


def _find_change_sets_by_stack() -> None:
    """A change set is named within its stack. Every CDK change set is named
    `cdk-deploy-change-set`, and moto looks change sets up by name alone (the first or the last
    of that name), so it described, executed or deleted another stack's: the new-deadline deploy
    failed, and the issue saw stacks left REVIEW_IN_PROGRESS with no resources while the CLI
    printed success. (name, stack) resolves to the change set's ARN before moto sees the
    request; a change set that does not exist answers ChangeSetNotFoundException, as AWS does
    (the CLI deletes one it never made, which failed in moto)."""
    from moto.cloudformation.exceptions import CloudFormationError
    from moto.cloudformation.responses import CloudFormationResponse
    from moto.core.responses import EmptyResult

    class ChangeSetNotFound(CloudFormationError):
        code = "ChangeSetNotFoundException"

    def arn_of(response: Any) -> str:
        """The ARN of the stack's newest change set of that name (AWS removes a stack's change
        sets once one executes, so a name is unique there; moto keeps them)."""
        name, stack_name = response._get_param("ChangeSetName"), response._get_param("StackName")
        backend = response.cloudformation_backend
        if not name or name in backend.change_sets or not stack_name:
            return str(name)
        stack_ids = {
            s.stack_id for s in backend.stacks.values() if stack_name in (s.name, s.stack_id)
        }
        named = [
            arn
            for arn, change_set in backend.change_sets.items()
            if change_set.change_set_name == name and change_set.stack_id in stack_ids
        ]
        return str(named[-1]) if named else str(name)

    def by_stack(original: Callable[[Any], Any]) -> Callable[[Any], Any]:
        def respond(self: Any) -> Any:
            arn = arn_of(self)
            if arn not in self.cloudformation_backend.change_sets:
                if original.__name__ == "delete_change_set":
                    return EmptyResult()
                raise ChangeSetNotFound(f"ChangeSet [{arn}] does not exist")
            self.params["ChangeSetName"] = arn  # where moto's handlers read parameters
            return original(self)

        return respond

    for method in ("describe_change_set", "delete_change_set", "execute_change_set"):
        _patch(CloudFormationResponse, method, by_stack(getattr(CloudFormationResponse, method)))


def _execute_change_sets_as_cloudformation_does() -> None:
    """After a change set executes, the stack has the change set's template and outputs (moto
    computed the outputs when it created the stack, before any resource existed, so every CDK
    stack had none); a change set that fails leaves the stack CREATE_FAILED or UPDATE_FAILED
    with the reason as an event (moto answered HTTP 500 and left the old status, which the CLI
    took for success)."""
    from moto.cloudformation.models import CloudFormationBackend

    original = CloudFormationBackend.execute_change_set

    def execute(self: Any, change_set_name: str, stack_name: str | None = None) -> None:
        change_set = self.describe_change_set(change_set_name)
        stack = self.stacks[change_set.stack_id]
        try:
            original(self, change_set_name, stack_name)
        except Exception as exc:  # any moto failure is the stack's failure, as in AWS
            stack.status = f"{change_set.change_set_type}_FAILED"
            stack._add_stack_event(stack.status, resource_status_reason=f"moto: {exc!r}")
            return
        stack.template_dict = change_set.template_dict  # moto kept the first template
        stack.output_map = stack._create_output_map()

    _patch(CloudFormationBackend, "execute_change_set", execute)


def _resolve_get_stack_output() -> None:
    """Fn::GetStackOutput (CDK's reference to another stack's output; here always the same
    account and region): the named stack's output value."""
    from moto.cloudformation import parsing
    from moto.cloudformation.models import cloudformation_backends

    original = parsing.clean_json

    def clean_json(resource_json: Any, resources_map: Any) -> Any:
        if isinstance(resource_json, dict) and "Fn::GetStackOutput" in resource_json:
            spec = resource_json["Fn::GetStackOutput"]
            account, region = resources_map._account_id, resources_map._region_name
            (stack,) = cloudformation_backends[account][region].describe_stacks(spec["StackName"])
            for output in stack.outputs or []:
                if output["OutputKey"] == spec["OutputName"]:
                    return output["OutputValue"]
            raise KeyError(f"{spec['StackName']} has no output {spec['OutputName']}")
        return original(resource_json, resources_map)

    _patch(parsing, "clean_json", clean_json)


def _names_within_limits() -> None:
    """CloudFormation keeps a generated name within its type's limit; moto does so for a few
    types only, and a Step Functions state machine (80 characters) of a long stack name and
    logical id failed its own validation."""
    from moto.cloudformation import parsing

    original = parsing.generate_resource_name

    def generate(resource_type: str, stack_name: str, logical_id: str) -> str:
        name = original(resource_type, stack_name, logical_id)
        if resource_type == "AWS::StepFunctions::StateMachine" and len(name) > 80:
            name = name[:67] + "-" + name[-12:]
        return name

    _patch(parsing, "generate_resource_name", generate)


def _previous_ssm_values_on_update() -> None:
    """On an update the CLI passes BootstrapVersion (an SSM-parameter type) with
    UsePreviousValue, and moto then looks the previous *resolved* value ("33") up as a
    parameter name. A value that names no parameter and is no path is that resolved value."""
    from moto.cloudformation import parsing
    from moto.ssm.models import ssm_backends

    original = parsing.ResourceMap.parse_ssm_parameter

    def parse(self: Any, value: str, value_type: str) -> str:
        backend = ssm_backends[self._account_id][self._region_name]
        if not value.startswith("/") and backend.get_parameter(value) is None:
            return value
        return str(original(self, value, value_type))

    _patch(parsing.ResourceMap, "parse_ssm_parameter", parse)


def _updates_keep_what_moto_cannot_update() -> None:
    """CloudFormation updates a resource in place when its properties (or only its tags)
    change. For a type without an update model (custom resources, stand-ins, instances, VPC
    parts, log groups) moto stored None instead: the resource left the stack and the next
    Fn::GetAtt to it failed ("references undefined resource"). Keep the existing resource."""
    from moto.cloudformation import parsing

    original = parsing.parse_and_update_resource

    def update(
        logical_id: str, resource_json: Any, resources_map: Any, account_id: str, region_name: str
    ) -> Any:
        updated = original(logical_id, resource_json, resources_map, account_id, region_name)
        return updated if updated is not None else resources_map[logical_id]

    _patch(parsing, "parse_and_update_resource", update)


def _bucket_tag_updates_by_name() -> None:
    """A bucket's tags update in place. moto's update reads the new tags' bucket from the
    BucketName property, which a bucket with a generated name (every CDK bucket) lacks, so any
    new deadline (it is a tag) failed the data stack's update with KeyError 'BucketName'."""
    from moto.s3.models import FakeBucket

    original = vars(FakeBucket)["update_from_cloudformation_json"].__func__

    def update(
        cls: Any,
        original_resource: Any,
        new_resource_name: str,
        cloudformation_json: Any,
        account_id: str,
        region_name: str,
    ) -> Any:
        cloudformation_json["Properties"].setdefault("BucketName", original_resource.name)
        return original(
            cls, original_resource, new_resource_name, cloudformation_json, account_id, region_name
        )

    _patch(FakeBucket, "update_from_cloudformation_json", classmethod(update))


def references(value: Any, logical_ids: Collection[str]) -> set[str]:
    """The ids among `logical_ids` that `value` (a resource's JSON) refers to: Ref,
    Fn::GetAtt, ${...} in Fn::Sub, DependsOn."""
    found: set[str] = set()
    if isinstance(value, list):
        for item in value:
            found |= references(item, logical_ids)
    elif isinstance(value, dict):
        for key, item in value.items():
            if key in ("Ref", "DependsOn") and isinstance(item, str):
                found.add(item)
            elif key == "DependsOn":
                found.update(item)
            elif key == "Fn::GetAtt":
                found.add(item[0] if isinstance(item, list) else str(item).split(".")[0])
            elif key == "Fn::Sub":
                text, variables = (item[0], item[1:]) if isinstance(item, list) else (item, [])
                found.update(name.split(".")[0] for name in re.findall(r"\$\{([^}!]+)\}", text))
                found |= references(variables, logical_ids)
            else:
                found |= references(item, logical_ids)
    return found & set(logical_ids)


def dependency_order(resources: dict[str, Any]) -> list[str]:
    """The template's logical ids, each after every resource it refers to."""
    ordered: dict[str, None] = {}
    visiting: set[str] = set()

    def visit(logical_id: str) -> None:
        if logical_id in ordered or logical_id in visiting:
            return  # done, or a cycle (CloudFormation rejects those): keep the template's order
        visiting.add(logical_id)
        for dependency in sorted(references(resources[logical_id], resources)):
            visit(dependency)
        visiting.discard(logical_id)
        ordered[logical_id] = None

    for logical_id in resources:
        visit(logical_id)
    return list(ordered)


def _disassociate(ec2: Any, link: Any) -> None:
    """Remove a SubnetRouteTableAssociation (moto's physical id for it is the route table's)."""
    table = ec2.get_route_table(link.route_table_id)
    for association, subnet in list(table._associations.items()):
        if subnet == link.subnet_id:
            ec2.disassociate_route_table(association)


# The EC2 parts moto's CloudFormation leaves behind on delete (no delete model, so the call
# was a no-op), removed through the EC2 backend. A route table left behind kept its VPC.
_EC2_DELETES: dict[str, Callable[[Any, Any], object]] = {
    "AWS::EC2::RouteTable": lambda ec2, table: ec2.delete_route_table(table.id),
    "AWS::EC2::SubnetRouteTableAssociation": _disassociate,
    "AWS::EC2::VPCEndpoint": lambda ec2, endpoint: ec2.delete_vpc_endpoints([endpoint.id]),
    "AWS::EC2::FlowLog": lambda ec2, flow_log: ec2.delete_flow_logs([flow_log.id]),
}


def _deletes_in_reverse_dependency_order() -> None:
    """CloudFormation deletes a resource only after everything that refers to it, and deletes
    every resource it created. moto tried resources in set order, retrying while some went, and
    left route tables, endpoints and flow logs behind, so `cdk destroy` of the PS stack failed
    with "The vpc ... has dependencies". Delete in reverse dependency order, with _EC2_DELETES
    for what moto left behind; a failure is raised, not skipped."""
    from moto.cloudformation import parsing
    from moto.ec2.models import ec2_backends

    original = parsing.ResourceMap._delete_resource

    def delete_resource(self: Any, resource: Any, resource_json: dict[str, Any]) -> None:
        remove = _EC2_DELETES.get(resource_json["Type"])
        if remove is None:
            original(self, resource, resource_json)
        else:
            remove(ec2_backends[self._account_id][self._region_name], resource)

    def delete(self: Any) -> None:
        for logical_id in reversed(dependency_order(self._resource_json_map)):
            resource_json = self._resource_json_map[logical_id]
            resource = self._parsed_resources.get(logical_id)
            if resource is None or resource_json.get("DeletionPolicy") == "Retain":
                continue  # never created (a false condition), or kept as the template asks
            self._delete_resource(resource, resource_json)
            self._parsed_resources.pop(logical_id)

    _patch(parsing.ResourceMap, "_delete_resource", delete_resource)
    _patch(parsing.ResourceMap, "delete", delete)


def _clear_model_caches() -> None:
    from moto.cloudformation import parsing

    parsing.get_model_list.cache_clear()  # moto caches its models and their types
    parsing.get_model_map.cache_clear()
    parsing.get_name_type_map.cache_clear()


def install() -> None:
    """Apply every fix to this process's moto (the pinned version only)."""
    if version("moto") != MOTO_VERSION:
        raise RuntimeError(
            f"tools/moto_compat.py is written for moto {MOTO_VERSION}, "
            f"found {version('moto')}: check each fix against it"
        )
    if _UNDO:
        return
    _answer_custom_resources()
    _find_change_sets_by_stack()
    _execute_change_sets_as_cloudformation_does()
    _resolve_get_stack_output()
    _names_within_limits()
    _previous_ssm_values_on_update()
    _updates_keep_what_moto_cannot_update()
    _bucket_tag_updates_by_name()
    _deletes_in_reverse_dependency_order()
    _STAND_INS.extend(_stand_in(kind) for kind in STAND_IN_TYPES)
    _clear_model_caches()


def uninstall() -> None:
    """Undo install() (stand-ins a live stack still holds stay until it goes)."""
    from moto.core.model_instances import model_data

    while _UNDO:
        owner, name, original = _UNDO.pop()
        setattr(owner, name, original)
    model_data.pop(_MODEL_GROUP, None)
    _STAND_INS.clear()
    _clear_model_caches()
    gc.collect()  # the stand-in classes leave __subclasses__ once collected


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.moto_compat", description=__doc__)
    parser.add_argument("--port", type=int, default=0, help="0 (the default): any free port")
    args = parser.parse_args(argv)
    from moto.server import ThreadedMotoServer

    install()
    server = ThreadedMotoServer(ip_address="localhost", port=args.port, verbose=False)
    server.start()
    print(f"http://localhost:{server.get_host_and_port()[1]}", flush=True)
    try:
        sys.stdin.read()  # serve until whoever started the server closes its stdin or exits
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
