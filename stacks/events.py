"""Pure builders of what the runtime receives: worker events, the prepare event, PS flags.

Every number comes from the Plan; the stacks only add where things live (buckets, endpoints,
secret). Keys follow docs/CONTRACTS.md exactly; nothing here imports aws_cdk, so the emulator
and tests can use it too.
"""

from __future__ import annotations

from typing import Any

from functions.model_spec import parse_spec
from provisioner.pipeline_plan import Stage
from provisioner.plan import Plan
from provisioner.replan_step import shards_prefix as count_shards_prefix

PS_PORT = 7070  # one TCP port per PS instance; only the workers' security group may reach it
SAFETY_MARGIN_S = 30.0  # the worker stops this long before its invocation time runs out


def checkpoint_prefix(plan: Plan) -> str:
    """Where the PS checkpoints, final model and report of this job go in the artifacts bucket."""
    return f"{plan.job}/checkpoints"


def result_keys(plan: Plan) -> tuple[str, str]:
    """The final model and the run report: all that functions/finalize.py writes."""
    return f"{plan.job}/model.pt", f"{plan.job}/report.json"


def exchange_prefix(plan: Plan) -> str:
    """Where an S3-sync run's workers exchange gradient partitions, in the artifacts bucket.

    One prefix per job, not per run: the runtime keys each run's objects under it by run id, and
    a lifecycle rule (stacks/data.py) needs a literal prefix to expire what a cut-off run leaves.
    """
    return f"{plan.job}/exchange"


def sync_summary(plan: Plan) -> str:
    """How the workers exchange gradients, as the summaries and descriptions say it."""
    if plan.sync == "s3":
        return f"sync: s3 ({plan.reducers} reducer{'s' if plan.reducers != 1 else ''}), no PS"
    return f"PS {plan.ps_count} x {plan.ps_type}"


def shards_prefix(plan: Plan, n_workers: int | None = None) -> str:
    """Shards are one per worker, so the prefix names n: a new n never reads stale shards.
    `n_workers`: another count's (a re-plan's), by default the plan's."""
    return count_shards_prefix(plan.job, plan.n_workers if n_workers is None else n_workers)


def layout_counts(plan: Plan) -> tuple[int, ...]:
    """The worker counts whose shards the prepare step writes: every count of the envelope of
    a plan that re-plans (a switch finds its shards ready), the plan's included; else the plan's."""
    if plan.replan is None:
        return (plan.n_workers,)
    return tuple(sorted({plan.n_workers, *plan.replan.envelope.worker_counts}))


def layout_prefixes(plan: Plan) -> tuple[str, ...]:
    """The shards prefix of every `layout_counts` count."""
    return tuple(shards_prefix(plan, n) for n in layout_counts(plan))


def worker_event(
    plan: Plan,
    *,
    rank: int,
    dataset_bucket: str,
    artifacts_bucket: str,
    ps_endpoints: list[str],
    secret_ref: str,
) -> dict[str, Any]:
    """The first event of worker `rank` (docs/CONTRACTS.md, "Worker event").

    A PS plan's event carries no sync keys (the defaults are the PS's); an S3 plan's carries
    `sync`, `reducers` and `exchange_prefix`, with `ps_endpoints` [] and `secret_ref` "".
    """
    event: dict[str, Any] = {
        "job_id": plan.job,
        "rank": rank,
        "n_workers": plan.n_workers,
        "model": plan.training.model,
        "dataset_bucket": dataset_bucket,
        "dataset_prefix": shards_prefix(plan),
        "artifacts_bucket": artifacts_bucket,
        "checkpoint_prefix": checkpoint_prefix(plan),
        "ps_endpoints": list(ps_endpoints),
        "secret_ref": secret_ref,
        "local_batch": plan.training.local_batch,
        "iterations": plan.training.iterations,
        "learning_rate": plan.training.learning_rate,
        "momentum": plan.training.momentum,
        "memory_mb": plan.memory_mb,
        "seed": 0,
        "start_iteration": 0,
        "invocation": 0,
        "safety_margin_s": SAFETY_MARGIN_S,
        "ephemeral_storage_mb": plan.ephemeral_storage_mb,  # optional key: /tmp fits a shard?
    }
    if plan.sync == "s3":
        event.update(sync="s3", reducers=plan.reducers, exchange_prefix=exchange_prefix(plan))
    return event


