"""Runs: a job's second run trains from scratch, and a superseded run's workers are refused.

Before runs existed, checkpoints lived at `<job>/checkpoints` and the PS resumed the newest one:
a re-run (a redeploy, a re-run after the PS was stopped, a replaced instance) started at the
previous run's final iteration, trained nothing and reported success.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from functions import wire, worker
from functions.runs import new_run, parse_run, run_checkpoint_prefix
from functions.task import TaskError, WorkerTask

from .conftest import endpoints
from .helpers import ps_vector, reference_params, run_threads, worker_event

FIRST = {"run_id": "exec-first", "run_started": "2026-03-01T10:00:00.000Z"}
SECOND = {"run_id": "exec-second", "run_started": "2026-03-01T12:30:00.000Z"}
CHECKPOINTED = {"checkpoint_every": 2, "learning_rate": 0.1, "momentum": 0.9}


def _cluster(ps_cluster: Any, bucket: str) -> list[Any]:
    """Two checkpointing shards of a job of two workers, as a deployed PS would run."""
    return ps_cluster(2, 2, artifacts_bucket=bucket, checkpoint_prefix="job/ckpt", **CHECKPOINTED)


def _train(servers: list[Any], bucket: str, iterations: int, run: dict[str, str]) -> list[Any]:
    events = [
        worker_event(r, 2, endpoints(servers), bucket, iterations=iterations, **run)
        for r in range(2)
    ]
    return run_threads(worker.handler, [(e, None) for e in events])


def _assert_trained_from_scratch(results: list[Any], servers: list[Any], s3: Any, bucket: str,
                                 iterations: int) -> None:  # fmt: skip
    assert [r["iterations_run"] for r in results] == [iterations, iterations]
    assert all(r["done"] and r["iteration"] == iterations for r in results)
    event = worker_event(0, 2, endpoints(servers), bucket)
    np.testing.assert_allclose(
        ps_vector(servers), reference_params(s3, bucket, event, iterations), rtol=1e-4, atol=1e-5
    )


def test_a_second_run_on_the_same_ps_trains_every_iteration_again(
    s3: Any, bucket: str, digits: Any, ps_cluster: Any
) -> None:
    """Run 1 trains 8 iterations; run 2 asks for 5: it trains 5 from the initial parameters
    (it used to adopt the PS's iteration 8, run none and report done)."""
    digits(2)
    servers = _cluster(ps_cluster, bucket)
    _train(servers, bucket, 8, FIRST)
    second = _train(servers, bucket, 5, SECOND)
    _assert_trained_from_scratch(second, servers, s3, bucket, 5)
    assert [s.superseded_runs for s in servers] == [1, 1]


def test_a_restarted_ps_restores_only_its_own_runs_checkpoints(
    s3: Any, bucket: str, digits: Any, ps_cluster: Any
) -> None:
    """A replaced or restarted PS instance: run 1's checkpoints (at 8) stay in S3, run 2 on
    fresh shards finds none of its own and trains from 0."""
    digits(2)
    first = _cluster(ps_cluster, bucket)
    _train(first, bucket, 8, FIRST)
    for server in first:
        server.stop()
    fresh = _cluster(ps_cluster, bucket)
    second = _train(fresh, bucket, 5, SECOND)
    assert [s.restored_iteration for s in fresh] == [None, None]
    _assert_trained_from_scratch(second, fresh, s3, bucket, 5)
    listed = s3.list_objects_v2(Bucket=bucket, Prefix="job/ckpt/")["Contents"]
    runs = {obj["Key"].split("/")[2] for obj in listed}
    assert runs == {"exec-first", "exec-second"}  # each run checkpointed under its own id


def test_a_superseded_runs_worker_is_refused(
    s3: Any, bucket: str, digits: Any, ps_cluster: Any
) -> None:
    """StopExecution does not cancel running Lambda invocations: a stopped run's worker that
    reconnects after the new run started must not push into it."""
    digits(2)
    servers = _cluster(ps_cluster, bucket)
    _train(servers, bucket, 2, SECOND)
    late = worker_event(0, 2, endpoints(servers), bucket, iterations=4, **FIRST)
    with pytest.raises(wire.RemoteError, match="run exec-first was superseded by run exec-second"):
        worker.handler(late, None)
    assert all(s.state.iteration == 2 for s in servers)  # the new run's state is untouched


def test_the_newer_run_wins_whatever_the_order_of_ids() -> None:
    older = parse_run("zzz", "2026-03-01T10:00:00Z")
    newer = parse_run("aaa", "2026-03-01T10:00:00.001Z")
    assert older < newer
    assert parse_run("b", "2026-03-01T11:00:00+01:00") == parse_run("b", "2026-03-01T10:00:00Z")


@pytest.mark.parametrize(
    ("run_id", "started", "message"),
    [
        ("", "2026-03-01T10:00:00Z", "run id ''"),
        ("a/b", "2026-03-01T10:00:00Z", "run id 'a/b'"),
        ("x" * 81, "2026-03-01T10:00:00Z", "expected 1-80 letters"),
        ("ok", "yesterday", "run start 'yesterday': expected an ISO-8601 time string"),
        ("ok", "2026-03-01T10:00:00", "expected a time zone"),
        ("ok", 17, "run start 17"),
    ],
)
def test_bad_runs_are_refused_in_one_line(run_id: str, started: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_run(run_id, started)


def test_a_worker_event_without_a_run_is_refused() -> None:
    event = worker_event(0, 1, ["127.0.0.1:1"], "b")
    del event["run_id"]
    with pytest.raises(TaskError, match="missing required key 'run_id'"):
        WorkerTask.from_event(event)
    with pytest.raises(TaskError, match="'run_id'/'run_started': run start 'now'"):
        WorkerTask.from_event({**worker_event(0, 1, ["127.0.0.1:1"], "b"), "run_started": "now"})


def test_checkpoints_and_local_runs_are_named_per_run() -> None:
    import datetime

    assert run_checkpoint_prefix("job/checkpoints/", "exec-1") == "job/checkpoints/exec-1"
    when = datetime.datetime(2026, 3, 1, 10, 0, 0, 123456, tzinfo=datetime.UTC)
    run_id, started = new_run(when, "42")
    assert (run_id, started) == ("run-20260301T100000123456Z-42", "2026-03-01T10:00:00.123456Z")
    assert parse_run(run_id, started).started_s == when.timestamp()
