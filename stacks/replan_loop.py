"""The training state machine's re-planning loop, for a plan that re-plans (`plan.replan`).

One Distributed Map per link instead of one that chains every worker's links: `PaceStart`
sets the pace (`$.pace`, provisioner/replan_step.py's `initial_pace`) to the plan's own
values → `Links` runs one link of each of `$.pace.n_workers` workers, each on the function of
its memory variant → `PaceCheck` (the pace function) reads the boundary's link records, checks
the pace and, when the run is behind, switches to a re-plan inside the envelope →
`PaceVerdict`: done → the rest of the run; past the link cap or a second stall in a row →
fail through the run's own failure path (a PS plan stops its instances and closes its
endpoints first), as a worker of a plan that runs as it is would; otherwise `Links` again with
the new pace. Every count and memory a re-plan may take is synthesized here, so a switch needs no
deploy: the Map's concurrency is the envelope's ceiling and its Choice knows every variant's
function.

The pace function gets the plan, its profile and its catalog file in its payload (the
bundle), as they were at synth: a re-plan is the planner's own search on the same figures.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from aws_cdk import Duration, JsonNull
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from provisioner.catalog import CATALOG_DIR, read_data_json
from provisioner.plan import Plan
from provisioner.profile import PROFILE_DIR
from provisioner.replan_step import initial_pace
from provisioner.runaway import LINK_RETRIES
from stacks.events import PACE_EVENT_KEYS, replan_event_base
from stacks.worker_loop import RUN_FROM_STATE, invoke

PACE_MEMORY_MB = 1024  # numpy and the planner's search; no torch
PACE_TIMEOUT_S = 60  # one exact search on the envelope's few configurations
STALLS_TO_FAIL = 2  # a stalled boundary runs the same event once more (a cold link may stall)

# A link's result, per rank: what the pace check needs of it (the full record is in S3).
LINK_RESULT = {
    "done.$": "$.Payload.done",
    "start_iteration.$": "$.Payload.next_event.start_iteration",
    "invocation.$": "$.Payload.next_event.invocation",
}


def with_nulls(value: Any) -> Any:
    """`value` (JSON data) for a state's Result or Parameters: jsii drops a None member, so each
    becomes CDK's JsonNull, which renders as null (a catalog's last price tier's `null` bound, the
    pace's `segment.plan`, are data)."""
    if value is None:
        return JsonNull.INSTANCE
    if isinstance(value, dict):
        return {key: with_nulls(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [with_nulls(item) for item in value]
    return value


def plan_documents(plan: Plan) -> tuple[dict[str, Any], dict[str, Any]]:
    """(profile JSON, catalog JSON) the plan was made from, read by name as the app reads them
    (profiles/<workload>.json, catalog/<catalog>.json). A document the name does not find (a
    profile given by path: the plan keeps only its name) is {}: `cdk synth` passes both as the
    context named them (app.py), and the emulator's pace step puts in the run's `--workload`."""

    def by_name(name: str, directory: Any, kind: str) -> dict[str, Any]:
        try:
            document: dict[str, Any] = read_data_json(name, directory, kind)[1]
        except ValueError:
            return {}
        return document

    return (by_name(plan.workload, PROFILE_DIR, "profile"),
            by_name(plan.catalog, CATALOG_DIR, "catalog"))  # fmt: skip


def pace_item_selector(worker_event: Mapping[str, Any]) -> dict[str, Any]:
    """The Map item's event: the worker event's fixed keys, the run, the item's rank and every
    key the pace sets (provisioner/replan_step.py)."""
    paced = {f"{key}.$": f"$.pace.{key}" for key in PACE_EVENT_KEYS}
    return {"event": {**replan_event_base(dict(worker_event)), **RUN_FROM_STATE,
                      "rank.$": "$$.Map.Item.Value", **paced}}  # fmt: skip


def _variant_links(scope: Construct, workers: Mapping[int, lambda_.IFunction],
                   timeout_s: int) -> sfn.Choice:  # fmt: skip
    """One link on the function of the event's memory: a Choice over the variants."""
    by_memory = sfn.Choice(scope, "LinkMemory")
    for mb, function in sorted(workers.items()):
        run = invoke(
            scope, f"RunWorkerMb{mb}", function, timeout_s=timeout_s,
            payload=sfn.TaskInput.from_json_path_at("$.event"), result_selector=LINK_RESULT,
        )  # fmt: skip
        # A crashed link is retried from the same event (as a plan's that runs as it is).
        run.add_retry(errors=["States.TaskFailed"], max_attempts=LINK_RETRIES,
                      interval=Duration.seconds(10), backoff_rate=2)  # fmt: skip
        by_memory.when(sfn.Condition.number_equals("$.event.memory_mb", mb), run)
    return by_memory.otherwise(
        sfn.Fail(scope, "NoSuchMemoryVariant", error="NoSuchMemoryVariant",
                 cause="The pace chose a memory no worker function of the envelope has.")
    )  # fmt: skip


def guard(scope: Construct, name: str, cause: str, on_failure: sfn.IChainable) -> sfn.Pass:
    """A runaway guard that fails the run: a Pass named for the error that leaves the state as a
    Catch would (`{"Error", "Cause"}`) and goes on to the run's failure path, so a PS plan's
    instances are stopped by the run itself, not later by the rule on a failed execution."""
    failing = sfn.Pass(scope, name, result=sfn.Result.from_object({"Error": name, "Cause": cause}),
                       result_path="$")  # fmt: skip
    failing.next(on_failure)
    return failing


class ReplanLoop:
    """The loop's states, from `start` (PaceStart) to `verdict` (PaceVerdict), whose done branch
    goes to `then` and whose guards go to `on_failure`. Attributes: `start`, `links` (the Map),
    `pace_check`, `verdict`, and `chain`: PaceStart to `then`, to chain on from (`then` is its
    one end)."""

    def __init__(self, scope: Construct, *, plan: Plan,
                 workers: Mapping[int, lambda_.IFunction], pace: lambda_.IFunction,
                 worker_event: Mapping[str, Any], then: sfn.TaskStateBase,
                 on_failure: sfn.IChainable, documents: tuple[dict[str, Any], dict[str, Any]],
                 max_links: int) -> None:  # fmt: skip
        if plan.replan is None:
            raise ValueError(f"plan {plan.job} does not re-plan: it has no envelope")
        variants = set(plan.replan.envelope.memory_variants_mb)
        if set(workers) != variants:
            raise ValueError(f"worker functions at {sorted(workers)} MB; the envelope's "
                             f"variants are {sorted(variants)} MB")  # fmt: skip
        first = sfn.Result.from_object(with_nulls(initial_pace(plan)))
        self.start = sfn.Pass(scope, "PaceStart", result=first, result_path="$.pace")
        self.links = sfn.DistributedMap(
            scope, "Links", items_path="$.pace.ranks",
            max_concurrency=plan.replan.envelope.max_workers,
            item_selector=pace_item_selector(worker_event), result_path="$.links",
        )  # fmt: skip
        self.links.item_processor(_variant_links(scope, workers, plan.invocation_timeout_s))
        self.pace_check = invoke(
            scope, "PaceCheck", pace, timeout_s=PACE_TIMEOUT_S,
            payload=sfn.TaskInput.from_object(
                with_nulls(pace_payload(plan, worker_event, documents))
            ),
            payload_response_only=True, result_path="$.pace",
        )  # fmt: skip
        cond = sfn.Condition
        self.verdict = (
            sfn.Choice(scope, "PaceVerdict")
            .when(cond.boolean_equals("$.pace.done", True), then)
            # The cap spans segments: a switch keeps counting the links.
            .when(cond.number_greater_than_equals("$.pace.invocation", max_links),
                  guard(scope, "TooManyLinks",
                        f"A worker ran {max_links} links, the plan's bound.", on_failure))
            .when(cond.number_greater_than_equals("$.pace.stalls", STALLS_TO_FAIL),
                  guard(scope, "LinkMadeNoProgress", "Two links in a row ended without "
                        "advancing; see the workers' logs.", on_failure))
            .otherwise(self.links)
        )  # fmt: skip
        self.start.next(self.links).next(self.pace_check).next(self.verdict)
        self.chain = sfn.Chain.custom(self.start, [then], then)


def pace_payload(plan: Plan, worker_event: Mapping[str, Any],
                 documents: tuple[dict[str, Any], dict[str, Any]]) -> dict[str, Any]:  # fmt: skip
    """What the pace function gets at each boundary (functions/pace.py)."""
    profile, catalog = documents
    return {
        "pace.$": "$.pace",
        "links.$": "$.links",
        **RUN_FROM_STATE,
        "now.$": "$$.State.EnteredTime",
        "job_id": plan.job,
        "artifacts_bucket": worker_event["artifacts_bucket"],
        "bundle": {"plan": json.loads(plan.to_json()), "profile": profile, "catalog": catalog},
    }
