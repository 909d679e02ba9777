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
    attempt: int = 1
    done: bool = False
    current: Invocation | None = None
    environment: Environment | None = None
    links: list[dict[str, Any]] = field(default_factory=list)  # one per successful invocation
    failures: list[str] = field(default_factory=list)
    iteration: int = 0
    stalled: bool = False  # its last link did not advance (the state machine's `$.stalled`)


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
