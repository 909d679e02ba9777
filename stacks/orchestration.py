"""The state machine that runs one training job, and the custom resource that starts it.

Name the run → open the run's interface endpoints → start the PS instances → prepare the shards
→ wait until every PS shard serves → fan out n workers as a Distributed Map (BSP needs all n
running at once; an inline Map runs at most 40 and shares one 25,000-event history) → each
worker is re-invoked with its `next_event` until `done` (the 15-minute limit) → finalize (final
model + run report) → stop the PS → close the endpoints, so nothing of the job bills by the hour
between runs. Any failure also stops the PS and closes the endpoints before the execution fails.

Runaway bounds (provisioner/runaway.py, priced in the plan): two links in a row that do not
advance `start_iteration` fail the run (one is re-invoked: a cold link may spend its budget
starting), so does a worker past its link cap, and the execution has a timeout. A timed-out or
stopped execution runs no catch, so a rule on its end stops the PS instances and closes the
endpoints unless another run of the job is going (a redeploy stops the old run as the new one
starts).

A pipelined plan runs one function per stage: the Map's items are every replica of every stage,
all at once (stacks/worker_loop.py), and each stage's links are chained and bound as above.

A plan that re-plans runs one Map per link instead, with a pace check between Maps that may
switch the next Map's workers and memory (stacks/replan_loop.py); the bounds and catches stay.

An S3-sync plan has no PS and no endpoints: name the run → prepare → workers → finalize, and a
failure just fails the execution; nothing bills by the hour, so nothing needs stopping when a
run is cut off (its exchange objects expire by the artifacts bucket's lifecycle rule).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aws_cdk import ArnFormat, Duration, Stack
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from aws_cdk import custom_resources as cr
from constructs import Construct

from provisioner.plan import Plan
from stacks.events import RUN_KEYS_FROM_EXECUTION
from stacks.nag import acknowledge_invoking_machine
from stacks.provider_logs import stack_log_group
from stacks.replan_loop import ReplanLoop
from stacks.run_network import PsWait, RunNetwork
from stacks.worker_loop import (
    RUN_FROM_STATE,
    STAGE_ITEM_SELECTOR,
    invoke,
    stage_items,
    stage_worker_loop,
    without_rank,
    worker_loop,
)


def _ec2_call(
    scope: Construct,
    state_id: str,
    action: str,
    *,
    instance_ids: list[str],
    instance_arns: list[str],
) -> tasks.CallAwsService:
    """ec2:StartInstances / StopInstances on exactly the PS instances."""
    return tasks.CallAwsService(
        scope, state_id, service="ec2", action=action,
        parameters={"InstanceIds": instance_ids}, iam_resources=instance_arns,
        iam_action=f"ec2:{action[0].upper()}{action[1:]}", result_path=sfn.JsonPath.DISCARD,
    )  # fmt: skip


@dataclass(frozen=True)
class PsSteps:
    """What a PS plan's run starts, waits for and stops around its workers; an S3-sync plan has
    none of it (no instances, no endpoints)."""

    instance_ids: list[str]
    instance_arns: list[str]
    run_network: RunNetwork
    ps_wait: PsWait


def _stop_ps_after_failure(scope: Construct, ps: PsSteps, failed: sfn.Fail,
                           helper_timeout_s: int) -> tasks.CallAwsService:  # fmt: skip
    """Stop the PS, then close the endpoints (even if the stop failed), then fail."""
    close_after_failure = _close_network(scope, "CloseNetworkAfterFailure", ps.run_network,
                                         helper_timeout_s).add_catch(failed)  # fmt: skip
    stop_after_failure = _ec2_call(
        scope,
        "StopPsAfterFailure",
        "stopInstances",
        instance_ids=ps.instance_ids,
        instance_arns=ps.instance_arns,
    )
    stop_after_failure.add_catch(close_after_failure)
    stop_after_failure.next(close_after_failure).next(failed)
    return stop_after_failure


@dataclass(frozen=True)
class ReplanFunctions:
    """What a plan that re-plans runs its links on (stacks/replan_loop.py): a worker function
    per memory variant of the envelope (MB → function), the pace function, and the plan's
    profile and catalog JSON for the pace function's payload."""

    plan: Plan
    workers: Mapping[int, lambda_.IFunction]
    pace: lambda_.IFunction
    documents: tuple[dict[str, Any], dict[str, Any]]


