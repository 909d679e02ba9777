"""Sync mode "s3": the pure parts (partitions, keys, back-off, the update), then n workers
exchanging through a moto S3 == one process with the global batch, resumed and killed runs,
clean-up, request counts, finalize."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
import torch

from functions import finalize, s3sync, worker
from functions.ps.config import PSConfig
from functions.ps.state import ShardState
from functions.s3sync import S3Exchange
from functions.task import WorkerTask

from .helpers import link_losses, reference_params, run_threads, worker_event

PREFIX = "exchange"
BASE = f"{PREFIX}/job-test/run-test"  # exchange_base of every helper event


def s3_event(rank: int, n: int, k: int, bucket: str, **overrides: Any) -> dict[str, Any]:
    """A worker event in sync mode s3 (no PS endpoints, no secret)."""
    return worker_event(
        rank,
        n,
        [],
        bucket,
        sync="s3",
        reducers=k,
        exchange_prefix=PREFIX,
        secret_ref="",
        **overrides,
    )


def exchange_keys(s3: Any, bucket: str) -> list[str]:
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=f"{BASE}/")
    return [obj["Key"] for page in pages for obj in page.get("Contents", [])]


def final_params(s3: Any, event: dict[str, Any]) -> tuple[int, np.ndarray]:
    """The parameters as finalize reads them: the reducers' checkpoints."""
    return finalize.assemble_parameters(s3, WorkerTask.from_event(event))


def assert_cleaned_up(s3: Any, bucket: str, k: int, iterations: int) -> None:
    """No gradient left, and only the last two states of each partition."""
    keys = exchange_keys(s3, bucket)
    assert [key for key in keys if "/grad/" in key] == []
    states = s3sync.states_by_part(keys, k)
    assert states == {j: {iterations - 1, iterations} for j in range(k)}


# -- pure parts -----------------------------------------------------------------------------
@pytest.mark.parametrize(("total", "parts"), [(10, 3), (5, 5), (7, 1), (3, 4), (1000, 7)])
def test_partitions_cover_the_vector_as_array_split_does(total: int, parts: int) -> None:
    bounds = s3sync.partition_bounds(total, parts)
    chunks = np.array_split(np.arange(total), parts)
    assert [hi - lo for lo, hi in bounds] == [len(c) for c in chunks]
    assert bounds[0][0] == 0 and bounds[-1][1] == total
    assert all(a[1] == b[0] for a, b in zip(bounds, bounds[1:], strict=False))


def test_partitions_need_at_least_one_part() -> None:
    with pytest.raises(ValueError, match="^parts 0: expected at least 1$"):
        s3sync.partition_bounds(10, 0)


def test_key_layout() -> None:
    base = s3sync.exchange_base("/exchange/", "job", "run-1")
    assert base == "exchange/job/run-1"
    assert s3sync.grad_key(base, 12, 3, 8, 7) == "exchange/job/run-1/grad/0000000012/003/0008/0007"
    assert s3sync.state_key(base, 12, 3) == "exchange/job/run-1/state/0000000012/003"


def test_resume_iteration_is_the_newest_every_partition_has() -> None:
    keys = [s3sync.state_key(BASE, t, j) for t, j in [(4, 0), (5, 0), (3, 1), (4, 1), (9, 9)]]
    keys.append(s3sync.grad_key(BASE, 5, 1, 2, 0))
    states = s3sync.states_by_part(keys, 2)
    assert states == {0: {4, 5}, 1: {3, 4}}  # partition 9 is not one of the 2
    assert s3sync.resume_iteration(states) == 4
    assert s3sync.resume_iteration({0: {0}, 1: set()}) is None  # a fresh run, state 0 half made
    assert s3sync.resume_iteration({}) is None


def test_stale_keys_are_a_partitions_old_gradients_and_states() -> None:
    keys = [
        s3sync.grad_key(BASE, 3, 0, 2, 1),  # stale: partition 0 is at state 5
        s3sync.grad_key(BASE, 5, 0, 2, 1),  # the current iteration's: kept
        s3sync.grad_key(BASE, 3, 1, 2, 1),  # another partition's
        s3sync.state_key(BASE, 3, 0),  # stale
        s3sync.state_key(BASE, 4, 0),  # one of the two kept
        s3sync.state_key(BASE, 5, 0),
        "other/grad/0000000001/000/0000",  # another run's
    ]
    assert s3sync.stale_keys(keys, BASE, 0, 5) == [keys[0], keys[3]]


