"""Child-process supervision: every child in its own process group, all of them killed on exit.

The emulator starts PS shards and worker invocations as processes. Whatever ends the run (a
normal finish, an exception, Ctrl-C, SIGTERM, a crashed worker), `Supervisor.stop_all()` runs
from a `finally`, from atexit and from the signal handlers, and kills each child's whole
process group (a worker's torch threads or a PS's helpers included). None of that runs when the
emulator itself is SIGKILLed: then the kernel kills each child (emulator.lifeline).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from types import FrameType
from typing import IO

from emulator.lifeline import pid_alive, popen
from emulator.s3server import kill_process_group

__all__ = ["Interrupted", "Supervisor", "group_alive", "pid_alive", "wait_for_log_line"]


def group_alive(pgid: int) -> bool:
    """True while any process of the process group `pgid` exists."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM arrived while children ran; by convention the exit code is 128 + signum.

    A KeyboardInterrupt, so every `finally` on the way out runs and Ctrl-C handlers still match.
    """

    def __init__(self, signum: int) -> None:
        self.signum = signum
        self.signal_name = signal.Signals(signum).name
        super().__init__(f"signal {self.signal_name}")


class Supervisor:
    """Starts children in new sessions and guarantees they are gone when it stops."""

    def __init__(self) -> None:
        self._children: list[tuple[subprocess.Popen[bytes], IO[bytes] | None]] = []
        self._previous_handlers: dict[int, object] = {}

    def spawn(
        self,
        argv: Sequence[str],
        env: Mapping[str, str],
        log_path: Path | None = None,
        preexec: Callable[[], None] | None = None,
        cwd: Path | None = None,
        stdin_pipe: bool = False,
    ) -> subprocess.Popen[bytes]:
        """Start `argv` in its own process group, stdout and stderr appended to `log_path`."""
        log = open(log_path, "wb") if log_path is not None else None  # noqa: SIM115 - kept open
        proc: subprocess.Popen[bytes] = popen(
            list(argv),
            env=dict(env),
            cwd=cwd,
            stdin=subprocess.PIPE if stdin_pipe else subprocess.DEVNULL,
            stdout=log or subprocess.DEVNULL,
            stderr=log or subprocess.DEVNULL,
            start_new_session=True,
            # preexec runs between fork and exec: the CPU group holds the child from its
            # first instruction (interpreter start and `import torch` included).
            preexec=preexec,
        )
        self._children.append((proc, log))
        return proc

    def stop(self, proc: subprocess.Popen[bytes], grace_s: float = 5.0) -> None:
        """Kill one child's process group (idempotent)."""
        kill_process_group(proc, grace_s=grace_s)
        if proc.stdin is not None and not proc.stdin.closed:
            with contextlib.suppress(OSError):
                proc.stdin.close()
        for child, log in self._children:
            if child is proc and log is not None and not log.closed:
                log.close()

    def stop_all(self, grace_s: float = 5.0) -> None:
        """Kill every child's process group, newest first; never raises."""
        for proc, log in reversed(self._children):
            with contextlib.suppress(Exception):
                kill_process_group(proc, grace_s=grace_s)
            # A child whose leader exited may have left members in its group.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            if proc.stdin is not None and not proc.stdin.closed:
                with contextlib.suppress(OSError):
                    proc.stdin.close()
            if log is not None and not log.closed:
                log.close()

    @contextlib.contextmanager
    def stopping(self) -> Iterator[Supervisor]:
        """Every child is stopped when the block exits, however it exits. Nested inside the
        S3 server's block, so a PS stopped by SIGTERM can still write its last checkpoint."""
        try:
            yield self
        finally:
            self.stop_all()

    def pgids(self) -> list[int]:
        return [proc.pid for proc, _ in self._children]

    @contextlib.contextmanager
    def guard(self) -> Iterator[Supervisor]:
        """Within the block, SIGINT/SIGTERM and interpreter exit all stop every child."""

        def on_signal(signum: int, frame: FrameType | None) -> None:
            # Raise in the main thread so the orchestrator's finally blocks run (upload what
            # can be uploaded, remove cgroups) before the children are killed. A second Ctrl-C
            # must not cut that cleanup short: further signals wait until the block has exited.
            for ignored in (signal.SIGINT, signal.SIGTERM):
                signal.signal(ignored, signal.SIG_IGN)
            raise Interrupted(signum)

        atexit.register(self.stop_all)
        # Signal handlers can only be set from the main thread; elsewhere atexit and the
        # finally below still stop every child.
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                self._previous_handlers[signum] = signal.signal(signum, on_signal)
        try:
            yield self
        finally:
            self.stop_all()
            for previous_signum, handler in self._previous_handlers.items():
                signal.signal(previous_signum, handler)  # type: ignore[arg-type]  # as saved
            self._previous_handlers.clear()
            atexit.unregister(self.stop_all)


def wait_for_log_line(
    proc: subprocess.Popen[bytes], log_path: Path, prefix: str, timeout_s: float
) -> str:
    """Poll the child's log until a line starts with `prefix`; return the rest of that line.

    The child writes to a file, not a pipe, so a chatty child can never block on a full pipe
    after we stop reading. Raises TimeoutError after `timeout_s`, RuntimeError if it exits.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        with contextlib.suppress(FileNotFoundError):
            for line in log_path.read_text(errors="replace").splitlines():
                if line.strip().startswith(prefix):
                    return line.strip()[len(prefix) :].strip()
        if proc.poll() is not None:
            raise RuntimeError(f"exited with code {proc.returncode} before printing {prefix!r}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {prefix!r} line within {timeout_s} s")
        time.sleep(0.1)
