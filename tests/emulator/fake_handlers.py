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
    """Three links per worker, 10 iterations each, a falling loss; fails once if asked to."""
    link = int(event.get("invocation", 0))
    flaky = Path(event["pid_file"]).with_suffix(f".flaky-{event['rank']}")
    if event.get("fail_first_link") and link == 1 and not flaky.exists():
        flaky.write_text("failed once")
        raise RuntimeError("transient failure")
    start = int(event.get("start_iteration", 0))
    end = start + 10
    return {
        "done": link >= 2,
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


def crash_midway(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """The real worker handler, except rank 0's first invocation dies abruptly 1.5 s into it
    (os._exit: no checkpoint, no goodbye to the PS), once per marker file."""
    import threading

    from functions.worker import handler

    marker = Path(os.environ["EMU_TEST_CRASH_MARKER"])
    if event["rank"] == 0 and not marker.exists():
        marker.write_text("crashed once")
        threading.Timer(1.5, os._exit, args=(137,)).start()
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
            deadline = time.monotonic() + 120  # the invocation limit usually ends it first
            while not (gate / "go").exists() and time.monotonic() < deadline:
                time.sleep(0.05)
        real_step(run, iteration)

    if event["rank"] == 0 and not getattr(real_step, "gated", False):
        step.gated = True  # type: ignore[attr-defined]  # a warm environment patches once
        worker._step = step
    return worker.handler(event, context)
