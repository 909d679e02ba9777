"""The synthesized Step Functions definition, run offline on the real handlers.

The training stack's state machine is taken from the template exactly as CloudFormation would
get it, its intrinsics resolved to local names, and interpreted (tests/functions/asl.py) with
its Lambda tasks dispatched to the real prepare, worker and finalize handlers, moto S3 and
in-process PS shards: the paths, result selectors, re-invocation loop and catch routes that
`cdk deploy` ships are what trains here.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from emulator.asl import Interpreter, StatesError, resolve_cfn
from emulator.definition import shards_by_instance
from functions import datasets, finalize, network, ps_health, s3sync, worker
from functions.ps.server import ParameterServer
from functions.task import WorkerTask
from provisioner import cli
from provisioner.plan import Plan
from stacks.events import PS_PORT
from stacks.network import INTERFACE_ENDPOINTS
from tests.stacks.conftest import make_plan
from tests.stacks.test_stacks import DIGITS, build, training_machine

from .conftest import SECRET_ENV
from .helpers import CountdownContext, reference_params

ACCOUNT = "123456789012"
INVOKE = "arn:aws:states:::lambda:invoke"
EC2 = "arn:aws:states:::aws-sdk:ec2:"


def _plan(iterations: int) -> Plan:
    base = make_plan()
    training = dataclasses.replace(
        base.training, model="mlp", local_batch=16, global_batch=32, iterations=iterations,
        checkpoint_every_iterations=10,
    )  # fmt: skip
    return dataclasses.replace(base, job="sfn", n_workers=2, ps_count=2, memory_mb=1769,
                               training=training)  # fmt: skip


def _resolver(shard_of_instance: dict[str, int], vpc: dict[str, str]) -> Any:
    def resolve(intrinsic: dict[str, Any]) -> str:
        """CloudFormation values as the deployed account would give them; PS hosts by shard."""
        pseudo = {"AWS::Partition": "aws", "AWS::AccountId": ACCOUNT, "AWS::Region": "us-east-1"}
        if intrinsic.get("Ref") in pseudo:
            return pseudo[intrinsic["Ref"]]
        if "Fn::GetAtt" in intrinsic:
            logical_id, attribute = intrinsic["Fn::GetAtt"]
            assert attribute == "Arn", intrinsic
            return f"arn:aws:lambda:us-east-1:{ACCOUNT}:function:{logical_id}"
        output = intrinsic["Fn::GetStackOutput"]["OutputName"]
        if "JobSecret" in output:
            return f"env:{SECRET_ENV}"
        for part, value in (("NetworkEndpoints", vpc["group"]), ("Subnet", vpc["subnet"]),
                            ("NetworkVpc", vpc["vpc"])):  # fmt: skip
            if part in output:
                return value
        (shard,) = [k for lid, k in shard_of_instance.items() if lid in output]
        return f"ps{shard}.internal" if "PrivateIp" in output else f"i-{shard}"

    return resolve


NO_VPC = {"vpc": "vpc-0", "subnet": "subnet-0", "group": "sg-0"}


def _definition(plan: Plan, vpc: dict[str, str] = NO_VPC) -> dict[str, Any]:
    _, templates = build(plan, DIGITS)
    ps = templates.get("ps")  # none for a plan that syncs through S3
    shard_of_instance = shards_by_instance(ps.to_json()) if ps else {}
    machine = training_machine(templates["training"])
    text = resolve_cfn(machine["Properties"]["DefinitionString"],
                       _resolver(shard_of_instance, vpc))  # fmt: skip
    definition: dict[str, Any] = json.loads(text)
    return definition


Checks = int | tuple[int, ...]


class LocalAws:
    """The AWS side of the tasks: EC2 start/stop recorded, Lambda invokes run the handlers here
    (the network function against moto's EC2)."""

    def __init__(self, servers: list[ParameterServer], worker_checks: Checks) -> None:
        self.hosts = {f"ps{k}.internal:{PS_PORT}": f"127.0.0.1:{s.address[1]}"
                      for k, s in enumerate(servers)}  # fmt: skip
        # Iteration checks each link's context allows: one figure for every link, or one per
        # link of a worker (the last repeats).
        self.worker_checks = worker_checks if isinstance(worker_checks, tuple) else (worker_checks,)
        self.ec2: list[tuple[str, list[str]]] = []
        self.invocations: dict[int, int] = {}
        self.fail_workers = False
        self.network: list[tuple[str, list[str]]] = []  # (action, services) per invoke

    def tasks(self) -> dict[str, Any]:
        return {
            f"{EC2}startInstances": lambda p: self.ec2.append(("start", p["InstanceIds"])) or {},
            f"{EC2}stopInstances": lambda p: self.ec2.append(("stop", p["InstanceIds"])) or {},
            INVOKE: self.invoke,
        }

    def invoke(self, params: dict[str, Any]) -> dict[str, Any]:
        function = params["FunctionName"].rsplit(":", 1)[-1]
        event = dict(params["Payload"])
        if "ps_endpoints" in event:  # the VPC's private addresses, as seen from this machine
            event["ps_endpoints"] = [self.hosts.get(e, e) for e in event["ps_endpoints"]]
        if function.startswith("RunNetworkFunction"):
            result = network.handler(event, CountdownContext(calls=10**6))
            prefix = "com.amazonaws.us-east-1."
            self.network.append((event["action"], [n.removeprefix(prefix)
                                                   for n in result["services"]]))  # fmt: skip
        elif function.startswith("PsWaitFunction"):
            result = ps_health.wait_handler(event, CountdownContext(calls=10**6))
        elif function.startswith("PrepareFunction"):
            result = datasets.prepare_handler(event)
        elif function.startswith("WorkerFunction"):
            link = self.invocations.get(event["rank"], 0)
            self.invocations[event["rank"]] = link + 1
            if self.fail_workers:
                raise RuntimeError("worker crashed")
            checks = self.worker_checks[min(link, len(self.worker_checks) - 1)]
            result = worker.handler(event, CountdownContext(calls=checks))
        elif function.startswith("FinalizeFunction"):
            result = finalize.handler(event)
        else:
            raise AssertionError(f"unexpected function {function}")
        return {"StatusCode": 200, "Payload": result}


def _moto_vpc(moto_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, dict[str, str]]:
    """The PS stack's VPC, subnet and endpoint group in moto's EC2, which the network function
    reaches as it reaches EC2 in Lambda (boto3's service endpoint variable)."""
    import boto3

    monkeypatch.setenv("AWS_ENDPOINT_URL_EC2", moto_endpoint)
    ec2 = boto3.client("ec2")
    vpc = ec2.create_vpc(CidrBlock="10.42.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.42.0.0/20")["Subnet"]["SubnetId"]
    group = ec2.create_security_group(GroupName=f"endpoints-{vpc}", Description="endpoints",
                                      VpcId=vpc)["GroupId"]  # fmt: skip
    return ec2, {"vpc": vpc, "subnet": subnet, "group": group}


def live_endpoints(ec2: Any, vpc: dict[str, str]) -> list[str]:
    found = ec2.describe_vpc_endpoints(Filters=[{"Name": "vpc-id", "Values": [vpc["vpc"]]}])
    return [e["ServiceName"] for e in found["VpcEndpoints"]
            if e["State"].lower() not in network.GONE]  # fmt: skip


@pytest.fixture()
def deployed(s3: Any, shard_cache: Any, ps_cluster: Any, moto_endpoint: str,
             monkeypatch: pytest.MonkeyPatch) -> Any:  # fmt: skip
    """The job's buckets, VPC and PS shards, named as the stacks name them."""

    def make(plan: Plan, worker_checks: Checks) -> tuple[LocalAws, dict[str, Any], str]:
        # `<job>-<purpose>-<account>`, as stacks.grants.job_bucket names them.
        dataset, artifacts = (f"{plan.job}-{kind}-{ACCOUNT}" for kind in ("dataset", "artifacts"))
        for name in (dataset, artifacts):
            s3.create_bucket(Bucket=name)
        servers = ps_cluster(
            plan.ps_count, plan.n_workers, job_id=plan.job,
            learning_rate=plan.training.learning_rate, momentum=plan.training.momentum,
            artifacts_bucket=artifacts, checkpoint_prefix=f"{plan.job}/checkpoints",
            checkpoint_every=plan.training.checkpoint_every_iterations,
        )  # fmt: skip
        ec2, vpc = _moto_vpc(moto_endpoint, monkeypatch)
        aws = LocalAws(servers, worker_checks)
        aws.vpc_endpoints = lambda: live_endpoints(ec2, vpc)  # type: ignore[attr-defined]
        return aws, _definition(plan, vpc), artifacts

    return make


def test_the_deployed_state_machine_trains_to_the_end_and_stops_the_ps(
    s3: Any, deployed: Any, tmp_path: Path
) -> None:
    plan = _plan(iterations=24)
    aws, definition, artifacts = deployed(plan, worker_checks=10)
    machine = Interpreter(definition, aws.tasks())
    machine.run({}, name="exec-1")
    assert machine.trace.end == "TrainingFinished"
    assert aws.ec2 == [("start", ["i-0", "i-1"]), ("stop", ["i-0", "i-1"])]
    # The run opened the plan's interface endpoints before the PS started, and closed them.
    services = sorted(plan.interface_endpoints or INTERFACE_ENDPOINTS)
    assert aws.network == [("open", services), ("close", services)]
    assert machine.trace.states.index("OpenNetwork") < machine.trace.states.index("StartPs")
    assert aws.vpc_endpoints() == []
    # 10 iterations per link: every worker went round the re-invocation loop three times.
    assert aws.invocations == {0: 3, 1: 3}
    assert machine.trace.states.count("WorkerDone") == 6
    report = json.loads(s3.get_object(Bucket=artifacts, Key="sfn/report.json")["Body"].read())
    assert report["iteration"] == plan.training.iterations and report["complete"]
    assert s3.head_object(Bucket=artifacts, Key="sfn/model.pt")["ContentLength"] > 0
    # Finalize reports the workers in AWS too (the Map's results are not passed to it): every
    # link of both ranks, read from the records the links wrote.
    assert report["run_id"] == "exec-1"
    assert [len(w["links"]) for w in report["workers"]] == [3, 3]
    assert [w["iterations_run"] for w in report["workers"]] == [24, 24]
    assert all(link["losses_recorded"] == 10 for w in report["workers"] for link in w["links"][:2])
    _calibrates_from_the_aws_report(report, plan, tmp_path)


def _calibrates_from_the_aws_report(report: dict[str, Any], plan: Plan, tmp_path: Path) -> None:
    """`python -m provisioner calibrate report.json --plan plan.json` on the report finalize
    wrote: the rate refitted at Lambda's share of the plan's memory is the straggler's samples
    over its compute, summed over its links' own timings."""
    (tmp_path / "report.json").write_text(json.dumps(report))
    (tmp_path / "plan.json").write_text(plan.to_json())
    out = tmp_path / "refit.json"
    argv = ["calibrate", str(tmp_path / "report.json"), "--plan", str(tmp_path / "plan.json"),
            "--out", str(out), "--catalog-out", str(tmp_path / "override.json")]  # fmt: skip
    assert cli.run(argv) == 0
    computes = [sum(link["timings"]["compute_s"] for link in w["links"]) for w in report["workers"]]
    expected = 24 * plan.training.local_batch / max(computes)
    points = json.loads(out.read_text())["training_rate"][plan.arch]["points"]
    at_plan = [p for p in points if p["vcpu_share"] == round(plan.memory_mb / 1769, 4)]
    assert at_plan and at_plan[0]["samples_per_s"] == pytest.approx(expected, abs=0.05)


STARTED = "2026-05-01T10:00:00Z"
PS_STATES = {"OpenNetwork", "StartPs", "WaitForPs", "StopPs", "CloseNetwork",
             "StopPsAfterFailure", "CloseNetworkAfterFailure"}  # fmt: skip


def _s3_plan(n_workers: int, reducers: int, iterations: int) -> Plan:
    """The PS plan turned into one that syncs through S3, as the planner emits it."""
    base = _plan(iterations)
    batch = n_workers * base.training.local_batch
    training = dataclasses.replace(base.training, global_batch=batch)
    return dataclasses.replace(base, n_workers=n_workers, sync="s3", reducers=reducers,
                               ps_count=0, ps_type="", interface_endpoints=(),
                               training=training)  # fmt: skip


@pytest.mark.parametrize(("n", "k"), [(2, 1), (3, 3)])
def test_the_deployed_state_machine_trains_through_s3_to_the_end(
    s3: Any, deployed: Any, n: int, k: int
) -> None:
    """No PS, no network: the workers exchange through S3 across re-invocations, finalize
    reads the reducers' checkpoints, and the run's parameters are single-process SGD's."""
    plan = _s3_plan(n, k, iterations=24)
    run = f"exec-s3-{n}-{k}"  # the S3 server outlives the test: its own exchange per case
    aws, definition, artifacts = deployed(plan, worker_checks=10)
    assert not PS_STATES & set(definition["States"])
    machine = Interpreter(definition, aws.tasks())
    machine.run({}, name=run, start_time=STARTED)
    assert machine.trace.end == "TrainingFinished"
    assert not PS_STATES & set(machine.trace.states)
    assert aws.ec2 == [] and aws.network == []
    # 10 iterations per link: every worker went round the re-invocation loop three times.
    assert aws.invocations == dict.fromkeys(range(n), 3)
    report = json.loads(s3.get_object(Bucket=artifacts, Key="sfn/report.json")["Body"].read())
    assert report["iteration"] == plan.training.iterations and report["complete"]
    assert report["ps_checkpoint_acks"] is None  # no PS was asked
    assert report["test_samples"] > 0 and 0 < report["test_accuracy"] <= 1
    assert report["test_loss"] > 0
    assert s3.head_object(Bucket=artifacts, Key="sfn/model.pt")["ContentLength"] > 0
    assert [w["iterations_run"] for w in report["workers"]] == [24] * n
    assert [len(w["links"]) for w in report["workers"]] == [3] * n
    # The parameters finalize assembled are one process's SGD on the global batch.
    payload = definition["States"]["Finalize"]["Parameters"]["Payload"]
    event = {key: value for key, value in payload.items() if not key.endswith(".$")}
    event |= {"run_id": run, "run_started": STARTED}
    iteration, got = finalize.assemble_parameters(s3, WorkerTask.from_event(event))
    want = reference_params(s3, event["dataset_bucket"], event, plan.training.iterations)
    assert iteration == plan.training.iterations
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    # The reducers deleted every gradient; each partition keeps its last two states.
    base = s3sync.exchange_base(event["exchange_prefix"], plan.job, run)
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=artifacts, Prefix=f"{base}/")
    keys = [obj["Key"] for page in pages for obj in page.get("Contents", [])]
    assert [key for key in keys if "/grad/" in key] == []
    assert s3sync.states_by_part(keys, k) == dict.fromkeys(range(k), {23, 24})


