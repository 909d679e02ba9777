"""Bad input to the PS: each attack is rejected and logged, and the honest workers, running at
the same time, still finish with the correct parameters."""

from __future__ import annotations

import contextlib
import json
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from functions import wire, worker
from functions.ps_client import PSClient
from functions.wire import MsgType

from .conftest import SECRET, endpoints
from .helpers import (
    RUN_ID,
    RUN_STARTED,
    challenged_socket,
    ps_vector,
    reference_params,
    run_threads,
    worker_event,
)

MLP_DIGITS_PARAMS = 64 * 128 + 128 + 128 * 64 + 64 + 64 * 10 + 10


def _hello(
    sock: socket.socket,
    nonce: bytes,
    *,
    secret: str = SECRET,
    job_id: str = "job-test",
    rank: int = 1,
    total: int = MLP_DIGITS_PARAMS,
    shard: int = 0,
) -> None:
    body = json.dumps(
        {"job_id": job_id, "rank": rank, "shard": shard, "shards": 2, "total_params": total,
         "run_id": RUN_ID, "run_started": RUN_STARTED}
    ).encode()  # fmt: skip
    mac = wire.hello_mac(secret.encode(), nonce, body)
    wire.send_frame(sock, MsgType.HELLO, 0, mac + body, time.monotonic() + 10)


def _authenticated(endpoint: str, shard: int = 0) -> socket.socket:
    sock, nonce = challenged_socket(endpoint)
    _hello(sock, nonce, shard=shard)
    deadline = time.monotonic() + 10
    header = wire.recv_header(sock, deadline)
    assert header.msg_type == MsgType.WELCOME
    wire.recv_control(sock, header, deadline)
    return sock


def _closed_by_server(sock: socket.socket) -> bool:
    """The server answers with at most an ERROR frame, then closes."""
    sock.settimeout(20)
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except ConnectionResetError:
        pass
    finally:
        sock.close()
    if data:
        assert wire.decode_header(data[: wire.HEADER_BYTES]).msg_type == MsgType.ERROR
    return True


def garbage(endpoint: str, shard: int) -> socket.socket:
    sock, _ = challenged_socket(endpoint)
    sock.sendall(b"GET / HTTP/1.1\r\nHost: ps\r\n\r\n" + bytes(range(256)))
    return sock


def wrong_hmac(endpoint: str, shard: int) -> socket.socket:
    sock, nonce = challenged_socket(endpoint)
    _hello(sock, nonce, secret="not-the-secret", shard=shard)
    return sock


def wrong_job(endpoint: str, shard: int) -> socket.socket:
    sock, nonce = challenged_socket(endpoint)
    _hello(sock, nonce, job_id="another-job", shard=shard)
    return sock


def oversize_hello(endpoint: str, shard: int) -> socket.socket:
    sock, _ = challenged_socket(endpoint)
    sock.sendall(wire.encode_header(MsgType.HELLO, 0, 1 << 40))  # 1 TiB announced, never sent
    return sock


def oversize_push(endpoint: str, shard: int) -> socket.socket:
    sock = _authenticated(endpoint, shard)
    sock.sendall(wire.encode_header(MsgType.PUSH, 0, 1 << 40))
    return sock


