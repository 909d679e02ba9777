"""A pipelined plan through the emulator: the synthesized stage functions, their (stage, rank)
workers held to each stage's CPU share, boundary objects in a real S3 server, finalize joining
the stages; the model equals a one-stage run of the same global batch.

The plan is the planner's S3-sync digits-mlp plan (2 replicas) cut by hand into 2 stages of the
MLP's blocks (an nn.Sequential: Flatten, Linear, ReLU | Linear, ReLU, Linear), M = 2; a few
dozen iterations in 2 links (`iterations_per_invocation`), so the run fits the test budget.
"""

from __future__ import annotations

import dataclasses
import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import torch

from emulator.options import Options
from emulator.orchestrator import run
from emulator.s3server import S3Endpoint
from functions import datasets, models
from provisioner.pipeline_plan import Pipeline, Stage
from provisioner.plan import Plan
from tests.emulator.plans import machine_cpu_scale, planned_digits_s3, with_iterations

ITERATIONS = 24
PER_INVOCATION = 12  # two links per worker, at any speed
CUTS = ((0, 3), (3, 6))  # the zoo's mlp has 6 blocks


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


def test_a_two_stage_plan_trains_like_its_one_stage_plan(
    tmp_path: Path, s3_endpoint: S3Endpoint, s3_client: Any
) -> None:
    one = with_iterations(planned_digits_s3("emu-pipe-one", max_workers=2), ITERATIONS)
    one = dataclasses.replace(one, iterations_per_invocation=PER_INVOCATION,
                              invocations_per_worker=ITERATIONS // PER_INVOCATION)  # fmt: skip
    assert one.n_workers == 2
    piped = two_stage(dataclasses.replace(one, job="emu-pipe-two"))
    options = Options(invocation_limit_s=120.0, iterations_per_invocation=PER_INVOCATION,
                      cpu_scale=machine_cpu_scale(one), quiet=True)  # fmt: skip
    records = {}
    for plan in (one, piped):
        out = tmp_path / plan.job
        records[plan.job] = run(plan, dataclasses.replace(options, out_dir=out),
                                endpoint=s3_endpoint)  # fmt: skip

    piped_record = records[piped.job]
    workers = piped_record.workers
    assert [(w.stage, w.rank) for w in workers] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert all(w.done and w.iteration == ITERATIONS and len(w.links) == 2 for w in workers)
    artifacts = piped_record.buckets["artifacts"]
    got = final_model(s3_client, piped_record.buckets, piped.job, piped.training.model)
    want = final_model(s3_client, records[one.job].buckets, one.job, one.training.model)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    losses = [loss for link in workers[-1].links for _, loss in link["losses"]]
    assert np.mean(losses[-4:]) < np.mean(losses[:4])  # the last stage's loss falls
    assert keys_under(s3_client, artifacts, f"{piped.job}/pipe/") == []  # boundaries all read
    report = json.loads((tmp_path / piped.job / "report.json").read_text())
    assert report["iterations"]["completed"] == ITERATIONS
    # each stage's terms measured (both replicas of it) beside the plan's
    stages = report["stages"]
    assert [(row["stage"], row["blocks"], row["replicas"]) for row in stages] == [
        (0, [0, 3], 2), (1, [3, 6], 2)
    ]  # fmt: skip
    for row in stages:
        assert all(row["measured_per_iteration_s"][t] > 0 for t in ("compute", "boundary", "sync"))
        assert row["predicted_per_iteration_s"]["boundary"] == 2 * 0.01  # M x per micro-batch
    assert all(w.environment is None or w.environment.proc.poll() is not None for w in workers)
