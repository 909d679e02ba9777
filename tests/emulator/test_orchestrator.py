"""The emulator's own copies of the state machine's rules (fan_out, and the messages that name
why the interpreted definition failed)."""

from __future__ import annotations

import dataclasses
import io
import json
from typing import Any

from emulator.orchestrator import links_bound_for_limit, with_losses
from emulator.records import WorkerState
from emulator.workers import advanced, relaunch_note, stall_failure
from tests.emulator.plans import planned_digits


def test_a_link_must_advance_like_in_the_state_machine() -> None:
    assert advanced({"start_iteration": 4}, {"start_iteration": 5})
    assert not advanced({"start_iteration": 4}, {"start_iteration": 4})
    assert not advanced({}, {"start_iteration": 0})


def _link(start: int, reached: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """A link's event and result: from `start` to `reached`, stopped by the time limit."""
    return {"start_iteration": start, "invocation": 0}, {
        "iteration": reached, "stopped": "time_limit",
        "next_event": {"start_iteration": reached, "invocation": 1},
    }  # fmt: skip


def test_a_stalled_link_is_re_invoked_once_and_a_second_in_a_row_fails_the_run() -> None:
    """A cold link may spend its budget starting; the warm one after it must advance."""
    worker = WorkerState(rank=2, event={})
    assert stall_failure(worker, *_link(0, 0)) is None and worker.stalled
    assert "made no progress" in relaunch_note(worker, *_link(0, 0))
    failure = stall_failure(worker, *_link(0, 0))
    assert failure is not None
    assert failure.startswith("worker 2: link 0 made no progress (stopped at iteration 0: "
                              "time_limit), the second link in a row")  # fmt: skip


def test_an_advancing_link_clears_the_stall() -> None:
    worker = WorkerState(rank=0, event={})
    assert stall_failure(worker, *_link(0, 0)) is None
    assert stall_failure(worker, *_link(0, 7)) is None and not worker.stalled
    assert relaunch_note(worker, *_link(0, 7)).endswith("re-invoking (link 1)")
    assert stall_failure(worker, *_link(7, 7)) is None  # a stall later in the run: once again


class _OneObject:
    def __init__(self, key: str, body: dict[str, Any]) -> None:
        self.key, self.body = key, json.dumps(body).encode()

    def get_object(self, *, Bucket: str, Key: str) -> dict[str, Any]:  # noqa: N803  # boto3's
        assert Key == self.key
        return {"Body": io.BytesIO(self.body)}


def test_the_losses_and_step_times_of_a_link_come_from_its_record() -> None:
    record = {"losses": [[0, 2.3], [1, 2.1]], "step_compute_s": [0.012, 0.004]}
    s3 = _OneObject("j/runs/r/links/rank-00000-link-00000.json", record)
    result = {"done": True, "record_key": s3.key}
    assert with_losses(s3, "b", result) == {**result, **record}
    # a record written before step times were recorded: none
    old = _OneObject(s3.key, {"losses": [[0, 2.3]]})
    assert with_losses(old, "b", result) == {**result, "losses": [[0, 2.3]], "step_compute_s": []}
    assert with_losses(s3, "b", {"done": True}) == {"done": True}  # a handler without records


def test_a_shorter_invocation_limit_scales_the_plans_link_bound() -> None:
    """A 900 s plan of one link may take 5 links; the same work under a 4 s limit (3 usable s
    against 870) takes up to 290 times as many, so the bound is 3·290 + 2: the run is not
    failed as runaway for the links a short limit needs (it was, on a slow machine)."""
    plan = dataclasses.replace(
        planned_digits("bound"), invocation_timeout_s=900, invocations_per_worker=1,
        max_links_per_worker=5,
    )  # fmt: skip
    assert links_bound_for_limit(plan, 4.0, 1.0) == 3 * 290 + 2
    # at the plan's own limit (or a longer one) the plan's bound stands
    assert links_bound_for_limit(plan, 900.0, 30.0) == 5
    assert links_bound_for_limit(plan, 900.0, 300.0) == 3 * 2 + 2