def test_a_second_execution_on_the_same_stacks_trains_every_iteration_again(
    s3: Any, deployed: Any
) -> None:
    """A re-run (a redeploy, or start-execution after the PS was stopped) on the PS that
    served the first run: it used to adopt the PS's final iteration and train nothing."""
    plan = _plan(iterations=24)
    aws, definition, artifacts = deployed(plan, worker_checks=10)
    Interpreter(definition, aws.tasks()).run({}, name="first", start_time="2026-05-01T10:00:00Z")
    second = Interpreter(definition, aws.tasks())
    second.run({}, name="second", start_time="2026-05-01T11:00:00Z")
    assert second.trace.end == "TrainingFinished"
    assert aws.invocations == {0: 6, 1: 6}  # three links per worker in each run
    report = json.loads(s3.get_object(Bucket=artifacts, Key="sfn/report.json")["Body"].read())
    assert report["run_id"] == "second"
    assert [w["iterations_run"] for w in report["workers"]] == [24, 24]


def test_links_that_do_not_advance_twice_in_a_row_fail_the_run_instead_of_looping(
    deployed: Any,
) -> None:
    """A time limit hit before the first step: the link returns at its own start iteration.
    The loop used to re-invoke it forever, up to 15 minutes of Lambda per link; now the
    second such link in a row fails the run."""
    plan = _plan(iterations=24)
    aws, definition, _ = deployed(plan, worker_checks=0)
    machine = Interpreter(definition, aws.tasks())
    with pytest.raises(StatesError):
        machine.run({})
    assert "LinkMadeNoProgress" in machine.trace.states
    assert machine.trace.states[-3:] == ["StopPsAfterFailure", "CloseNetworkAfterFailure",
                                         "TrainingFailed"]  # fmt: skip
    assert aws.invocations == {0: 2, 1: 2}  # the stalled link re-invoked once, no third
    assert aws.vpc_endpoints() == []  # a failed run bills no endpoint-hours either


