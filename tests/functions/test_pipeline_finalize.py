"""Finalize of a pipelined run: the whole-job event (as the stacks give it) assembles the stages'
checkpoints in stage order into the model single-process SGD trains, and reports per (stage,
rank) without the per-iteration series."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from functions import datasets, finalize, models
from functions.ps.config import PSConfig
from functions.ps.server import ParameterServer

from .conftest import SECRET, endpoints
from .helpers import worker_event
from .pipeline_helpers import SharedData, run_link, stage_event

ITERATIONS = 3
STAGES = 2
REPLICAS = 2


@contextmanager
def checkpointing_servers(s3: Any, bucket: str, job: str) -> Iterator[list[list[ParameterServer]]]:
    """Two PS shards per stage that checkpoint under their stage's prefix; stopped at the end."""
    started: list[list[ParameterServer]] = []
    try:
        for s in range(STAGES):
            stage = []
            for k in range(2):
                config = PSConfig(job_id=job, shard=k, shards=2, workers=REPLICAS,
                                  secret=SECRET.encode(), learning_rate=0.1, momentum=0.9,
                                  artifacts_bucket=bucket,
                                  checkpoint_prefix=f"{job}/checkpoints/stage-{s:02d}")  # fmt: skip
                server = ParameterServer(config, s3=s3)
                server.start()
                stage.append(server)
            started.append(stage)
        yield started
    finally:
        for stage in started:
            for server in stage:
                server.stop()


def job_event(bucket: str, sync: str, job: str, servers: list[list[ParameterServer]] | None):
    """The stacks' finalize event: the whole job's, every stage's PS endpoints stage by stage."""
    every = [e for stage in servers for e in endpoints(stage)] if servers else []
    return worker_event(0, REPLICAS, every, bucket, job_id=job, iterations=ITERATIONS,
                        checkpoint_prefix=f"{job}/checkpoints", sync=sync, reducers=REPLICAS,
                        exchange_prefix=f"{job}/exchange")  # fmt: skip


def stored_model(s3: Any, bucket: str, event: dict[str, Any]) -> np.ndarray:
    body = s3.get_object(Bucket=bucket, Key=f"{event['job_id']}/model.pt")["Body"].read()
    manifest = datasets.read_manifest(s3, bucket, event["dataset_prefix"])
    model = models.build(event["model"], manifest["input_shape"], manifest["classes"], 0)
    model.load_state_dict(torch.load(io.BytesIO(body), weights_only=True))
    return torch.nn.utils.parameters_to_vector(model.parameters()).detach().numpy()


@pytest.mark.parametrize("sync", ["s3", "ps"])
def test_finalize_joins_the_stages_into_the_single_process_model(
    pipeline_data: SharedData, shard_cache: Path, sync: str
) -> None:
    bucket, job = pipeline_data.bucket(REPLICAS), pipeline_data.new_job()
    with ExitStack() as stack:
        servers = (
            stack.enter_context(checkpointing_servers(pipeline_data.s3, bucket, job))
            if sync == "ps"
            else None
        )
        events = [
            stage_event(bucket, sync, s, r, stages=STAGES, replicas=REPLICAS, job=job,
                        micro_batches=2, iterations=ITERATIONS, servers=servers)
            for s in range(STAGES)
            for r in range(REPLICAS)
        ]  # fmt: skip
        results = run_link(events)
        event = job_event(bucket, sync, job, servers)
        report = finalize.handler(event)

    assert all(r["done"] for r in results)
    assert report["iteration"] == ITERATIONS and report["complete"] and report["stages"] == STAGES
    if sync == "ps":
        assert report["ps_checkpoint_acks"] == [ITERATIONS] * (2 * STAGES)
    want = pipeline_data.reference(events[0], ITERATIONS)
    assert report["parameters"] == want.size
    np.testing.assert_allclose(
        stored_model(pipeline_data.s3, bucket, event), want, rtol=1e-4, atol=1e-5
    )
    stored = json.loads(
        pipeline_data.s3.get_object(Bucket=bucket, Key=f"{job}/report.json")["Body"].read()
    )
    workers = stored["workers"]
    assert [(w["stage"], w["rank"]) for w in workers] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    links = [link for w in workers for link in w["links"]]
    assert not any(k.startswith("step_") for link in links for k in link)
    assert [w["loss"] is not None for w in workers] == [False, False, True, True]  # last stage's


def test_stage_tasks_refuse_endpoints_that_do_not_split_by_stage() -> None:
    task = finalize.WorkerTask.from_event(
        worker_event(0, 1, ["127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"], "b")
    )
    with pytest.raises(ValueError, match="3 PS endpoints: expected a multiple of the 2 stages"):
        finalize.stage_tasks(task, 2)
