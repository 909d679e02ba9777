"""Stand-in Lambda handlers for the supervision tests (no torch, no PS): crash, hang, chain."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Any


def _spawn_grandchild(event: dict[str, Any]) -> None:
    """A long sleeper the handler leaves behind: cleanup must kill it with the process group."""
    child = subprocess.Popen(["sleep", "300"])
    with Path(event["pid_file"]).open("a") as pids:
        pids.write(f"{child.pid}\n")


def crash(event: dict[str, Any], context: Any) -> dict[str, Any]:
    _spawn_grandchild(event)
    raise RuntimeError(f"worker {event['rank']} crashed on purpose")


def hang(event: dict[str, Any], context: Any) -> dict[str, Any]:
    _spawn_grandchild(event)
    time.sleep(300)
    return {}


def chain(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Links of 10 iterations each, a falling loss, done after three that advanced; fails once
    if asked to; the links `stall_links` names end where they started (a cold start that took
    the whole budget)."""
    link = int(event.get("invocation", 0))
    flaky = Path(event["pid_file"]).with_suffix(f".flaky-{event['rank']}")
    if event.get("fail_first_link") and link == 1 and not flaky.exists():
        flaky.write_text("failed once")
        raise RuntimeError("transient failure")
    start = int(event.get("start_iteration", 0))
    end = start if link in event.get("stall_links", []) else start + 10
    return {
        "done": end >= 30,
        "iteration": end,
        "next_event": {**event, "start_iteration": end, "invocation": link + 1},
        "losses": [[it, 1.0 / (it + 1)] for it in range(start, end)],
        "pid": os.getpid(),
        "timings": {
            "compute_s": 0.01,
            "startup_s": 0.02,
            "remaining_ms_at_start": context.get_remaining_time_in_millis(),
        },
    }


CRASH_POINTS = ("start", "after_push", "after_step", "before_checkpoint")


def crash_at(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """The real worker handler, except rank 0's first attempt SIGKILLs itself (no checkpoint, no
    goodbye to the PS) at the point EMU_TEST_CRASH_POINT names, after EMU_TEST_CRASH_AFTER
    steps where that applies; once per marker file EMU_TEST_CRASH_MARKER.

    - start: before the handler touches S3 or the PS;
    - after_push: gradients of step N pushed, its parameters never pulled (the PS holds a
      gradient from a worker that is gone; the retry must not apply it twice);
    - after_step: step N complete;
    - before_checkpoint: at the end of the link, when rank 0 asks the PS to checkpoint.
    """
    import signal

    from functions import worker
    from functions.ps_client import PSClient

    marker = Path(os.environ["EMU_TEST_CRASH_MARKER"])
    point = os.environ["EMU_TEST_CRASH_POINT"]
    after = int(os.environ.get("EMU_TEST_CRASH_AFTER", "100"))
    if event["rank"] != 0 or marker.exists():
        return worker.handler(event, context)
    marker.write_text(point)

    def die(*_: Any, **__: Any) -> None:
        os.kill(os.getpid(), signal.SIGKILL)

    def die_after(method: Any) -> Any:
        calls = [0]

        def wrapped(*args: Any, **kwargs: Any) -> Any:
            result = method(*args, **kwargs)
            calls[0] += 1
            if calls[0] >= after:
                die()
            return result

        return wrapped

    if point == "start":
        die()
    elif point == "after_push":
        PSClient.push = die_after(PSClient.push)  # type: ignore[method-assign]
    elif point == "after_step":
        worker._step = die_after(worker._step)
    elif point == "before_checkpoint":
        PSClient.checkpoint = die  # type: ignore[method-assign,assignment]
    else:
        raise ValueError(f"EMU_TEST_CRASH_POINT {point!r}: expected one of {CRASH_POINTS}")
    return worker.handler(event, context)


def _wait_for_file(path: Path, timeout_s: float = 120.0) -> bool:
    """Wait until the test creates `path`; False if it did not within `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def after_marker(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """The real worker handler, except links after the first wait for the marker file
    EMU_TEST_RESUME_MARKER (at most 120 s): the test's fault happens before the run can end."""
    from functions.worker import handler

    marker = Path(os.environ["EMU_TEST_RESUME_MARKER"])
    if int(event.get("invocation", 0)) >= 1 and not _wait_for_file(marker):
        raise TimeoutError(f"{marker} never appeared")
    return handler(event, context)


def gated(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """The real worker handler, except that rank 0 stops once before computing iteration
    $EMU_TEST_GATE_ITERATION: it writes `reached` in $EMU_TEST_GATE_DIR and waits until the
    test writes `go` there (the test injects its fault in between)."""
    from functions import worker

    gate = Path(os.environ["EMU_TEST_GATE_DIR"])
    at_iteration = int(os.environ["EMU_TEST_GATE_ITERATION"])
    real_step = worker._step

    def step(run: Any, iteration: int) -> None:
        if iteration == at_iteration and not (gate / "reached").exists():
            (gate / "reached").write_text(str(iteration))
            _wait_for_file(gate / "go")  # the invocation limit usually ends a longer wait
        real_step(run, iteration)

    if event["rank"] == 0 and not getattr(real_step, "gated", False):
        step.gated = True  # type: ignore[attr-defined]  # a warm environment patches once
        worker._step = step
    return worker.handler(event, context)
