"""PS checkpoints in S3: pruning keeps storage bounded and never removes what a restore needs."""

from __future__ import annotations

from typing import Any

import numpy as np

from functions.ps.checkpoints import CheckpointStore
from functions.ps.config import PSConfig
from functions.ps.server import ParameterServer

from .conftest import SECRET

KEY = SECRET.encode()


def _server(s3: Any, bucket: str, shard: int, shards: int = 2) -> ParameterServer:
    config = PSConfig(
        job_id="job-ckpt",
        shard=shard,
        shards=shards,
        workers=1,
        secret=SECRET.encode(),
        artifacts_bucket=bucket,
        checkpoint_prefix="ckpt",
    )
    return ParameterServer(config, s3=s3)


def _at_iteration(server: ParameterServer, it: int) -> None:
    """Put the shard at iteration `it` with parameters that encode it (no workers needed)."""
    with server.state.cond:
        server.state.adopt(8, np.full(4, it, np.float32), np.zeros(4, np.float32), it)


def test_prune_deletes_only_iterations_older_than_the_given_one(s3: Any, bucket: str) -> None:
    store = CheckpointStore(s3, bucket, "ckpt", shards=2, secret=KEY)
    zeros = np.zeros(4, np.float32)
    for shard, its in ((0, (2, 4, 6)), (1, (2, 4))):
        for it in its:
            store.save(shard, it, 8, zeros, zeros)
    assert store.prune(0, keep_from=4) == [2]
    assert store.iterations_by_shard() == {0: {4, 6}, 1: {2, 4}}
    assert store.latest_common_iteration() == 4


def test_checkpoints_are_pruned_to_the_newest_common_iteration(s3: Any, bucket: str) -> None:
    shards = [_server(s3, bucket, 0), _server(s3, bucket, 1)]
    store = CheckpointStore(s3, bucket, "ckpt", shards=2, secret=KEY)
    for it in (2, 4, 6, 8):
        for server in shards:
            _at_iteration(server, it)
            server.checkpoint()
    # Shard 0 checkpointed 8 while shard 1 was still at 6: it kept 6 (the common one);
    # shard 1, which checkpointed last, could delete everything before 8.
    assert store.iterations_by_shard() == {0: {6, 8}, 1: {8}}
    # A shard that runs ahead never deletes the checkpoint a restore of both would use.
    _at_iteration(shards[0], 10)
    shards[0].checkpoint()
    assert store.iterations_by_shard() == {0: {8, 10}, 1: {8}}
    restarted = [_server(s3, bucket, 0), _server(s3, bucket, 1)]
    assert [s.restore() for s in restarted] == [8, 8]
    np.testing.assert_array_equal(restarted[0].state.params, np.full(4, 8, np.float32))


def test_a_failed_prune_does_not_fail_the_checkpoint(s3: Any, bucket: str) -> None:
    server = _server(s3, bucket, 0, shards=1)
    _at_iteration(server, 2)

    class ListFails:
        def __getattr__(self, name: str) -> Any:
            if name == "get_paginator":
                raise OSError("listing refused")
            return getattr(s3, name)

    assert server.store is not None
    server.store.s3 = ListFails()
    assert server.checkpoint() == 2
    assert CheckpointStore(s3, bucket, "ckpt", shards=1, secret=KEY).iterations_by_shard() == {
        0: {2}
    }
