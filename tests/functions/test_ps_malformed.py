"""Malformed frames and bad flags: every malformed frame gets one ERROR frame and a close (no
exception escapes a connection thread); every bad flag one line and exit code 2."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from typing import Any

import pytest

from functions import wire
from functions.ps import cli as ps
from functions.wire import MsgType

from .conftest import SECRET, endpoints
from .helpers import RUN_ID, RUN_STARTED, challenged_socket

GOOD_HELLO = {
    "job_id": "job-test", "rank": 0, "shard": 0, "shards": 1, "total_params": 10,
    "run_id": RUN_ID, "run_started": RUN_STARTED,
}  # fmt: skip


def _send_hello(sock: socket.socket, nonce: bytes, body: bytes) -> None:
    mac = wire.hello_mac(SECRET.encode(), nonce, body)  # signed: it reaches the JSON checks
    wire.send_frame(sock, MsgType.HELLO, 0, mac + body, time.monotonic() + 30)


def _hello_with(**changes: Any) -> bytes:
    value = {**GOOD_HELLO, **changes}
    return json.dumps({k: v for k, v in value.items() if v is not _MISSING}).encode()


_MISSING = object()

BAD_HELLOS: dict[str, tuple[bytes, str]] = {
    "json-list": (b"[1, 2, 3]", "HELLO must be a JSON object, got a JSON list"),
    "json-string": (b'"hello"', "HELLO must be a JSON object, got a JSON str"),
    "json-null": (b"null", "HELLO must be a JSON object, got a JSON NoneType"),
    "not-json": (b"{rank: 0", "HELLO is not JSON"),
    "not-utf8": (b"\xff\xfe{}", "HELLO is not JSON"),
    "rank-string": (_hello_with(rank="0"), "HELLO rank '0': expected an integer"),
    "rank-float": (_hello_with(rank=0.5), "HELLO rank 0.5: expected an integer"),
    "rank-bool": (_hello_with(rank=True), "HELLO rank True: expected an integer"),
    "rank-list": (_hello_with(rank=[0]), "HELLO rank [0]: expected an integer"),
    "rank-missing": (_hello_with(rank=_MISSING), "HELLO lacks 'rank': expected an integer"),
    "job-id-missing": (_hello_with(job_id=_MISSING), "HELLO job_id None: expected a string"),
    "job-id-number": (_hello_with(job_id=7), "HELLO job_id 7: expected a string"),
    "shard-string": (_hello_with(shard="0"), "HELLO shard '0': expected an integer"),
    "shards-missing": (_hello_with(shards=_MISSING), "HELLO lacks 'shards': expected an integer"),
    "total-negative": (_hello_with(total_params=-1), "HELLO total_params -1: expected"),
    "total-dict": (_hello_with(total_params={}), "HELLO total_params {}: expected an integer"),
    "lr-string": (_hello_with(learning_rate="fast"), "HELLO learning_rate 'fast': expected"),
    "lr-nan": (_hello_with(learning_rate=float("nan")), "HELLO learning_rate nan: expected"),
    "rank-out-of-range": (_hello_with(rank=9), "rank 9 out of range -1..1"),
    # json.loads recurses a level a bracket: refused by the depth bound, not by RecursionError
    "nested-30000-deep": (
        b"[" * 30_000 + b"]" * 30_000,
        "HELLO nests JSON deeper than the bound of 32 levels",
    ),
    "nested-in-an-object": (
        b'{"job_id": ' + b"[" * 40 + b"]" * 40 + b"}",
        "HELLO nests JSON deeper than the bound of 32 levels",
    ),
}


def _error_then_close(sock: socket.socket) -> str:
    """The server's ERROR message; asserts the frame is an ERROR and the connection then ends."""
    deadline = time.monotonic() + 30
    header = wire.recv_header(sock, deadline)
    assert header.msg_type == MsgType.ERROR
    message = wire.recv_control(sock, header, deadline).decode()
    sock.settimeout(30)
    with contextlib.suppress(ConnectionResetError):  # a reset is a close too
        assert sock.recv(1) == b""
    sock.close()
    return message


@pytest.fixture()
def thread_errors(monkeypatch: pytest.MonkeyPatch) -> list[BaseException]:
    """Exceptions that escaped any thread during the test (each would print a traceback)."""
    caught: list[BaseException] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: caught.append(args.exc_value))
    return caught


@pytest.mark.parametrize("case", BAD_HELLOS, ids=str)
def test_each_malformed_hello_gets_an_error_frame_and_a_close(
    ps_cluster: Any, thread_errors: list[BaseException], case: str
) -> None:
    (server,) = ps_cluster(1, 2)
    body, expected = BAD_HELLOS[case]
    sock, nonce = challenged_socket(endpoints([server])[0])
    _send_hello(sock, nonce, body)
    message = _error_then_close(sock)
    assert expected in message
    assert not message.startswith("internal error")  # refused by a check, not by the net
    assert server.rejected_connections == 1
    assert thread_errors == []


def _unknown_type(sock: socket.socket) -> None:
    sock.sendall(wire.HEADER.pack(wire.MAGIC, wire.VERSION, 99, 0, 0, 0))


