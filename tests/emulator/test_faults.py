"""Faults: S3 paused and resumed, S3 killed mid-run, Ctrl-C and SIGTERM of the emulator.

Each test that harms S3 starts its own weed server (the session's is shared by other tests).
The fault is injected at a point the test controls, never against a sleep: rank 0 stops before
computing iteration 99 (`fake_handlers.gated`), the test harms S3, then lets rank 0 go; its push
completes iteration 100, where the PS checkpoints (every 50 iterations), so the PS's next S3 call
certainly meets the fault.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from emulator import cgroups
from emulator.naming import bucket_name
from emulator.options import Options
from emulator.orchestrator import run
from emulator.procs import pid_alive
from emulator.records import EmulatorError
from emulator.s3_client import s3_client_for
from emulator.s3server import weed_server, weed_socket_paths
from functions.ps.checkpoints import CheckpointStore
from functions.runs import run_checkpoint_prefix
from provisioner.plan import Plan
from stacks.events import checkpoint_prefix
from tests.emulator.leftovers import processes_with_env, survivors
from tests.emulator.plans import (
    machine_cpu_scale,
    planned_digits,
    with_iterations,
    with_long_training,
)

REPO = Path(__file__).resolve().parents[2]
GATE_ITERATION = 99  # rank 0 waits before computing it; its push completes iteration 100
CHECKPOINT_EVERY = 50  # so 0 and 50 are checkpointed before the fault, 100 meets it
WAIT_S = 120.0  # outer bound of every wait in these tests (generous: a shared 2-core machine)


def _plan(job: str, iterations: int) -> Plan:
    base = with_iterations(planned_digits(job), iterations)
    training = dataclasses.replace(base.training, checkpoint_every_iterations=CHECKPOINT_EVERY)
    return dataclasses.replace(base, training=training)


SECRET = "fault-test-secret"


def _gated_options(out_dir: Path, plan: Plan) -> Options:
    return Options(
        invocation_limit_s=60.0,
        cpu_scale=machine_cpu_scale(plan),
        out_dir=out_dir,
        quiet=True,
        worker_handler="tests.emulator.fake_handlers:gated",
        ps_secret=SECRET,  # the test verifies the checkpoints' HMAC after the run
    )


def _open_gate_after(gate: Path, fault: Callable[[], None]) -> threading.Thread:
    """A thread that waits for rank 0 at the gate, runs `fault`, then lets rank 0 go."""
    gate.mkdir()

    def inject() -> None:
        _wait_for(lambda: (gate / "reached").exists(), "rank 0 at the gate")
        try:
            fault()
        finally:
            (gate / "go").write_text("go")

    thread = threading.Thread(target=inject, daemon=True)
    thread.start()
    return thread


def _wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.05)


def _bytes_waiting_at(port: int) -> int:
    """Bytes (or queued connections) the kernel holds for local TCP `port` that no process has
    taken yet: a request waiting on a stopped server."""
    waiting = 0
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if int(fields[1].split(":")[1], 16) == port:
            waiting += int(fields[4].split(":")[1], 16)
    return waiting


def test_s3_paused_mid_run_is_waited_out_and_training_completes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGSTOP the S3 server while the PS must checkpoint: the PUT waits (within its bounded
    timeout), S3 resumes, the checkpoint lands and the run completes every iteration."""
    monkeypatch.setenv("EMU_TEST_GATE_DIR", str(tmp_path / "gate"))
    monkeypatch.setenv("EMU_TEST_GATE_ITERATION", str(GATE_ITERATION))
    plan = _plan("emu-s3pause", 300)
    with weed_server(data_dir=tmp_path / "weed") as endpoint:
        assert endpoint.pid is not None
        port = int(endpoint.url.rsplit(":", 1)[1])
        request_held: list[int] = []

        def pause_until_a_request_waits() -> None:
            os.killpg(endpoint.pid, signal.SIGSTOP)
            try:
                (tmp_path / "gate" / "go").write_text("go")
                _wait_for(lambda: _bytes_waiting_at(port) > 0, "an S3 request to the paused server")
                request_held.append(_bytes_waiting_at(port))
            finally:
                os.killpg(endpoint.pid, signal.SIGCONT)

        chaos = _open_gate_after(tmp_path / "gate", pause_until_a_request_waits)
        record = run(plan, _gated_options(tmp_path / "run", plan), endpoint=endpoint)
        chaos.join(WAIT_S)
    assert request_held, "no S3 request met the paused server"
    report = json.loads((tmp_path / "run" / "report.json").read_text())
    assert report["iterations"]["planned"] == report["iterations"]["completed"] == 300
    ps_log = (tmp_path / "run" / "logs" / "ps-0.log").read_text()
    assert "checkpointed iteration 100 " in ps_log
    assert not [p for p in record.child_pids if pid_alive(p)]


