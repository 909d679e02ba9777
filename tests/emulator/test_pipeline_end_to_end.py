"""A pipelined plan through the emulator: the synthesized stage functions, their (stage, rank)
workers held to each stage's CPU share, boundary objects in a real S3 server, finalize joining
the stages; the model equals a one-stage run of the same global batch.

The plan is the planner's S3-sync digits-mlp plan (2 replicas; also made a PS plan) cut by hand
into 2 stages of the MLP's blocks (an nn.Sequential: Flatten, Linear, ReLU | Linear, ReLU,
Linear), M = 2; a few dozen iterations in 2 links (`iterations_per_invocation`), so each run
fits the test budget.
"""

from __future__ import annotations

import dataclasses
import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from emulator.options import Options
from emulator.orchestrator import run
from emulator.procs import pid_alive
from emulator.s3_client import s3_client_for
from emulator.s3server import S3Endpoint
from functions import datasets, models
from provisioner.pipeline_plan import Pipeline, Stage
from provisioner.plan import Plan
from tests.emulator.plans import machine_cpu_scale, planned_digits_s3, with_iterations

ITERATIONS = 24
PER_INVOCATION = 12  # two links per worker, at any speed
CUTS = ((0, 3), (3, 6))  # the zoo's mlp has 6 blocks
# what the planner's PS plans open (a PS plan's workers reach EC2 and the secret in the VPC)
PS_INTERFACE_ENDPOINTS = ("ec2messages", "ecr.api", "ecr.dkr", "logs", "secretsmanager", "ssm",
                          "ssmmessages")  # fmt: skip


def two_stage(plan: Plan) -> Plan:
    """`plan` cut into the 2 stages of CUTS, each at the plan's memory, M = 2."""
    stages = tuple(
        Stage(index=s, first_block=a, stop_block=b,
              block_names=tuple(f"{k}:block" for k in range(a, b)), memory_mb=plan.memory_mb,
              vcpu_share=plan.memory_mb / 1769, parameter_bytes=1, memory_needed_mb=1,
              compute_per_micro_batch_s=0.001, boundary_per_micro_batch_s=0.01,
              sync_per_iteration_s=0.01)
        for s, (a, b) in enumerate(CUTS)
    )  # fmt: skip
    pipeline = Pipeline(stages=stages, micro_batches=2, reason="cheaper")
    return dataclasses.replace(plan, pipeline=pipeline, iterations_per_invocation=PER_INVOCATION,
                               invocations_per_worker=ITERATIONS // PER_INVOCATION)  # fmt: skip


def final_model(s3: Any, buckets: dict[str, str], job: str, model: str) -> np.ndarray:
    body = s3.get_object(Bucket=buckets["artifacts"], Key=f"{job}/model.pt")["Body"].read()
    manifest = datasets.read_manifest(s3, buckets["dataset"], f"{job}/shards-n2")
    net = models.build(model, manifest["input_shape"], manifest["classes"], 0)
    net.load_state_dict(torch.load(io.BytesIO(body), weights_only=True))
    return torch.nn.utils.parameters_to_vector(net.parameters()).detach().numpy()


def keys_under(s3: Any, bucket: str, prefix: str) -> list[str]:
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    return [o["Key"] for page in pages for o in page.get("Contents", [])]


def one_stage_plan() -> Plan:
    """The planner's S3-sync digits plan of 2 workers, in 2 links of PER_INVOCATION."""
    one = with_iterations(planned_digits_s3("emu-pipe-one", max_workers=2), ITERATIONS)
    return dataclasses.replace(one, iterations_per_invocation=PER_INVOCATION,
                               invocations_per_worker=ITERATIONS // PER_INVOCATION)  # fmt: skip


def options_for(plan: Plan, out_dir: Path) -> Options:
    return Options(invocation_limit_s=120.0, iterations_per_invocation=PER_INVOCATION,
                   cpu_scale=machine_cpu_scale(plan), quiet=True, out_dir=out_dir)  # fmt: skip


@pytest.fixture(scope="module")
def one_stage_model(tmp_path_factory: pytest.TempPathFactory, s3_endpoint: S3Endpoint) -> Any:
    """The one-stage run's final model, run once for both sync modes' pipelined runs."""
    one = one_stage_plan()
    assert one.n_workers == 2
    record = run(one, options_for(one, tmp_path_factory.mktemp(one.job)), endpoint=s3_endpoint)
    return final_model(s3_client_for(s3_endpoint), record.buckets, one.job, one.training.model)


def as_ps_plan(plan: Plan) -> Plan:
    """`plan` synced through one PS shard per stage instead of S3 reducers."""
    return dataclasses.replace(plan, sync="ps", reducers=0, ps_count=1, ps_type="c5.large",
                               interface_endpoints=PS_INTERFACE_ENDPOINTS)  # fmt: skip


@pytest.mark.parametrize("sync", ["s3", "ps"])
def test_a_two_stage_plan_trains_like_its_one_stage_plan(
    tmp_path: Path, s3_endpoint: S3Endpoint, s3_client: Any, one_stage_model: Any, sync: str
) -> None:
    piped = two_stage(dataclasses.replace(one_stage_plan(), job=f"emu-pipe-{sync}"))
    piped = as_ps_plan(piped) if sync == "ps" else piped
    piped_record = run(piped, options_for(piped, tmp_path), endpoint=s3_endpoint)

    workers = piped_record.workers
    assert [(w.stage, w.rank) for w in workers] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert all(w.done and w.iteration == ITERATIONS and len(w.links) == 2 for w in workers)
    artifacts = piped_record.buckets["artifacts"]
    got = final_model(s3_client, piped_record.buckets, piped.job, piped.training.model)
    np.testing.assert_allclose(got, one_stage_model, rtol=1e-4, atol=1e-5)
    losses = [loss for link in workers[-1].links for _, loss in link["losses"]]
    assert np.mean(losses[-4:]) < np.mean(losses[:4])  # the last stage's loss falls
    assert keys_under(s3_client, artifacts, f"{piped.job}/pipe/") == []  # boundaries all read
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["iterations"]["completed"] == ITERATIONS
    # each stage's terms measured (both replicas of it) beside the plan's
    stages = report["stages"]
    assert [(row["stage"], row["blocks"], row["replicas"]) for row in stages] == [
        (0, [0, 3], 2), (1, [3, 6], 2)
    ]  # fmt: skip
    for row in stages:
        assert all(row["measured_per_iteration_s"][t] > 0 for t in ("compute", "boundary", "sync"))
        assert row["predicted_per_iteration_s"]["boundary"] == 2 * 0.01  # M x per micro-batch
    assert not [pid for pid in piped_record.child_pids if pid_alive(pid)]  # no process left
