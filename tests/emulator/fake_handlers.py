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
