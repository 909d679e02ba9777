"""Resume: a worker stopped (gracefully or by SIGKILL) and re-invoked, and a PS restarted from
its S3 checkpoint, all end with the parameters of the uninterrupted run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from functions import models, wire, worker
from functions.aws import resolve_secret
from functions.exchange import PSExchange
from functions.ps.server import ParameterServer
from functions.ps_client import PSClient
from functions.task import WorkerTask

from .conftest import endpoints
from .helpers import (
    RUN,
    CountdownContext,
    GateContext,
    link_losses,
    ps_vector,
    reference_params,
    run_threads,
    worker_event,
)

ITERATIONS = 8


def _assert_uninterrupted(got: np.ndarray, s3: Any, bucket: str, event: dict[str, Any],
                          iterations: int) -> None:  # fmt: skip
    """The parameters equal one uninterrupted process's after `iterations` (float tolerance)."""
    np.testing.assert_allclose(
        got, reference_params(s3, bucket, event, iterations), rtol=1e-4, atol=1e-5
    )


def _wait_for_iteration(server: ParameterServer, iteration: int, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while server.state.iteration < iteration:
        assert time.monotonic() < deadline, "training did not progress"
        time.sleep(0.01)


def test_worker_stops_before_time_limit_and_chain_resumes(
    s3: Any, bucket: str, digits: Any, ps_cluster: Any
) -> None:
    digits(2)
    servers = ps_cluster(2, 2, learning_rate=0.1, momentum=0.9)
    events = [
        worker_event(r, 2, endpoints(servers), bucket, iterations=ITERATIONS) for r in range(2)
    ]
    links: list[dict[str, Any]] = []

    def chained_rank1() -> None:
        event: dict[str, Any] = events[1]
        while True:
            result = worker.handler(event, CountdownContext(calls=3))
            links.append(result)
            if result["done"]:
                return
            event = result["next_event"]

    run_threads(lambda i: worker.handler(events[0]) if i == 0 else chained_rank1(), [(0,), (1,)])
    assert [link["iteration"] for link in links] == [3, 6, 8]
    assert [link["stopped"] for link in links] == ["time_limit", "time_limit", "done"]
    assert links[0]["next_event"]["start_iteration"] == 3
    assert links[0]["next_event"]["invocation"] == 1
    assert links[1]["next_event"]["invocation"] == 2
    _assert_uninterrupted(ps_vector(servers), s3, bucket, events[0], ITERATIONS)


def test_worker_that_died_after_pushing_to_one_shard_resumes_exactly(
    s3: Any, bucket: str, digits: Any, ps_cluster: Any
) -> None:
    """Rank 1 pushes its iteration-2 gradient to shard 0 only and dies. Rank 0 has pushed
    already, so shard 0 completes iteration 2 and moves to 3 while shard 1 stays at 2: the
    re-invoked worker resumes at 2 (shard 0 still holds those parameters), recomputes the same
    gradient, shard 0 ignores the duplicate and shard 1 takes it."""
    digits(2)
    servers = ps_cluster(2, 2, learning_rate=0.1, momentum=0.9)
    events = [
        worker_event(r, 2, endpoints(servers), bucket, iterations=ITERATIONS) for r in range(2)
    ]
    rank0 = threading.Thread(target=worker.handler, args=(events[0],))
    rank0.start()
    first = worker.handler(events[1], CountdownContext(calls=2))
    assert first["iteration"] == 2

    # Push rank 1's iteration-2 gradient to shard 0 only, then "die" (close the sockets).
    task = WorkerTask.from_event(events[1])
    run = _half_run(task)
    iteration = worker._resync(run)
    assert iteration == 2
    worker.compute_step(run, iteration)
    grads = run.flat.grads.numpy()
    client = run.exchange.client
    shard0 = client._shards[0]
    wire.send_frame(
        shard0.sock, wire.MsgType.PUSH, 2, grads[shard0.start : shard0.stop], time.monotonic() + 10
    )
    status = client.status()
    client.close()
    assert [st["iteration"] for st in status] == [3, 2]
    assert status[1]["received"] == [0]

    # The orchestrator re-invokes with the *old* event: the worker adopts the PS's iteration.
    second = worker.handler(events[1])
    rank0.join(60)
    assert second["done"] and second["iteration"] == ITERATIONS
    assert servers[0].state.duplicates_ignored >= 1
    assert [s.state.iteration for s in servers] == [ITERATIONS, ITERATIONS]
    _assert_uninterrupted(ps_vector(servers), s3, bucket, events[0], ITERATIONS)


def _half_run(task: WorkerTask) -> Any:
    from functions import datasets, models
    from functions.aws import s3_client

    s3 = s3_client()
    manifest = datasets.read_manifest(s3, task.dataset_bucket, task.dataset_prefix)
    x, y = datasets.load_shard(s3, task.dataset_bucket, task.dataset_prefix, task.rank, manifest)
    flat = models.flat_parameters(
        models.build(task.model, manifest["input_shape"], manifest["classes"], task.seed)
    )
    client = PSClient(
        task.ps_endpoints,
        task.job_id,
        task.rank,
        resolve_secret(task.secret_ref),
        int(flat.params.numel()),
        timeout_s=30,
        run_id=task.run_id,
        run_started=task.run_started,
    )
    exchange = PSExchange(client, task.rank)
    return worker._Run(task, flat, models.loss_function(task.model), exchange, x, y)


def test_worker_killed_with_sigkill_and_reinvoked_matches(
    s3: Any, bucket: str, digits: Any, ps_cluster: Any, tmp_path: Path
) -> None:
    digits(2)
    iterations = 40
    servers = ps_cluster(2, 2, learning_rate=0.05, momentum=0.9)
    events = [
        worker_event(r, 2, endpoints(servers), bucket, iterations=iterations, learning_rate=0.05)
        for r in range(2)
    ]
    event_file = tmp_path / "event.json"
    event_file.write_text(json.dumps(events[1]))
    code = (
        "import json,sys; from functions.worker import handler; "
        "handler(json.load(open(sys.argv[1])))"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(event_file)],
        cwd=Path(__file__).resolve().parents[2],
        env=dict(os.environ),
    )
    rank0_result: list[Any] = []
    gate = GateContext(park_at=7)  # rank 0 waits after iteration 5; BSP holds rank 1 there too
    rank0 = threading.Thread(target=lambda: rank0_result.append(worker.handler(events[0], gate)))
    rank0.start()
    try:
        gate.wait_parked()
        _wait_for_iteration(servers[0], 6)
    finally:
        proc.kill()
        proc.wait()
        gate.gate.set()
    killed_at = min(s.state.iteration for s in servers)  # a shard may be one ahead
    assert killed_at == 6
    second = worker.handler(events[1])  # the original event: start_iteration 0
    rank0.join(120)
    assert second["done"] and rank0_result[0]["done"]
    assert link_losses(s3, bucket, second)[0][0] >= killed_at  # it resumed, not started over
    _assert_uninterrupted(ps_vector(servers), s3, bucket, events[0], iterations)


