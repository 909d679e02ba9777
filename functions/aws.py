"""AWS access shared by the runtime: one S3 client per endpoint, and the job's shared secret.

Locally the S3 endpoint comes from AWS_ENDPOINT_URL_S3, which boto3 honours natively; the client
is cached per endpoint so tests that start their own S3 server get a matching client.

Every S3 client has bounded connect and read timeouts and a bounded number of attempts
(botocore's "standard" retry mode), so no S3 call waits forever: a dead or stalled endpoint
ends as `S3Unreachable` ("S3 endpoint unreachable: <endpoint>: <reason>") at the boundary that
wraps its calls in `naming_s3_failures()` (every handler and the PS).
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

# A connect on loopback or to a VPC endpoint takes milliseconds; 5 s means the endpoint is gone.
S3_CONNECT_TIMEOUT_S = 5.0
# Longest silence between two reads of a response before the attempt is abandoned.
S3_READ_TIMEOUT_S = 20.0
S3_MAX_ATTEMPTS = 3  # the first try and two retries
S3_POOL_CONNECTIONS = 64  # botocore's default of 10 would queue a worker's k transfers
MIN_TIMEOUT_S = 0.5  # below this a healthy but busy endpoint would fail spuriously
# botocore's standard mode sleeps rand(0, 1) * min(2 ** (n - 1), 20) s before attempt n + 1.
_BACKOFF_BASE_S = 2.0
_BACKOFF_CAP_S = 20.0


def list_keys(s3: Any, bucket: str, prefix: str) -> list[str]:
    """Every object key under `prefix`, through all the listing's pages, in S3's order."""
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    return [o["Key"] for page in pages for o in page.get("Contents", [])]


def download_to(s3: Any, bucket: str, key: str, target: Path) -> None:
    """One object downloaded to `target`, its folders made."""
    target.parent.mkdir(parents=True, exist_ok=True)
    s3.download_file(bucket, key, str(target))


def remaining_s(context: Any) -> float | None:
    """Seconds left in this invocation; None without a Lambda context (no deadline to keep)."""
    if context is None or not hasattr(context, "get_remaining_time_in_millis"):
        return None
    return float(context.get_remaining_time_in_millis()) / 1000.0


class S3Unreachable(RuntimeError):
    """S3 did not answer within the client's timeouts and retries; the message names it."""


def backoff_bound_s(attempts: int = S3_MAX_ATTEMPTS) -> float:
    """Longest total sleep between `attempts` tries of one call (botocore standard mode)."""
    return sum(min(_BACKOFF_BASE_S**i, _BACKOFF_CAP_S) for i in range(attempts - 1))


def worst_case_call_s(connect_s: float, read_s: float, attempts: int = S3_MAX_ATTEMPTS) -> float:
    """Longest one call can wait on an endpoint that accepts nothing or answers nothing."""
    return attempts * (connect_s + read_s) + backoff_bound_s(attempts)


def s3_timeouts_s(budget_s: float | None = None) -> tuple[float, float]:
    """(connect, read) timeouts; with `budget_s`, shrunk so one call's worst case fits it.

    A quarter of each attempt's share goes to the connect. Never below MIN_TIMEOUT_S: a budget
    too small for that is not honoured (the caller's own deadline is then the bound).
    """
    if budget_s is None:
        return S3_CONNECT_TIMEOUT_S, S3_READ_TIMEOUT_S
    per_attempt_s = (budget_s - backoff_bound_s()) / S3_MAX_ATTEMPTS
    connect_s = min(S3_CONNECT_TIMEOUT_S, max(MIN_TIMEOUT_S, per_attempt_s / 4))
    read_s = min(S3_READ_TIMEOUT_S, max(MIN_TIMEOUT_S, per_attempt_s - connect_s))
    # Half-second steps: invocations with similar budgets share one cached client.
    return math.floor(connect_s * 2) / 2, math.floor(read_s * 2) / 2


