"""S3 requests the exchange and the pipeline's boundaries send, counted by kind (the report
sets them beside the requests the model prices)."""

from __future__ import annotations

import threading
import time
from typing import Any

from botocore.exceptions import ClientError

DELETE_BATCH = 1000  # keys per DeleteObjects request (the S3 limit)


class RequestCounts:
    """S3 requests of one link by kind, counted from the exchange's threads."""

    KINDS = ("put", "get", "get_miss", "delete", "list")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts = dict.fromkeys(self.KINDS, 0)

    def add(self, kind: str, count: int = 1) -> None:
        with self._lock:
            self._counts[kind] += count

    def as_dict(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)


def _missing(exc: ClientError) -> bool:
    """A GET of a key that does not exist (yet)."""
    return exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404")


def counted_get(
    s3: Any, bucket: str, key: str, counts: RequestCounts, length: int | None = None
) -> tuple[bytes, float] | None:
    """GET (the first `length` bytes), counted (a miss as "get" and "get_miss"); (body, when it
    answered), None while the key is not there."""
    extra = {"Range": f"bytes=0-{length - 1}"} if length is not None else {}
    counts.add("get")
    try:
        response = s3.get_object(Bucket=bucket, Key=key, **extra)
    except ClientError as exc:
        if not _missing(exc):
            raise
        counts.add("get_miss")
        return None
    answered = time.perf_counter()
    return response["Body"].read(), answered


def counted_delete(s3: Any, bucket: str, keys: list[str], counts: RequestCounts) -> None:
    """DELETE `keys` in batches of DELETE_BATCH, one counted request each (keys already gone
    cost nothing more)."""
    for i in range(0, len(keys), DELETE_BATCH):
        batch = [{"Key": k} for k in keys[i : i + DELETE_BATCH]]
        s3.delete_objects(Bucket=bucket, Delete={"Objects": batch, "Quiet": True})
        counts.add("delete")