@dataclass
class _Run:
    """Two PS shards checkpointing to S3 and two workers training in threads."""

    servers: list[ParameterServer]
    ps_kwargs: dict[str, Any]
    events: list[dict[str, Any]]
    threads: list[threading.Thread]
    results: list[Any]
    gates: list[GateContext]

    def go(self) -> None:
        for gate in self.gates:
            gate.gate.set()

    def join(self) -> None:
        self.go()
        for t in self.threads:
            t.join(120)
        assert self.results[0]["done"] and self.results[1]["done"]


def _start_checkpointed_run(
    bucket: str, ps_cluster: Any, *, iterations: int, checkpoint_every: int, park_at: int
) -> _Run:
    """Both workers park at the PS's iteration `park_at` (gates the test opens with `go`)."""
    ps_kwargs: dict[str, Any] = dict(
        learning_rate=0.05,
        momentum=0.9,
        artifacts_bucket=bucket,
        checkpoint_prefix="ckpt",
        checkpoint_every=checkpoint_every,
    )
    servers = ps_cluster(2, 2, **ps_kwargs)
    events = [
        worker_event(r, 2, endpoints(servers), bucket, iterations=iterations, learning_rate=0.05)
        for r in range(2)
    ]
    results: list[Any] = [None, None]
    gates = [GateContext(park_at=park_at + 1) for _ in range(2)]

    def run(rank: int) -> None:
        results[rank] = worker.handler(events[rank], gates[rank])

    threads = [threading.Thread(target=run, args=(r,)) for r in range(2)]
    for t in threads:
        t.start()
    for gate in gates:
        gate.wait_parked()
    return _Run(servers, ps_kwargs, events, threads, results, gates)


def test_ps_restart_restores_checkpoint_and_workers_resume(
    s3: Any, bucket: str, digits: Any, ps_cluster: Any
) -> None:
    digits(2)
    iterations = 30
    run = _start_checkpointed_run(
        bucket, ps_cluster, iterations=iterations, checkpoint_every=2, park_at=7
    )
    ports = [s.address[1] for s in run.servers]
    for server in run.servers:
        server.stop()
    stopped_at = [s.state.iteration for s in run.servers]
    restarted = ps_cluster(2, 2, ports=ports, **run.ps_kwargs)
    run.join()
    restored = restarted[0].restored_iteration
    assert stopped_at == [7, 7]
    assert restored == 6  # the newest checkpoint both shards have (every 2 iterations)
    assert restarted[1].restored_iteration == restored
    # Iterations after the checkpoint were redone from the checkpoint, not from scratch.
    assert restarted[0].state.updates_applied == iterations - restored
    _assert_uninterrupted(ps_vector(restarted), s3, bucket, run.events[0], iterations)


