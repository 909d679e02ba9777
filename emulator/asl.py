"""A small Amazon States Language interpreter: runs the synthesized state machine offline.

The emulator runs the training job through it (emulator/state_machine.py), and the tests run
the synthesized definitions through it on the real handlers, so what runs locally is what
`cdk deploy` ships.

Just the subset our state machines use, with AWS's semantics for it: Task (Parameters with
`.$` paths, ResultSelector, ResultPath incl. null, Retry with its interval, Catch), Pass
(Result, ResultPath, Parameters), Choice (BooleanEquals and the numeric comparisons, with a
value or a `...Path`), the intrinsic States.ArrayLength, Map (ItemsPath, ItemSelector with
`$$.Map.Item.Value`, ItemProcessor, items run concurrently up to MaxConcurrency), Parallel
(Branches run at once, outputs in branch order), Succeed (OutputPath) and Fail. The context
object has `Execution.Name` and `StartTime`, and `State.Name` and `EnteredTime` (ISO-8601, the
execution's start plus the interpreter's clock since it began: when the state was entered).
Step Functions' payload limit holds: a task result or a state's output over 256 KiB fails with
States.DataLimitExceeded, as in AWS.
Task resources are dispatched to Python callables by resource ARN, so the real handlers run
behind the real definition. Anything outside the subset raises `Unsupported`, never guesses.
"""

from __future__ import annotations

import concurrent.futures
import copy
import datetime
import json
import operator
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

Task = Callable[[dict[str, Any]], Any]
PAYLOAD_LIMIT_BYTES = 256 * 1024  # Step Functions' limit on a task result and a state's data
_COMPARISONS = {
    "BooleanEquals": operator.is_,
    "NumericEquals": operator.eq,
    "NumericLessThan": operator.lt,
    "NumericLessThanEquals": operator.le,
    "NumericGreaterThan": operator.gt,
    "NumericGreaterThanEquals": operator.ge,
}


def _parse_time(text: str) -> datetime.datetime:
    """An execution's StartTime (ISO-8601 with a zone; `Z` for UTC)."""
    when = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    return when if when.tzinfo else when.replace(tzinfo=datetime.UTC)


def within_payload_limit(value: Any, what: str) -> Any:
    """`value`, or States.DataLimitExceeded when its JSON exceeds 256 KiB (UTF-8)."""
    size = len(json.dumps(value, separators=(",", ":")).encode())
    if size > PAYLOAD_LIMIT_BYTES:
        raise StatesError("States.DataLimitExceeded", f"{what} is {size} bytes (limit 262144)")
    return value


class Unsupported(Exception):
    """The definition uses ASL this interpreter does not implement."""


class StatesError(Exception):
    """A state failed with an ASL error name (States.TaskFailed, a Fail state's Error, ...)."""

    def __init__(self, error: str, cause: str) -> None:
        super().__init__(f"{error}: {cause}")
        self.error, self.cause = error, cause


@dataclass
class Trace:
    """What ran: state names in order (Map items interleave), the final state, and the errors
    caught on the way."""

    states: list[str] = field(default_factory=list)
    end: str = ""
    # (state, error, cause) of every error a Catch turned into a transition, in order: a
    # failure path that ends in a generic Fail still says what started it
    caught: list[tuple[str, str, str]] = field(default_factory=list)
    # The Error and Cause a Fail state's input held (a guard's Pass or a Catch leaves them in the
    # state), what the execution history shows as the failure's input
    fail_input: tuple[str, str] | None = None