def s3_config(budget_s: float | None = None) -> Any:
    """The botocore Config of every S3 client: timeouts, bounded retries, path addressing."""
    return _config(*s3_timeouts_s(budget_s))


def _config(connect_s: float, read_s: float) -> Any:
    from botocore.config import Config

    return Config(
        connect_timeout=connect_s,
        read_timeout=read_s,
        retries={"total_max_attempts": S3_MAX_ATTEMPTS, "mode": "standard"},
        s3={"addressing_style": "path"},
        # The s3 sync mode keeps a partition's uploads and downloads in flight at once.
        max_pool_connections=S3_POOL_CONNECTIONS,
    )


@functools.lru_cache(maxsize=8)
def _s3_for(endpoint: str | None, connect_s: float, read_s: float) -> Any:
    import boto3  # imported here: the PS does not need boto3 unless it checkpoints

    return boto3.client("s3", config=_config(connect_s, read_s))


def s3_client(budget_s: float | None = None) -> Any:
    """A boto3 S3 client for the current endpoint (AWS_ENDPOINT_URL_S3 if set).

    `budget_s`: seconds one call may take at worst, timeouts and retries included (a worker
    passes a share of its invocation's remaining time).
    """
    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    return _s3_for(endpoint, *s3_timeouts_s(budget_s))


def s3_is_configured() -> bool:
    """Is there an S3 to reach: an endpoint in the environment (a local S3), or a region from
    the environment or the AWS config file (AWS itself)?"""
    names = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_REGION", "AWS_DEFAULT_REGION")
    if any(os.environ.get(name) for name in names):  # AWS_REGION: the PS container's
        return True
    import botocore.session

    return bool(botocore.session.Session().get_config_variable("region"))


def _endpoint_of(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}" if parts.netloc else url


def unreachable_message(err: BaseException) -> str | None:
    """`S3 endpoint unreachable: <endpoint>: <reason>` for botocore's connection, timeout and
    closed-connection errors; None for any other error (an S3 error response included)."""
    from botocore import exceptions as bce

    if isinstance(err, bce.ReadTimeoutError):
        reason = "no response (read timed out)"
    elif isinstance(err, bce.ConnectTimeoutError):
        reason = "connect timed out"
    elif isinstance(err, bce.ConnectionClosedError):
        reason = "connection closed before the response ended"
    elif isinstance(err, bce.EndpointConnectionError):
        inner = str(err.kwargs.get("error") or err)
        found = re.search(r"\[Errno -?\d+\][^'\")]*", inner)
        reason = found.group(0).strip() if found else inner
    else:
        return None
    url = str(err.kwargs.get("endpoint_url") or "?")
    return f"S3 endpoint unreachable: {_endpoint_of(url)}: {reason}"


@contextlib.contextmanager
def naming_s3_failures() -> Iterator[None]:
    """Within the block (or the decorated function), an S3 endpoint that cannot be reached
    raises S3Unreachable with one line naming it, instead of botocore's own error."""
    try:
        yield
    except Exception as err:
        message = unreachable_message(err)
        if message is None:
            raise
        raise S3Unreachable(message) from err


def resolve_secret(secret_ref: str) -> bytes:
    """`env:NAME` → os.environ[NAME]; anything else is a Secrets Manager secret id or ARN."""
    if secret_ref.startswith("env:"):
        name = secret_ref[4:]
        value = os.environ.get(name)
        if not value:
            raise ValueError(
                f"secret_ref {secret_ref!r}: environment variable {name!r} is unset or empty"
            )
        return value.encode("utf-8")
    if not secret_ref:
        raise ValueError("secret_ref is empty: expected 'env:NAME' or a Secrets Manager id/ARN")
    import boto3

    response = boto3.client("secretsmanager").get_secret_value(SecretId=secret_ref)
    secret = response.get("SecretString")
    if secret is None:
        return bytes(response["SecretBinary"])
    return str(secret).encode("utf-8")
