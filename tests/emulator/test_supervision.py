"""Supervision: re-invocation until done, bounded retries, and no process left behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from emulator import cpu
from emulator.options import Options
from emulator.procs import Supervisor, pid_alive
from emulator.records import EmulatorError
from emulator.workers import fan_out
from tests.emulator.plans import planned_digits

HANDLERS = "tests.emulator.fake_handlers"
REPO = Path(__file__).resolve().parents[2]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO)}


def _run(  # type: ignore[type-arg]
    tmp_path: Path, handler: str, limit_s: float = 10.0, warm: bool = True, **extra: object
) -> list:
    """fan_out over fake handlers; returns the WorkerStates."""
    plan = planned_digits("emu-fake")
    pid_file = tmp_path / "pids.txt"
    events = [
        {"rank": r, "invocation": 0, "pid_file": str(pid_file), **extra}
        for r in range(plan.n_workers)
    ]
    options = Options(
        invocation_limit_s=limit_s,
        worker_handler=f"{HANDLERS}:{handler}",
        max_attempts=2,
        kill_grace_s=1.0,
        warm=warm,
    )
    supervisor = Supervisor()
    placements = [
        cpu.Placement(name=f"w{r}", cores=1.0, procs_file=None) for r in range(plan.n_workers)
    ]
    with supervisor.guard():
        return fan_out(
            supervisor,
            plan,
            options,
            first_events=events,
            env=_env(),
            logs=tmp_path / "logs",
            placements=placements,
            status=lambda: None,
            progress=None,
            deadline_monotonic_s=time.monotonic() + 120,
        )


def _pids(tmp_path: Path) -> list[int]:
    return [int(p) for p in (tmp_path / "pids.txt").read_text().split()]


def _survivors(pids: list[int], wait_s: float = 10.0) -> list[int]:
    """Pids still alive after up to `wait_s` (an orphan is reaped by init a moment later)."""
    deadline = time.monotonic() + wait_s
    while any(pid_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    return [p for p in pids if pid_alive(p)]


def test_workers_are_reinvoked_with_next_event_until_done(tmp_path: Path) -> None:
    workers = _run(tmp_path, "chain")
    for worker in workers:
        assert worker.done
        assert [link["iteration"] for link in worker.links] == [10, 20, 30]
        assert 0 < worker.links[0]["timings"]["remaining_ms_at_start"] <= 10_000


def test_links_reuse_the_warm_environment_unless_cold_starts_are_asked(tmp_path: Path) -> None:
    warm = _run(tmp_path / "warm", "chain")
    assert [len({link["pid"] for link in w.links}) for w in warm] == [1] * len(warm)
    assert [[link["cold"] for link in w.links] for w in warm][0] == [True, False, False]
    cold = _run(tmp_path / "cold", "chain", warm=False)
    assert [len({link["pid"] for link in w.links}) for w in cold] == [3] * len(cold)


def test_a_failed_invocation_is_retried_with_the_same_event(tmp_path: Path) -> None:
    workers = _run(tmp_path, "chain", fail_first_link=True)
    for worker in workers:
        assert worker.done and worker.iteration == 30
        assert len(worker.failures) == 1 and "transient failure" in worker.failures[0]


def test_a_link_that_did_not_advance_is_re_invoked_once(tmp_path: Path) -> None:
    workers = _run(tmp_path, "chain", stall_links=[0, 2])
    for worker in workers:
        assert worker.done and not worker.stalled
        assert [link["iteration"] for link in worker.links] == [0, 10, 10, 20, 30]


def test_a_second_link_in_a_row_that_did_not_advance_fails_the_run(tmp_path: Path) -> None:
    with pytest.raises(EmulatorError, match=r"worker \d: link 2 made no progress \(stopped at "
                       r"iteration 10: None\), the second link in a row"):  # fmt: skip
        _run(tmp_path, "chain", stall_links=[1, 2])


def test_crashing_worker_fails_the_run_and_leaves_no_process(tmp_path: Path) -> None:
    with pytest.raises(
        EmulatorError, match=r"worker \d failed 2 times; last: .*crashed on purpose"
    ):
        _run(tmp_path, "crash")
    pids = _pids(tmp_path)
    assert len(pids) >= 2
    assert not _survivors(pids)


def test_hanging_worker_is_killed_at_its_limit(tmp_path: Path) -> None:
    with pytest.raises(EmulatorError, match="over the invocation limit"):
        _run(tmp_path, "hang", limit_s=1.0)
    assert not _survivors(_pids(tmp_path))


def test_sigint_stops_every_child(tmp_path: Path) -> None:
    script = (
        "import os, sys, time\n"
        "from emulator.procs import Supervisor\n"
        "s = Supervisor()\n"
        "with s.guard():\n"
        "    p = s.spawn(['sleep', '300'], env=os.environ)\n"
        "    print(p.pid, flush=True)\n"
        "    time.sleep(60)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, env=_env(), cwd=REPO
    )
    assert proc.stdout is not None
    child_pid = int(proc.stdout.readline())
    assert pid_alive(child_pid)
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=20)
    assert proc.returncode != 0  # interrupted, not finished
    assert not _survivors([child_pid])