def _server_type(sock: socket.socket) -> None:
    wire.send_frame(sock, MsgType.WELCOME, 0, b"", time.monotonic() + 30)


def _second_hello(sock: socket.socket) -> None:
    wire.send_frame(sock, MsgType.HELLO, 0, b"", time.monotonic() + 30)


# (frame, sent after the handshake?, the ERROR message expected)
BAD_FRAMES = [
    (_unknown_type, False, "unknown message type 99"),
    (_unknown_type, True, "unknown message type 99"),
    (_server_type, False, "unexpected WELCOME frame, expected HELLO"),
    (_server_type, True, "unexpected WELCOME frame from a worker"),
    (_second_hello, False, "HELLO too short to carry an HMAC"),
    (_second_hello, True, "unexpected HELLO frame from a worker"),
]


@pytest.mark.parametrize(
    ("send", "after_handshake", "expected"),
    BAD_FRAMES,
    ids=lambda v: getattr(v, "__name__", "after" if v is True else "before" if v is False else ""),
)
def test_each_malformed_frame_gets_an_error_frame_and_a_close(
    ps_cluster: Any,
    thread_errors: list[BaseException],
    send: Any,
    after_handshake: bool,
    expected: str,
) -> None:
    (server,) = ps_cluster(1, 2)
    sock, nonce = challenged_socket(endpoints([server])[0])
    if after_handshake:
        _send_hello(sock, nonce, _hello_with())
        deadline = time.monotonic() + 30
        header = wire.recv_header(sock, deadline)
        assert header.msg_type == MsgType.WELCOME
        wire.recv_control(sock, header, deadline)
    send(sock)
    assert expected in _error_then_close(sock)
    assert server.rejected_connections == 1
    assert thread_errors == []


BASE_ARGS = ["--job-id", "j", "--workers", "2", "--secret-ref", "env:LDNN_TEST_SECRET"]
BAD_FLAGS = [
    (["--learning-rate", "nan"], "--learning-rate nan: expected a finite number > 0"),
    (["--learning-rate", "inf"], "--learning-rate inf: expected a finite number > 0"),
    (["--learning-rate", "-1"], "--learning-rate -1.0: expected a finite number > 0"),
    (["--learning-rate", "0"], "--learning-rate 0.0: expected a finite number > 0"),
    (["--momentum", "1"], "--momentum 1.0: expected a number in [0, 1)"),
    (["--momentum", "-0.1"], "--momentum -0.1: expected a number in [0, 1)"),
    (["--momentum", "nan"], "--momentum nan: expected a number in [0, 1)"),
    (["--handshake-timeout-s", "0"], "--handshake-timeout-s 0.0: expected a finite number > 0"),
    (["--idle-timeout-s", "inf"], "--idle-timeout-s inf: expected a finite number > 0"),
    (["--max-unauthenticated", "0"], "--max-unauthenticated 0: expected >= 1"),
    (
        ["--job-id", ""],
        "--job-id '': expected 1-32 letters, digits or hyphens starting with a "
        "letter, e.g. digits-demo",
    ),
    (
        ["--workers", "99999999999999999999"],
        "--workers 99999999999999999999: expected an integer from 1 to 100000",
    ),
    (["--workers", "0"], "--workers 0: expected an integer from 1 to 100000"),
    (
        ["--artifacts-bucket", "My_Bucket"],
        "--artifacts-bucket 'My_Bucket': expected an S3 "
        "bucket name (3-63 lowercase letters, digits, dots or hyphens), or '' for no checkpoints",
    ),
]


@pytest.mark.parametrize(("flags", "message"), BAD_FLAGS, ids=lambda v: " ".join(v))
def test_each_bad_flag_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    assert ps.main([*BASE_ARGS, *flags]) == 2
    captured = capsys.readouterr()
    assert captured.err == f"functions.ps: error: {message}\n"
    assert captured.out == ""


def test_an_artifacts_bucket_without_an_s3_to_reach_is_refused_before_listening(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    for name in ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("LDNN_TEST_SECRET", "s")
    monkeypatch.setattr(ps.ParameterServer, "start", _never_listens)
    assert ps.main([*BASE_ARGS, "--artifacts-bucket", "ckpts"]) == 2
    assert capsys.readouterr().err == (
        "functions.ps: error: --artifacts-bucket 'ckpts': no S3 endpoint or region is "
        "configured; set AWS_ENDPOINT_URL_S3 (a local S3) or AWS_REGION, or give '' for no "
        "checkpoints\n"
    )
    monkeypatch.setenv("AWS_REGION", "eu-west-1")  # the PS container's one setting
    with pytest.raises(AssertionError, match="listened"):
        ps.main([*BASE_ARGS, "--artifacts-bucket", "ckpts"])


def _never_listens(*_: Any) -> None:
    raise AssertionError("listened")


def test_the_job_id_pattern_is_the_planners() -> None:
    from provisioner.parse import JOB_NAME_PATTERN

    assert ps.JOB_ID.pattern == JOB_NAME_PATTERN.pattern
