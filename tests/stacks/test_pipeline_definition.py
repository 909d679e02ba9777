"""A pipelined plan's synthesized state machine, run by the emulator's ASL interpreter
(emulator/asl.py) on stand-in functions: every replica of every stage runs at once, each link
goes to its own stage's function, and links chain and are bound as a one-stage worker's.

The stand-ins record what they were invoked with; the first link of every item waits on a
barrier of S·r parties, so a Map that ran fewer at once could never finish.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from aws_cdk.assertions import Template

from emulator.asl import Interpreter, StatesError, resolve_cfn
from tests.stacks.pipeline_plans import pipelined_plan
from tests.stacks.test_pipeline_stacks import stage_function_ids
from tests.stacks.test_s3_sync import build_app, templates_of
from tests.stacks.test_stacks import training_machine

INVOKE = "arn:aws:states:::lambda:invoke"
BARRIER_DEADLINE_S = 60.0  # only a Map that holds items back ever waits this long


def local_definition(template: Template) -> dict[str, Any]:
    """The DefinitionString with each function ARN as `lambda:<logical id>`, the rest plain."""

    def resolve(intrinsic: dict[str, Any]) -> str:
        if "Fn::GetAtt" in intrinsic:
            return f"lambda:{intrinsic['Fn::GetAtt'][0]}"
        if intrinsic.get("Ref") == "AWS::Partition":
            return "aws"
        return "TOKEN"

    text = resolve_cfn(training_machine(template)["Properties"]["DefinitionString"], resolve)
    return json.loads(text)  # type: ignore[no-any-return]


class StandIns:
    """Stage functions that finish after `links` links, each advancing 10 iterations; every
    other function (prepare, finalize, the PS steps) answers at once."""

    def __init__(self, stage_ids: list[str], replicas: int, links: int) -> None:
        self.stage_of = {f"lambda:{lid}": s for s, lid in enumerate(stage_ids)}
        self.links = links
        self.barrier = threading.Barrier(len(stage_ids) * replicas, timeout=BARRIER_DEADLINE_S)
        self.calls: list[tuple[int, dict[str, Any]]] = []
        self.lock = threading.Lock()

    def invoke(self, params: dict[str, Any]) -> dict[str, Any]:
        stage = self.stage_of.get(params["FunctionName"])
        if stage is None:
            return {"Payload": {}}
        event = params["Payload"]
        with self.lock:
            self.calls.append((stage, event))
        if event["invocation"] == 0:
            self.barrier.wait()
        nxt = {**event, "invocation": event["invocation"] + 1,
               "start_iteration": event["start_iteration"] + 10}  # fmt: skip
        return {"Payload": {"done": nxt["invocation"] >= self.links, "next_event": nxt}}


@pytest.mark.parametrize("stages,sync", [(2, "ps"), (3, "s3")])
def test_every_replica_of_every_stage_runs_at_once_and_links_go_to_their_stage(
    stages: int, sync: str
) -> None:
    plan = pipelined_plan(stages, sync=sync, n_workers=3)
    _, stacks = build_app(plan)
    training = templates_of(stacks)["training"]
    stands = StandIns(stage_function_ids(training, stages), plan.n_workers, links=2)
    ec2 = {f"arn:aws:states:::aws-sdk:ec2:{a}": lambda _p: {}
           for a in ("startInstances", "stopInstances")}  # fmt: skip
    interpreter = Interpreter(local_definition(training), {INVOKE: stands.invoke, **ec2})
    interpreter.run({}, name="exec-1")
    assert interpreter.trace.end == "TrainingFinished"
    assert not stands.barrier.broken
    seen = sorted((s, e["stage"]["index"], e["rank"], e["invocation"]) for s, e in stands.calls)
    assert seen == [(s, s, r, i) for s in range(stages) for r in range(plan.n_workers)
                    for i in range(2)]  # fmt: skip
    for stage, event in stands.calls:
        assert event["run_id"] == "exec-1"
        assert event["memory_mb"] == plan.pipeline.stages[stage].memory_mb  # type: ignore[union-attr]


def test_a_stage_past_the_link_cap_fails_the_run() -> None:
    """The cap holds per item, whatever its stage: a stage that never finishes is stopped."""
    plan = pipelined_plan(2, sync="s3", n_workers=1)
    _, stacks = build_app(plan)
    training = templates_of(stacks)["training"]
    stands = StandIns(stage_function_ids(training, 2), plan.n_workers, links=10**6)
    interpreter = Interpreter(local_definition(training), {INVOKE: stands.invoke})
    with pytest.raises(StatesError, match="A step failed"):
        interpreter.run({}, name="exec-2")
    assert any(state == "Workers" for state, _, _ in interpreter.trace.caught)
    assert "TooManyLinks" in interpreter.trace.states
