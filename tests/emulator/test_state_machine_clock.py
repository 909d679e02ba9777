"""The emulator's training clock: it stops when the last worker's final result is seen."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from emulator import state_machine
from emulator.invocation import Outcome
from emulator.options import Options
from emulator.procs import Supervisor
from emulator.records import WorkerState
from tests.stacks.conftest import make_plan


class Clock:
    """monotonic() as the test drives it."""

    def __init__(self) -> None:
        self.now_s = 100.0

    def monotonic(self) -> float:
        return self.now_s


class SlowToRecordPool:
    """A pool whose links finish at once, done, and whose record (the emulator's S3 read of the
    link's record and its stop of the worker's environment) takes `record_s` on the clock."""

    def __init__(self, clock: Clock, record_s: float) -> None:
        self.clock, self.record_s = clock, record_s

    def launch(self, worker: WorkerState) -> None:
        self.clock.now_s += 1.0  # the link's own wall

    def poll(self, worker: WorkerState) -> Outcome:
        return Outcome(ok=True, result={"done": True}, wall_s=1.0, exit_code=0, error="")

    def record(self, worker: WorkerState, outcome: Outcome) -> dict[str, Any]:
        self.clock.now_s += self.record_s
        worker.done = True
        return outcome.result


def test_the_training_clock_stops_at_the_last_final_result_not_after_its_housekeeping(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock()
    monkeypatch.setattr(state_machine.time, "monotonic", clock.monotonic)
    run = state_machine.LocalRun(
        supervisor=Supervisor(), plan=make_plan(n_workers=2), options=Options(), env={},
        logs=tmp_path, buckets={}, worker_event_extra={}, placements=[], read_record=dict,
        secret=b"", progress=None, deadline_monotonic_s=1e9, say=lambda _: None,
    )  # fmt: skip
    run.pool = SlowToRecordPool(clock, record_s=5.0)  # type: ignore[assignment]
    run.run_worker({"rank": 0})  # launched at 100, seen at 101, recorded by 106
    run.run_worker({"rank": 1})  # launched at 106, seen at 107, recorded by 112
    assert (run.timings.train_started_s, run.timings.train_ended_s) == (100.0, 107.0)