def test_a_cold_link_that_only_started_is_re_invoked_and_the_run_finishes(
    s3: Any, deployed: Any
) -> None:
    """The first link of each worker spends its budget starting (no iteration check passes);
    the next ones train. A run on a slow machine or a short limit used to fail right there."""
    plan = _plan(iterations=24)
    aws, definition, artifacts = deployed(plan, worker_checks=(0, 10, 0, 10))
    machine = Interpreter(definition, aws.tasks())
    machine.run({})
    assert machine.trace.end == "TrainingFinished"
    assert "RetryStalledLink" in machine.trace.states
    # Per worker: stall, 10, stall again (allowed: the link before it advanced), 10, 4.
    assert aws.invocations == {0: 5, 1: 5}
    report = json.loads(s3.get_object(Bucket=artifacts, Key="sfn/report.json")["Body"].read())
    assert [w["iterations_run"] for w in report["workers"]] == [24, 24]


def test_a_worker_past_its_link_cap_fails_the_run(deployed: Any) -> None:
    """Every link advances, but by one iteration each: past the plan's cap the run fails."""
    plan = dataclasses.replace(_plan(iterations=24), max_links_per_worker=4)
    aws, definition, _ = deployed(plan, worker_checks=1)
    machine = Interpreter(definition, aws.tasks())
    with pytest.raises(StatesError):
        machine.run({})
    assert "TooManyLinks" in machine.trace.states
    assert aws.invocations == {0: 4, 1: 4} and aws.ec2[-1] == ("stop", ["i-0", "i-1"])
    # The run ends in the generic TrainingFailed; the trace keeps the cause the Map caught, so
    # the emulator's error can name it (it said only "A step failed; see the execution history").
    state, _, cause = machine.trace.caught[0]
    assert state == "Workers" and "A worker ran 4 links, the plan's bound" in cause


