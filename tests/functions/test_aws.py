"""S3 clients: bounded timeouts and retries, and a dead endpoint named in one line."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from functions.aws import (
    S3_CONNECT_TIMEOUT_S,
    S3_MAX_ATTEMPTS,
    S3_READ_TIMEOUT_S,
    S3Unreachable,
    naming_s3_failures,
    s3_config,
    s3_timeouts_s,
    unreachable_message,
    worst_case_call_s,
)
from functions.task import WorkerTask
from functions.worker import S3_CALLS_TO_LOAD, s3_budget_s

from .helpers import worker_event


def _client(url: str, budget_s: float) -> Any:
    return boto3.session.Session().client(
        "s3",
        endpoint_url=url,
        region_name="us-east-1",
        aws_access_key_id="x",
        aws_secret_access_key="y",
        config=s3_config(budget_s),
    )


@pytest.fixture
def closed_port() -> int:
    """A loopback port nobody listens on (connections are refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def silent_server() -> Iterator[str]:
    """A loopback listener that accepts connections and never answers (a stalled S3)."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"


def test_default_timeouts_and_attempts_are_bounded() -> None:
    config = s3_config()
    assert (config.connect_timeout, config.read_timeout) == (
        S3_CONNECT_TIMEOUT_S,
        S3_READ_TIMEOUT_S,
    )
    assert config.retries == {"total_max_attempts": S3_MAX_ATTEMPTS, "mode": "standard"}


@pytest.mark.parametrize("budget_s", [9.0, 15.0, 40.0, 78.0, 290.0])
def test_a_budget_bounds_one_calls_worst_case(budget_s: float) -> None:
    assert worst_case_call_s(*s3_timeouts_s(budget_s)) <= budget_s


def test_a_budget_never_shrinks_timeouts_below_the_floor() -> None:
    assert s3_timeouts_s(0.0) == (0.5, 0.5)


def test_refused_connection_is_named_with_endpoint_and_reason(closed_port: int) -> None:
    url = f"http://127.0.0.1:{closed_port}"
    with pytest.raises(S3Unreachable) as caught, naming_s3_failures():
        _client(url, budget_s=9.0).get_object(Bucket="b", Key="k")
    assert str(caught.value) == f"S3 endpoint unreachable: {url}: [Errno 111] Connection refused"


def test_a_stalled_endpoint_ends_in_a_read_timeout_named_as_such(silent_server: str) -> None:
    stalled = r"^S3 endpoint unreachable: http://127\.0\.0\.1:\d+: no response \(read timed out\)$"
    with pytest.raises(S3Unreachable, match=stalled), naming_s3_failures():
        _client(silent_server, budget_s=9.0).head_object(Bucket="b", Key="k")


def test_an_s3_error_response_is_not_called_unreachable() -> None:
    denied = ClientError({"Error": {"Code": "AccessDenied", "Message": "no"}}, "GetObject")
    assert unreachable_message(denied) is None
    with pytest.raises(ClientError), naming_s3_failures():
        raise denied


class _Context:
    def __init__(self, remaining_ms: int) -> None:
        self.remaining_ms = remaining_ms

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


def test_worker_loads_within_its_invocation_minus_the_safety_margin() -> None:
    task = WorkerTask.from_event(worker_event(0, 1, ["127.0.0.1:1"], "b", safety_margin_s=15.0))
    assert s3_budget_s(task, _Context(60_000)) == pytest.approx(45.0 / S3_CALLS_TO_LOAD)
    assert s3_budget_s(task, _Context(5_000)) == 0.0
    assert s3_budget_s(task, None) is None


def test_list_keys_reads_every_page_and_download_to_makes_the_folders(tmp_path: Path) -> None:
    """1,003 objects span two pages of a listing (S3 gives at most 1,000): every key comes back,
    none from beside the prefix; an object lands at a path whose folders did not exist."""
    from moto import mock_aws

    from functions.aws import download_to, list_keys

    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket="keys-test")
        keys = [f"data/{i:04d}.bin" for i in range(1003)]
        for key in keys + ["other/x.bin", "data-not/y.bin"]:
            s3.put_object(Bucket="keys-test", Key=key, Body=key.encode())
        assert list_keys(s3, "keys-test", "data/") == keys
        assert list_keys(s3, "keys-test", "none/") == []
        target = tmp_path / "deep" / "er" / "one.bin"
        download_to(s3, "keys-test", keys[7], target)
        assert target.read_bytes() == b"data/0007.bin"
