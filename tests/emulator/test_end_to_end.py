"""End to end: a planned job through the emulator with a real S3 server, PS and Lambda workers.

The plan comes from the real planner (digits-mlp profile, 30 s deadline → n ≥ 2); only its
iteration count is set so the run fits the test budget and a 8 s invocation limit forces every
worker through at least one checkpoint-and-re-invoke.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import threading
import time
from pathlib import Path

import boto3
import pytest

from emulator.orchestrator import EmulatorError, Options, run
from emulator.procs import pid_alive
from emulator.s3server import S3Endpoint
from tests.emulator.plans import planned_digits, with_iterations

ITERATIONS = 4000
LIMIT_S = 8.0


def test_planned_job_trains_end_to_end(tmp_path: Path, s3_endpoint: S3Endpoint) -> None:
    plan = with_iterations(planned_digits("emu-e2e"), ITERATIONS)
    assert plan.n_workers >= 2
    record = run(
        plan,
        Options(invocation_limit_s=LIMIT_S, out_dir=tmp_path, quiet=True),
        endpoint=s3_endpoint,
    )

    report = json.loads((tmp_path / "report.json").read_text())
    assert report["iterations"] == {"planned": ITERATIONS, "completed": ITERATIONS}
    assert all(n >= 2 for n in report["invocations"]["per_worker"]), report["invocations"]
    assert report["loss"]["last"] < report["loss"]["first"]
    assert report["accuracy"]["accuracy"] > 0.8  # 10 classes: chance is 0.1
    assert {row["term"] for row in report["terms"]} >= {
        "load",
        "compute",
        "communication",
        "startup",
        "chaining",
        "total",
    }
    measured = {row["term"]: row["measured_s"] for row in report["terms"]}
    # The PS's own update time, from its STATUS: part of the run, never all of it.
    assert 0 < measured["ps_aggregation"] < measured["total"]
    assert (tmp_path / "loss.png").stat().st_size > 0

    s3 = boto3.session.Session().client(
        "s3",
        endpoint_url=s3_endpoint.url,
        region_name="us-east-1",
        aws_access_key_id="x",
        aws_secret_access_key="y",
    )
    artifacts = record.buckets["artifacts"]
    model = s3.head_object(Bucket=artifacts, Key="emu-e2e/model.pt")
    assert model["ContentLength"] > 0
    uploaded = json.loads(
        s3.get_object(Bucket=artifacts, Key="emu-e2e/emulator/report.json")["Body"].read()
    )
    assert uploaded["iterations"]["completed"] == ITERATIONS

    deadline = time.monotonic() + 10
    while any(pid_alive(p) for p in record.child_pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [p for p in record.child_pids if pid_alive(p)]


def test_worker_crash_mid_training_is_retried_and_training_completes(
    tmp_path: Path, s3_endpoint: S3Endpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EMU_TEST_CRASH_MARKER", str(tmp_path / "crashed"))
    plan = with_iterations(planned_digits("emu-crash"), 3000)
    record = run(
        plan,
        Options(
            invocation_limit_s=60.0,
            out_dir=tmp_path / "run",
            quiet=True,
            worker_handler="tests.emulator.fake_handlers:crash_midway",
        ),
        endpoint=s3_endpoint,
    )
    report = json.loads((tmp_path / "run" / "report.json").read_text())
    assert (tmp_path / "crashed").exists()
    assert report["iterations"]["completed"] == 3000
    assert report["invocations"]["failed_attempts"] == 1
    assert "exited with code 137" in report["invocations"]["failures"][0]
    assert record.workers[0].failures and not record.workers[1].failures
    assert report["accuracy"]["accuracy"] > 0.8


def test_a_failed_run_leaves_a_failed_report(tmp_path: Path, s3_endpoint: S3Endpoint) -> None:
    plan = planned_digits("emu-fail")
    options = Options(
        invocation_limit_s=30.0,
        out_dir=tmp_path,
        quiet=True,
        max_attempts=1,
        worker_handler="tests.emulator.fake_handlers:crash",
    )
    with pytest.raises(EmulatorError, match=r"worker \d failed 1 times"):
        run(plan, options, endpoint=s3_endpoint)
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["status"] == "failed" and report["error"].startswith("worker ")


def test_a_ps_shard_killed_mid_run_is_restarted_and_training_completes(
    tmp_path: Path, s3_endpoint: S3Endpoint
) -> None:
    """SIGKILL one of two PS shard processes mid-run: the emulator restarts it on its port (as
    Docker does on EC2), it restores the newest common checkpoint, the workers roll the other
    shard back, and the run still completes every iteration and learns."""
    base = with_iterations(planned_digits("emu-psfail"), 4000)
    plan = dataclasses.replace(
        base, ps_count=2,
        training=dataclasses.replace(base.training, checkpoint_every_iterations=200),
    )  # fmt: skip
    killed: list[int] = []

    def kill_shard_1_once_training_runs() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not killed:
            for pid in _pids_of("functions.ps", "--job-id emu-psfail --shard 1 "):
                if _shard_log_shows_progress(tmp_path):
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
            time.sleep(0.2)

    chaos = threading.Thread(target=kill_shard_1_once_training_runs, daemon=True)
    chaos.start()
    record = run(
        plan, Options(invocation_limit_s=30.0, out_dir=tmp_path, quiet=True), endpoint=s3_endpoint
    )
    chaos.join(5)
    report = json.loads((tmp_path / "report.json").read_text())
    assert killed, "the PS shard was never killed: the run ended first"
    assert report["ps_restarts"] == 1
    assert report["iterations"] == {"planned": 4000, "completed": 4000}
    assert report["loss"]["last"] < report["loss"]["first"]
    assert report["accuracy"]["accuracy"] > 0.8
    assert not [p for p in record.child_pids if pid_alive(p)]


def _pids_of(*fragments: str) -> list[int]:
    """Pids whose command line holds every fragment (the PS shard processes of a job)."""
    pids = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if all(f in text for f in fragments):
            pids.append(int(cmdline.parent.name))
    return pids


def _shard_log_shows_progress(out_dir: Path) -> bool:
    """Shard 1 has checkpointed past iteration 0 (a restart then rolls back, not to the start)."""
    log = out_dir / "logs" / "ps-1.log"
    text = log.read_text(errors="replace") if log.exists() else ""
    return any(int(i) > 0 for i in re.findall(r"checkpointed iteration (\d+)", text))
