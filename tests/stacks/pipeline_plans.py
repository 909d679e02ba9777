"""Pipelined Plans for the stacks' tests: the hand-built plan with a hand-made Pipeline.

The planner's pipelined choices are another module's business; these pin the stacks to the
Plan's fields (stage memory, S, M, r, ps_count and reducers per stage) and nothing else.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from provisioner.pipeline_plan import Pipeline, Stage
from provisioner.plan import Plan
from tests.stacks.conftest import make_plan

# Stage memories differ so a test can tell the stages' functions apart by their size too.
STAGE_MEMORY_MB = (1024, 1536, 2048)


def stage(index: int, first: int, stop: int, memory_mb: int) -> Stage:
    """A stage of blocks [first, stop) with plausible predicted terms."""
    return Stage(
        index=index, first_block=first, stop_block=stop,
        block_names=tuple(f"{b}:Linear" for b in range(first, stop)), memory_mb=memory_mb,
        vcpu_share=memory_mb / 1769, parameter_bytes=10_000 * (stop - first),
        memory_needed_mb=memory_mb - 200, compute_per_micro_batch_s=0.01,
        boundary_per_micro_batch_s=0.02, sync_per_iteration_s=0.05,
    )  # fmt: skip


def pipelined_plan(stages: int = 2, *, sync: str = "ps", micro_batches: int = 4,
                   **overrides: Any) -> Plan:  # fmt: skip
    """The hand-built plan cut into `stages` stages of one block each (the last takes the rest)
    with M = `micro_batches`; `sync` "s3" makes it an S3-sync plan as tests/stacks/test_s3_sync
    does (2 reducers per stage, no PS)."""
    cuts = [(s, s + 1) for s in range(stages - 1)] + [(stages - 1, stages + 1)]
    pipeline = Pipeline(
        stages=tuple(stage(s, a, b, STAGE_MEMORY_MB[s]) for s, (a, b) in enumerate(cuts)),
        micro_batches=micro_batches, reason="cheaper",
    )  # fmt: skip
    plan = dataclasses.replace(make_plan(**overrides), pipeline=pipeline,
                               memory_mb=max(s.memory_mb for s in pipeline.stages))  # fmt: skip
    if sync == "s3":
        plan = dataclasses.replace(plan, sync="s3", reducers=2, ps_count=0, ps_type="none",
                                   interface_endpoints=())  # fmt: skip
    return plan
