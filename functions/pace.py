"""The pace function: the state machine's check between two link Maps of a run that re-plans.

IO only. It reads the segment's link records by key (no LIST: the pace names every rank and
invocation it needs), takes the run's elapsed time from the event's ISO times (the state's entry
less the execution's start), calls provisioner.replan_step.next_pace with the bundle's plan,
profile and catalog, writes the decision record beside the link records and returns the new pace
(`$.pace`). A missing record or a bad event fails the task with one line (States.TaskFailed).
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Mapping
from typing import Any

from functions.aws import naming_s3_failures, s3_client
from functions.runs import link_record_key, parse_run, replan_record_key
from provisioner.catalog import catalog_from_dict
from provisioner.plan import Plan
from provisioner.profile import profile_from_dict
from provisioner.replan_step import next_pace, records_wanted

EVENT_KEYS = ("pace", "links", "run_id", "run_started", "now", "job_id", "artifacts_bucket",
              "bundle")  # fmt: skip


class PaceError(RuntimeError):
    """The pace check cannot run: one line naming what is missing or wrong."""


def elapsed_s(run_started: Any, now: Any, run_id: str) -> float:
    """Seconds from the run's start to `now` (both ISO-8601 with a time zone)."""
    start = parse_run(run_id, run_started).started_s
    try:
        when = datetime.datetime.fromisoformat(str(now))
    except ValueError:
        raise PaceError(f"pace: now {now!r}: expected an ISO-8601 time string") from None
    if when.tzinfo is None:
        raise PaceError(f"pace: now {now!r}: expected a time zone (e.g. a trailing Z)")
    return max(0.0, when.timestamp() - start)


def read_records(
    s3: Any, bucket: str, job_id: str, run_id: str, wanted: list[list[int]]
) -> list[list[dict[str, Any]]]:
    """Each rank's link records of the invocations `wanted` (rank i's at index i)."""
    from botocore.exceptions import ClientError

    out = []
    for rank, invocations in enumerate(wanted):
        mine = []
        for invocation in invocations:
            key = link_record_key(job_id, run_id, rank, invocation)
            try:
                body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
            except ClientError as err:
                code = err.response.get("Error", {}).get("Code", "?")
                raise PaceError(f"pace: link record s3://{bucket}/{key}: {code}") from None
            mine.append(json.loads(body))
        out.append(mine)
    return out


def _bundle(event: Mapping[str, Any]) -> tuple[Plan, Any, Any]:
    bundle = event["bundle"]
    try:
        plan = Plan.from_dict(bundle["plan"])
        return plan, profile_from_dict(bundle["profile"]), catalog_from_dict(bundle["catalog"])
    except (KeyError, TypeError, ValueError) as err:
        raise PaceError(f"pace: bundle: {err}") from None


def handler(event: Mapping[str, Any], context: Any = None) -> dict[str, Any]:
    missing = [k for k in EVENT_KEYS if k not in event]
    if missing:
        raise PaceError(f"pace: event lacks {', '.join(missing)}")
    pace, links = event["pace"], event["links"]
    run_id, job_id, bucket = str(event["run_id"]), str(event["job_id"]), event["artifacts_bucket"]
    try:
        elapsed = elapsed_s(event["run_started"], event["now"], run_id)
        wanted = records_wanted(pace, links)
    except (KeyError, TypeError, ValueError) as err:
        raise PaceError(str(err)) from None
    plan, profile, catalog = _bundle(event)
    s3 = s3_client()
    with naming_s3_failures():
        records = read_records(s3, bucket, job_id, run_id, wanted)
        new, decision = next_pace(pace, links, records, elapsed, plan, profile, catalog)
        if decision is not None:
            key = replan_record_key(job_id, run_id, int(new["invocation"]))
            s3.put_object(Bucket=bucket, Key=key, Body=json.dumps(decision).encode())
    return new
