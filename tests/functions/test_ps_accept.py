"""The PS never stops accepting: idle connections beyond the open-file limit neither end the
accept loop nor lock out an honest client, and the liveness check sees the starved state."""

from __future__ import annotations

import os
import resource
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from functions import ps_health, wire
from functions.ps_client import PSClient

from .conftest import SECRET

FD_LIMIT = 64


@pytest.fixture()
def low_fd_ps(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], str, Path]]:
    """A PS subprocess under RLIMIT_NOFILE = FD_LIMIT whose unauthenticated connections are
    neither capped nor timed out: the test decides when the idle ones go away."""
    log = tmp_path / "ps.log"

    def limit_fds() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (FD_LIMIT, FD_LIMIT))

    with log.open("w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "functions.ps", "--job-id", "j", "--workers", "1",
             "--secret-ref", "env:LDNN_TEST_SECRET", "--port", "0",
             "--max-unauthenticated", "1000", "--handshake-timeout-s", "600"],
            stdout=subprocess.PIPE, stderr=err, text=True, preexec_fn=limit_fds,
            env={**os.environ, "LDNN_TEST_SECRET": SECRET},
        )  # fmt: skip
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("READY "), log.read_text()
        yield proc, line.split()[1], log
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _status(endpoint: str, job_id: str = "j") -> dict[str, object]:
    """A control client's STATUS, retried until the shard lets it in (deadline 60 s)."""
    deadline = time.monotonic() + 60
    while True:
        client = PSClient((endpoint,), job_id, -1, SECRET.encode(), 0, timeout_s=5)
        try:
            client.connect()
            return client.status()[0]
        except (OSError, wire.WireError, wire.RemoteError):
            assert time.monotonic() < deadline, "the shard never let a status query in"
            time.sleep(0.2)
        finally:
            client.close()


def _read_to_eof(sock: socket.socket) -> int:
    sock.settimeout(30)
    got = 0
    while chunk := sock.recv(65536):
        got += len(chunk)
    return got


def _wait_for_line(log: Path, text: str) -> None:
    deadline = time.monotonic() + 60
    while text not in log.read_text():
        assert time.monotonic() < deadline, f"{text!r} never logged: {log.read_text()}"
        time.sleep(0.1)


def test_a_shard_out_of_descriptors_keeps_accepting_and_logs_once(
    low_fd_ps: tuple[subprocess.Popen[str], str, Path],
) -> None:
    proc, endpoint, log = low_fd_ps
    host, port = wire.parse_endpoint(endpoint)
    idle = [socket.create_connection((host, port), timeout=30) for _ in range(FD_LIMIT + 40)]
    _wait_for_line(log, "Too many open files")
    # Starved: alive, listening, but a new connection is never greeted.
    assert proc.poll() is None
    starved = ps_health.probe(endpoint, timeout_s=1.0)
    assert starved.listening and not starved.serving
    for sock in idle:
        sock.close()
    status = _status(endpoint)
    assert isinstance(status["accept_errors"], int) and status["accept_errors"] >= 1
    assert ps_health.probe(endpoint).serving
    lines = [x for x in log.read_text().splitlines() if "cannot accept" in x]
    assert len(lines) == 1 and "Too many open files" in lines[0]
    assert f"open-file limit {FD_LIMIT}" in lines[0]


def test_idle_connections_beyond_the_limit_do_not_lock_out_a_worker(
    ps_cluster: object,
) -> None:
    """The default cap in action, in process: the oldest handshakes are evicted, so an honest
    client gets in while every idle connection is still open on the attacker's side."""
    (server,) = ps_cluster(1, 1, max_unauthenticated=4, handshake_timeout_s=600)  # type: ignore[operator]
    endpoint = f"{server.address[0]}:{server.address[1]}"
    idle = []
    for _ in range(10):
        sock = socket.create_connection(server.address, timeout=30)
        # admitted, in order: the whole challenge read (the shard writes its header and nonce
        # in two sends, and an eviction may fall between them on a busy machine)
        challenge = wire.recv_header(sock, time.monotonic() + 30)
        assert len(wire.recv_control(sock, challenge, time.monotonic() + 30)) == wire.NONCE_BYTES
        idle.append(sock)
    assert (
        _status(endpoint, "job-test")["evicted_handshakes"] == 7
    )  # 6 idle ones, then 1 for the query
    for sock in idle[:6]:  # the oldest six were closed by the shard: nothing more, then EOF
        assert _read_to_eof(sock) == 0
    for sock in idle:
        sock.close()


def test_an_idle_handshake_times_out(ps_cluster: object) -> None:
    (server,) = ps_cluster(1, 1, handshake_timeout_s=0.2)  # type: ignore[operator]
    sock = socket.create_connection(server.address, timeout=30)
    deadline = time.monotonic() + 30
    header = wire.recv_header(sock, deadline)
    wire.recv_control(sock, header, deadline)  # the CHALLENGE, never answered
    header = wire.recv_header(sock, deadline)
    assert header.msg_type == wire.MsgType.ERROR
    sock.close()
    assert server.rejected_connections == 1
