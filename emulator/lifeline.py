"""Every child dies with its parent: the one rule for every process the emulator starts.

A run's `finally` blocks, atexit and signal handlers stop its children, but none of them runs
when the emulator itself is killed with SIGKILL (or by the OOM killer): `weed mini` and the PS
shards kept serving with no one left to stop them. So each child asks the kernel, between fork
and exec, for SIGKILL when its parent goes (Linux `prctl(PR_SET_PDEATHSIG)`).

The kernel's "parent" there is the thread that forked, not the process: a child started from a
Map item's thread would be killed when that thread ends, a PS restarted mid-run among them. So
every child is forked by one long-lived thread of this module (`popen`), which lives as long as
the process. What a killed run leaves on disk is reaped by the next run (s3server's temp folders,
cpu's groups), keyed by the dead run's pid.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import queue
import signal
import subprocess
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def pid_alive(pid: int) -> bool:
    """True while a process with this pid exists (signal 0 checks without sending anything)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _prctl() -> Callable[..., int] | None:
    """libc's prctl, looked up before any fork (a child between fork and exec should do as
    little as it can); None where there is none (not Linux)."""
    try:
        prctl: Callable[..., int] = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    return prctl


_PRCTL = _prctl()


def die_with_parent(then: Callable[[], None] | None = None) -> Callable[[], None]:
    """A preexec_fn: SIGKILL for the child when the thread that forks it exits, then `then`.

    Spawn from a thread that lives as long as the process (`popen` does), or the child dies
    with the thread."""
    parent = os.getpid()

    def preexec() -> None:
        if _PRCTL is not None:
            _PRCTL(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            # The parent may have died between fork and prctl: no signal would come then.
            if os.getppid() != parent:
                os.kill(os.getpid(), signal.SIGKILL)
        if then is not None:
            then()

    return preexec


class _Spawner:
    """One daemon thread that forks every child: a daemon thread never exits before the process
    does, so the children's parent-death signal comes exactly when the process dies."""

    def __init__(self) -> None:
        self._requests: queue.SimpleQueue[
            tuple[Callable[[], subprocess.Popen[Any]], Future[subprocess.Popen[Any]]]
        ] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def call(self, start: Callable[[], subprocess.Popen[Any]]) -> subprocess.Popen[Any]:
        """Run `start` (a Popen) on the spawner thread; its child, or its exception."""
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._serve, name="emulator-spawner", daemon=True
                )
                self._thread.start()
        done: Future[subprocess.Popen[Any]] = Future()
        self._requests.put((start, done))
        try:
            return done.result()
        except BaseException:
            # Interrupted (Ctrl-C) while the child was being started: no one will own it, so
            # it is killed as soon as it exists rather than left running until we exit.
            done.add_done_callback(_kill_unowned)
            raise

    def _serve(self) -> None:
        while True:
            start, done = self._requests.get()
            try:
                done.set_result(start())
            except BaseException as err:  # noqa: BLE001  # handed to the caller, who raises it
                done.set_exception(err)


def _kill_unowned(done: Future[subprocess.Popen[Any]]) -> None:
    """Kill (and reap) the child a Popen made after its caller stopped waiting for it."""
    if done.cancelled() or done.exception() is not None:
        return
    child = done.result()
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(child.pid, signal.SIGKILL)
    child.wait()


_SPAWNER = _Spawner()


def popen(
    argv: list[str], *, preexec: Callable[[], None] | None = None, **kwargs: Any
) -> subprocess.Popen[Any]:
    """`subprocess.Popen(argv, **kwargs)` whose child is SIGKILLed when this process dies;
    `preexec` runs in the child after that is arranged (e.g. entering a CPU group)."""
    return _SPAWNER.call(
        lambda: subprocess.Popen(
            argv,
            preexec_fn=die_with_parent(preexec),  # noqa: PLW1509 - prctl and the caller's hook
            **kwargs,
        )
    )