def resolve_cfn(value: Any, resolve: Callable[[dict[str, Any]], str]) -> str:
    """A DefinitionString (`Fn::Join` of strings and intrinsics) as plain JSON text."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Fn::Join" in value:
        sep, parts = value["Fn::Join"]
        return str(sep).join(resolve_cfn(p, resolve) for p in parts)
    if isinstance(value, dict):
        return resolve(value)
    raise Unsupported(f"DefinitionString part {value!r}")


def get_path(data: Any, path: str, context: Mapping[str, Any]) -> Any:
    """`$`, `$.a.b` on the state input, `$$.a.b` on the context object."""
    root, rest = (context, path[2:]) if path.startswith("$$") else (data, path[1:])
    if not path.startswith("$"):
        raise Unsupported(f"path {path!r}")
    value = root
    for key in [k for k in rest.split(".") if k]:
        if not isinstance(value, dict) or key not in value:
            raise StatesError("States.Runtime", f"path {path} not found")
        value = value[key]
    return value


def _present(data: Any, path: str, context: Mapping[str, Any]) -> bool:
    """Choice's IsPresent: whether `path` names a field (any other test on a missing field is
    States.Runtime, as in AWS)."""
    try:
        get_path(data, path, context)
    except StatesError:
        return False
    return True


def set_path(data: Any, path: str | None, result: Any) -> Any:
    """ResultPath: None discards the result, `$` replaces the input, `$.a` sets a field."""
    if path is None:
        return data
    if path == "$":
        return result
    keys = [k for k in path[1:].split(".") if k]
    out = copy.deepcopy(data) if isinstance(data, dict) else {}
    node = out
    for key in keys[:-1]:
        node = node.setdefault(key, {})
    node[keys[-1]] = result
    return out


def render(template: Any, data: Any, context: Mapping[str, Any]) -> Any:
    """Parameters / ItemSelector / ResultSelector: keys ending in `.$` are paths."""
    if isinstance(template, dict):
        out = {}
        for key, value in template.items():
            if key.endswith(".$"):
                if not isinstance(value, str):
                    raise Unsupported(f"non-path {key}: {value!r}")
                out[key[:-2]] = _intrinsic(value, data, context)
            else:
                out[key] = render(value, data, context)
        return out
    if isinstance(template, list):
        return [render(v, data, context) for v in template]
    return template


def _intrinsic(value: str, data: Any, context: Mapping[str, Any]) -> Any:
    """A path, or the one intrinsic function the definitions use: States.ArrayLength(path)."""
    if not value.startswith("States."):
        return get_path(data, value, context)
    inner = value.removeprefix("States.ArrayLength(").removesuffix(")")
    if inner == value or not inner.startswith("$"):
        raise Unsupported(f"intrinsic {value!r}")
    found = get_path(data, inner, context)
    if not isinstance(found, list):
        raise StatesError("States.Runtime", f"{inner} is not an array")
    return len(found)


def _matches(rule: Mapping[str, Any], error: str) -> bool:
    names = rule["ErrorEquals"]
    terminal = ("States.Runtime", "States.DataLimitExceeded")  # States.ALL never catches them
    return error in names or ("States.ALL" in names and error not in terminal)


class Interpreter:
    """Runs a definition; `tasks` maps a Task's Resource ARN to a callable(parameters).

    `sleep` waits a Retry's interval (IntervalSeconds, times BackoffRate per attempt); the
    default waits none, the emulator passes one scaled like its invocation limit. `abort` is
    set when a Map or Parallel fails, so tasks still running in its other items can stop (AWS
    stops them too) instead of holding the state until they end by themselves.
    """

    def __init__(self, definition: Mapping[str, Any], tasks: Mapping[str, Task],
                 sleep: Callable[[float], None] = lambda _s: None,
                 monotonic: Callable[[], float] = time.monotonic) -> None:  # fmt: skip
        self.definition, self.tasks, self.trace = definition, tasks, Trace()
        self.sleep = sleep
        self.abort = threading.Event()
        # `$$.State.EnteredTime`: the execution's StartTime plus this clock's seconds since run
        self.monotonic = monotonic
        self._started: tuple[datetime.datetime, float] | None = None

    def run(self, data: Any, *, name: str | None = None,
            start_time: str = "2026-01-01T00:00:00.000Z") -> Any:  # fmt: skip
        """Run an execution called `name` (default: a new unique one, as StartExecution names
        it), started at `start_time` (the context object)."""
        name = name or f"exec-{uuid.uuid4()}"
        self._started = (_parse_time(start_time), self.monotonic())
        context = {"Execution": {"Name": name, "StartTime": start_time}}
        output, end = self._machine(self.definition, data, context)
        self.trace.end = end
        return output

    def _machine(self, machine: Mapping[str, Any], data: Any,
                 context: Mapping[str, Any]) -> tuple[Any, str]:  # fmt: skip
        name, outer = machine["StartAt"], context
        while True:
            state = machine["States"][name]
            self.trace.states.append(name)
            context = {**outer, "State": {"Name": name, "EnteredTime": self._entered_time()}}
            kind = state["Type"]
            if kind == "Succeed":
                return (get_path(data, state["OutputPath"], context)
                        if "OutputPath" in state else data), name  # fmt: skip
            if kind == "Fail":
                if isinstance(data, dict) and {"Error", "Cause"} <= set(data):
                    self.trace.fail_input = (str(data["Error"]), str(data["Cause"]))
                raise StatesError(state.get("Error", "States.Fail"), state.get("Cause", ""))
            if kind == "Choice":
                name = self._choose(state, data, context)
                continue
            try:
                data = within_payload_limit(self._step(state, data, context), f"{name} output")
            except StatesError as err:
                catch = next((c for c in state.get("Catch", []) if _matches(c, err.error)), None)
                if catch is None:
                    raise
                self.trace.caught.append((name, err.error, err.cause))
                data = set_path(data, catch.get("ResultPath", "$"),
                                {"Error": err.error, "Cause": err.cause})  # fmt: skip
                name = catch["Next"]
                continue
            if state.get("End"):
                return data, name
            name = state["Next"]

    def _entered_time(self) -> str:
        """Now, as `$$.State.EnteredTime`: ISO-8601 in UTC with milliseconds, as AWS writes it."""
        if self._started is None:  # a machine run outside `run` (a test's Map item)
            self._started = (datetime.datetime.now(datetime.UTC), self.monotonic())
        start, at_s = self._started
        when = start + datetime.timedelta(seconds=self.monotonic() - at_s)
        return when.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.") + (
            f"{when.microsecond // 1000:03d}Z"
        )

    def _choose(self, state: Mapping[str, Any], data: Any, context: Mapping[str, Any]) -> str:
        for rule in state["Choices"]:
            (test,) = set(rule) - {"Variable", "Next"} or {None}
            if test == "IsPresent":
                if _present(data, rule["Variable"], context) is rule[test]:
                    return str(rule["Next"])
                continue
            name = str(test).removesuffix("Path")
            if name not in _COMPARISONS:
                raise Unsupported(f"choice rule {rule}")
            expected = rule[test]
            if test.endswith("Path"):
                expected = get_path(data, expected, context)
            if _COMPARISONS[name](get_path(data, rule["Variable"], context), expected):
                return str(rule["Next"])
        if "Default" not in state:
            raise StatesError("States.NoChoiceMatched", str(data))
        return str(state["Default"])

    def _step(self, state: Mapping[str, Any], data: Any, context: Mapping[str, Any]) -> Any:
        kind = state["Type"]
        if kind == "Pass":
            if "Parameters" in state:
                result = render(state["Parameters"], data, context)
            else:
                result = state.get("Result", data)
            return set_path(data, state.get("ResultPath", "$"), result)
        if kind == "Task":
            result = self._task(state, render(state.get("Parameters", data), data, context))
        elif kind == "Map":
            result = self._map(state, data, context)
        elif kind == "Parallel":
            result = self._parallel(state, data, context)
        else:
            raise Unsupported(f"state type {kind}")
        if "ResultSelector" in state:
            result = render(state["ResultSelector"], result, context)
        return set_path(data, state.get("ResultPath", "$"), result)

    def _task(self, state: Mapping[str, Any], params: dict[str, Any]) -> Any:
        call = self.tasks.get(state["Resource"])
        if call is None:
            raise Unsupported(f"no task for {state['Resource']}")
        attempts: dict[int, int] = {}
        while True:
            try:
                return within_payload_limit(call(params), f"{state['Resource']} result")
            except StatesError as err:
                error = err
            except Exception as exc:  # noqa: BLE001  # a handler error is a TaskFailed, as in AWS
                error = StatesError("States.TaskFailed", f"{type(exc).__name__}: {exc}")
            rules = state.get("Retry", [])
            index = next((i for i, r in enumerate(rules) if _matches(r, error.error)), None)
            if index is None or attempts.get(index, 0) >= rules[index].get("MaxAttempts", 3):
                raise error
            if self.abort.is_set():
                raise error
            rule, done = rules[index], attempts.get(index, 0)
            self.sleep(rule.get("IntervalSeconds", 1) * rule.get("BackoffRate", 2.0) ** done)
            attempts[index] = done + 1

    def _map(self, state: Mapping[str, Any], data: Any, context: Mapping[str, Any]) -> list[Any]:
        items = get_path(data, state.get("ItemsPath", "$"), context)
        processor = state.get("ItemProcessor") or state.get("Iterator")
        if processor is None or not isinstance(items, list):
            raise Unsupported("Map without ItemProcessor or with non-list items")
        selector = state.get("ItemSelector") or state.get("Parameters")

        def one(index: int, value: Any) -> Any:
            item_context = {**context, "Map": {"Item": {"Index": index, "Value": value}}}
            item = render(selector, data, item_context) if selector is not None else value
            return self._machine(processor, item, item_context)[0]

        workers = state.get("MaxConcurrency") or len(items) or 1
        with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
            futures = [pool.submit(one, i, v) for i, v in enumerate(items)]
            return self._all_or_abort(futures)

    def _parallel(self, state: Mapping[str, Any], data: Any,
                  context: Mapping[str, Any]) -> list[Any]:  # fmt: skip
        """Every branch on the same input at once; the first failure fails the state."""
        branches = state["Branches"]
        with concurrent.futures.ThreadPoolExecutor(max_workers=len(branches)) as pool:
            futures = [pool.submit(self._machine, b, data, context) for b in branches]
            return [out for out, _ in self._all_or_abort(futures)]

    def _all_or_abort(self, futures: list[concurrent.futures.Future[Any]]) -> list[Any]:
        """Every result in order; the first failure (or an interrupt) sets `abort` so the other
        items' tasks stop, and fails the state (AWS stops the other iterations too)."""
        try:
            for done in concurrent.futures.as_completed(futures):
                done.result()
            return [f.result() for f in futures]
        except BaseException:
            self.abort.set()
            raise
