"""Pipelined runs on the real local pieces: a `weed mini` S3 server, in-process PS shards per
stage, and every stage worker of a link running at once as the handler in a thread."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from functions import worker
from functions.ps.checkpoints import CheckpointStore
from functions.ps.config import PSConfig
from functions.ps.server import ParameterServer
from functions.runs import run_checkpoint_prefix

from .conftest import SECRET, SECRET_ENV, endpoints
from .helpers import RUN_ID, reference_params, run_threads, worker_event

JOB = "job-test"
MLP_BLOCKS = 6  # the zoo's mlp: Flatten, Linear, ReLU, Linear, ReLU, Linear
CUTS = {2: [(0, 3), (3, 6)], 3: [(0, 2), (2, 4), (4, 6)]}  # stage count → blocks per stage
_buckets = itertools.count()


@contextmanager
def weed_s3() -> Iterator[Any]:
    """A `weed mini` S3 on 127.0.0.1, the environment pointed at it; killed at the end."""
    from emulator.s3server import weed_server
    from functions.aws import s3_client

    with weed_server() as endpoint:
        env = {**endpoint.client_env(), SECRET_ENV: SECRET}
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            yield s3_client()
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


def new_bucket(s3: Any, replicas: int) -> str:
    """A fresh bucket with the digits dataset cut into one shard per replica under 'data'."""
    from functions import datasets

    name = f"pipe-{os.getpid()}-{next(_buckets)}"
    s3.create_bucket(Bucket=name)
    datasets.write_shards(s3, "builtin:digits", replicas, name, "data", seed=1)
    return name


@contextmanager
def stage_servers(
    stages: int, replicas: int, job: str = JOB
) -> Iterator[list[list[ParameterServer]]]:
    """One PS shard per stage (each holds only its stage's parameters); stopped at the end."""
    started: list[list[ParameterServer]] = []
    try:
        for _ in range(stages):
            config = PSConfig(job_id=job, shard=0, shards=1, workers=replicas,
                              secret=SECRET.encode(), learning_rate=0.1, momentum=0.9)  # fmt: skip
            server = ParameterServer(config)
            server.start()
            started.append([server])
        yield started
    finally:
        for servers in started:
            for server in servers:
                server.stop()


def stage_event(
    bucket: str, sync: str, s: int, r: int, *, stages: int, replicas: int, micro_batches: int,
    iterations: int, servers: list[list[ParameterServer]] | None = None, job: str = JOB,
    **overrides: Any,
) -> dict[str, Any]:  # fmt: skip
    """The contract's event for stage s, replica r (as stacks/events.py builds it)."""
    first, stop = CUTS[stages][s]
    return worker_event(
        r,
        replicas,
        endpoints(servers[s]) if servers else [],
        bucket,
        job_id=job,
        iterations=iterations,
        checkpoint_prefix=f"{job}/checkpoints/stage-{s:02d}",
        sync=sync,
        reducers=replicas,
        exchange_prefix=f"{job}/exchange/stage-{s:02d}",
        stage={
            "index": s,
            "count": stages,
            "first_block": first,
            "stop_block": stop,
            "micro_batches": micro_batches,
            "boundary_prefix": f"{job}/pipe",
        },  # fmt: skip
        **overrides,
    )


def run_link(events: list[dict[str, Any]], handler: Any = worker.handler) -> list[Any]:
    """Every stage worker of a link at once (they exchange activations), as threads."""
    return run_threads(handler, [(e, None) for e in events], timeout_s=120)


def final_params(s3: Any, bucket: str, events: list[dict[str, Any]], iteration: int,
                 servers: list[list[ParameterServer]] | None) -> np.ndarray:  # fmt: skip
    """The whole model's flat parameters: the stages' vectors in stage order, from each
    stage's PS shards or (s3 sync) from its reducers' end-of-link checkpoints."""
    if servers is not None:
        return np.concatenate([s.state.params for stage in servers for s in stage])
    parts = []
    for event in events:
        if event["rank"] != 0:
            continue
        prefix = run_checkpoint_prefix(event["checkpoint_prefix"], RUN_ID)
        store = CheckpointStore(s3, bucket, prefix, event["reducers"], secret=SECRET.encode())
        parts += [store.load(j, iteration)["params"] for j in range(event["reducers"])]
    return np.concatenate(parts)


def keys_under(s3: Any, bucket: str, prefix: str) -> list[str]:
    """Every key under `prefix` (the tests' view: the runtime never lists boundary objects)."""
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    return [obj["Key"] for page in pages for obj in page.get("Contents", [])]


class SharedData:
    """One digits bucket per replica count and the single-process reference per (replicas,
    iterations), made once per module: each test runs its own job in the bucket."""

    def __init__(self, s3: Any) -> None:
        self.s3 = s3
        self._buckets: dict[int, str] = {}
        self._references: dict[tuple[int, int], np.ndarray] = {}
        self._jobs = itertools.count()

    def bucket(self, replicas: int) -> str:
        if replicas not in self._buckets:
            self._buckets[replicas] = new_bucket(self.s3, replicas)
        return self._buckets[replicas]

    def new_job(self) -> str:
        return f"job-{next(self._jobs)}"

    def reference(self, event: dict[str, Any], iterations: int) -> np.ndarray:
        """Single-process SGD on the global batch (tests.functions.helpers.reference_params)."""
        key = (int(event["n_workers"]), iterations)
        if key not in self._references:
            self._references[key] = reference_params(self.s3, event["dataset_bucket"], event,
                                                     iterations)  # fmt: skip
        return self._references[key]
