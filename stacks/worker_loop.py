"""One worker's links inside the training state machine's Map, one stage's or the only one's.

A worker is re-invoked with its `next_event` until `done` (the 15-minute limit), while each link
advances `start_iteration`. A pipelined plan's Map item is one replica of one stage: a Choice on
the item's stage sets the stage's first event, and a Choice on the event's stage picks the
stage's function for every link. All stages share the link checks, so a stage's links are bound
exactly like a one-stage worker's. Choices and fixed function names only: the emulator's ASL
interpreter (emulator/asl.py) runs it as it is, and each invoke is CDK's LambdaInvoke on one
known function, so the machine's role may invoke exactly those.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from aws_cdk import Duration
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct

from provisioner.runaway import LINK_RETRIES, TASK_MARGIN_S

# The run (functions.runs) as the execution names it, kept in the state at `$.run`.
RUN_FROM_STATE = {"run_id.$": "$.run.run_id", "run_started.$": "$.run.run_started"}


def invoke(scope: Construct, state_id: str, function: lambda_.IFunction, *, timeout_s: int,
           payload: sfn.TaskInput, **kwargs: Any) -> tasks.LambdaInvoke:  # fmt: skip
    """Invoke `function`; the task gives up a margin after the function's own timeout."""
    return tasks.LambdaInvoke(
        scope, state_id, lambda_function=function, payload=payload,
        task_timeout=sfn.Timeout.duration(Duration.seconds(timeout_s + TASK_MARGIN_S)),
        **kwargs,
    )  # fmt: skip


def without_rank(event: dict[str, Any]) -> dict[str, Any]:
    """The event minus `rank`, which each Map item fills in (a key may not appear twice)."""
    return {key: value for key, value in event.items() if key != "rank"}


def _link(scope: Construct, state_id: str, worker: lambda_.IFunction,
          timeout_s: int) -> tasks.LambdaInvoke:  # fmt: skip
    """One link: the worker invoked with `$.event`, its result beside the event."""
    run_worker = invoke(
        scope, state_id, worker, timeout_s=timeout_s,
        payload=sfn.TaskInput.from_json_path_at("$.event"),
        result_selector={"done.$": "$.Payload.done", "event.$": "$.Payload.next_event"},
        result_path="$.link",  # beside the link's own event: did it advance?
    )  # fmt: skip
    # A crashed link is retried from the same event: the worker resumes from its checkpoint.
    run_worker.add_retry(errors=["States.TaskFailed"], max_attempts=LINK_RETRIES,
                         interval=Duration.seconds(10), backoff_rate=2)  # fmt: skip
    return run_worker


def _after_link(scope: Construct, next_link: sfn.IChainable, max_links: int) -> sfn.Choice:
    """Done, failed (past the link cap, or a second stall in a row) or `next_link` again."""
    cond = sfn.Condition
    # A link that did not advance is re-invoked once: a cold link may spend its budget starting
    # and loading, and the next link, warm, skips both. `$.stalled` marks that retry (beside
    # the event, so the worker never sees it); a second stall in a row fails the run, and an
    # advancing link drops the mark (NextLink rebuilds the state from the event alone).
    stalled = (
        sfn.Choice(scope, "StalledBefore")
        .when(cond.is_present("$.stalled"),
              sfn.Fail(scope, "LinkMadeNoProgress", error="LinkMadeNoProgress",
                       cause="Two worker links in a row ended without advancing; see its log."))
        .otherwise(sfn.Pass(scope, "RetryStalledLink",
                            parameters={"event.$": "$.link.event", "stalled": True})
                   .next(next_link))
    )  # fmt: skip
    return (
        sfn.Choice(scope, "WorkerDone")
        # Output just `true`: n full events would hit the Map's 256 KB result limit.
        .when(cond.boolean_equals("$.link.done", True),
              sfn.Succeed(scope, "WorkerFinished", output_path="$.link.done"))
        # Every link counts against the cap, a stalled one's retry included.
        .when(cond.number_greater_than_equals("$.link.event.invocation", max_links),
              sfn.Fail(scope, "TooManyLinks", error="TooManyLinks",
                       cause=f"A worker ran {max_links} links, the plan's bound."))
        .when(cond.number_less_than_equals_json_path("$.link.event.start_iteration",
                                                     "$.event.start_iteration"), stalled)
        .otherwise(sfn.Pass(scope, "NextLink", parameters={"event.$": "$.link.event"})
                   .next(next_link))
    )  # fmt: skip


def worker_loop(scope: Construct, worker: lambda_.IFunction, *, timeout_s: int,
                max_links: int) -> sfn.IChainable:  # fmt: skip
    """A one-stage worker's links, from the item's `$.event`."""
    run_worker = _link(scope, "RunWorker", worker, timeout_s)
    return run_worker.next(_after_link(scope, run_worker, max_links))


def stage_items(stage_count: int, n_workers: int) -> list[dict[str, int]]:
    """The Map's items of a pipelined plan: every replica of every stage, all run at once."""
    return [{"stage": s, "rank": r} for s in range(stage_count) for r in range(n_workers)]


# A pipelined plan's Map item: its stage and replica, and the run its events carry.
STAGE_ITEM_SELECTOR = {
    "stage.$": "$$.Map.Item.Value.stage",
    "rank.$": "$$.Map.Item.Value.rank",
    "run.$": "$.run",
}


def stage_worker_loop(scope: Construct, stages: Sequence[tuple[lambda_.IFunction, dict[str, Any]]],
                      *, timeout_s: int, max_links: int) -> sfn.IChainable:  # fmt: skip
    """A pipelined plan's item: `stages[s]` is stage s's function and its first event (rank 0).

    The item (`STAGE_ITEM_SELECTOR`) names its stage; its first event is that stage's with the
    item's rank and run; every link then goes to the function of the event's `stage.index`.
    """
    cond = sfn.Condition
    links = [_link(scope, f"RunStage{s}Worker", fn, timeout_s) for s, (fn, _) in enumerate(stages)]
    link_stage = sfn.Choice(scope, "LinkStage")
    for s, run_stage in enumerate(links):
        link_stage.when(cond.number_equals("$.event.stage.index", s), run_stage)
    after = _after_link(scope, link_stage, max_links)
    for run_stage in links:
        run_stage.next(after)
    item_stage = sfn.Choice(scope, "ItemStage")
    for s, (_, event) in enumerate(stages):
        first = sfn.Pass(scope, f"Stage{s}FirstEvent", parameters={
            "event": {**without_rank(event), **RUN_FROM_STATE, "rank.$": "$.rank"}})  # fmt: skip
        item_stage.when(cond.number_equals("$.stage", s), first.next(links[s]))
    return item_stage
