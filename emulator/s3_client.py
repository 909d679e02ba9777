"""The emulator's own client of the local S3 server: the client every part of a run uses
(with the runtime's timeouts and bounded retries), and the job's buckets created and warmed.
"""

from __future__ import annotations

from typing import Any

from emulator.s3server import S3Endpoint
from functions.aws import s3_config

WARM_KEY = ".emulator-warm"  # written and deleted at once: the bucket holds nothing of it after


def s3_client_for(endpoint: S3Endpoint) -> Any:
    """A boto3 S3 client of `endpoint`, with its dummy credentials and the runtime's config."""
    import boto3  # only when a client is made: `python -m emulator --help` does not pay for it

    env = endpoint.client_env()
    return boto3.session.Session().client(
        "s3",
        endpoint_url=endpoint.url,
        aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
        region_name=env["AWS_DEFAULT_REGION"],
        config=s3_config(),
    )


def create_buckets(endpoint: S3Endpoint, names: list[str]) -> None:
    """Create the job's buckets (idempotent: an existing bucket of ours is fine)."""
    from botocore.exceptions import ClientError  # as boto3 in s3_client_for

    client = s3_client_for(endpoint)
    for name in names:
        try:
            client.create_bucket(Bucket=name)
        except ClientError as err:
            if err.response.get("Error", {}).get("Code") not in (
                "BucketAlreadyOwnedByYou",
                "BucketAlreadyExists",
            ):
                raise
        warm_bucket(client, name)


def warm_bucket(client: Any, bucket: str) -> None:
    """Write and delete one object so the bucket's first real write is as fast as any other.

    SeaweedFS grows a volume for a bucket on its first write: 0.21 s against 4 ms for the next
    (measured, 100 kB PUTs into three fresh buckets). S3 has no such cost, and here it fell on
    the PS's iteration-0 checkpoint, inside every worker's start-up (0.21 of its 0.23 s sync).
    """
    client.put_object(Bucket=bucket, Key=WARM_KEY, Body=b"")
    client.delete_object(Bucket=bucket, Key=WARM_KEY)
