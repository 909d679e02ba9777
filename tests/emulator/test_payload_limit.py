"""Step Functions' 256 KiB limit holds what a handler returns, not what the emulator records.

The emulator reads every link's record (each loss and step time, about 38 bytes an iteration)
for its report; a link of 7,000 iterations made that record larger than the limit, and the
run failed with States.DataLimitExceeded although the handler returned 1.5 KB. The link is
driven through the real dispatch (LocalRun.invoke) and the real interpreter, with a pool whose
invocations end at once, so no worker trains.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from emulator import state_machine
from emulator.asl import PAYLOAD_LIMIT_BYTES, Interpreter, StatesError
from emulator.invocation import Outcome
from emulator.options import Options
from emulator.procs import Supervisor
from emulator.records import WorkerState
from emulator.workers import WorkerPool
from tests.stacks.conftest import make_plan

ITERATIONS = 12_000  # a link this long enriched past the limit


class InstantPool(WorkerPool):
    """A pool whose invocations return `handler_result` at once; recording is the real one."""

    handler_result: dict[str, Any] = {}

    def launch(self, worker: WorkerState) -> None:
        worker.current = None

    def poll(self, worker: WorkerState) -> Outcome:
        return Outcome(ok=True, result=self.handler_result, wall_s=1.0, exit_code=0, error="")


def _enriched(result: dict[str, Any]) -> dict[str, Any]:
    """What the emulator's read of the link's record adds: every loss and step time."""
    return {
        **result,
        "losses": [[i, 2.302585 - i * 1e-5] for i in range(ITERATIONS)],
        "step_compute_s": [0.0031] * ITERATIONS,
    }


def _one_link(tmp_path: Path, handler_result: dict[str, Any]) -> tuple[Any, WorkerState]:
    run = state_machine.LocalRun(
        supervisor=Supervisor(), plan=make_plan(n_workers=1), options=Options(), env={},
        logs=tmp_path, buckets={}, worker_event_extra={}, placements=[],
        read_record=_enriched, secret=b"", progress=None, deadline_monotonic_s=1e12,
        say=lambda _: None,
    )  # fmt: skip
    pool = InstantPool(run.supervisor, run.plan, run.options, env={}, logs=tmp_path,
                       placements=[], read_record=_enriched)  # fmt: skip
    pool.handler_result = handler_result
    run.pool = pool
    definition = {
        "StartAt": "RunWorker",
        "States": {
            "RunWorker": {
                "Type": "Task",
                "Resource": state_machine.INVOKE,
                "Parameters": {"FunctionName": "lambda:worker", "Payload": {"rank": 0}},
                "ResultSelector": {"result.$": "$.Payload"},
                "End": True,
            }
        },
    }
    run.interpreter = Interpreter(definition, run.tasks())
    return run.interpreter.run({}), run.workers[0]


def test_a_link_whose_record_is_large_passes_when_its_handler_result_is_small(
    tmp_path: Path,
) -> None:
    result = {"done": True, "iteration": ITERATIONS, "record_key": "records/0/link-0.json"}
    assert len(str(_enriched(result))) > PAYLOAD_LIMIT_BYTES  # the record would not fit
    output, worker = _one_link(tmp_path, result)
    assert output == {"result": result}
    assert len(worker.links[0]["losses"]) == ITERATIONS  # the report still has every loss


def test_a_handler_result_over_the_limit_still_fails_with_data_limit_exceeded(
    tmp_path: Path,
) -> None:
    result = {"done": True, "iteration": 1, "blob": "x" * (PAYLOAD_LIMIT_BYTES + 1)}
    with pytest.raises(StatesError) as failed:
        _one_link(tmp_path, result)
    assert failed.value.error == "States.DataLimitExceeded"
    assert "lambda:invoke result is" in failed.value.cause
