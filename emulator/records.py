"""What a run records, in the raw: each worker's chain of invocations, the whole run's record
(emulator/report.py turns it into predicted vs measured), and the one error a run fails with.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from emulator.invocation import Environment, Invocation
from emulator.options import Options
from provisioner.plan import Plan


class EmulatorError(RuntimeError):
    """The run could not complete; the message is one line naming what failed. `states`: the
    state machine's top-level states the run went through, when it got that far."""

    states: tuple[str, ...] = ()


@dataclass
class WorkerState:
    """One worker's chain of invocations (mutable while the run goes on)."""

    rank: int
    event: dict[str, Any]
    stage: int | None = None  # a pipelined plan's: the stage this replica's function runs
    done: bool = False
    current: Invocation | None = None
    environment: Environment | None = None
    links: list[dict[str, Any]] = field(default_factory=list)  # one per successful invocation
    failures: list[str] = field(default_factory=list)
    iteration: int = 0
    stalled: bool = False  # its last link did not advance (the state machine's `$.stalled`)
    attempt: int = 1

    @property
    def label(self) -> str:
        """How logs and notes name it: its rank, or in a pipelined plan `<stage>-<rank>`."""
        return worker_label(self.rank, self.stage)


def worker_label(rank: int, stage: int | None = None) -> str:
    """A worker's name in logs, notes and CPU placements (WorkerState.label)."""
    return str(rank) if stage is None else f"{stage}-{rank}"


def stage_keys(plan: Plan) -> list[tuple[int | None, int]]:
    """Every worker as (stage, rank), stage by stage: (None, r) for a one-stage plan's."""
    stages: list[int | None] = (
        [None] if plan.pipeline is None else list(range(plan.pipeline.stage_count))
    )
    return [(s, r) for s in stages for r in range(plan.n_workers)]


def worker_slots(plan: Plan) -> list[tuple[int | None, int]]:
    """Every worker a run may need, as (stage, rank): `stage_keys`, or for a plan that re-plans
    one slot per rank up to the envelope's most workers (a re-plan takes its count from them)."""
    if plan.replan is None:
        return stage_keys(plan)
    return [(None, r) for r in range(max(plan.n_workers, plan.replan.envelope.max_workers))]


def segment_workers(workers: list[WorkerState], n_workers: int | None) -> list[WorkerState]:
    """The workers of the segment that runs now: ranks below its `n_workers` (a re-planning
    run's slots above it wait for a re-plan that asks for them); every worker when None."""
    return workers if n_workers is None else [w for w in workers if w.rank < n_workers]


def worker_index(plan: Plan, stage: int | None, rank: int) -> int:
    """A worker's place in `stage_keys` (and in the run's list of workers and placements)."""
    return (stage or 0) * plan.n_workers + rank


def event_stage(event: dict[str, Any]) -> int | None:
    """The stage a worker event is for (its `stage` member's index); None for a one-stage plan."""
    stage = event.get("stage")
    return None if stage is None else int(stage["index"])


def worker_memory_mb(plan: Plan, stage: int | None) -> int:
    """The memory of the function a worker runs in: its stage's, or the plan's."""
    return (
        plan.memory_mb
        if stage is None or plan.pipeline is None
        else (plan.pipeline.stages[stage].memory_mb)
    )


def check_memory_ceiling(plan: Plan, ceiling_mb: int | None) -> None:
    """ValueError, one line, where a function of the plan holds more than the local memory
    ceiling (`--memory-ceiling`; None: no ceiling): such a plan was not made for this machine's
    functions (`python -m provisioner plan --memory-ceiling` makes one that is)."""
    if ceiling_mb is None:
        return
    stages = range(len(plan.pipeline.stages)) if plan.pipeline is not None else [None]
    for stage in stages:
        memory = worker_memory_mb(plan, stage)
        where = "the plan's functions" if stage is None else f"stage {stage}'s functions"
        if plan.replan is not None and stage is None:  # a re-plan may run its largest variant
            memory = max(memory, *plan.replan.envelope.memory_variants_mb)
            where = "the plan's re-planning envelope's functions"
        if memory > ceiling_mb:
            raise ValueError(
                f"bad --memory-ceiling {ceiling_mb}: {where} hold {memory} MB; accepted: a "
                f"ceiling of at least {memory} MB, or a plan made under it (python -m "
                f"provisioner plan --memory-ceiling {ceiling_mb})"
            )


@dataclass(frozen=True)
class RunRecord:
    """What happened, in the raw: the report module turns it into predicted vs measured."""

    plan: Plan
    options: Options
    cpu_scale: float
    cpu_status: str
    worker_cores: float
    s3_kind: str
    s3_url: str
    buckets: dict[str, str]
    prepare_s: float
    ps_start_s: float
    train_wall_s: float
    finalize_s: float
    workers: list[WorkerState]
    finalize_result: dict[str, Any]
    out_dir: Path
    throttled_s: dict[str, float]
    child_pids: list[int]  # every process the run started (all gone when run() returns)
    ps_update_s: float | None = None  # slowest PS shard's total update time (STATUS)
    ps_restarts: int = 0  # PS shard processes that died and were started again
    run_id: str = ""  # the run's checkpoints are under <checkpoint prefix>/<run_id>
    # The synthesized state machine's top-level states in the order the run went through them.
    states: tuple[str, ...] = ()

    @property
    def workload(self) -> str:
        """The profile the report predicts from: the option's, else the plan's name."""
        return self.options.workload or self.plan.workload