def stage_checkpoint_prefix(plan: Plan, stage: int) -> str:
    """Stage `stage`'s own checkpoints: its parameters are a sub-vector no other stage holds."""
    return f"{checkpoint_prefix(plan)}/stage-{stage:02d}"


def stage_exchange_prefix(plan: Plan, stage: int) -> str:
    """Stage `stage`'s own S3 exchange, under the job's exchange prefix (and its expiry rule)."""
    return f"{exchange_prefix(plan)}/stage-{stage:02d}"


def boundary_prefix(plan: Plan) -> str:
    """Where a pipelined job's activations and their gradients cross from stage to stage.

    One literal prefix per job, like the exchange's: a lifecycle rule expires what a cut-off run
    leaves, and the runtime keys each run's objects under it by boundary and run id.
    """
    return f"{plan.job}/pipe"


def stage_boundaries(plan: Plan, stage: int) -> list[str]:
    """The boundary prefixes stage `stage` touches: b{s-1} (before it) and b{s} (after it), of
    those that exist (boundary b sits between stages b and b+1, b = 0..S-2)."""
    count = plan.pipeline.stage_count if plan.pipeline else 1
    return [f"{boundary_prefix(plan)}/b{b:02d}" for b in (stage - 1, stage) if 0 <= b < count - 1]


def stage_reads_dataset(plan: Plan, stage: int) -> bool:
    """The first stage reads the samples, the last the labels; the stages between read neither."""
    count = plan.pipeline.stage_count if plan.pipeline else 1
    return stage in (0, count - 1)


def stage_member(plan: Plan, stage: Stage) -> dict[str, Any]:
    """The event's `stage` member: which blocks this function runs and where its boundaries are."""
    assert plan.pipeline is not None, "a one-stage plan's events carry no stage"
    return {
        "index": stage.index,
        "count": plan.pipeline.stage_count,
        "first_block": stage.first_block,
        "stop_block": stage.stop_block,
        "micro_batches": plan.pipeline.micro_batches,
        "boundary_prefix": boundary_prefix(plan),
    }


def stage_worker_event(
    plan: Plan,
    stage: Stage,
    *,
    rank: int,
    dataset_bucket: str,
    artifacts_bucket: str,
    ps_endpoints: list[str],
    secret_ref: str,
) -> dict[str, Any]:
    """The first event of replica `rank`'s function of `stage` in a pipelined plan.

    `worker_event` with the stage's memory, its own checkpoint prefix, its own sync (the
    endpoints of its own PS shards, or its own exchange prefix; `reducers` is per stage) and the
    `stage` member; `rank` is the replica, whose data shard the first and last stage read. It
    adds the plan's `iterations_per_invocation`: the stages of a link exchange activations, so
    they must stop at the same iteration, which their own time limits would not give them.
    """
    stages = plan.pipeline.stages if plan.pipeline else ()
    if stage not in stages or stages[stage.index] != stage:
        raise ValueError(f"stage {stage.index} is not a stage of plan {plan.job}'s pipeline")
    event = worker_event(plan, rank=rank, dataset_bucket=dataset_bucket,
                         artifacts_bucket=artifacts_bucket, ps_endpoints=ps_endpoints,
                         secret_ref=secret_ref)  # fmt: skip
    event.update(memory_mb=stage.memory_mb,
                 checkpoint_prefix=stage_checkpoint_prefix(plan, stage.index),
                 iterations_per_invocation=plan.iterations_per_invocation,
                 stage=stage_member(plan, stage))  # fmt: skip
    if plan.sync == "s3":
        event["exchange_prefix"] = stage_exchange_prefix(plan, stage.index)
    return event


