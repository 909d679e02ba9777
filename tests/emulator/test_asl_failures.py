"""A failed execution says what started it: a runaway guard (a Pass that leaves the state as a
Catch would) going on through the PS's stop to the generic Fail keeps its Error and Cause as the
Fail's input, and the interpreter's trace holds them for the emulator's one-line error."""

from __future__ import annotations

from typing import Any

import pytest

from emulator.asl import Interpreter, StatesError

GUARDED = {
    "StartAt": "TooManyLinks",
    "States": {
        "TooManyLinks": {"Type": "Pass", "Next": "StopPs", "ResultPath": "$",
                         "Result": {"Error": "TooManyLinks",
                                    "Cause": "A worker ran 20 links, the plan's bound."}},
        "StopPs": {"Type": "Task", "Resource": "lambda:t", "Next": "Failed", "ResultPath": None},
        "Failed": {"Type": "Fail", "Cause": "A step failed; see the execution history."},
    },
}  # fmt: skip


def test_a_guard_s_error_reaches_the_generic_fail_as_its_input() -> None:
    def stop(params: dict[str, Any]) -> dict[str, Any]:
        return {"StoppingInstances": []}

    interpreter = Interpreter(GUARDED, {"lambda:t": stop})
    with pytest.raises(StatesError) as err:
        interpreter.run({"pace": {}})
    assert err.value.cause == "A step failed; see the execution history."
    assert interpreter.trace.fail_input == (
        "TooManyLinks",
        "A worker ran 20 links, the plan's bound.",
    )


def test_a_fail_reached_without_an_error_in_its_input_holds_none() -> None:
    plain = {"StartAt": "Failed", "States": {"Failed": {"Type": "Fail", "Cause": "no"}}}
    interpreter = Interpreter(plain, {})
    with pytest.raises(StatesError):
        interpreter.run({"pace": {}})
    assert interpreter.trace.fail_input is None
