"""A pipelined plan's stage events and PS argv (stacks/events.py), pure: no CDK involved."""

from __future__ import annotations

import pytest

from functions.ps.cli import build_parser
from functions.task import WorkerTask
from provisioner.plan import Plan
from stacks.events import (
    ps_command,
    run_keys,
    stage_boundaries,
    stage_reads_dataset,
    stage_worker_event,
    worker_event,
)
from tests.stacks.pipeline_plans import pipelined_plan

BUCKETS = {"dataset_bucket": "d", "artifacts_bucket": "a"}


def event_of(plan: Plan, stage: int, rank: int = 1, endpoints: list[str] | None = None) -> dict:
    assert plan.pipeline is not None
    return stage_worker_event(plan, plan.pipeline.stages[stage], rank=rank, **BUCKETS,
                              ps_endpoints=endpoints or [], secret_ref="arn:s")  # fmt: skip


@pytest.mark.parametrize("stages", [2, 3])
def test_a_stage_event_is_the_worker_event_with_its_stage_memory_prefixes_and_member(
    stages: int,
) -> None:
    plan = pipelined_plan(stages, micro_batches=4)
    assert plan.pipeline is not None
    whole = worker_event(plan, rank=1, **BUCKETS, ps_endpoints=[], secret_ref="arn:s")
    for s, stage in enumerate(plan.pipeline.stages):
        event = event_of(plan, s, endpoints=[f"10.0.{s}.1:7070", f"10.0.{s}.2:7070"])
        assert event["memory_mb"] == stage.memory_mb
        assert event["checkpoint_prefix"] == f"demo/checkpoints/stage-{s:02d}"
        assert event["ps_endpoints"] == [f"10.0.{s}.1:7070", f"10.0.{s}.2:7070"]
        assert event["stage"] == {
            "index": s, "count": stages, "first_block": stage.first_block,
            "stop_block": stage.stop_block, "micro_batches": 4, "boundary_prefix": "demo/pipe",
        }  # fmt: skip
        assert event["iterations_per_invocation"] == plan.iterations_per_invocation
        assert "iterations_per_invocation" not in whole  # a one-stage worker stops on its time
        changed = {"memory_mb", "checkpoint_prefix", "ps_endpoints", "stage",
                   "iterations_per_invocation"}  # fmt: skip
        assert {k: v for k, v in event.items() if k not in changed} == {
            k: v for k, v in whole.items() if k not in changed
        }
        assert "sync" not in event and "exchange_prefix" not in event  # a PS plan's defaults


def test_an_s3_stage_exchanges_under_its_own_prefix_with_the_per_stage_reducers() -> None:
    plan = pipelined_plan(3, sync="s3")
    for s in range(3):
        event = event_of(plan, s)
        assert (event["sync"], event["reducers"]) == ("s3", plan.reducers)
        assert event["exchange_prefix"] == f"demo/exchange/stage-{s:02d}"
        assert event["ps_endpoints"] == [] and event["memory_mb"] == (1024, 1536, 2048)[s]


def test_a_stage_event_parses_into_the_runtime_task() -> None:
    """Every key is one the runtime knows; `stage` is the pipelined runtime's (kept in `extra`
    by a runtime that predates it, and passed on to the next link unchanged)."""
    plan = pipelined_plan(2)
    event = event_of(plan, 1, rank=3, endpoints=["10.0.1.1:7070"])
    task = WorkerTask.from_event({**event, **run_keys("exec-1", "2026-01-01T00:00:00Z")})
    assert set(task.extra) <= {"stage"}
    assert (task.rank, task.n_workers, task.memory_mb) == (3, plan.n_workers, 1536)
    assert task.to_event()["stage"] == event["stage"]


def test_each_stage_touches_only_the_boundaries_beside_it() -> None:
    three = pipelined_plan(3)
    assert [stage_boundaries(three, s) for s in range(3)] == [
        ["demo/pipe/b00"],
        ["demo/pipe/b00", "demo/pipe/b01"],
        ["demo/pipe/b01"],
    ]
    two = pipelined_plan(2)
    assert [stage_boundaries(two, s) for s in range(2)] == [["demo/pipe/b00"], ["demo/pipe/b00"]]


def test_only_the_first_and_the_last_stage_read_the_dataset() -> None:
    assert [stage_reads_dataset(pipelined_plan(3), s) for s in range(3)] == [True, False, True]
    assert [stage_reads_dataset(pipelined_plan(2), s) for s in range(2)] == [True, True]


def test_a_stage_that_is_not_the_plans_is_refused_in_one_line() -> None:
    plan, other = pipelined_plan(2), pipelined_plan(3)
    assert other.pipeline is not None
    with pytest.raises(ValueError, match=r"^stage 2 is not a stage of plan demo's pipeline$"):
        stage_worker_event(plan, other.pipeline.stages[2], rank=0, **BUCKETS, ps_endpoints=[],
                           secret_ref="")  # fmt: skip


def test_a_stage_ps_shard_checkpoints_under_its_stage_and_the_ps_cli_accepts_it() -> None:
    plan = pipelined_plan(3)
    argv = ps_command(plan, shard=1, secret_ref="arn:secret", artifacts_bucket="b", stage=2)
    args = build_parser().parse_args(argv[3:])
    assert args.checkpoint_prefix == "demo/checkpoints/stage-02"
    assert (args.shard, args.shards, args.workers) == (1, plan.ps_count, plan.n_workers)
    one_stage = ps_command(plan, shard=1, secret_ref="arn:secret", artifacts_bucket="b")
    assert build_parser().parse_args(one_stage[3:]).checkpoint_prefix == "demo/checkpoints"