def test_update_is_the_ps_update_and_torch_sgd() -> None:
    """Reducer arithmetic == a PS shard's (bit for bit) == torch.optim.SGD (float tolerance)."""
    rng = np.random.default_rng(0)
    n, size, lr, m = 3, 1000, 0.05, 0.8
    init = rng.standard_normal(size, dtype=np.float32)
    params, scaled = init.copy(), np.zeros(size, np.float32)
    shard = ShardState(
        PSConfig(
            job_id="j", shard=0, shards=1, workers=n, secret=b"s", learning_rate=lr, momentum=m
        )
    )
    with shard.cond:  # ShardState's callers hold its condition
        shard.adopt(size, init, np.zeros(size, np.float32), 0)
    param = torch.nn.Parameter(torch.from_numpy(init.copy()))
    opt = torch.optim.SGD([param], lr=lr, momentum=m)
    for it in range(4):
        grads = [rng.standard_normal(size, dtype=np.float32) for _ in range(n)]
        total = np.zeros(size, np.float32)
        for g in grads:
            total += g
        s3sync.momentum_step(params, scaled, total, learning_rate=lr, momentum=m, workers=n)
        with shard.cond:
            for rank, grad in enumerate(grads):
                shard.add_gradient(rank, it, grad.copy())
        param.grad = torch.from_numpy(np.mean(grads, axis=0, dtype=np.float32))
        opt.step()
    np.testing.assert_array_equal(params, shard.params)
    np.testing.assert_allclose(params, param.detach().numpy(), rtol=1e-5, atol=1e-6)


# -- training through S3 --------------------------------------------------------------------
@pytest.fixture()
def list_calls(s3: Any) -> Iterator[list[str]]:
    """Every ListObjectsV2 call made through the (process-wide, cached) S3 client."""
    calls: list[str] = []

    def count(model: Any, **_: Any) -> None:
        calls.append(model.name)

    s3.meta.events.register("before-call.s3.ListObjectsV2", count)
    yield calls
    s3.meta.events.unregister("before-call.s3.ListObjectsV2", count)


@pytest.mark.parametrize(
    ("n", "k", "model"), [(2, 1, "mlp"), (3, 3, "mlp"), (4, 2, "mlp"), (3, 2, "cnn")]
)
def test_s3_workers_match_single_process_sgd(
    s3: Any, bucket: str, digits: Any, list_calls: list[str], n: int, k: int, model: str
) -> None:
    digits(n)
    iterations = 5
    events = [s3_event(r, n, k, bucket, model=model, iterations=iterations) for r in range(n)]
    results = run_threads(worker.handler, [(e, None) for e in events])
    listed = len(list_calls)  # the workers' LISTs (the checks below list too)

    assert all(r["done"] and r["iteration"] == iterations for r in results)
    for r in results:
        assert [it for it, _ in link_losses(s3, bucket, r)] == list(range(iterations))
        assert r["timings"]["push_s"] > 0 and r["timings"]["pull_transfer_s"] > 0
        assert (r["timings"]["reduce_s"] > 0) == (r["rank"] < k)
    iteration, got = final_params(s3, events[0])
    want = reference_params(s3, bucket, events[0], iterations)
    initial = reference_params(s3, bucket, events[0], 0)
    assert iteration == iterations
    assert np.abs(want - initial).max() > 1e-3  # training moved the parameters
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    assert_cleaned_up(s3, bucket, k, iterations)
    # The hot path never lists: two LISTs at each start of a fresh exchange (the exchange, then
    # the checkpoints, whether or not a peer's state 0 came first) and a reducer's checkpoint
    # listing at its end, whatever the iterations.
    assert listed == 2 * n + k
    assert sum(r["s3_requests"]["list"] for r in results) == listed


