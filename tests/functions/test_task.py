"""WorkerTask: the event parsed once, validated with one-line errors, round-tripped."""

from __future__ import annotations

import dataclasses

import pytest

from functions.task import TaskError, WorkerTask

from .helpers import worker_event


def _event(**overrides: object) -> dict[str, object]:
    event = worker_event(1, 2, ["127.0.0.1:9000", "127.0.0.1:9001"], "b")
    event.update(overrides)
    return event


def test_round_trip_and_next_event() -> None:
    event = _event(orchestrator_note="kept")
    task = WorkerTask.from_event(event)
    assert task.ps_endpoints == ("127.0.0.1:9000", "127.0.0.1:9001")
    assert WorkerTask.from_event(task.to_event()) == task
    nxt = task.next_task(5)
    assert (nxt.start_iteration, nxt.invocation) == (5, 1)
    assert nxt == dataclasses.replace(task, start_iteration=5, invocation=1)
    assert nxt.to_event()["orchestrator_note"] == "kept"
    assert (
        task.safety_margin_s == 0.0
        and WorkerTask.from_event(
            {k: v for k, v in event.items() if k != "safety_margin_s"}
        ).safety_margin_s
        == 30.0
    )


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"rank": 2}, "worker event key 'rank' = 2: expected 0..1"),
        ({"rank": True}, "worker event key 'rank' = True: expected an integer"),
        ({"local_batch": "8"}, "worker event key 'local_batch' = '8': expected an integer"),
        ({"momentum": 1.0}, "worker event key 'momentum' = 1.0: expected 0 <= momentum < 1"),
        (
            {"ps_endpoints": "h:1"},
            "worker event key 'ps_endpoints' = 'h:1': expected a list of strings",
        ),
        (
            {"ps_endpoints": ["nohost"]},
            "worker event key 'ps_endpoints': bad PS endpoint "
            "'nohost': expected 'host:port' with port 1-65535",
        ),
        ({"memory_mb": 64}, "worker event key 'memory_mb' = 64: expected an integer >= 128"),
        ({"sync": "tcp"}, "worker event key 'sync' = 'tcp': expected 'ps' or 's3'"),
        (
            {"sync": "s3", "reducers": 0, "exchange_prefix": "x"},
            "worker event key 'reducers' = 0: expected an integer from 1 to n_workers (2)"
            " (sync 's3')",
        ),
        (
            {"sync": "s3", "reducers": 3, "exchange_prefix": "x"},
            "worker event key 'reducers' = 3: expected an integer from 1 to n_workers (2)"
            " (sync 's3')",
        ),
        (
            {"sync": "s3", "reducers": 1, "exchange_prefix": ""},
            "worker event key 'exchange_prefix' = '': expected a non-empty S3 key prefix"
            " (sync 's3')",
        ),
        (
            {"sync": "s3", "reducers": 1, "exchange_prefix": "/"},
            "worker event key 'exchange_prefix' = '/': expected a non-empty S3 key prefix"
            " (sync 's3')",
        ),
    ],
)
def test_bad_values_name_the_key_and_what_is_accepted(
    overrides: dict[str, object], message: str
) -> None:
    with pytest.raises(TaskError) as info:
        WorkerTask.from_event(_event(**overrides))
    assert str(info.value) == message


def test_missing_key() -> None:
    event = _event()
    del event["job_id"]
    with pytest.raises(TaskError, match="^worker event is missing required key 'job_id'$"):
        WorkerTask.from_event(event)


def test_an_s3_event_needs_no_ps_and_no_secret() -> None:
    task = WorkerTask.from_event(
        _event(sync="s3", reducers=2, exchange_prefix="x", ps_endpoints=[], secret_ref="")
    )
    assert (task.sync, task.reducers, task.ps_endpoints, task.secret_ref) == ("s3", 2, (), "")
    assert WorkerTask.from_event(task.to_event()) == task
