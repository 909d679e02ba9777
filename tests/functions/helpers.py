"""Shared helpers: worker events, running workers in threads, the single-process reference."""

from __future__ import annotations

import json
import socket
import threading
import time
from typing import Any

import numpy as np
import torch
from torch.nn import functional as F

from functions import datasets, models, wire
from functions.ps.server import ParameterServer
from functions.runs import parse_run

from .conftest import SECRET_ENV

RUN_ID, RUN_STARTED = "run-test", "2026-01-01T00:00:00Z"  # the run every helper event is in
RUN = parse_run(RUN_ID, RUN_STARTED)


def worker_event(
    rank: int, n_workers: int, endpoints: list[str], bucket: str, **overrides: Any
) -> dict[str, Any]:
    event = {
        "job_id": "job-test",
        "rank": rank,
        "n_workers": n_workers,
        "model": "mlp",
        "dataset_bucket": bucket,
        "dataset_prefix": "data",
        "artifacts_bucket": bucket,
        "checkpoint_prefix": "ckpt",
        "ps_endpoints": endpoints,
        "secret_ref": f"env:{SECRET_ENV}",
        "local_batch": 8,
        "iterations": 6,
        "learning_rate": 0.1,
        "momentum": 0.9,
        "memory_mb": 1769,
        "seed": 3,
        "run_id": RUN_ID,
        "run_started": RUN_STARTED,
        "ps_timeout_s": 60.0,
        "safety_margin_s": 0.0,
    }
    event.update(overrides)
    return event


class CountdownContext:
    """A Lambda context whose remaining time runs out after `calls` iteration checks
    (deterministic). The worker's first look, which sizes its S3 timeouts, is not counted."""

    def __init__(self, calls: int) -> None:
        self.calls = calls + 1
        self.memory_limit_in_mb = 1769

    def get_remaining_time_in_millis(self) -> int:
        self.calls -= 1
        return 900_000 if self.calls >= 0 else 0


class GateContext:
    """Never runs out of time, but its `park_at`-th check blocks until the test opens the gate.

    The worker checks the time once before each step, so with start_iteration 0 it parks with
    iterations 0 .. park_at - 2 done: the PS is at iteration park_at - 1, whatever the speed.
    The worker's first look, which sizes its S3 timeouts, is not counted.
    """

    def __init__(self, park_at: int) -> None:
        self.park_at = park_at + 1
        self.calls = 0
        self.parked = threading.Event()
        self.gate = threading.Event()
        self.memory_limit_in_mb = 1769

    def get_remaining_time_in_millis(self) -> int:
        self.calls += 1
        if self.calls == self.park_at:
            self.parked.set()
            if not self.gate.wait(120):
                raise TimeoutError("the test never opened the gate")
        return 900_000

    def wait_parked(self, timeout_s: float = 120) -> None:
        assert self.parked.wait(timeout_s), "the worker never reached its parking iteration"


def run_threads(fn: Any, args_list: list[tuple[Any, ...]], timeout_s: float = 120) -> list[Any]:
    """Run fn(*args) for each args in threads; re-raise the first failure."""
    results: list[Any] = [None] * len(args_list)
    errors: list[BaseException] = []

    def target(i: int, args: tuple[Any, ...]) -> None:
        try:
            results[i] = fn(*args)
        except BaseException as exc:  # noqa: BLE001  # reported to the test below
            errors.append(exc)

    threads = [threading.Thread(target=target, args=(i, a)) for i, a in enumerate(args_list)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout_s)
    assert not any(t.is_alive() for t in threads), "a worker thread hung"
    if errors:
        raise errors[0]
    return results


def link_losses(s3: Any, bucket: str, result: dict[str, Any]) -> list[list[float]]:
    """Every [iteration, loss] of a link, from the record it wrote (its return has none)."""
    body = s3.get_object(Bucket=bucket, Key=result["record_key"])["Body"].read()
    return list(json.loads(body)["losses"])


def ps_vector(servers: list[ParameterServer]) -> np.ndarray:
    return np.concatenate([s.state.params for s in servers])


def reference_params(s3: Any, bucket: str, event: dict[str, Any], iterations: int) -> np.ndarray:
    """One process, torch.optim.SGD(momentum), global batch = every rank's batch concatenated."""
    manifest = datasets.read_manifest(s3, bucket, event["dataset_prefix"])
    n = event["n_workers"]
    shards = [
        datasets.load_shard(s3, bucket, event["dataset_prefix"], r, manifest) for r in range(n)
    ]
    shape, classes = manifest["input_shape"], manifest["classes"]
    model = models.build(event["model"], shape, classes, event["seed"])
    opt = torch.optim.SGD(model.parameters(), lr=event["learning_rate"], momentum=event["momentum"])
    for it in range(iterations):
        xs, ys = [], []
        for r, (x, y) in enumerate(shards):
            idx = datasets.batch_indices(event["seed"], r, it, event["local_batch"], len(x))
            xs.append(x[idx])
            ys.append(y[idx])
        opt.zero_grad()
        loss = F.cross_entropy(
            model(torch.from_numpy(np.concatenate(xs))), torch.from_numpy(np.concatenate(ys))
        )
        loss.backward()
        opt.step()
    return torch.nn.utils.parameters_to_vector(model.parameters()).detach().numpy()


def challenged_socket(endpoint: str, timeout_s: float = 30) -> tuple[socket.socket, bytes]:
    """A raw connection to a PS shard that has read the shard's CHALLENGE; (socket, nonce)."""
    host, port = wire.parse_endpoint(endpoint)
    sock = socket.create_connection((host, port), timeout=timeout_s)
    deadline = time.monotonic() + timeout_s
    header = wire.recv_header(sock, deadline)
    assert header.msg_type == wire.MsgType.CHALLENGE
    return sock, wire.recv_control(sock, header, deadline)
