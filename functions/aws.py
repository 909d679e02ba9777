"""AWS access shared by the runtime: one S3 client per endpoint, and the job's shared secret.

Locally the S3 endpoint comes from AWS_ENDPOINT_URL_S3, which boto3 honours natively; the client
is cached per endpoint so tests that start their own S3 server get a matching client.
"""

from __future__ import annotations

import functools
import os
from typing import Any


@functools.lru_cache(maxsize=8)
def _s3_for(endpoint: str | None) -> Any:
    import boto3  # imported here: the PS does not need boto3 unless it checkpoints
    from botocore.config import Config

    config = Config(
        retries={"max_attempts": 5, "mode": "standard"}, s3={"addressing_style": "path"}
    )
    return boto3.client("s3", config=config)


def s3_client() -> Any:
    """A boto3 S3 client for the current endpoint (AWS_ENDPOINT_URL_S3 if set)."""
    return _s3_for(os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL"))


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