class TrainingOrchestration(Construct):
    """Attributes: `state_machine`, `log_group`. `ps`: the PS steps of a PS plan; None for an
    S3-sync plan, whose run is name → prepare → workers → finalize (a failure just fails).
    `replan`: a plan that re-plans runs its links in the re-planning loop (stacks/replan_loop.py)
    instead of one Map of chained links; `worker` is then its plan's memory's function."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        n_workers: int,
        worker: lambda_.IFunction | None,
        worker_timeout_s: int,
        worker_event: dict[str, Any],
        prepare: lambda_.IFunction,
        prepare_event: dict[str, Any],
        finalize: lambda_.IFunction,
        helper_timeout_s: int,
        ps: PsSteps | None,
        bounds: tuple[int, int],
        stages: Sequence[tuple[lambda_.IFunction, dict[str, Any]]] = (),
        replan: ReplanFunctions | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        if (worker is None) == (not stages):
            raise ValueError("give one worker (a one-stage plan) or the stages' (a pipelined one)")
        if replan is not None and stages:
            raise ValueError("a pipelined plan does not re-plan: give no re-planning functions")
        max_links, timeout_s = bounds  # provisioner.runaway.plan_bounds
        failed = sfn.Fail(self, "TrainingFailed", cause="A step failed; see the execution history.")
        on_failure = _stop_ps_after_failure(self, ps, failed, helper_timeout_s) if ps else failed
        # The execution's name and start time, read once into the state: every worker event
        # and finalize carry them, so each run checkpoints apart and a newer run's PS refuses
        # a stopped execution's workers.
        name_run = sfn.Pass(self, "NameRun", parameters=RUN_KEYS_FROM_EXECUTION,
                            result_path="$.run")  # fmt: skip
        prepare_step = invoke(
            self, "PrepareDataset", prepare, timeout_s=helper_timeout_s,
            payload=sfn.TaskInput.from_object(prepare_event), result_path=sfn.JsonPath.DISCARD,
        ).add_catch(on_failure)  # fmt: skip
        finalize_step = invoke(
            self, "Finalize", finalize, timeout_s=helper_timeout_s,
            payload=sfn.TaskInput.from_object({**worker_event, **RUN_FROM_STATE}),
            result_path=sfn.JsonPath.DISCARD,
        ).add_catch(on_failure)  # fmt: skip
        # The workers' part of the run, through finalize.
        if replan is not None:
            loop = ReplanLoop(
                self, plan=replan.plan, workers=replan.workers, pace=replan.pace,
                worker_event=worker_event, then=finalize_step, on_failure=on_failure,
                documents=replan.documents,
                max_links=max_links,
            )  # fmt: skip
            for step in (loop.links, loop.pace_check):
                step.add_catch(on_failure)
            run = loop.chain
        else:
            if worker is not None:
                ranks, fan_out = self._workers(
                    worker, worker_event, n_workers, timeout_s=worker_timeout_s,
                    max_links=max_links,
                )  # fmt: skip
            else:
                ranks, fan_out = self._stage_workers(stages, n_workers, timeout_s=worker_timeout_s,
                                                     max_links=max_links)  # fmt: skip
            fan_out.add_catch(on_failure)
            run = ranks.next(fan_out).next(finalize_step)
        if ps is None:
            definition = (
                name_run.next(prepare_step).next(run).next(sfn.Succeed(self, "TrainingFinished"))
            )
        else:
            definition = self._around_ps(ps, on_failure, helper_timeout_s, name_run=name_run,
                                         prepare_step=prepare_step, run=run)  # fmt: skip
        self.log_group, self.state_machine = logged_state_machine(
            self, definition, timeout=Duration.seconds(timeout_s)
        )
        if ps is not None:
            StopPsWhenRunEnds(
                self,
                "StopPsWhenRunEnds",
                training=self.state_machine,
                run_network=ps.run_network,
                helper_timeout_s=helper_timeout_s,
                instance_ids=ps.instance_ids,
                instance_arns=ps.instance_arns,
            )

    def _workers(
        self,
        worker: lambda_.IFunction,
        worker_event: dict[str, Any],
        n_workers: int,
        *,
        timeout_s: int,
        max_links: int,
    ) -> tuple[sfn.Pass, sfn.DistributedMap]:
        """n workers as a Distributed Map, each item's event the worker event with its rank."""
        loop = worker_loop(self, worker, timeout_s=timeout_s, max_links=max_links)
        ranks = sfn.Pass(self, "WorkerRanks", result=sfn.Result.from_array(list(range(n_workers))),
                         result_path="$.ranks")  # fmt: skip
        fan_out = sfn.DistributedMap(
            self, "Workers", items_path="$.ranks", max_concurrency=n_workers,
            item_selector={"event": {**without_rank(worker_event), **RUN_FROM_STATE,
                                     "rank.$": "$$.Map.Item.Value"}},
            result_path=sfn.JsonPath.DISCARD,
        )  # fmt: skip
        fan_out.item_processor(loop)
        return ranks, fan_out

    def _stage_workers(self, stages: Sequence[tuple[lambda_.IFunction, dict[str, Any]]],
                       n_workers: int, *, timeout_s: int,
                       max_links: int) -> tuple[sfn.Pass, sfn.DistributedMap]:  # fmt: skip
        """S·n stage workers as one Distributed Map: every stage of every replica at once (they
        hand activations to each other, so none may wait for another to finish)."""
        loop = stage_worker_loop(self, stages, timeout_s=timeout_s, max_links=max_links)
        items = stage_items(len(stages), n_workers)
        listed = sfn.Pass(self, "WorkerItems", result=sfn.Result.from_array(items),
                          result_path="$.items")  # fmt: skip
        fan_out = sfn.DistributedMap(
            self, "Workers", items_path="$.items", max_concurrency=len(items),
            item_selector=STAGE_ITEM_SELECTOR, result_path=sfn.JsonPath.DISCARD,
        )  # fmt: skip
        fan_out.item_processor(loop)
        return listed, fan_out

    def _around_ps(self, ps: PsSteps, on_failure: sfn.IChainable, helper_timeout_s: int, *,
                   name_run: sfn.Pass, prepare_step: sfn.TaskStateBase,
                   run: sfn.Chain) -> sfn.Chain:  # fmt: skip
        """A PS plan's run: open the endpoints and start the PS before the shards are prepared,
        wait for the PS before the workers (`run`: through finalize), stop it and close the
        endpoints after finalize."""
        ids = {"instance_ids": ps.instance_ids, "instance_arns": ps.instance_arns}
        start_ps = _ec2_call(self, "StartPs", "startInstances", **ids).add_catch(on_failure)
        open_network = invoke(
            self, "OpenNetwork", ps.run_network.function, timeout_s=helper_timeout_s,
            payload=sfn.TaskInput.from_object(ps.run_network.open_event),
            result_path=sfn.JsonPath.DISCARD,
        ).add_catch(on_failure)  # fmt: skip
        wait_ps = invoke(
            self, "WaitForPs", ps.ps_wait.function, timeout_s=helper_timeout_s,
            payload=sfn.TaskInput.from_object(ps.ps_wait.event), result_path=sfn.JsonPath.DISCARD,
        )  # fmt: skip
        # A first boot installs Docker and pulls the image: one more wait before giving up.
        wait_ps.add_retry(errors=["States.TaskFailed"], max_attempts=1)
        wait_ps.add_catch(on_failure)
        return (
            name_run.next(open_network).next(start_ps).next(prepare_step).next(wait_ps)
            .next(run)
            .next(_ec2_call(self, "StopPs", "stopInstances", **ids))
            .next(_close_network(self, "CloseNetwork", ps.run_network, helper_timeout_s))
            .next(sfn.Succeed(self, "TrainingFinished"))
        )  # fmt: skip


