"""Runs: one execution of a job, named in every worker event, HELLO and checkpoint key.

A job's stacks outlive its runs (a redeploy, a re-run after the PS was stopped, a replaced PS
instance), so "the newest checkpoint of the job" is not enough to resume from: it may be the
previous run's final iteration. Each run therefore checkpoints under its own prefix, and a PS
serves one run at a time, the one that started last.
"""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass

RUN_ID = re.compile(r"[A-Za-z0-9_.-]{1,80}")  # a Step Functions execution name fits


@dataclass(frozen=True, order=True)
class Run:
    """One execution of the job. Checkpoints live under its id, and a run that started later
    supersedes it: the PS serves one run at a time, so a stopped execution's workers (Step
    Functions' StopExecution does not cancel running Lambda invocations) are refused, and a new
    run never resumes the previous run's final iteration."""

    started_s: float  # first: runs order by their start, then by id
    id: str

    def __str__(self) -> str:
        return self.id


def parse_run(run_id: object, started: object) -> Run:
    """A run from its id and ISO-8601 start (Step Functions' `$$.Execution.StartTime`);
    raises ValueError naming the bad value."""
    if not isinstance(run_id, str) or not RUN_ID.fullmatch(run_id):
        raise ValueError(f"run id {run_id!r}: expected 1-80 letters, digits, '-', '_' or '.'")
    if not isinstance(started, str):
        raise ValueError(f"run start {started!r}: expected an ISO-8601 time string")
    try:
        when = datetime.datetime.fromisoformat(started)
    except ValueError:
        raise ValueError(f"run start {started!r}: expected an ISO-8601 time string") from None
    if when.tzinfo is None:
        raise ValueError(f"run start {started!r}: expected a time zone (e.g. a trailing Z)")
    return Run(when.timestamp(), run_id)


def run_checkpoint_prefix(base: str, run_id: str) -> str:
    """Where one run's checkpoints go: under the job's checkpoint prefix, by run id."""
    return f"{base.rstrip('/')}/{run_id}" if base else run_id


def link_record_key(job_id: str, run_id: str, rank: int, invocation: int) -> str:
    """Where a worker link's full result (losses and timings) goes in the artifacts bucket.

    The link returns only a bounded summary: Step Functions refuses a task result over 256 KiB
    (States.DataLimitExceeded), which every [iteration, loss] of a long link would pass. A
    retried link writes the same key again, so each link has one record.
    """
    return f"{links_prefix(job_id, run_id)}rank-{rank:05d}-link-{invocation:05d}.json"


def links_prefix(job_id: str, run_id: str) -> str:
    """The folder of one run's link records (ends in '/')."""
    return f"{runs_prefix(job_id)}/{run_id}/links/"


def replan_record_key(job_id: str, run_id: str, invocation: int) -> str:
    """Where the pace check after link `invocation` writes its decision record (keep or switch,
    with its story and figures), beside the run's link records: the report reads them."""
    return f"{runs_prefix(job_id)}/{run_id}/replan/{invocation:05d}.json"


def runs_prefix(job_id: str) -> str:
    """The job's per-run records (not checkpoints: workers may write here, the PS there)."""
    return f"{job_id}/runs"


def new_run(now: datetime.datetime, tag: str) -> tuple[str, str]:
    """(run id, ISO start) for a run not started by Step Functions (the emulator's); `tag`
    tells runs that start in the same microsecond apart (e.g. a process id)."""
    now = now.astimezone(datetime.UTC)
    return f"run-{now:%Y%m%dT%H%M%S%fZ}-{tag}", now.isoformat().replace("+00:00", "Z")
