"""A run whose own S3 server has exited says so in its one line: the unreachable endpoint is
the symptom, the server's exit the cause."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from emulator.orchestrator import naming_a_dead_server
from emulator.records import EmulatorError
from emulator.s3_client import create_buckets
from emulator.s3server import S3Endpoint, weed_server
from functions.aws import S3Unreachable

WAIT_S = 60.0


def test_a_failure_after_the_local_s3_server_died_names_its_exit(tmp_path: Path) -> None:
    with weed_server(data_dir=tmp_path / "weed") as endpoint:
        assert endpoint.pid is not None and endpoint.exit_note() is None
        os.killpg(endpoint.pid, signal.SIGKILL)
        deadline = time.monotonic() + WAIT_S
        while endpoint.exit_code() is None:
            assert time.monotonic() < deadline, "weed did not die"
            time.sleep(0.05)
        # the emulator's own first S3 call, as the run makes it: no inner block names the error
        with pytest.raises(EmulatorError) as failed, naming_a_dead_server(endpoint):
            create_buckets(endpoint, ["emu-dead-s3"])
    (line,) = str(failed.value).splitlines()
    assert line.startswith(f"S3 endpoint unreachable: {endpoint.url}: ")
    assert line.endswith(
        f"; the local S3 server (weed, pid {endpoint.pid}) exited with code -9 (SIGKILL)"
    )


def test_a_failure_while_the_server_runs_is_left_as_it_is() -> None:
    running = S3Endpoint(url="http://127.0.0.1:9", kind="weed", pid=1, exit_code=lambda: None)
    unchanged = pytest.raises(S3Unreachable, match="^S3 endpoint unreachable: elsewhere$")
    with unchanged, naming_a_dead_server(running):
        raise S3Unreachable("S3 endpoint unreachable: elsewhere")
