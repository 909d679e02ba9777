"""plan.json: round trip through Plan.from_json and byte-identical output for the same inputs."""

from __future__ import annotations

import dataclasses
import json

from provisioner import Goal, Limits, Plan, load_catalog, load_profile, plan_job
from provisioner.pipeline_plan import Pipeline, Stage


def _result() -> object:
    return plan_job(
        load_profile("cifar10-resnet18"),
        load_catalog("lambda-2025"),
        Goal(deadline_s=3600),
        Limits(),
        "job-1",
    )


def test_plan_round_trips_through_json() -> None:
    result = _result()
    text = result.to_json()  # type: ignore[attr-defined]
    assert Plan.from_json(text) == result.plan  # type: ignore[attr-defined]
    doc = json.loads(text)
    assert set(doc) == {"plan", "frontier", "alternatives", "other_sync"}
    assert [Plan.from_dict(a) for a in doc["alternatives"]] == list(result.alternatives)  # type: ignore[attr-defined]


def test_same_inputs_give_the_same_bytes() -> None:
    assert _result().to_json() == _result().to_json()  # type: ignore[attr-defined]


def test_a_pipelined_plan_round_trips_through_its_dict_and_its_json() -> None:
    one_stage = _result().plan  # type: ignore[attr-defined]
    stages = tuple(
        Stage(index=s, first_block=a, stop_block=b,
              block_names=tuple(f"{i}:Block" for i in range(a, b)), memory_mb=1024,
              vcpu_share=0.58, parameter_bytes=1000, memory_needed_mb=900,
              compute_per_micro_batch_s=0.1, boundary_per_micro_batch_s=0.05,
              sync_per_iteration_s=0.2)
        for s, (a, b) in enumerate([(0, 2), (2, 5)])
    )  # fmt: skip
    plan = dataclasses.replace(
        one_stage, pipeline=Pipeline(stages=stages, micro_batches=4, reason="does-not-fit")
    )
    assert Plan.from_dict(plan.to_dict()) == plan
    assert Plan.from_json(plan.to_json()) == plan
    assert "pipeline" in plan.to_dict() and "pipeline" not in one_stage.to_dict()
