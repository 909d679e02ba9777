"""The state machine of a profiling run: prepare a shard, profile each memory size, write it.

Prepare the profile shards → one Parallel branch per memory size (each its own function, so each
is a cold sandbox of that size; they run at once, as AWS Lambda Power Tuning runs its power
values) → finalize assembles the profile and writes it to the artifacts bucket. A size that fails
(e.g. out of memory below the workload's minimum) is caught in its branch and recorded, so the
other sizes still make a profile; finalize fails the run only if none was measured.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aws_cdk import Duration
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct

from provisioner.runaway import TASK_MARGIN_S
from stacks.orchestration import logged_state_machine


def _invoke(scope: Construct, state_id: str, function: lambda_.IFunction, *, timeout_s: int,
            payload: sfn.TaskInput, **kwargs: Any) -> tasks.LambdaInvoke:  # fmt: skip
    return tasks.LambdaInvoke(
        scope, state_id, lambda_function=function, payload=payload,
        task_timeout=sfn.Timeout.duration(Duration.seconds(timeout_s + TASK_MARGIN_S)),
        **kwargs,
    )  # fmt: skip


class ProfileOrchestration(Construct):
    """Attributes: `state_machine`, `log_group`."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        profilers: Mapping[int, lambda_.IFunction],
        profile_events: Mapping[int, dict[str, Any]],
        profile_timeout_s: int,
        prepare: lambda_.IFunction,
        prepare_event: dict[str, Any],
        finalize: lambda_.IFunction,
        finalize_event: dict[str, Any],
        helper_timeout_s: int,
    ) -> None:
        super().__init__(scope, construct_id)
        sizes = sfn.Parallel(self, "MemorySizes", result_path="$.results")
        for memory_mb, function in profilers.items():
            sizes.branch(self._branch(memory_mb, function, profile_events[memory_mb],
                                      profile_timeout_s))  # fmt: skip
        prepare_step = _invoke(
            self, "PrepareDataset", prepare, timeout_s=helper_timeout_s,
            payload=sfn.TaskInput.from_object(prepare_event), result_path=sfn.JsonPath.DISCARD,
        )  # fmt: skip
        finalize_step = _invoke(
            self, "WriteProfile", finalize, timeout_s=helper_timeout_s,
            payload=sfn.TaskInput.from_object(
                {**finalize_event, "results": sfn.JsonPath.list_at("$.results")}),
            result_selector={"profile_uri.$": "$.Payload.profile_uri"},
        )  # fmt: skip
        definition = (
            prepare_step.next(sizes).next(finalize_step)
            .next(sfn.Succeed(self, "ProfileWritten"))
        )  # fmt: skip
        self.log_group, self.state_machine = logged_state_machine(self, definition)

    def _branch(self, memory_mb: int, function: lambda_.IFunction, event: dict[str, Any],
                timeout_s: int) -> sfn.IChainable:  # fmt: skip
        """{"memory_mb": m, "measured": {...}} or, caught, {"memory_mb": m, "error": {...}}."""
        size = sfn.Pass(self, f"Size{memory_mb}", result=sfn.Result.from_object(
            {"memory_mb": memory_mb}))  # fmt: skip
        run = _invoke(
            self, f"Profile{memory_mb}", function, timeout_s=timeout_s,
            payload=sfn.TaskInput.from_object(event),
            result_selector={"memory_mb.$": "$.Payload.memory_mb", "measured.$": "$.Payload"},
        )  # fmt: skip
        # Caught, the branch keeps its {"memory_mb": m} and adds the error beside it.
        run.add_catch(sfn.Pass(self, f"Failed{memory_mb}"), errors=["States.ALL"],
                      result_path="$.error")  # fmt: skip
        return size.next(run)
