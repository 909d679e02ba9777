"""stacks/events.py against the runtime that consumes it (docs/CONTRACTS.md), no CDK involved."""

from __future__ import annotations

import dataclasses

from functions.ps.cli import build_parser
from functions.task import WorkerTask
from provisioner.plan import Plan
from stacks.events import PS_PORT, prepare_event, ps_command, run_keys, worker_event


def test_worker_event_parses_into_the_runtime_task_with_plan_numbers(plan: Plan) -> None:
    event = worker_event(
        plan,
        rank=3,
        dataset_bucket="d",
        artifacts_bucket="a",
        ps_endpoints=["10.0.0.1:7070", "10.0.0.2:7070"],
        secret_ref="arn:s",
    )
    task = WorkerTask.from_event({**event, **run_keys("exec-1", "2026-01-01T00:00:00Z")})
    assert task.extra == {}  # every key we send is one the runtime knows
    assert (task.rank, task.n_workers, task.memory_mb) == (3, plan.n_workers, plan.memory_mb)
    assert task.local_batch == plan.training.local_batch
    assert task.iterations == plan.training.iterations
    assert task.learning_rate == plan.training.learning_rate
    assert task.ephemeral_storage_mb == plan.ephemeral_storage_mb
    assert task.ps_endpoints == ("10.0.0.1:7070", "10.0.0.2:7070")
    assert (task.start_iteration, task.invocation) == (0, 0)


def test_shards_prefix_changes_with_n_so_a_new_plan_never_reads_stale_shards(plan: Plan) -> None:
    kwargs = {"source": "builtin:digits", "dataset_bucket": "d"}
    assert (
        prepare_event(plan, **kwargs)["dataset_prefix"]
        != prepare_event(dataclasses.replace(plan, n_workers=plan.n_workers + 1), **kwargs)[
            "dataset_prefix"
        ]
    )


def test_prepare_event_has_the_keys_the_prepare_handler_requires(plan: Plan) -> None:
    event = prepare_event(plan, source="builtin:digits", dataset_bucket="d")
    assert {"source", "n_shards", "dataset_bucket", "dataset_prefix"} <= set(event)
    assert event["n_shards"] == plan.n_workers
    worker = worker_event(plan, rank=0, dataset_bucket="d", artifacts_bucket="a",
                          ps_endpoints=[], secret_ref="s")  # fmt: skip
    assert event["dataset_prefix"] == worker["dataset_prefix"]


def test_ps_command_is_accepted_by_the_parameter_server_cli(plan: Plan) -> None:
    argv = ps_command(plan, shard=1, secret_ref="arn:secret", artifacts_bucket="bucket")
    assert argv[:3] == ["python", "-m", "functions.ps"]
    args = build_parser().parse_args(argv[3:])
    assert (args.shard, args.shards, args.workers) == (1, plan.ps_count, plan.n_workers)
    assert (args.host, args.port) == ("0.0.0.0", PS_PORT)
    assert args.learning_rate == plan.training.learning_rate
    assert args.momentum == plan.training.momentum
    assert args.checkpoint_every == plan.training.checkpoint_every_iterations
    assert (args.secret_ref, args.artifacts_bucket) == ("arn:secret", "bucket")
