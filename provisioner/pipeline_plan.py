"""A pipelined plan's stages: the part of a Plan that exists only when the model is cut.

A plan with one stage (every worker holds the whole model) carries no `pipeline` at all, so its
JSON and the templates built from it are what they were before pipelining existed. A plan with
S ≥ 2 stages cuts the model's blocks (`functions.blocks`) into S contiguous ranges; each data-
parallel replica of the job is a chain of S functions, stage s holding blocks
[first_block, stop_block). `Plan.n_workers` is the replica count (every stage has that many
functions) and `Plan.memory_mb` the largest stage's memory; each stage's own memory is here.

Per iteration each replica's local batch is split into `micro_batches` micro-batches that run
GPipe's schedule (all forwards, then all backwards), their activations and activation gradients
travelling stage to stage through S3 (`boundary`). At the end of the batch each stage
synchronises its own parameters among its replicas with the plan's sync mode: its own PS shards
(`Plan.ps_count` per stage) or its own S3 exchange (`Plan.reducers` per stage).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

SCHEDULES = ("gpipe",)
BOUNDARIES = ("s3",)
REASONS = ("does-not-fit", "cheaper")


@dataclass(frozen=True)
class Stage:
    """One stage: blocks [first_block, stop_block) on `Plan.n_workers` functions of `memory_mb`."""

    index: int
    first_block: int
    stop_block: int
    block_names: tuple[str, ...]
    memory_mb: int
    vcpu_share: float
    parameter_bytes: int
    memory_needed_mb: int  # runtime + parameters, gradients, momentum + activations in flight
    compute_per_micro_batch_s: float  # forward + backward of one micro-batch at vcpu_share
    boundary_per_micro_batch_s: float  # this stage's activation/gradient transfers of one
    sync_per_iteration_s: float  # this stage's gradient exchange among its replicas


@dataclass(frozen=True)
class Pipeline:
    """The cut, the schedule and why the planner cut the model at all."""

    stages: tuple[Stage, ...]
    micro_batches: int
    reason: str  # one of REASONS: the model does not fit one function, or cutting is cheaper
    schedule: str = "gpipe"
    boundary: str = "s3"  # where activations travel between stages

    @property
    def stage_count(self) -> int:
        return len(self.stages)


def pipeline_from_dict(data: dict[str, Any]) -> Pipeline:
    """The Pipeline in `data` (already checked by `check_pipeline_dict`)."""
    stages = tuple(Stage(**{**s, "block_names": tuple(s["block_names"])}) for s in data["stages"])
    return Pipeline(**{**data, "stages": stages})


def pipeline_to_dict(pipeline: Pipeline) -> dict[str, Any]:
    return dataclasses.asdict(pipeline)


def check_pipeline_dict(data: Any, n_blocks_hint: int | None = None) -> None:
    """ValueError (one line naming the field and what is accepted) for a bad `pipeline` member."""
    if not isinstance(data, dict):
        raise ValueError(
            f"plan field 'pipeline': expected a JSON object, got {type(data).__name__}"
        )
    known = {f.name for f in dataclasses.fields(Pipeline)}
    for name in data:
        if name not in known:
            raise ValueError(f"plan field 'pipeline.{name}' is not a plan field")
    for name, choices in (("schedule", SCHEDULES), ("boundary", BOUNDARIES), ("reason", REASONS)):
        value = data.get(name, choices[0])
        if value not in choices:
            raise ValueError(
                f"plan field 'pipeline.{name}': {value!r} is not one of {', '.join(choices)}"
            )
    m = data.get("micro_batches")
    if not isinstance(m, int) or isinstance(m, bool) or m < 1:
        raise ValueError(f"plan field 'pipeline.micro_batches': {m!r} is not an integer ≥ 1")
    stages = data.get("stages")
    if not isinstance(stages, list | tuple) or len(stages) < 2:
        raise ValueError(
            f"plan field 'pipeline.stages': {stages!r} is not a list of at least 2 stages "
            "(a one-stage plan carries no pipeline)"
        )
    fields = {f.name for f in dataclasses.fields(Stage)}
    expect = 0
    for i, stage in enumerate(stages):
        where = f"pipeline.stages[{i}]"
        if not isinstance(stage, dict) or set(stage) != fields:
            got = sorted(stage) if isinstance(stage, dict) else type(stage).__name__
            raise ValueError(f"plan field {where!r}: {got!r} is not a stage; use {sorted(fields)}")
        if stage["index"] != i or stage["first_block"] != expect:
            raise ValueError(
                f"plan field '{where}.first_block': {stage['first_block']!r} does not follow the "
                f"previous stage; stages are contiguous from block 0 (expected {expect})"
            )
        if not stage["stop_block"] > stage["first_block"]:
            raise ValueError(
                f"plan field '{where}.stop_block': {stage['stop_block']!r} leaves the stage empty; "
                f"use more than first_block ({stage['first_block']})"
            )
        if len(stage["block_names"]) != stage["stop_block"] - stage["first_block"]:
            raise ValueError(
                f"plan field '{where}.block_names': {len(stage['block_names'])} names for "
                f"{stage['stop_block'] - stage['first_block']} blocks; use one name per block"
            )
        expect = stage["stop_block"]
    if n_blocks_hint is not None and expect != n_blocks_hint:
        raise ValueError(
            f"plan field 'pipeline.stages': the stages cover {expect} blocks of {n_blocks_hint}; "
            "use stages that cover every block"
        )
