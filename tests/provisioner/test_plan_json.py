"""plan.json: round trip through Plan.from_json and byte-identical output for the same inputs."""

from __future__ import annotations

import json

from provisioner import Goal, Limits, Plan, load_catalog, load_profile, plan_job


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