def test_the_interpreter_holds_the_definition_to_the_payload_limit() -> None:
    """A task result over 256 KiB fails as in AWS (what every [iteration, loss] of a 12,000
    iteration link did), and no States.ALL catch takes it."""
    definition = {"StartAt": "Big", "States": {"Big": {
        "Type": "Task", "Resource": "big", "End": True,
        "Catch": [{"ErrorEquals": ["States.ALL"], "Next": "Caught"}]},
        "Caught": {"Type": "Succeed"}}}  # fmt: skip
    losses = [[it, 2.302585092994046] for it in range(12_000)]
    with pytest.raises(StatesError, match="States.DataLimitExceeded"):
        Interpreter(definition, {"big": lambda _: {"losses": losses}}).run({})


def test_the_interpreter_tells_a_present_field_from_a_missing_one() -> None:
    """Choice's IsPresent, which the worker loop's stall rule reads (`$.stalled`)."""
    definition = {"StartAt": "Seen", "States": {
        "Seen": {"Type": "Choice", "Default": "No",
                 "Choices": [{"Variable": "$.a.b", "IsPresent": True, "Next": "Yes"}]},
        "Yes": {"Type": "Pass", "Result": "yes", "End": True},
        "No": {"Type": "Pass", "Result": "no", "End": True}}}  # fmt: skip
    assert Interpreter(definition, {}).run({"a": {"b": False}}) == "yes"
    assert Interpreter(definition, {}).run({"a": {}}) == "no"
    assert Interpreter(definition, {}).run({}) == "no"


