"""Checkpoint integrity: each checkpoint carries an HMAC with the job secret; one that does not
verify is refused with a line naming its key, moved aside, and the shard falls back to the
newest common checkpoint that verifies (or starts fresh)."""

from __future__ import annotations

import io
import logging
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from functions.finalize import assemble_parameters
from functions.ps.checkpoints import (
    CHECKPOINT_MAC_META,
    CheckpointRejected,
    CheckpointStore,
    checkpoint_mac,
)
from functions.ps.config import PSConfig
from functions.ps.server import ParameterServer
from functions.task import WorkerTask

from .conftest import SECRET
from .helpers import worker_event

KEY = SECRET.encode()


def _server(s3: Any, bucket: str, shard: int = 0, shards: int = 1) -> ParameterServer:
    config = PSConfig(
        job_id="job-ckpt",
        shard=shard,
        shards=shards,
        workers=1,
        secret=KEY,
        artifacts_bucket=bucket,
        checkpoint_prefix="ckpt",
    )
    return ParameterServer(config, s3=s3)


def _save(store: CheckpointStore, shard: int, it: int) -> str:
    """A checkpoint whose parameters encode its iteration (no pruning: older ones stay)."""
    return store.save(shard, it, 8, np.full(4, it, np.float32), np.zeros(4, np.float32))


def _body(s3: Any, bucket: str, key: str) -> tuple[bytes, dict[str, str]]:
    got = s3.get_object(Bucket=bucket, Key=key)
    return got["Body"].read(), got.get("Metadata", {})


def flipped_byte(s3: Any, bucket: str, key: str, store: CheckpointStore) -> None:
    """The parameters changed, the HMAC kept: what an attacker without the secret can do."""
    body, meta = _body(s3, bucket, key)
    with np.load(io.BytesIO(body)) as data:
        arrays = {name: data[name] for name in data.files}
    arrays["params"] = arrays["params"] + np.float32(1000)
    out = io.BytesIO()
    np.savez(out, **arrays)
    s3.put_object(Bucket=bucket, Key=key, Body=out.getvalue(), Metadata=meta)


def no_hmac(s3: Any, bucket: str, key: str, store: CheckpointStore) -> None:
    body, _ = _body(s3, bucket, key)
    s3.put_object(Bucket=bucket, Key=key, Body=body)


def other_shards_file(s3: Any, bucket: str, key: str, store: CheckpointStore) -> None:
    """A valid checkpoint of another shard, copied with its HMAC under this key."""
    other = _save(CheckpointStore(s3, bucket, "ckpt", shards=1, secret=KEY), 0, 99)
    s3.delete_object(Bucket=bucket, Key=key)
    s3.copy_object(Bucket=bucket, Key=key, CopySource={"Bucket": bucket, "Key": other})
    s3.delete_object(Bucket=bucket, Key=other)


def wrong_secret(s3: Any, bucket: str, key: str, store: CheckpointStore) -> None:
    body, _ = _body(s3, bucket, key)
    mac = checkpoint_mac(b"another-secret", key, body)
    s3.put_object(Bucket=bucket, Key=key, Body=body, Metadata={CHECKPOINT_MAC_META: mac})


TAMPERINGS: list[Callable[[Any, str, str, CheckpointStore], None]] = [
    flipped_byte,
    no_hmac,
    other_shards_file,
    wrong_secret,
]


def test_a_checkpoint_round_trips_with_its_hmac(s3: Any, bucket: str) -> None:
    store = CheckpointStore(s3, bucket, "ckpt", shards=1, secret=KEY)
    key = _save(store, 0, 3)
    _, meta = _body(s3, bucket, key)
    assert len(meta[CHECKPOINT_MAC_META]) == 64  # hex SHA-256
    np.testing.assert_array_equal(store.load(0, 3)["params"], np.full(4, 3, np.float32))


@pytest.mark.parametrize("tamper", TAMPERINGS, ids=lambda t: t.__name__)
def test_a_tampered_checkpoint_is_refused_and_the_shard_falls_back(
    s3: Any, bucket: str, tamper: Any, caplog: pytest.LogCaptureFixture
) -> None:
    store = CheckpointStore(s3, bucket, "ckpt", shards=1, secret=KEY)
    _save(store, 0, 2)
    bad = _save(store, 0, 4)
    tamper(s3, bucket, bad, store)
    with pytest.raises(CheckpointRejected, match=bad):
        store.load(0, 4)
    server = _server(s3, bucket)
    with caplog.at_level(logging.ERROR, logger="functions.ps"):
        assert server.restore() == 2
    np.testing.assert_array_equal(server.state.params, np.full(4, 2, np.float32))
    refused = [r.getMessage() for r in caplog.records if "refused checkpoint" in r.getMessage()]
    assert len(refused) == 1 and f"s3://{bucket}/{bad}" in refused[0]
    # Moved aside, out of every listing (so all shards agree), kept for inspection.
    assert store.iterations_by_shard() == {0: {2}}
    assert s3.head_object(Bucket=bucket, Key=f"{bad}.rejected")["ContentLength"] > 0


def test_with_no_verified_checkpoint_the_shard_starts_fresh(s3: Any, bucket: str) -> None:
    store = CheckpointStore(s3, bucket, "ckpt", shards=1, secret=KEY)
    for it in (2, 4):
        flipped_byte(s3, bucket, _save(store, 0, it), store)
    server = _server(s3, bucket)
    assert server.restore() is None
    assert not server.state.initialized  # it waits for a worker's INIT
    assert store.iterations_by_shard() == {0: set()}


def test_shards_agree_after_one_refuses_its_newest_checkpoint(s3: Any, bucket: str) -> None:
    """Shard 1 restored 4 before shard 0 refused its 4: the worker's ROLLBACK brings shard 1 to
    2 as well, because the refused file left the listing every shard computes 'common' from."""
    store = CheckpointStore(s3, bucket, "ckpt", shards=2, secret=KEY)
    for shard in (0, 1):
        for it in (2, 4):
            _save(store, shard, it)
    flipped_byte(s3, bucket, store.key(0, 4), store)
    shards = [_server(s3, bucket, k, shards=2) for k in (0, 1)]
    assert shards[1].restore() == 4
    assert shards[0].restore() == 2
    assert shards[1].rollback() == 2
    assert shards[0].rollback() == 2  # already there: a no-op
    np.testing.assert_array_equal(shards[1].state.params, np.full(4, 2, np.float32))


def test_finalize_refuses_a_tampered_checkpoint(s3: Any, bucket: str) -> None:
    event = worker_event(0, 1, ["127.0.0.1:9"], bucket, iterations=1)
    task = WorkerTask.from_event(event)
    store = CheckpointStore(s3, bucket, task.run_checkpoint_prefix, shards=1, secret=KEY)
    flipped_byte(s3, bucket, _save(store, 0, 5), store)
    with pytest.raises(CheckpointRejected, match="HMAC does not match"):
        assemble_parameters(s3, task)


def test_tampered_checkpoint_against_seaweedfs(weed_endpoint: str) -> None:
    """The emulator's S3 keeps user metadata through PUT, GET and COPY, so the same holds."""
    from functions.aws import s3_client

    s3 = s3_client()
    s3.create_bucket(Bucket="weed-ckpt")
    store = CheckpointStore(s3, "weed-ckpt", "ckpt", shards=1, secret=KEY)
    _save(store, 0, 2)
    flipped_byte(s3, "weed-ckpt", _save(store, 0, 4), store)
    assert _server(s3, "weed-ckpt").restore() == 2
    assert store.iterations_by_shard() == {0: {2}}
    assert store.load(0, 2)["iteration"] == 2
