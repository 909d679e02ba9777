"""Emulated Lambda execution environments and the invocations they serve.

An `Environment` is one `python -m emulator.runner --serve` process (its own process group, in
its worker's CPU group). The first invocation it serves is a cold start (interpreter, handler
import, `import torch`); later ones reuse it warm, as Lambda reuses an environment that is
invoked again soon. An invocation that runs past its limit (plus a grace for writing its result)
is killed with its environment, as Lambda kills a function at its timeout; an environment whose
invocation failed is discarded too, so a retry starts cold. Either ends as a failed `Outcome`
the orchestrator may retry.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
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
    wall_s: float  # request sent to result seen, as the orchestrator saw it
    exit_code: int | None
    error: str  # one line; empty when ok
    cold: bool = True  # served by a fresh environment


@dataclass
class Environment:
    """A running execution environment (mutable: it serves invocations until closed)."""

    name: str
    proc: subprocess.Popen[bytes]
    log_path: Path
    served: int = 0
    memory_mb: int = 0  # the function's memory (a link at another memory needs another one)

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None


@dataclass
class Invocation:
    """One request in flight in an environment."""

    name: str
    env: Environment
    result_path: Path
    started_monotonic_s: float
    kill_after_s: float
    cold: bool
    one_shot: bool = False  # close the environment when this invocation ends
    extra: dict[str, Any] = field(default_factory=dict)

    def elapsed_s(self) -> float:
        return time.monotonic() - self.started_monotonic_s


def start_environment(
    supervisor: Supervisor,
    *,
    name: str,
    handler: str,
    memory_mb: int,
    work_dir: Path,
    env: Mapping[str, str],
    placement: Placement | None = None,
) -> Environment:
    """Spawn a warm-capable runner for `handler`; it waits for requests on stdin.

    The runner imports the handler unthrottled (Lambda's init burst) and then enters the CPU
    group of `placement` itself, so every invocation runs at the memory's share.
    """
    work_dir.mkdir(parents=True, exist_ok=True)
    log_path = work_dir / f"{name}.log"
    argv = [
        sys.executable,
        "-m",
        "emulator.runner",
        "--serve",
        f"--memory-mb={memory_mb}",
        f"--handler={handler}",
        f"--function-name={name}",
    ]
    if placement is not None and placement.procs_file is not None:
        argv.append(f"--cpu-group-procs={placement.procs_file}")
    proc = supervisor.spawn(argv, env=env, log_path=log_path, stdin_pipe=True)
    return Environment(name=name, proc=proc, log_path=log_path, memory_mb=memory_mb)


def submit(
    environment: Environment,
    *,
    name: str,
    event: Mapping[str, Any],
    limit_s: float,
    work_dir: Path,
    kill_grace_s: float = KILL_GRACE_S,
    one_shot: bool = False,
) -> Invocation:
    """Send one invocation to the environment; returns at once."""
    event_path = work_dir / f"{name}.event.json"
    result_path = work_dir / f"{name}.result.json"
    event_path.write_text(json.dumps(event, indent=1))
    result_path.unlink(missing_ok=True)
    request = {"event": str(event_path), "result": str(result_path), "limit_s": limit_s}
    cold = environment.served == 0
    environment.served += 1
    assert environment.proc.stdin is not None
    try:
        environment.proc.stdin.write((json.dumps(request) + "\n").encode())
        environment.proc.stdin.flush()
    except (BrokenPipeError, OSError):
        pass  # the environment died; poll() reports it as a crash
    return Invocation(
        name=name,
        env=environment,
        result_path=result_path,
        started_monotonic_s=time.monotonic(),
        kill_after_s=limit_s + kill_grace_s,
        cold=cold,
        one_shot=one_shot,
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


def _read_result(path: Path) -> dict[str, Any] | None:
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else {"errorType": "BadResult", "errorMessage": "?"}


def poll(supervisor: Supervisor, inv: Invocation) -> Outcome | None:
    """None while running; the Outcome once the result is written, the process died, or the
    invocation ran past its limit (then the environment is killed)."""
    result = _read_result(inv.result_path) if inv.result_path.exists() else None
    wall_s = inv.elapsed_s()
    if result is not None:
        ok = "errorType" not in result
        if not ok or inv.one_shot:
            supervisor.stop(inv.env.proc, grace_s=2.0)  # a failed environment is not reused
        detail = (
            "" if ok else f"{inv.name}: {result.get('errorType')}: {result.get('errorMessage')}"
        )
        return Outcome(
            ok=ok, result=result, wall_s=wall_s, exit_code=None, error=detail, cold=inv.cold
        )
    code = inv.env.proc.poll()
    if code is not None:
        supervisor.stop(inv.env.proc, grace_s=2.0)  # reap stragglers of its group
        detail = last_log_line(inv.env.log_path) or "no output"
        return Outcome(
            ok=False,
            result={"errorType": "Crash", "errorMessage": f"exit code {code}"},
            wall_s=wall_s,
            exit_code=code,
            error=f"{inv.name}: environment exited with code {code}: {detail}",
            cold=inv.cold,
        )
    if wall_s < inv.kill_after_s:
        return None
    supervisor.stop(inv.env.proc, grace_s=2.0)
    return Outcome(
        ok=False,
        result={"errorType": "Timeout", "errorMessage": "invocation limit exceeded"},
        wall_s=wall_s,
        exit_code=None,
        error=f"{inv.name}: killed after {wall_s:.1f} s (over the invocation limit)",
        cold=inv.cold,
    )