def test_request_counts_per_iteration(s3: Any, bucket: str, digits: Any) -> None:
    """PUT n·k + k, GET n·k (reducers) + n·k (workers) found, DELETE k per iteration."""
    n, k, iterations = 3, 2, 4
    digits(n)
    events = [s3_event(r, n, k, bucket, iterations=iterations) for r in range(n)]
    results = run_threads(worker.handler, [(e, None) for e in events])
    kinds = results[0]["s3_requests"]
    total = {kind: sum(r["s3_requests"][kind] for r in results) for kind in kinds}
    # Start: state 0 (k PUTs), read by nobody: every worker built the model it was seeded
    # from. End: a checkpoint per reducer (k PUTs).
    assert total["put"] == iterations * (n * k + k) + k + k
    assert total["get"] - total["get_miss"] == iterations * 2 * n * k
    assert total["delete"] == iterations * k
    assert total["list"] == 2 * n + k  # every start's two, every reducer's end's one


def test_a_missing_peer_ends_the_invocation_at_the_deadline(bucket: str, digits: Any) -> None:
    """Rank 1 never comes: reducer 0 waits ps_timeout_s for its gradient, then returns."""
    digits(2)
    result = worker.handler(s3_event(0, 2, 1, bucket, ps_timeout_s=0.5))
    assert result["stopped"] == "ps_timeout" and not result["done"]
    assert result["iteration"] == 0 and result["next_event"]["start_iteration"] == 0


def test_chained_links_end_where_one_link_ends(s3: Any, bucket: str, digits: Any) -> None:
    """Every rank stops after 3 iterations and is invoked again: the chain resumes from S3."""
    n, k, iterations = 3, 2, 8
    digits(n)
    events = [
        s3_event(r, n, k, bucket, iterations=iterations, iterations_per_invocation=3)
        for r in range(n)
    ]

    def chain(event: dict[str, Any]) -> list[dict[str, Any]]:
        links = [worker.handler(event)]
        while not links[-1]["done"]:
            links.append(worker.handler(links[-1]["next_event"]))
        return links

    chains = run_threads(chain, [(e,) for e in events])
    for links in chains:
        assert [link["iteration"] for link in links] == [3, 6, 8]
        assert [link["stopped"] for link in links] == ["iteration_limit"] * 2 + ["done"]
    iteration, got = final_params(s3, events[0])
    assert iteration == iterations
    want = reference_params(s3, bucket, events[0], iterations)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    assert_cleaned_up(s3, bucket, k, iterations)


class Killed(Exception):
    """The injected death of a worker."""


def kill_once(
    monkeypatch: pytest.MonkeyPatch, name: str, when: Callable[..., bool], after: bool
) -> None:
    """S3Exchange.<name> raises Killed the first time `when(self, *args)` holds, before the
    real method runs or after it (in the worker whose `when` it is; the others go on)."""
    real, fired = getattr(S3Exchange, name), threading.Event()

    def patched(self: S3Exchange, *args: Any) -> Any:
        hit = not fired.is_set() and when(self, *args)
        if hit and not after:
            fired.set()
            raise Killed(name)
        result = real(self, *args)
        if hit:
            fired.set()
            raise Killed(name)
        return result

    monkeypatch.setattr(S3Exchange, name, patched)


KILLS = {
    # rank 2 (no partition) has pushed iteration 3, dies before reading state 4
    "worker_after_push": ("_pull", lambda ex, it, _: ex.rank == 2 and it == 4, False),
    # rank 1 has pushed iteration 3, dies before reducing partition 1
    "reducer_before_state": ("_reduce", lambda ex, part, it: ex.rank == 1 and it == 3, False),
    # rank 1 wrote state 4 of partition 1, dies before deleting what it no longer needs
    "reducer_after_state": (
        "_write_state",
        lambda ex, part: ex.rank == 1 and part.iteration == 4,
        True,
    ),
}


