"""One run per run folder: a run holds an exclusive lock on `<folder>/.run.lock` from before it
deletes anything in the folder until it has written its report.

Two runs given the same `--out` used to destroy each other: the second deleted the first's
`logs/` and `artifacts/` mid-run and overwrote its report.json, and both exited 0. The lock is
flock(2): the kernel drops it when its holder exits, however it exits (SIGKILL included), so
no stale lock outlives a run. The holder writes its pid into the file, for the refusal to name.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path

LOCK_FILE = ".run.lock"
HOLDER_WAIT_S = 2.0  # for the holder to write its pid between its flock and its write


class RunFolderBusy(RuntimeError):
    """Another live run holds the run folder; the message is one line naming its pid."""


@contextlib.contextmanager
def run_folder_lock(folder: Path) -> Iterator[None]:
    """Hold `folder`'s run lock for the block; RunFolderBusy, touching nothing else in the
    folder, when another run holds it."""
    folder.mkdir(parents=True, exist_ok=True)
    # O_NOFOLLOW: a symlink planted as the lock file must not make us create or truncate its
    # target (naming.run_dir keeps everything else a run writes inside the folder).
    fd = os.open(folder / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RunFolderBusy(
                f"output folder {str(folder)!r} is in use by another run ({_holder(fd)}); "
                "wait for it to end or give another --out"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the lock; the file stays (removing it would race a next run)


def _holder(fd: int, wait_s: float = HOLDER_WAIT_S) -> str:
    """'pid N' of the run holding the lock, read from the file; it writes it just after its
    flock, so an empty file is read again for up to `wait_s`."""
    deadline = time.monotonic() + wait_s
    while True:
        text = os.pread(fd, 64, 0).decode(errors="replace").strip()
        if text.isdigit():
            return f"pid {text}"
        if time.monotonic() > deadline:
            return "pid unknown"
        time.sleep(0.05)