def _close_network(
    scope: Construct, state_id: str, run_network: RunNetwork, helper_timeout_s: int
) -> tasks.LambdaInvoke:
    """Delete the job's interface endpoints (every one tagged with the job, whoever made it)."""
    return invoke(
        scope, state_id, run_network.function, timeout_s=helper_timeout_s,
        payload=sfn.TaskInput.from_object(run_network.close_event),
        result_path=sfn.JsonPath.DISCARD,
    )  # fmt: skip


class StopPsWhenRunEnds(Construct):
    """Stops the PS instances and closes the endpoints when a run ends without its own stop step
    (timed out, stopped by a user, or failed where no catch runs, such as
    States.DataLimitExceeded), unless another run of the job is going: a redeploy starts the new
    run before it stops the old one, and the new run needs both. Attribute: `state_machine`."""

    def __init__(self, scope: Construct, construct_id: str, *, training: sfn.StateMachine,
                 instance_ids: list[str], instance_arns: list[str], run_network: RunNetwork,
                 helper_timeout_s: int) -> None:  # fmt: skip
        super().__init__(scope, construct_id)
        running = tasks.CallAwsService(
            self, "RunningExecutions", service="sfn", action="listExecutions",
            parameters={"StateMachineArn": training.state_machine_arn, "StatusFilter": "RUNNING",
                        "MaxResults": 1},
            iam_resources=[training.state_machine_arn], iam_action="states:ListExecutions",
            result_selector={"count.$": "States.ArrayLength($.Executions)"},
        )  # fmt: skip
        stop = _ec2_call(self, "StopPs", "stopInstances", instance_ids=instance_ids,
                         instance_arns=instance_arns)  # fmt: skip
        definition = running.next(
            sfn.Choice(self, "AnotherRunGoing")
            .when(sfn.Condition.number_greater_than("$.count", 0),
                  sfn.Succeed(self, "LeavePsRunning"))
            .otherwise(stop.next(_close_network(self, "CloseNetwork", run_network,
                                                helper_timeout_s)))
        )  # fmt: skip
        _, self.state_machine = logged_state_machine(self, definition)
        acknowledge_invoking_machine(self.state_machine, [run_network.function])
        events.Rule(
            self, "RunEnded",
            description="A training run timed out, was stopped or failed: stop its PS instances",
            event_pattern=events.EventPattern(
                source=["aws.states"], detail_type=["Step Functions Execution Status Change"],
                detail={"status": ["TIMED_OUT", "ABORTED", "FAILED"],
                        "stateMachineArn": [training.state_machine_arn]},
            ),
            targets=[targets.SfnStateMachine(self.state_machine)],
        )  # fmt: skip