def truncated_push(endpoint: str, shard: int) -> socket.socket:
    sock = _authenticated(endpoint, shard)
    start, stop = wire.shard_bounds(MLP_DIGITS_PARAMS, 2, shard)
    payload = np.full(stop - start, 1e6, np.float32).tobytes()
    # The server may already have refused the frame on its header (shard not initialised).
    with contextlib.suppress(OSError):
        sock.sendall(
            wire.encode_header(MsgType.PUSH, 0, len(payload)) + payload[: len(payload) // 2]
        )
        sock.shutdown(socket.SHUT_WR)  # the rest never comes
    return sock


def wrong_shape_push(endpoint: str, shard: int) -> socket.socket:
    sock = _authenticated(endpoint, shard)
    start, stop = wire.shard_bounds(MLP_DIGITS_PARAMS, 2, shard)
    wrong = np.ones(stop - start - 1, np.float32)
    wire.send_frame(sock, MsgType.PUSH, 0, wrong, time.monotonic() + 10)
    return sock


def nan_push(endpoint: str, shard: int) -> socket.socket:
    sock = _authenticated(endpoint, shard)
    start, stop = wire.shard_bounds(MLP_DIGITS_PARAMS, 2, shard)
    wire.send_frame(
        sock, MsgType.PUSH, 0, np.full(stop - start, np.nan, np.float32), time.monotonic() + 10
    )
    return sock


def bad_version(endpoint: str, shard: int) -> socket.socket:
    sock, _ = challenged_socket(endpoint)
    sock.sendall(struct.pack("!4sBBHqQ", b"LDNN", 99, 2, 0, 0, 10))
    return sock


def _initialise(servers: list[Any]) -> None:
    """An honest INIT, so each attack meets the check it targets (not 'uninitialised')."""
    client = PSClient(
        tuple(endpoints(servers)), "job-test", 0, SECRET.encode(), MLP_DIGITS_PARAMS,
        timeout_s=10, run_id=RUN_ID, run_started=RUN_STARTED,
    )  # fmt: skip
    with client:
        client.connect()
        client.init_params(np.zeros(MLP_DIGITS_PARAMS, np.float32))


ATTACKS: list[Callable[[str, int], socket.socket]] = [
    garbage,
    wrong_hmac,
    wrong_job,
    oversize_hello,
    oversize_push,
    truncated_push,
    wrong_shape_push,
    nan_push,
    bad_version,
]


@pytest.mark.parametrize("attack", ATTACKS, ids=lambda a: a.__name__)
def test_each_bad_input_closes_only_that_connection(ps_cluster: Any, attack: Any) -> None:
    servers = ps_cluster(2, 2)
    _initialise(servers)
    sock = attack(endpoints(servers)[1], 1)
    assert _closed_by_server(sock)
    counted = {True: servers[1].truncated_frames, False: servers[1].rejected_connections}
    assert counted[attack is truncated_push] == 1 and counted[attack is not truncated_push] == 0
    # The server still answers an honest handshake afterwards.
    honest = _authenticated(endpoints(servers)[1], 1)
    honest.close()


def test_honest_run_completes_correctly_under_attack(
    s3: Any, bucket: str, digits: Any, ps_cluster: Any
) -> None:
    digits(2)
    iterations = 10
    servers = ps_cluster(2, 2, learning_rate=0.1, momentum=0.9)
    events = [
        worker_event(r, 2, endpoints(servers), bucket, iterations=iterations) for r in range(2)
    ]
    outcomes: list[bool] = []

    def attack_all() -> None:
        for attack in ATTACKS:
            for shard, endpoint in enumerate(endpoints(servers)):
                outcomes.append(_closed_by_server(attack(endpoint, shard)))

    def attack_once_initialised() -> None:
        deadline = time.monotonic() + 60
        while not all(s.state.initialized for s in servers):
            assert time.monotonic() < deadline
            time.sleep(0.005)
        attack_all()

    attacker = threading.Thread(target=attack_once_initialised)
    attacker.start()
    results = run_threads(worker.handler, [(e, None) for e in events])
    attacker.join(60)
    assert len(outcomes) == len(ATTACKS) * 2 and all(outcomes)
    assert all(r["done"] for r in results)
    # Every attack but the truncated frame is rejected; the truncated one is a disconnect
    # mid-frame (like a killed worker) and its partial gradient is dropped.
    assert sum(s.rejected_connections for s in servers) == (len(ATTACKS) - 1) * 2
    assert sum(s.truncated_frames for s in servers) == 2
    np.testing.assert_allclose(
        ps_vector(servers),
        reference_params(s3, bucket, events[0], iterations),
        rtol=1e-4,
        atol=1e-5,
    )


def test_ps_cli_prints_ready_and_rejects_bad_flags(moto_endpoint: str) -> None:
    cmd = [
        sys.executable,
        "-m",
        "functions.ps",
        "--job-id",
        "j",
        "--workers",
        "2",
        "--secret-ref",
        "env:LDNN_TEST_SECRET",
        "--port",
        "0",
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        assert line.startswith("READY 127.0.0.1:")
        wire.parse_endpoint(line.split()[1])
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    assert proc.returncode == 0
    bad = subprocess.run(
        [*cmd[:-2], "--shard", "5", "--shards", "2"], capture_output=True, text=True, timeout=60
    )
    assert bad.returncode == 2
    assert bad.stderr.strip() == "functions.ps: error: --shard 5: expected 0..1"