def test_a_worker_that_keeps_failing_stops_the_ps_and_fails_the_run(deployed: Any) -> None:
    plan = _plan(iterations=24)
    aws, definition, _ = deployed(plan, worker_checks=10)
    aws.fail_workers = True
    machine = Interpreter(definition, aws.tasks())
    with pytest.raises(StatesError):
        machine.run({})
    assert machine.trace.states[-3:] == ["StopPsAfterFailure", "CloseNetworkAfterFailure",
                                         "TrainingFailed"]  # fmt: skip
    assert aws.ec2[-1] == ("stop", ["i-0", "i-1"]) and aws.vpc_endpoints() == []
    # The definition retries a failed link twice before the run gives up; the first worker out
    # of retries fails the Map, which stops the other's retries (as AWS stops its iterations).
    assert max(aws.invocations.values()) == 3 and set(aws.invocations.values()) <= {1, 2, 3}
    assert "Finalize" not in machine.trace.states


def test_the_emulator_plays_the_definitions_retry_policy() -> None:
    """`make demo` plays the state machine's role: it must retry a failed link as often."""
    from emulator.options import Options

    workers = _definition(_plan(iterations=24))["States"]["Workers"]
    run_worker = workers["ItemProcessor"]["States"]["RunWorker"]
    (task_failed,) = [r for r in run_worker["Retry"] if r["ErrorEquals"] == ["States.TaskFailed"]]
    assert Options().max_attempts == 1 + task_failed["MaxAttempts"]
    assert workers["MaxConcurrency"] == 2  # all n at once: BSP needs every worker running