def test_s3_killed_mid_run_fails_the_run_naming_s3_and_keeps_the_last_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGKILL the S3 server before the PS's checkpoint of iteration 100: the run fails with a
    line and a report naming the S3 endpoint, no process of the run is left, and the checkpoint
    of iteration 50 is intact in the (restarted) server's storage."""
    monkeypatch.setenv("EMU_TEST_GATE_DIR", str(tmp_path / "gate"))
    monkeypatch.setenv("EMU_TEST_GATE_ITERATION", str(GATE_ITERATION))
    plan = _plan("emu-s3kill", 300)
    data_dir = tmp_path / "weed"
    with weed_server(data_dir=data_dir) as endpoint:
        assert endpoint.pid is not None
        server_pid = endpoint.pid

        def kill_s3() -> None:
            os.killpg(server_pid, signal.SIGKILL)
            _wait_for(lambda: not pid_alive(server_pid) or _is_zombie(server_pid), "S3 to die")

        chaos = _open_gate_after(tmp_path / "gate", kill_s3)
        with pytest.raises(EmulatorError) as failed:
            run(plan, _gated_options(tmp_path / "run", plan), endpoint=endpoint)
        chaos.join(WAIT_S)
    dead_url = endpoint.url
    assert f"S3 endpoint unreachable: {dead_url}: [Errno 111] Connection refused" in str(
        failed.value
    )
    (line,) = str(failed.value).splitlines()
    assert line.endswith(f"the local S3 server (weed, pid {server_pid}) exited with code -9 "
                         "(SIGKILL)")  # fmt: skip
    report = json.loads((tmp_path / "run" / "report.json").read_text())
    assert report["status"] == "failed"
    assert f"S3 endpoint unreachable: {dead_url}" in report["error"]
    assert CHECKPOINT_EVERY <= report["iterations"]["completed"] <= 100
    assert report["last_checkpoint_iteration"] == CHECKPOINT_EVERY
    assert not survivors(str(tmp_path / "gate"))

    with weed_server(data_dir=data_dir) as restarted:
        store = CheckpointStore(
            s3_client_for(restarted),
            bucket_name(plan.job, "artifacts"),
            run_checkpoint_prefix(checkpoint_prefix(plan), report["run_id"]),
            1,
            secret=SECRET.encode(),
        )
        assert store.latest_common_iteration() == CHECKPOINT_EVERY
        checkpoint = store.load(0, CHECKPOINT_EVERY)
    assert int(checkpoint["iteration"]) == CHECKPOINT_EVERY and checkpoint["params"].size > 0


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"
    except OSError:
        return False


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_interrupting_the_emulator_writes_the_report_and_leaves_nothing(
    tmp_path: Path, signum: signal.Signals
) -> None:
    """`python -m emulator`'s process group gets SIGINT (Ctrl-C) or SIGTERM once training runs:
    it exits with 128 + signum and one line, report.json says interrupted and how far it got,
    and no process, CPU group, temp file or weed socket of the run is left."""
    plan = with_long_training(planned_digits("emu-interrupt"), 1_000_000)  # still training later
    plan_path = tmp_path / "plan.json"
    plan_path.write_text(plan.to_json())
    temp = tmp_path / "temp"
    temp.mkdir()
    out_dir = tmp_path / "run"
    marker = f"EMU_TEST_RUN={tmp_path}"
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "TMPDIR": str(temp),
        "EMU_TEST_RUN": str(tmp_path),
    }
    argv = [sys.executable, "-m", "emulator", str(plan_path), "--out", str(out_dir), "--quiet",
            "--cpu-scale", str(machine_cpu_scale(plan))]  # fmt: skip
    proc = subprocess.Popen(
        argv, cwd=REPO, env=env, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        _wait_for(
            lambda: _progress_seen(out_dir / "logs") > 0 or proc.poll() is not None, "training"
        )
        assert proc.poll() is None, proc.communicate()[1]
        seen = _progress_seen(out_dir / "logs")
        sockets = [s for pid in processes_with_env(marker) for s in _weed_sockets(pid)]
        assert sockets, "weed not found among the run's processes"
        os.killpg(proc.pid, signum)  # to the whole group, as a terminal's Ctrl-C and `timeout`
        _, stderr = proc.communicate(timeout=WAIT_S)
    finally:
        if proc.poll() is None:  # only when an assertion above failed
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 128 + signum, stderr
    (line,) = stderr.splitlines()  # --quiet: the one line, no traceback, no atexit noise
    assert line.startswith(f"emulator: interrupted by {signal.Signals(signum).name}; ")
    report = json.loads((out_dir / "report.json").read_text())
    assert report["status"] == "interrupted" and report["signal"] == signal.Signals(signum).name
    assert seen <= report["iterations"]["completed"] < report["iterations"]["planned"]
    # The PS checkpoints when it is stopped (SIGTERM), before the S3 server stops.
    assert seen <= report["last_checkpoint_iteration"] <= report["iterations"]["completed"]
    assert not survivors(marker)
    assert not (cgroups.CGROUP_V1_CPU_ROOT / f"lambda-dnn-emu-{proc.pid}").exists()
    assert sorted(temp.iterdir()) == []
    assert not (out_dir / "tmp").exists()
    assert [s for s in sockets if s.exists()] == []
    assert list((out_dir / "logs" / "s3").glob("weed.*.log.INFO.*"))


def _progress_seen(logs: Path) -> int:
    """The furthest iteration a worker's progress line reports so far (0 before training)."""
    from emulator.unfinished import iterations_completed

    return iterations_completed(logs) if logs.is_dir() else 0


def _weed_sockets(pid: int) -> list[Path]:
    """The /tmp gRPC socket files of process `pid` if it is weed (from its command line)."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
    except OSError:
        return []
    if "mini" not in argv:
        return []
    ports = {}
    for arg in argv:
        name, _, value = arg.lstrip("-").partition("=")
        if name.endswith((".port", ".port.grpc")) and value.isdigit():
            ports[name.replace(".port", "")] = int(value)
    return weed_socket_paths(ports)
