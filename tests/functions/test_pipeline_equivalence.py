"""A pipelined run (S stages × r replicas, M micro-batches, GPipe through S3) ends with the
parameters of single-process SGD on the same global batch, in both sync modes."""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path

import numpy as np
import pytest

from .helpers import link_losses
from .pipeline_helpers import (
    SharedData,
    final_params,
    keys_under,
    run_link,
    stage_event,
    stage_servers,
)

ITERATIONS = 3


@pytest.mark.parametrize("sync", ["ps", "s3"])
@pytest.mark.parametrize("replicas", [1, 2])
@pytest.mark.parametrize("micro_batches", [1, 4])
@pytest.mark.parametrize("stages", [2, 3])
def test_pipeline_matches_single_process_sgd(
    pipeline_data: SharedData, shard_cache: Path, stages: int, micro_batches: int, replicas: int,
    sync: str,
) -> None:  # fmt: skip
    bucket, job = pipeline_data.bucket(replicas), pipeline_data.new_job()
    with ExitStack() as stack:
        servers = (
            stack.enter_context(stage_servers(stages, replicas, job)) if sync == "ps" else None
        )
        events = [
            stage_event(bucket, sync, s, r, stages=stages, replicas=replicas, job=job,
                        micro_batches=micro_batches, iterations=ITERATIONS, servers=servers)
            for s in range(stages)
            for r in range(replicas)
        ]  # fmt: skip
        results = run_link(events)
        got = final_params(pipeline_data.s3, bucket, events, ITERATIONS, servers)

    assert all(r["done"] and r["iteration"] == ITERATIONS for r in results)
    want = pipeline_data.reference(events[0], ITERATIONS)
    initial = pipeline_data.reference(events[0], 0)
    assert got.shape == want.shape
    assert np.abs(want - initial).max() > 1e-3  # training moved them, to the same place
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    # Every boundary object was read and deleted; nothing was listed to find them.
    assert keys_under(pipeline_data.s3, bucket, f"{job}/pipe/") == []
    assert all(r["boundary_requests"]["list"] == 0 for r in results)


def test_stage_results_carry_the_stage_terms(pipeline_data: SharedData, shard_cache: Path) -> None:
    """Each stage's summary and record: its stage, its boundary seconds beside compute and
    sync, a record of its own (stages share a rank), the loss on the last stage only."""
    bucket, job = pipeline_data.bucket(1), pipeline_data.new_job()
    with stage_servers(3, 1, job) as servers:
        events = [
            stage_event(bucket, "ps", s, 0, stages=3, replicas=1, micro_batches=2, iterations=2,
                        servers=servers, job=job)
            for s in range(3)
        ]  # fmt: skip
        results = run_link(events)
    assert [r["stage"] for r in results] == [0, 1, 2]
    assert len({r["record_key"] for r in results}) == 3
    for s, result in enumerate(results):
        timings = result["timings"]
        assert timings["compute_s"] > 0 and timings["boundary_transfer_s"] > 0
        assert {"boundary_wait_s", "communication_s", "wait_s", "push_s"} <= set(timings)
        assert result["next_event"]["stage"] == events[s]["stage"]
        assert result["next_event"]["start_iteration"] == 2
        losses = link_losses(pipeline_data.s3, bucket, result)
        assert [it for it, _ in losses] == [0, 1]
        assert all((loss is not None) == (s == 2) for _, loss in losses)