def _stopper(plan: Plan, vpc: dict[str, str]) -> dict[str, Any]:
    """The run-ended rule's state machine, resolved like the training one."""
    _, templates = build(plan, DIGITS)
    shard_of_instance = shards_by_instance(templates["ps"].to_json())
    (machine,) = [m for lid, m in templates["training"].find_resources(
        "AWS::StepFunctions::StateMachine").items() if "StopPsWhenRunEnds" in lid]  # fmt: skip

    def resolve(intrinsic: dict[str, Any]) -> str:
        if "Ref" in intrinsic and intrinsic["Ref"].startswith("Orchestration"):
            return "arn:aws:states:us-east-1:123456789012:stateMachine:training"
        return str(_resolver(shard_of_instance, vpc)(intrinsic))

    definition: dict[str, Any] = json.loads(
        resolve_cfn(machine["Properties"]["DefinitionString"], resolve)
    )
    return definition


@pytest.mark.parametrize("running", [0, 1])
def test_a_run_that_ends_without_its_own_steps_gets_its_ps_stopped_and_endpoints_closed(
    deployed: Any, running: int
) -> None:
    """Timed out, stopped or failed where no catch runs: the rule's state machine stops the PS
    and closes the endpoints, unless another run of the job is going (a redeploy's)."""
    plan = _plan(iterations=24)
    aws, training, _ = deployed(plan, worker_checks=10)
    vpc_id = training["States"]["OpenNetwork"]["Parameters"]["Payload"]["vpc_id"]
    vpc = {"vpc": vpc_id, "subnet": "", "group": ""}
    # A run opened its endpoints and was stopped before it could close them.
    opener = Interpreter({"StartAt": "Open", "States": {"Open": {**training["States"][
        "OpenNetwork"], "End": True, "Catch": []}}}, aws.tasks())  # fmt: skip
    opener.run({"run": {"run_id": "stopped-run"}})
    assert len(aws.vpc_endpoints()) == len(INTERFACE_ENDPOINTS)
    listed = {"Executions": [{"executionArn": "new-run"}] * running}
    tasks = {**aws.tasks(), "arn:aws:states:::aws-sdk:sfn:listExecutions": lambda _p: listed}
    machine = Interpreter(_stopper(plan, vpc), tasks)
    machine.run({})
    if running:
        assert machine.trace.end == "LeavePsRunning"
        assert aws.ec2 == [] and len(aws.vpc_endpoints()) == len(INTERFACE_ENDPOINTS)
    else:
        assert aws.ec2 == [("stop", ["i-0", "i-1"])] and aws.vpc_endpoints() == []
