"""Finding the processes a run left behind, by a marker in their environment."""

from __future__ import annotations

import os
import time
from pathlib import Path


def processes_with_env(marker: str) -> list[int]:
    """Pids (other than this one) whose environment holds `marker`: the run's processes."""
    found = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        pid = int(environ.parent.name)
        try:
            if pid != os.getpid() and marker.encode() in environ.read_bytes():
                found.append(pid)
        except OSError:
            continue  # gone meanwhile, or not ours
    return found


def survivors(marker: str, wait_s: float = 10.0) -> list[int]:
    """The run's processes still alive once the kernel has had `wait_s` to reap orphans."""
    deadline = time.monotonic() + wait_s
    while processes_with_env(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    return processes_with_env(marker)
