"""A pipelined plan's workers: one function per stage, each granted exactly its stage's data.

Every stage runs the same image and handler with the stage's memory (`Stage.memory_mb`), the
plan's timeout and /tmp, and `plan.n_workers` replicas (reserved, if the plan reserves). Stage s
reads and writes only the boundaries beside it (b{s-1}, b{s}), its own checkpoints and exchange,
the dataset's shards only if it is the first (samples) or the last (labels) stage, and the
dataset's manifest (by its exact key: every stage builds the whole model from its input shape and
classes) (docs/CONTRACTS.md; /work/notes/pipeline-contract.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aws_cdk import aws_iam as iam
from constructs import Construct

from functions.datasets import MANIFEST
from functions.runs import runs_prefix
from provisioner.pipeline_plan import Stage
from provisioner.plan import Plan
from stacks.data import DataLayout
from stacks.events import (
    shards_prefix,
    stage_boundaries,
    stage_checkpoint_prefix,
    stage_exchange_prefix,
    stage_reads_dataset,
    stage_worker_event,
)
from stacks.functions import ImageFunction, VpcPlacement
from stacks.grants import BucketRef, grant_prefix, grant_s3_sync, read_secret_value
from stacks.image import ImageSpec


@dataclass(frozen=True)
class StageWorker:
    """One stage's function and the first event of its replica 0 (the Map fills in the rank)."""

    stage: Stage
    worker: ImageFunction
    event: dict[str, Any]


class StageWorkers(Construct):
    """Attribute: `stages`, one `StageWorker` per stage in stage order.

    `ps_endpoints`: each stage's own PS shards (`ParameterServers.stage_endpoints`); [] per stage
    for an S3-sync plan, whose `secret_arn` is None.
    """

    def __init__(self, scope: Construct, construct_id: str, *, plan: Plan, image: ImageSpec,
                 layout: DataLayout, placement: VpcPlacement | None,
                 ps_endpoints: list[list[str]], secret_arn: str | None) -> None:  # fmt: skip
        super().__init__(scope, construct_id)
        if plan.pipeline is None:
            raise ValueError(f"plan {plan.job} has one stage: TrainingStack builds its worker")
        self.stages: list[StageWorker] = []
        for stage, endpoints in zip(plan.pipeline.stages, ps_endpoints, strict=True):
            worker = ImageFunction(
                self, f"Stage{stage.index}", image=image, handler="functions.worker.handler",
                description=f"Training worker of job {plan.job}, stage {stage.index} "
                f"(blocks {stage.first_block}-{stage.stop_block - 1})",
                memory_mb=stage.memory_mb, timeout_s=plan.invocation_timeout_s,
                ephemeral_storage_mb=plan.ephemeral_storage_mb,
                reserved_concurrency=plan.n_workers if plan.reserve_concurrency else None,
                placement=placement,
            )  # fmt: skip
            event = stage_worker_event(
                plan, stage, rank=0, dataset_bucket=layout.dataset.name,
                artifacts_bucket=layout.artifacts.name, ps_endpoints=endpoints,
                secret_ref=secret_arn or "",
            )  # fmt: skip
            _grant_stage(plan, stage.index, worker, layout, secret_arn)
            self.stages.append(StageWorker(stage=stage, worker=worker, event=event))


def _grant_stage(plan: Plan, stage: int, worker: ImageFunction, layout: DataLayout,
                 secret_arn: str | None) -> None:  # fmt: skip
    """Stage `stage`'s access: what the one-stage worker has, cut down to its stage."""
    fn = worker.function
    fn.add_to_role_policy(read_manifest(layout.dataset, plan))
    if stage_reads_dataset(plan, stage):
        grant_prefix(fn, worker, layout.dataset, shards_prefix(plan), write=False,
                     reason="Reads its replica's shard (samples in the first stage, labels in "
                     "the last); keys are listed in the run's manifest.")  # fmt: skip
    grant_prefix(
        fn,
        worker,
        layout.artifacts,
        runs_prefix(plan.job),
        write=True,
        read=False,
        reason="Writes its link records; run id, stage and rank are in the key.",
    )
    for boundary in stage_boundaries(plan, stage):
        grant_prefix(fn, worker, layout.artifacts, boundary, write=True, delete=True,
                     reason="Hands activations and their gradients to the next or previous "
                     "stage; run, iteration, micro-batch and replica are in the key; the reader "
                     "deletes them.")  # fmt: skip
    if plan.sync == "s3":
        grant_s3_sync(fn, worker, layout.artifacts,
                      checkpoints=stage_checkpoint_prefix(plan, stage),
                      exchange=stage_exchange_prefix(plan, stage))  # fmt: skip
    if secret_arn is not None:
        fn.add_to_role_policy(read_secret_value(secret_arn))


def read_manifest(dataset: BucketRef, plan: Plan) -> iam.PolicyStatement:
    """GetObject on exactly the shards' manifest: a middle stage needs the input shape and classes
    to build the model whose blocks it runs, and no shard."""
    key = f"{shards_prefix(plan)}/{MANIFEST}"
    return iam.PolicyStatement(actions=["s3:GetObject"], resources=[f"{dataset.arn}/{key}"])
