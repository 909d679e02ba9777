"""Worker details: CPU share → threads, deadlines on PS waits, secrets, inconsistent shards."""

from __future__ import annotations

import os
from typing import Any

import pytest

from functions import worker
from functions.aws import resolve_secret

from .conftest import endpoints
from .helpers import worker_event


def test_threads_follow_the_memory_cpu_share_not_the_core_count() -> None:
    cores = os.cpu_count() or 1
    assert worker.torch_threads(128) == 1
    assert worker.torch_threads(1769) == 1
    assert worker.torch_threads(3538) == min(2, cores)
    assert worker.torch_threads(10240) == min(5, cores)


def test_a_missing_peer_ends_the_invocation_at_the_deadline(
    bucket: str, digits: Any, ps_cluster: Any
) -> None:
    """Rank 1 never comes: rank 0's pull waits ps_timeout_s, then it returns, not done."""
    digits(2)
    servers = ps_cluster(2, 2, learning_rate=0.1, momentum=0.9)
    event = worker_event(0, 2, endpoints(servers), bucket, ps_timeout_s=0.5)
    result = worker.handler(event)
    assert result["stopped"] == "ps_timeout" and not result["done"]
    assert result["iteration"] == 0 and result["next_event"]["start_iteration"] == 0


def test_worker_with_other_hyper_parameters_is_refused(
    bucket: str, digits: Any, ps_cluster: Any
) -> None:
    from functions import wire

    digits(2)
    servers = ps_cluster(2, 2, learning_rate=0.1, momentum=0.9)
    event = worker_event(0, 2, endpoints(servers), bucket, learning_rate=0.5)
    with pytest.raises(wire.RemoteError, match="learning rate/momentum"):
        worker.handler(event)


def test_secret_ref_errors_are_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LDNN_NOT_SET", raising=False)
    with pytest.raises(ValueError) as info:
        resolve_secret("env:LDNN_NOT_SET")
    assert str(info.value) == (
        "secret_ref 'env:LDNN_NOT_SET': environment variable 'LDNN_NOT_SET' is unset or empty"
    )
    monkeypatch.setenv("LDNN_SET", "abc")
    assert resolve_secret("env:LDNN_SET") == b"abc"


def test_one_long_wait_does_not_make_the_worker_stop_early() -> None:
    steady = [0.1] * 8
    # One iteration that waited 5 s for a peer's re-invocation: still about one iteration held back.
    assert worker.next_iteration_estimate_s(steady + [5.0]) == pytest.approx(0.2)
    assert worker.next_iteration_estimate_s([5.0] + steady) == pytest.approx(0.2)
    # Iterations that are all slow are reserved for in full.
    assert worker.next_iteration_estimate_s([3.0] * 9) == pytest.approx(6.0)
    assert worker.next_iteration_estimate_s([]) == 0.0


@pytest.mark.parametrize("iterations", [3, 300])
def test_the_return_value_stays_bounded_and_the_losses_go_to_s3(
    s3: Any, bucket: str, digits: Any, ps_cluster: Any, iterations: int
) -> None:
    """Step Functions refuses a task result over 256 KiB: a link of any length returns the same
    few hundred bytes, and its record in S3 holds every [iteration, loss]."""
    import json

    digits(1)
    servers = ps_cluster(1, 1, learning_rate=0.1, momentum=0.9)
    result = worker.handler(worker_event(0, 1, endpoints(servers), bucket, iterations=iterations))
    assert result["done"] and "losses" not in result
    assert len(json.dumps(result)) < 4096
    assert result["record_key"] == "job-test/runs/run-test/links/rank-00000-link-00000.json"
    record = json.loads(s3.get_object(Bucket=bucket, Key=result["record_key"])["Body"].read())
    assert [it for it, _ in record["losses"]] == list(range(iterations))
    assert record["loss"] == result["loss"] == record["losses"][-1][1]


def test_the_first_sync_wait_is_start_up_not_communication() -> None:
    """Waiting at the first sync is waiting for the other workers' cold starts: it goes to
    sync_s (start-up) only; in both, the report counted it twice."""
    import time
    import types

    class SlowPeers:
        def start(self, params: Any) -> int:
            time.sleep(0.05)  # stands for the peers' cold starts; only a lower bound is asserted
            return 7

    run = types.SimpleNamespace(exchange=SlowPeers(), timings=worker.Timings(),
                                flat=types.SimpleNamespace(params=types.SimpleNamespace(
                                    numpy=lambda: None)))  # fmt: skip
    assert worker._resync(run) == 7  # type: ignore[arg-type]
    assert run.timings.wait_s == 0.0 and run.timings.sync_s >= 0.05
    timings = run.timings.as_dict()
    assert timings["communication_s"] == 0.0 and timings["startup_s"] >= 0.05


def test_a_links_first_wait_for_its_peers_is_kept_apart_and_not_reserved_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A warm worker whose first pull of a link waits 3 s for a newcomer's cold start: the wait
    is recorded as first_wait_s (and in wait_s), and the time it reserves for the next iteration
    is the iteration without it, so its link does not end after one iteration."""
    import types

    from functions.exchange import StepTiming

    waits = iter([3.0, 0.001, 0.001])

    class Exchange:
        def step(self, iteration: int, grads: Any, params: Any) -> StepTiming:
            return StepTiming(wait_s=next(waits))

    monkeypatch.setattr(worker, "compute_step", lambda run, iteration: 0.5)
    array = types.SimpleNamespace(numpy=lambda: None)
    run = worker._Run(task=None, flat=types.SimpleNamespace(grads=array, params=array),  # type: ignore[arg-type]
                      loss_fn=None, exchange=Exchange(), x=None, y=None)  # type: ignore[arg-type]  # fmt: skip
    for iteration in range(3):
        worker._step(run, iteration)
    assert run.timings.first_wait_s == 3.0 and run.timings.wait_s == pytest.approx(3.002)
    assert max(run.iteration_s) < 1.0  # the 3 s wait is in none of them
    assert worker.next_iteration_estimate_s(run.iteration_s) < 1.0
