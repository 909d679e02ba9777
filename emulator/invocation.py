"""One emulated Lambda invocation as a child process, and its outcome.

`start_invocation` writes the event, spawns `python -m emulator.runner` in its own process group
and CPU group, and returns a handle; `poll` turns the finished process into an `Outcome`. A run
over the invocation limit (plus a grace for process exit) is killed, as Lambda kills a function
at its timeout, and reported as a failure the orchestrator may retry.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from emulator.cpu import Placement
from emulator.procs import Supervisor

# Lambda stops the clock at the limit; the child also needs to exit and flush its result file.
KILL_GRACE_S = 10.0


@dataclass(frozen=True)
class Outcome:
    """How one invocation ended."""

    ok: bool
    result: dict[str, Any]  # the handler's return value, or a Lambda-style error object
    wall_s: float  # spawn to exit, as the orchestrator saw it
    exit_code: int | None
    error: str  # one line; empty when ok


@dataclass
class Invocation:
    """A running invocation (mutable: it is polled until it ends)."""

    name: str
    proc: subprocess.Popen[bytes]
    result_path: Path
    log_path: Path
    started_monotonic_s: float
    kill_after_s: float

    def elapsed_s(self) -> float:
        return time.monotonic() - self.started_monotonic_s


def start_invocation(
    supervisor: Supervisor,
    *,
    name: str,
    handler: str,
    event: Mapping[str, Any],
    limit_s: float,
    memory_mb: int,
    work_dir: Path,
    env: Mapping[str, str],
    placement: Placement | None = None,
) -> Invocation:
    """Spawn the runner for `handler(event, context)` with a `limit_s` countdown."""
    work_dir.mkdir(parents=True, exist_ok=True)
    event_path = work_dir / f"{name}.event.json"
    result_path = work_dir / f"{name}.result.json"
    log_path = work_dir / f"{name}.log"
    event_path.write_text(json.dumps(event, indent=1))
    result_path.unlink(missing_ok=True)
    argv = [
        sys.executable,
        "-m",
        "emulator.runner",
        str(event_path),
        str(result_path),
        f"--limit-s={limit_s}",
        f"--memory-mb={memory_mb}",
        f"--handler={handler}",
        f"--function-name={name}",
    ]
    proc = supervisor.spawn(
        argv, env=env, log_path=log_path, preexec=placement.enter if placement else None
    )
    return Invocation(
        name=name,
        proc=proc,
        result_path=result_path,
        log_path=log_path,
        started_monotonic_s=time.monotonic(),
        kill_after_s=limit_s + KILL_GRACE_S,
    )


def last_log_line(path: Path, max_bytes: int = 4096) -> str:
    """The last non-empty line of a log (for one-line error reports)."""
    try:
        with open(path, "rb") as log:
            log.seek(0, 2)
            log.seek(max(0, log.tell() - max_bytes))
            lines = [ln.strip() for ln in log.read().decode(errors="replace").splitlines()]
    except OSError:
        return ""
    lines = [ln for ln in lines if ln]
    return lines[-1] if lines else ""


def poll(supervisor: Supervisor, inv: Invocation) -> Outcome | None:
    """None while running; the Outcome once the child exited or was killed at its limit."""
    code = inv.proc.poll()
    if code is None and inv.elapsed_s() < inv.kill_after_s:
        return None
    wall_s = inv.elapsed_s()
    if code is None:
        supervisor.stop(inv.proc, grace_s=2.0)
        return Outcome(
            ok=False,
            result={"errorType": "Timeout", "errorMessage": "invocation limit exceeded"},
            wall_s=wall_s,
            exit_code=None,
            error=f"{inv.name}: killed after {wall_s:.1f} s (over the invocation limit)",
        )
    supervisor.stop(inv.proc, grace_s=2.0)  # reap stragglers of its group, close its log
    try:
        result = json.loads(inv.result_path.read_text())
    except (OSError, ValueError):
        result = {"errorType": "Crash", "errorMessage": f"exit code {code}, no result"}
    if code == 0 and isinstance(result, dict) and "errorType" not in result:
        return Outcome(ok=True, result=result, wall_s=wall_s, exit_code=0, error="")
    message = result.get("errorMessage") if isinstance(result, dict) else None
    detail = message or last_log_line(inv.log_path) or "no output"
    return Outcome(
        ok=False,
        result=result if isinstance(result, dict) else {},
        wall_s=wall_s,
        exit_code=code,
        error=f"{inv.name}: exit code {code}: {detail}",
    )
