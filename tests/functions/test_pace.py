"""The pace function (functions/pace.py) against a local S3 (moto): it reads the segment's link
records by key, times the run from the event's ISO times, returns replan_step.next_pace's pace
and writes the decision record; a missing record or a bad event is one line."""

from __future__ import annotations

import copy
import dataclasses
import datetime
import json
from typing import Any

import pytest

from functions import pace
from functions.runs import link_record_key, replan_record_key
from provisioner import Goal, Limits, plan_job
from provisioner.catalog import CATALOG_DIR, catalog_from_dict, read_data_json
from provisioner.envelope import default_envelope
from provisioner.plan import Plan
from provisioner.profile import profile_from_dict
from provisioner.replan_spec import ReplanSpec
from provisioner.replan_step import initial_pace, next_pace
from tests.provisioner.conftest import profile_dict
from tests.provisioner.test_replan import at_pace
from tests.provisioner.test_replan_step import link_record

RUN_ID, STARTED = "run-1", "2025-01-01T00:00:00Z"
DEADLINE_S = 600.0


@pytest.fixture(scope="module")
def bundle() -> dict[str, Any]:
    """The plan (with its envelope), profile and catalog documents as the stacks pass them; the
    catalog's 75 s links chain the run in several links."""
    _, doc = read_data_json("lambda-2025", CATALOG_DIR, "catalog")
    doc = copy.deepcopy(doc)
    doc["lambda"]["invocation_timeout_s"]["value"] = 75
    prof_doc = profile_dict(model_bytes=400_000, epochs=16, max_global_batch=256)
    profile, catalog = profile_from_dict(prof_doc), catalog_from_dict(doc)
    plan = plan_job(profile, catalog, Goal(deadline_s=DEADLINE_S), Limits(), "job",
                    alternatives=0, frontier_points=0).plan  # fmt: skip
    envelope = default_envelope(plan, catalog, min_memory_mb=profile.min_memory_mb)
    plan = dataclasses.replace(plan, replan=ReplanSpec(envelope, 1.0))
    assert plan.invocations_per_worker >= 3
    return {"plan": plan.to_dict(), "profile": prof_doc, "catalog": doc}


def _event(bundle: dict[str, Any], bucket: str, links: list, elapsed_s: float) -> dict[str, Any]:
    start = datetime.datetime.fromisoformat(STARTED)
    now = (start + datetime.timedelta(seconds=elapsed_s)).isoformat().replace("+00:00", "Z")
    p = pace_of(bundle)
    return {"pace": p, "links": links, "run_id": RUN_ID, "run_started": STARTED, "now": now,
            "job_id": "job", "artifacts_bucket": bucket, "bundle": bundle}  # fmt: skip


def pace_of(bundle: dict[str, Any]) -> dict[str, Any]:
    return initial_pace(Plan.from_dict(bundle["plan"]))


def _first_link(bundle: dict[str, Any], speed: float) -> tuple[list, Any, Any]:
    plan = Plan.from_dict(bundle["plan"])
    progress = at_pace(plan, catalog_from_dict(bundle["catalog"]), 1, speed)
    per = plan.iterations_per_invocation
    links = [{"done": False, "start_iteration": per, "invocation": 1}] * plan.n_workers
    return links, progress, link_record(progress, per)


def test_the_handler_reads_the_records_decides_and_writes_the_decision(s3, bucket, bundle) -> None:
    links, progress, record = _first_link(bundle, 1.5)
    plan = Plan.from_dict(bundle["plan"])
    for rank in range(plan.n_workers):
        key = link_record_key("job", RUN_ID, rank, 0)
        s3.put_object(Bucket=bucket, Key=key, Body=json.dumps(record).encode())
    elapsed_s = float(round(progress.elapsed_s))  # whole seconds: the ISO times' difference exactly
    event = _event(bundle, bucket, links, elapsed_s)
    out = pace.handler(event)
    # what the pure step says for the same records and elapsed time (the ISO times' difference)
    expected, decision = next_pace(
        event["pace"], links, [[record]] * plan.n_workers, elapsed_s, plan,
        profile_from_dict(bundle["profile"]), catalog_from_dict(bundle["catalog"]),
    )  # fmt: skip
    assert out == expected and decision is not None
    assert out["invocation"] == 1 and out["start_iteration"] == plan.iterations_per_invocation
    body = s3.get_object(Bucket=bucket, Key=replan_record_key("job", RUN_ID, 1))["Body"].read()
    assert json.loads(body) == json.loads(json.dumps(decision))
    assert decision["status"] == "behind" and decision["link"] == 1
    assert out["switches"] == 1 and decision["action"] == "switch"


def test_a_missing_link_record_is_one_line(s3, bucket, bundle) -> None:
    links, progress, record = _first_link(bundle, 1.0)
    s3.put_object(Bucket=bucket, Key=link_record_key("job", RUN_ID, 0, 0),
                  Body=json.dumps(record).encode())  # fmt: skip
    with pytest.raises(pace.PaceError) as err:
        pace.handler(_event(bundle, bucket, links, progress.elapsed_s))
    missing = link_record_key("job", RUN_ID, 1, 0)
    assert str(err.value) == f"pace: link record s3://{bucket}/{missing}: NoSuchKey"
    assert "replan/" not in str(s3.list_objects_v2(Bucket=bucket).get("Contents"))


def test_a_stall_reads_and_writes_nothing(s3, bucket, bundle) -> None:
    links = [{"done": False, "start_iteration": 0, "invocation": 1}]
    out = pace.handler(_event(bundle, bucket, links, 10.0))
    assert out["stalls"] == 1 and "Contents" not in s3.list_objects_v2(Bucket=bucket)


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"now": "soon"}, "pace: now 'soon': expected an ISO-8601 time string"),
        ({"now": "2025-01-01T00:01:00"}, "expected a time zone"),
        ({"run_id": "a b"}, "run id 'a b'"),
        ({"links": []}, "no link results"),
        ({"bundle": {"plan": {}}}, "pace: bundle: "),
        (None, "pace: event lacks bundle"),
    ],
)
def test_a_bad_event_is_one_line(bucket, bundle, change, match) -> None:
    links = [{"done": False, "start_iteration": 1, "invocation": 1}]
    event = _event(bundle, bucket, links, 10.0)
    if change is None:
        del event["bundle"]
    else:
        event.update(change)
    with pytest.raises(pace.PaceError, match=match) as err:
        pace.handler(event)
    assert "\n" not in str(err.value)
