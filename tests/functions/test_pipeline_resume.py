"""A pipelined run survives a stage worker killed mid-iteration and re-invoked, and a chain
of links, ending with the parameters of the uninterrupted single process."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from functions import worker
from functions.boundary import Boundaries

from .pipeline_helpers import (
    SharedData,
    final_params,
    keys_under,
    run_link,
    stage_event,
    stage_servers,
)

ITERATIONS = 3


class Killed(Exception):
    """The stage worker's process dies here (the test's stand-in for a Lambda crash)."""


def _dies_once_at(monkeypatch: pytest.MonkeyPatch, where: tuple[int, int, str, int, int]) -> None:
    """Boundaries.take raises Killed the first time (replica, boundary, kind, iteration,
    micro) == where: mid-iteration, after some of its micro-batches' gradients went back."""
    original, fired = Boundaries.take, threading.Event()

    def take(self: Boundaries, boundary: int, kind: str, iteration: int, micro: int) -> Any:
        if (self.replica, boundary, kind, iteration, micro) == where and not fired.is_set():
            fired.set()
            raise Killed(f"killed waiting for {kind} {iteration}/{micro} on boundary {boundary}")
        return original(self, boundary, kind, iteration, micro)

    monkeypatch.setattr(Boundaries, "take", take)


@pytest.mark.parametrize("sync", ["ps", "s3"])
def test_a_stage_worker_killed_mid_iteration_and_reinvoked_ends_exact(
    pipeline_data: SharedData, shard_cache: Path, monkeypatch: pytest.MonkeyPatch, sync: str
) -> None:
    """Stage 1 (the middle of 3), replica 1, dies in iteration 1's backward after two of its
    four micro-batches' gradients went back; the orchestrator re-invokes it with the same
    event while the other five stage workers wait for it."""
    stages, replicas = 3, 2
    bucket, job = pipeline_data.bucket(replicas), pipeline_data.new_job()
    _dies_once_at(monkeypatch, (1, 1, "grad", 1, 2))
    attempts: list[str] = []

    def invoke(event: dict[str, Any], context: Any) -> dict[str, Any]:
        try:
            return worker.handler(event, context)
        except Killed as exc:
            attempts.append(str(exc))
            return worker.handler(event, context)  # the retry: the same event

    with stage_servers(stages, replicas, job) as servers:
        events = [
            stage_event(bucket, sync, s, r, stages=stages, replicas=replicas, micro_batches=4,
                        iterations=ITERATIONS, servers=servers if sync == "ps" else None, job=job)
            for s in range(stages)
            for r in range(replicas)
        ]  # fmt: skip
        results = run_link(events, invoke)
        got = final_params(
            pipeline_data.s3, bucket, events, ITERATIONS, servers if sync == "ps" else None
        )

    assert attempts == ["killed waiting for grad 1/2 on boundary 1"]
    retried = results[1 * replicas + 1]
    # The retry adopted the exchange's iteration (1: it had not synced 1) and did 1 and 2.
    assert retried["iteration"] == ITERATIONS and retried["iterations_run"] == ITERATIONS - 1
    assert all(r["done"] for r in results)
    np.testing.assert_allclose(
        got, pipeline_data.reference(events[0], ITERATIONS), rtol=1e-4, atol=1e-5
    )


def test_links_resume_each_stage_from_its_own_state(
    pipeline_data: SharedData, shard_cache: Path
) -> None:
    """Two links (iterations_per_invocation 2 of 3), all S·r stage workers of a link at once:
    each stage's second link adopts its own exchange's iteration and ends exact."""
    stages, replicas = 2, 2
    bucket, job = pipeline_data.bucket(replicas), pipeline_data.new_job()
    events = [
        stage_event(bucket, "s3", s, r, stages=stages, replicas=replicas, micro_batches=2,
                    iterations=ITERATIONS, iterations_per_invocation=2, job=job)
        for s in range(stages)
        for r in range(replicas)
    ]  # fmt: skip
    first = run_link(events)
    assert [r["iteration"] for r in first] == [2] * len(events)
    assert not any(r["done"] for r in first)
    second = run_link([r["next_event"] for r in first])
    assert [(r["iteration"], r["iterations_run"]) for r in second] == [(3, 1)] * len(events)
    got = final_params(pipeline_data.s3, bucket, events, ITERATIONS, None)
    np.testing.assert_allclose(
        got, pipeline_data.reference(events[0], ITERATIONS), rtol=1e-4, atol=1e-5
    )
    # each stage checkpointed under its own prefix; the boundary objects are all gone
    for s in range(stages):
        assert keys_under(pipeline_data.s3, bucket, f"{job}/checkpoints/stage-{s:02d}/")
    assert keys_under(pipeline_data.s3, bucket, f"{job}/pipe/") == []


def test_a_stage_ahead_of_a_stopped_peer_stops_at_the_same_iteration(
    pipeline_data: SharedData, shard_cache: Path
) -> None:
    """Stage 0 ends its link after one iteration, stage 1 has no cap: its wait for the next
    activation ends at the deadline ("ps_timeout") with both at iteration 1, and the next
    link (all stages at once) resumes both from their exchanges and ends exact. The deadline
    is far above any wait of a running peer (stage 0's start-up on a slow host): only the
    activation that never comes reaches it."""
    bucket, job = pipeline_data.bucket(1), pipeline_data.new_job()
    with stage_servers(2, 1, job) as servers:
        events = [
            stage_event(bucket, "ps", s, 0, stages=2, replicas=1, micro_batches=2,
                        iterations=ITERATIONS, servers=servers, job=job, ps_timeout_s=10.0,
                        iterations_per_invocation=1 - s)
            for s in range(2)
        ]  # fmt: skip
        first = run_link(events)
        assert [(r["iteration"], r["stopped"]) for r in first] == [
            (1, "iteration_limit"),
            (1, "ps_timeout"),
        ]
        second = run_link([{**r["next_event"], "iterations_per_invocation": 0} for r in first])
        got = final_params(pipeline_data.s3, bucket, events, ITERATIONS, servers)
    assert [(r["iteration"], r["iterations_run"]) for r in second] == [(3, 2), (3, 2)]
    np.testing.assert_allclose(
        got, pipeline_data.reference(events[0], ITERATIONS), rtol=1e-4, atol=1e-5
    )
    assert keys_under(pipeline_data.s3, bucket, f"{job}/pipe/") == []