def run_keys(run_id: str, run_started: str) -> dict[str, str]:
    """The worker and finalize event's run (functions.runs): the emulator's own values."""
    return {"run_id": run_id, "run_started": run_started}


# The same keys in the state machine: the execution's name and start time (context object).
RUN_KEYS_FROM_EXECUTION = {
    "run_id.$": "$$.Execution.Name",
    "run_started.$": "$$.Execution.StartTime",
}


def prepare_event(plan: Plan, *, source: str, dataset_bucket: str) -> dict[str, Any]:
    """What `functions.datasets.prepare_handler` gets: the source and where the n shards go.

    `source` is what `functions.datasets.load_source` reads: builtin:digits,
    synthetic-cifar:N or s3://bucket/prefix (a local folder is uploaded first, then read from S3).
    """
    event = {
        "source": source,
        "n_shards": plan.n_workers,
        "dataset_bucket": dataset_bucket,
        "dataset_prefix": shards_prefix(plan),
        "seed": 0,
    }
    if plan.replan is not None:  # one layout per envelope count, the same seed
        event["layouts"] = [{"n_shards": n, "dataset_prefix": shards_prefix(plan, n)}
                            for n in layout_counts(plan)]  # fmt: skip
    if parse_spec(plan.training.model).zoo_name is None:  # a user's file may read the data
        event["model"] = plan.training.model
    return event


def ps_workers(plan: Plan) -> int:
    """The PS's `--workers`: the ceiling of a plan that re-plans (each HELLO then names its
    segment's count), the plan's count otherwise."""
    return plan.replan.envelope.max_workers if plan.replan is not None else plan.n_workers


# What the pace (`$.pace`, provisioner/replan_step.py) sets in each link's worker event of a
# plan that re-plans; the Map's item selector reads them from the pace, with the item's rank.
PACE_EVENT_KEYS = ("n_workers", "memory_mb", "local_batch", "iterations_per_invocation",
                   "dataset_prefix", "start_iteration", "invocation")  # fmt: skip


def replan_event_base(event: dict[str, Any]) -> dict[str, Any]:
    """A worker event without its rank and the pace's keys: what every link's event of a plan
    that re-plans holds whatever the pace says (buckets, endpoints, model, optimizer)."""
    return {k: v for k, v in event.items() if k != "rank" and k not in PACE_EVENT_KEYS}


def ps_command(
    plan: Plan,
    *,
    shard: int,
    secret_ref: str,
    artifacts_bucket: str,
    host: str = "0.0.0.0",
    port: int = PS_PORT,
    stage: int | None = None,
) -> list[str]:
    """argv of `python -m functions.ps` for one shard (docs/CONTRACTS.md, "Parameter server").

    `stage`: in a pipelined plan, the stage whose parameters this shard holds; its `shard` of
    `plan.ps_count` is of that stage's parameters, and it checkpoints under the stage's prefix.
    """
    checkpoints = checkpoint_prefix(plan) if stage is None else stage_checkpoint_prefix(plan, stage)
    return [
        "python",
        "-m",
        "functions.ps",
        "--job-id", plan.job,
        "--shard", str(shard),
        "--shards", str(plan.ps_count),
        "--workers", str(ps_workers(plan)),
        "--host", host,
        "--port", str(port),
        "--secret-ref", secret_ref,
        "--model", plan.training.model,
        "--seed", "0",
        "--learning-rate", repr(plan.training.learning_rate),
        "--momentum", repr(plan.training.momentum),
        "--artifacts-bucket", artifacts_bucket,
        "--checkpoint-prefix", checkpoints,
        "--checkpoint-every", str(plan.training.checkpoint_every_iterations),
    ]  # fmt: skip
