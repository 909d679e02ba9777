"""Every child dies with its parent, also when the parent is SIGKILLed (no finally, no atexit
runs then), and the next start removes what the dead parent left in the temp folder."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import Future
from pathlib import Path

import pytest

from emulator.lifeline import _kill_unowned, popen
from emulator.procs import pid_alive
from emulator.s3server import SOCKETS_FILE, weed_server

REPO = Path(__file__).resolve().parents[2]
WAIT_S = 60.0  # outer bound of every wait (generous: a shared 2-core machine)


def _dead(pid: int) -> bool:
    """Gone, or a zombie nobody has reaped yet (it runs nothing)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return not pid_alive(pid)
    return state == "Z"


def _wait_until(condition: object, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"{what}: not within {WAIT_S} s"
        time.sleep(0.1)


def test_a_child_started_from_a_thread_outlives_the_thread() -> None:
    """The kernel's parent-death signal follows the forking thread; `popen` forks from one
    that lives as long as the process, so a child started from a short-lived thread stays."""
    started: list[subprocess.Popen[bytes]] = []
    tids: list[int] = []

    def start() -> None:
        tids.append(threading.get_native_id())
        started.append(popen(["sleep", "60"]))

    thread = threading.Thread(target=start)
    thread.start()
    thread.join()
    (child,), (tid,) = started, tids
    try:
        # join() returns before the kernel has ended the thread; a parent-death signal tied to
        # it is sent on the way out, so wait until the thread is gone from /proc, however slow
        # the machine, then give the signal the same half second to land
        _wait_until(lambda: not Path(f"/proc/self/task/{tid}").exists(), "the thread's exit")
        time.sleep(0.5)
        assert child.poll() is None
    finally:
        child.kill()
        child.wait()


def test_a_child_whose_caller_was_interrupted_is_killed_once_it_exists() -> None:
    """Ctrl-C while `popen` waits for the spawner thread: the child it then makes has no owner
    (no Supervisor knows it), so it is killed as soon as it exists."""
    done: Future[subprocess.Popen[bytes]] = Future()
    done.add_done_callback(_kill_unowned)  # what popen does when its wait is interrupted
    child = subprocess.Popen(["sleep", "60"])
    done.set_result(child)
    assert child.returncode == -signal.SIGKILL


def test_sigkill_of_the_parent_kills_weed_and_the_ps_and_the_next_start_reaps_its_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    temp = tmp_path / "temp"
    temp.mkdir()
    parent = subprocess.Popen(
        [sys.executable, "-m", "tests.emulator.killed_parent", str(tmp_path / "logs")],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), "TMPDIR": str(temp)},
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    weed_pid = ps_pid = 0
    try:
        assert parent.stdout is not None
        line = parent.stdout.readline()  # the parent prints it or dies (then: EOF)
        assert line.startswith("READY "), f"parent exited with {parent.wait()}"
        weed, ps, folder = line.split()[1:]
        weed_pid, ps_pid, weed_dir = int(weed), int(ps), Path(folder)
        assert not _dead(ps_pid)  # its spawning thread has ended, it has not
        sockets = (weed_dir / SOCKETS_FILE).read_text().split()
        parent.kill()
        parent.wait()
        _wait_until(lambda: _dead(weed_pid) and _dead(ps_pid), "weed and the PS dying")
    finally:
        for pid in (parent.pid, weed_pid, ps_pid):  # only when an assertion above failed
            if pid and not _dead(pid):
                os.killpg(pid, signal.SIGKILL)
    assert weed_dir.parent == temp and weed_dir.is_dir()  # no finally ran in the parent
    assert any(Path(s).exists() for s in sockets)  # weed, killed, removed none of them

    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    with weed_server(log_dir=tmp_path / "next") as endpoint:
        assert endpoint.pid is not None
        assert not weed_dir.exists()
        assert [s for s in sockets if Path(s).exists()] == []
    assert sorted(temp.iterdir()) == []