def test_one_shard_restarted_alone_rolls_every_shard_back_and_ends_exact(
    s3: Any, bucket: str, digits: Any, ps_cluster: Any
) -> None:
    """Shard 1 crashes and comes back at the last common checkpoint (8) while shard 0 went on
    (10 or more): the workers roll shard 0 back and the run still equals the reference."""
    digits(2)
    iterations = 24
    run = _start_checkpointed_run(
        bucket, ps_cluster, iterations=iterations, checkpoint_every=4, park_at=10
    )
    run.servers[1].stop()
    ahead = run.servers[0].state.iteration
    restarted = ps_cluster(2, 2, ports=[run.servers[1].address[1]], only=[1], **run.ps_kwargs)
    run.join()
    assert restarted[0].restored_iteration == 8 and ahead >= 10
    assert run.servers[0].state.rollbacks == 1
    both = np.concatenate([run.servers[0].state.params, restarted[0].state.params])
    _assert_uninterrupted(both, s3, bucket, run.events[0], iterations)


def test_shards_apart_without_checkpoints_stop_with_a_clear_error(
    s3: Any, bucket: str, digits: Any, ps_cluster: Any
) -> None:
    """No artifacts bucket, so no common checkpoint: the worker says so instead of looping."""
    digits(1)
    servers = ps_cluster(2, 1, learning_rate=0.05, momentum=0.9, run=RUN)
    event = worker_event(0, 1, endpoints(servers), bucket, iterations=4, learning_rate=0.05)
    total = models.parameter_count(models.build("mlp", [1, 8, 8], 10, seed=0))
    start, stop = wire.shard_bounds(total, 2, 0)
    zeros = np.zeros(stop - start, np.float32)
    with servers[0].state.cond:  # shard 0 has gone on to iteration 5; shard 1 starts at 0
        servers[0].state.adopt(total, zeros, zeros, 5)
    with pytest.raises(worker.PSInconsistent, match="ROLLBACK without checkpoints"):
        worker.handler(event, None)


def test_a_re_planned_link_resumes_the_checkpoint_at_another_count_and_local_batch(
    s3: Any, bucket: str, shard_cache: Any, ps_cluster: Any
) -> None:
    """A switch of plan: 2 workers at local batch 8 checkpoint iteration 3; the PS restarts from
    it (--workers 4, the envelope's ceiling) and 4 workers at local batch 4 (the same global
    batch, their own shards) resume it: the run ends where one process training on the same
    batches does."""
    from functions import datasets

    from .test_ps_replan import GLOBAL_BATCH, reference_segments

    for n in (2, 4):
        datasets.write_shards(s3, "builtin:digits", n, bucket, f"data-n{n}", seed=1)
    ps_kwargs: dict[str, Any] = dict(learning_rate=0.1, momentum=0.9, artifacts_bucket=bucket,
                                     checkpoint_prefix="ckpt", checkpoint_every=1)  # fmt: skip
    servers = ps_cluster(2, 4, **ps_kwargs)

    def link(n: int, start: int, invocation: int) -> list[dict[str, Any]]:
        events = [
            worker_event(r, n, endpoints(servers), bucket, dataset_prefix=f"data-n{n}",
                         local_batch=GLOBAL_BATCH // n, iterations=6, start_iteration=start,
                         invocation=invocation, iterations_per_invocation=3)
            for r in range(n)
        ]  # fmt: skip
        results = run_threads(worker.handler, [(e, None) for e in events])
        assert all(r["next_event"]["start_iteration"] == start + 3 for r in results)
        return events

    events = link(2, 0, 0)
    ports = [s.address[1] for s in servers]
    for server in servers:
        server.stop()
    servers = ps_cluster(2, 4, ports=ports, **ps_kwargs)
    link(4, 3, 1)
    assert [s.restored_iteration for s in servers] == [3, 3]
    assert all(s.state.updates_applied == 3 and s.state.n == 4 for s in servers)
    want = reference_segments(s3, bucket, events[0], [("data-n2", 2, 3), ("data-n4", 4, 3)])
    np.testing.assert_allclose(ps_vector(servers), want, rtol=1e-4, atol=1e-5)