@pytest.mark.parametrize("kill", sorted(KILLS))
def test_a_killed_worker_invoked_again_ends_at_the_same_parameters(
    s3: Any, bucket: str, digits: Any, monkeypatch: pytest.MonkeyPatch, kill: str
) -> None:
    n, k, iterations = 3, 2, 7
    digits(n)
    kill_once(monkeypatch, *KILLS[kill])
    events = [s3_event(r, n, k, bucket, iterations=iterations) for r in range(n)]
    deaths: list[str] = []

    def invoke_until_done(event: dict[str, Any]) -> dict[str, Any]:
        while True:  # the state machine's retry: the same event again
            try:
                return worker.handler(event)
            except Killed as exc:
                deaths.append(str(exc))

    results = run_threads(invoke_until_done, [(e,) for e in events])
    assert deaths == [KILLS[kill][0]]
    assert all(r["done"] for r in results)
    iteration, got = final_params(s3, events[0])
    assert iteration == iterations
    want = reference_params(s3, bucket, events[0], iterations)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    assert_cleaned_up(s3, bucket, k, iterations)


def test_finalize_reads_the_reducers_checkpoints(s3: Any, bucket: str, digits: Any) -> None:
    n, k, iterations = 2, 2, 4
    digits(n)
    events = [s3_event(r, n, k, bucket, iterations=iterations) for r in range(n)]
    run_threads(worker.handler, [(e, None) for e in events])
    report = finalize.handler(events[0])
    assert report["iteration"] == iterations and report["complete"]
    assert report["ps_checkpoint_acks"] is None and report["workers"] == n
    _, got = final_params(s3, events[0])
    want = reference_params(s3, bucket, events[0], iterations)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_an_expired_exchange_resumes_from_the_reducers_checkpoints(
    s3: Any, bucket: str, digits: Any
) -> None:
    """The exchange objects are gone between links (the lifecycle rule): the next links seed
    the states from the checkpoints the reducers wrote, momentum included."""
    n, k, iterations = 2, 2, 6
    digits(n)
    events = [
        s3_event(r, n, k, bucket, iterations=iterations, iterations_per_invocation=3)
        for r in range(n)
    ]
    first = run_threads(worker.handler, [(e, None) for e in events])
    assert [r["iteration"] for r in first] == [3, 3]
    keys = exchange_keys(s3, bucket)
    s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": key} for key in keys]})
    second = run_threads(worker.handler, [(r["next_event"], None) for r in first])
    assert all(r["done"] and r["iteration"] == iterations for r in second)
    iteration, got = final_params(s3, events[0])
    assert iteration == iterations
    want = reference_params(s3, bucket, events[0], iterations)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    assert_cleaned_up(s3, bucket, k, iterations)


class _SlowRequests:
    """An S3 client whose state PUTs and DeleteObjects each take `cost_s` more on `clock`."""

    def __init__(self, s3: Any, clock: list[float], cost_s: float) -> None:
        self._s3, self._clock, self._cost_s = s3, clock, cost_s

    def put_object(self, **kwargs: Any) -> Any:
        if "/state/" in kwargs["Key"]:
            self._clock[0] += self._cost_s
        return self._s3.put_object(**kwargs)

    def delete_objects(self, **kwargs: Any) -> Any:
        self._clock[0] += self._cost_s
        return self._s3.delete_objects(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._s3, name)


def test_a_reducers_state_put_and_delete_are_communication_not_reduce(
    s3: Any, bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The model prices the state's PUT in communication and the reduce as the arithmetic:
    a reducer whose state PUT and DELETE take 100 s each (on s3sync's clock) reduces in under
    100 s and pushes for at least 200, and its parts still sum to the exchange's wall."""
    import time as real_time
    from types import SimpleNamespace

    offset = [0.0]
    monkeypatch.setattr(
        s3sync, "time", SimpleNamespace(perf_counter=lambda: real_time.perf_counter() + offset[0])
    )
    task = WorkerTask.from_event(s3_event(0, 1, 1, bucket))
    exchange = S3Exchange.for_task(task, _SlowRequests(s3, offset, 100.0), 10)
    params = np.zeros(10, np.float32)
    try:
        iteration = exchange.start(params)
        t0 = s3sync.time.perf_counter()
        timing = exchange.step(iteration, np.ones(10, np.float32), params)
        wall_s = s3sync.time.perf_counter() - t0
    finally:
        exchange.close()
    assert timing.reduce_s < 100.0
    assert timing.push_s >= 200.0
    parts_s = timing.push_s + timing.wait_s + timing.transfer_s + timing.reduce_s
    assert parts_s == pytest.approx(wall_s, abs=1.0)
