"""The ASL interpreter's context object: `$$.State.EnteredTime` is when each state was entered,
the execution's StartTime plus the interpreter's clock since the run began (driven here)."""

from __future__ import annotations

from typing import Any

from emulator.asl import Interpreter


class Clock:
    """monotonic() as the test drives it: each task call takes `step_s`."""

    def __init__(self, step_s: float) -> None:
        self.now_s, self.step_s = 50.0, step_s

    def monotonic(self) -> float:
        return self.now_s

    def task(self, params: dict[str, Any]) -> dict[str, Any]:
        self.now_s += self.step_s
        return params


DEFINITION = {
    "StartAt": "First",
    "States": {
        "First": {"Type": "Task", "Resource": "lambda:t", "Next": "Second",
                  "Parameters": {"at.$": "$$.State.EnteredTime", "name.$": "$$.State.Name"},
                  "ResultPath": "$.first"},
        "Second": {"Type": "Task", "Resource": "lambda:t", "Next": "Items",
                   "Parameters": {"at.$": "$$.State.EnteredTime",
                                  "started.$": "$$.Execution.StartTime"},
                   "ResultPath": "$.second"},
        "Items": {"Type": "Map", "ItemsPath": "$.items", "MaxConcurrency": 1, "End": True,
                  "ResultPath": "$.mapped",
                  "ItemSelector": {"at.$": "$$.State.EnteredTime"},
                  "ItemProcessor": {"StartAt": "Inner", "States": {
                      "Inner": {"Type": "Pass", "End": True,
                                "Parameters": {"selected.$": "$.at",
                                               "inner.$": "$$.State.EnteredTime"}}}}},
    },
}  # fmt: skip


def test_each_state_sees_the_time_it_was_entered_in_the_start_times_form() -> None:
    clock = Clock(step_s=2.5)
    interpreter = Interpreter(DEFINITION, {"lambda:t": clock.task}, monotonic=clock.monotonic)
    out = interpreter.run({"items": [0, 1]}, start_time="2026-01-01T00:00:00.000Z")
    assert out["first"] == {"at": "2026-01-01T00:00:00.000Z", "name": "First"}
    # entered after First's task took 2.5 s on the clock
    assert out["second"] == {"at": "2026-01-01T00:00:02.500Z",
                             "started": "2026-01-01T00:00:00.000Z"}  # fmt: skip
    # the Map was entered after Second's 2.5 s; its items see the Map's entry, their own state
    # its own (no clock moved between them)
    assert out["mapped"] == [{"selected": "2026-01-01T00:00:05.000Z",
                              "inner": "2026-01-01T00:00:05.000Z"}] * 2  # fmt: skip


def test_entered_time_follows_a_start_with_microseconds_and_crosses_midnight() -> None:
    clock = Clock(step_s=0.0)
    definition = {"StartAt": "Wait", "States": {
        "Wait": {"Type": "Task", "Resource": "lambda:t", "Next": "After",
                 "ResultPath": None},
        "After": {"Type": "Pass", "End": True, "Parameters": {"at.$": "$$.State.EnteredTime"}},
    }}  # fmt: skip

    def wait(params: dict[str, Any]) -> None:
        clock.now_s += 90.0

    interpreter = Interpreter(definition, {"lambda:t": wait}, monotonic=clock.monotonic)
    # `functions.runs.new_run`'s form: microseconds and a Z
    out = interpreter.run({}, start_time="2026-03-31T23:59:00.123456Z")
    assert out == {"at": "2026-04-01T00:00:30.123Z"}
