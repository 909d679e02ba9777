"""A pipelined plan the LOCAL planner chose, run end to end: `python -m provisioner plan
--memory-ceiling` on the local machine's catalog cuts the digits MLP (its profile with blocks,
profiles/digits-mlp-blocks.json) because the model does not fit one function below the ceiling,
and the emulator trains that plan with the real pieces: a real S3 server, PS processes, a
worker process per (stage, replica) held to its stage's CPU share.

The catalog is the calibrator's document with fixed figures (tests/local_catalog.py), so the
plan does not depend on this machine; the run is a few dozen iterations in 2 links
(`iterations_per_invocation`), so it ends at any speed.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np

from emulator.options import Options
from emulator.orchestrator import run
from emulator.procs import pid_alive
from emulator.s3server import S3Endpoint
from provisioner.cli import run as provisioner_run
from provisioner.plan import Plan, load_plan
from tests.emulator.plans import machine_cpu_scale, with_iterations
from tests.local_catalog import shared_core_catalog_dict

CEILING_MB = 320  # below digits-mlp's 384 MB, above a stage's 224 MB
WORKLOAD = "digits-mlp-blocks"
ITERATIONS = 24
PER_INVOCATION = 12  # two links per worker, at any speed


def local_cut_plan(tmp_path: Path) -> Plan:
    """The planner's plan for digits-mlp under the ceiling, at most 4 functions at once (a
    test machine's share of processes), written by `python -m provisioner plan`."""
    catalog = tmp_path / "local.json"
    catalog.write_text(json.dumps(shared_core_catalog_dict()))
    out = tmp_path / "plan.json"
    code = provisioner_run([
        "plan", "--workload", WORKLOAD, "--catalog", str(catalog), "--deadline", "1h",
        "--memory-ceiling", str(CEILING_MB), "--max-concurrency", "4", "--job", "emu-local-cut",
        "--out", str(out),
    ])  # fmt: skip
    assert code == 0
    return load_plan(out)


def test_the_local_planner_cuts_a_model_above_the_ceiling_and_the_emulator_runs_it(
    tmp_path: Path, s3_endpoint: S3Endpoint, s3_client: Any
) -> None:
    plan = local_cut_plan(tmp_path)
    pipe = plan.pipeline
    assert pipe is not None and pipe.reason == "does-not-fit"
    assert 2 <= len(pipe.stages) <= 3
    assert [(s.first_block, s.stop_block) for s in pipe.stages][0][0] == 0
    assert pipe.stages[-1].stop_block == 6  # every block of the MLP, in order
    for stage in pipe.stages:
        assert stage.memory_needed_mb <= stage.memory_mb <= CEILING_MB
    assert plan.memory_mb <= CEILING_MB < 384  # the whole model's min_memory_mb

    # a few iterations in 2 links, the workers at the machine's cores (as the hand-cut test)
    plan = dataclasses.replace(
        with_iterations(plan, ITERATIONS), iterations_per_invocation=PER_INVOCATION,
        invocations_per_worker=ITERATIONS // PER_INVOCATION,
    )  # fmt: skip
    options = Options(invocation_limit_s=120.0, iterations_per_invocation=PER_INVOCATION,
                      cpu_scale=machine_cpu_scale(plan), quiet=True, out_dir=tmp_path / "run",
                      workload=WORKLOAD, memory_ceiling_mb=CEILING_MB,
                      local_catalog=str(tmp_path / "local.json"))  # fmt: skip
    record = run(plan, options, endpoint=s3_endpoint)

    stages, r = len(pipe.stages), plan.n_workers
    workers = record.workers
    assert sorted((w.stage, w.rank) for w in workers) == [
        (s, k) for s in range(stages) for k in range(r)
    ]
    assert all(w.done and w.iteration == ITERATIONS and len(w.links) == 2 for w in workers)
    last = [w for w in workers if w.stage == stages - 1][0]
    losses = [loss for link in last.links for _, loss in link["losses"]]
    assert np.mean(losses[-4:]) < np.mean(losses[:4])  # the last stage's loss falls
    report = json.loads((tmp_path / "run" / "report.json").read_text())
    assert report["iterations"]["completed"] == ITERATIONS
    # finalize joined the stages' parameters into one model
    s3_client.head_object(Bucket=record.buckets["artifacts"], Key=f"{plan.job}/model.pt")
    # the top table's "predicted here" is the pipelined model's, not a one-stage plan's
    assert f"pipelined model: {stages} stages" in report["predictions"]["local"]
    local_total = [t for t in report["terms"] if t["term"] == "total"][0]["predicted_local_s"]
    assert local_total is not None and local_total > 0
    # each stage's terms, predicted (the planner's) and measured, side by side
    rows = report["stages"]
    assert [row["stage"] for row in rows] == list(range(stages))
    for row, stage in zip(rows, pipe.stages, strict=True):
        assert row["blocks"] == [stage.first_block, stage.stop_block]
        assert row["replicas"] == r
        predicted, measured = row["predicted_per_iteration_s"], row["measured_per_iteration_s"]
        assert predicted["compute"] == pipe.micro_batches * stage.compute_per_micro_batch_s
        for term in ("compute", "boundary", "sync"):
            assert predicted[term] > 0 and measured[term] > 0
    assert not [pid for pid in record.child_pids if pid_alive(pid)]  # no process left