class StartOnDeploy(Construct):
    """Starts a run when the stack is created and when the Plan changes; stops it on delete.

    The custom resource's physical id is the execution ARN, so a changed Plan (new sha256) starts
    a new run and CloudFormation then deletes the old resource, which stops the superseded run;
    `cdk destroy` likewise stops a run still going instead of letting it fail against deleted
    functions. Attributes: `resource`, `execution_arn`, `log_group`.
    """

    def __init__(self, scope: Construct, construct_id: str, *, state_machine: sfn.IStateMachine,
                 plan_digest: str) -> None:  # fmt: skip
        super().__init__(scope, construct_id)
        start = cr.AwsSdkCall(
            service="SFN",
            action="startExecution",
            parameters={
                "stateMachineArn": state_machine.state_machine_arn,
                "input": json.dumps({"plan_sha256": plan_digest}),
            },
            physical_resource_id=cr.PhysicalResourceId.from_response("executionArn"),
        )
        stop = cr.AwsSdkCall(
            service="SFN",
            action="stopExecution",
            parameters={"executionArn": cr.PhysicalResourceIdReference(),
                        "cause": "stack updated to a new plan, or destroyed"},
            # A finished run cannot be stopped; that must never block an update or a destroy.
            ignore_error_codes_matching=".*",
        )  # fmt: skip
        machine_name = (
            Stack.of(self)
            .split_arn(state_machine.state_machine_arn, ArnFormat.COLON_RESOURCE_NAME)
            .resource_name
        )
        executions = Stack.of(self).format_arn(
            service="states", resource="execution", resource_name=f"{machine_name}:*",
            arn_format=ArnFormat.COLON_RESOURCE_NAME,
        )  # fmt: skip
        # CDK's provider function would otherwise get a retained log group of its own.
        self.log_group = stack_log_group(self, "Logs")
        self.resource = cr.AwsCustomResource(
            self, "Start", on_create=start, on_update=start, on_delete=stop,
            install_latest_aws_sdk=False, log_group=self.log_group,
            policy=cr.AwsCustomResourcePolicy.from_statements([
                iam.PolicyStatement(actions=["states:StartExecution"],
                                    resources=[state_machine.state_machine_arn]),
                iam.PolicyStatement(actions=["states:StopExecution"], resources=[executions]),
            ]),
        )  # fmt: skip
        self.execution_arn = self.resource.get_response_field("executionArn")


def logged_state_machine(
    scope: Construct, definition: sfn.IChainable, *, timeout: Duration | None = None
) -> tuple[logs.ILogGroup, sfn.StateMachine]:
    """A traced state machine logging every event to the stack's log group (`Logs` in scope)."""
    log_group = stack_log_group(scope, "Logs")
    machine = sfn.StateMachine(
        scope, "StateMachine",
        definition_body=sfn.DefinitionBody.from_chainable(definition),
        tracing_enabled=True, timeout=timeout,
        logs=sfn.LogOptions(destination=log_group, level=sfn.LogLevel.ALL),
    )  # fmt: skip
    return log_group, machine
