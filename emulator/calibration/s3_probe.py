"""The S3 probe: GET, PUT and a PS shard's checkpoint against the local SeaweedFS server.

Each is time = latency + size/B over 64 KB .. 32 MB objects, every size once a round, grown
until the time grows measurably (fits.fit_growing).
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from emulator.calibration.fits import Fit, fit_growing, fit_request
from emulator.calibration.ps_probe import process_cpu_s
from emulator.calibration.timing import median_rounds, timer
from emulator.s3_client import s3_client_for
from emulator.s3server import S3Endpoint

S3_SIZES_MB = (0.064, 1.0, 8.0, 32.0)
S3_SIZES_QUICK_MB = (0.064, 8.0)


def measure_s3(endpoint: S3Endpoint, sizes_mb: Sequence[float], repeats: int) -> tuple[Fit, Fit]:
    """(GET, PUT) latency and bandwidth against the local S3 server, every size once a round
    (median_rounds), grown until the time grows measurably (fit_growing)."""
    client = s3_client_for(endpoint)  # the runtime's timeouts and bounded retries
    bucket = "calibrate"
    client.create_bucket(Bucket=bucket)

    def put(size_mb: float) -> Callable[[], object]:
        body = os.urandom(round(size_mb * 1e6))
        return lambda: client.put_object(Bucket=bucket, Key=f"object-{size_mb:g}", Body=body)

    def get(size_mb: float) -> Callable[[], object]:
        put(size_mb)()  # the object to read
        return lambda: client.get_object(Bucket=bucket, Key=f"object-{size_mb:g}")["Body"].read()

    def median_times(
        action: Callable[[float], Callable[[], object]],
    ) -> Callable[[Sequence[float], int], list[float]]:
        return lambda sizes, rounds: median_rounds([timer(action(s)) for s in sizes], rounds)

    gets = fit_growing(median_times(get), sizes_mb, repeats, fit_request)
    puts = fit_growing(median_times(put), sizes_mb, repeats, fit_request)
    return gets, puts


def measure_checkpoint(endpoint: S3Endpoint, sizes_mb: Sequence[float], repeats: int) -> Fit:
    """Latency and MB/s of a PS shard's checkpoint of `sizes_mb` of parameters as the shard
    writes it (functions.ps: a copy of the parameters and momentum, np.savez, the HMAC, the PUT,
    then the LIST and DELETE that keep the bucket bounded), fit on the bytes of both vectors as
    the model's checkpoint_time_s counts them. A bare PUT of the same bytes is not the figure:
    MobileNetV2's checkpoints took 0.237 s in a run where a PUT of 18 MB fit 0.139 s."""
    from functions.ps.checkpoints import CheckpointStore

    client = s3_client_for(endpoint)
    bucket = "calibrate-checkpoints"
    client.create_bucket(Bucket=bucket)
    store = CheckpointStore(client, bucket, "calibrate", 1, secret=secrets.token_bytes(16))
    iteration = 0

    def checkpoint(size_mb: float) -> Callable[[], None]:
        params = np.random.default_rng(0).standard_normal(round(size_mb * 1e6 / 4), np.float32)
        momentum = params.copy()

        def save() -> None:
            nonlocal iteration
            iteration += 1
            store.save(0, iteration, params.size, params.copy(), momentum.copy())
            found = store.iterations_by_shard()
            common = store.latest_common_iteration(found)
            if common is not None:
                store.prune(0, common, found)

        return save

    def median_times(sizes: Sequence[float], rounds: int) -> list[float]:
        return median_rounds([timer(checkpoint(s)) for s in sizes], rounds)

    def fit_both_vectors(sizes: Sequence[float], times: Sequence[float]) -> Fit:
        return fit_request([2.0 * s for s in sizes], times)

    return fit_growing(median_times, sizes_mb, repeats, fit_both_vectors)


# Requests of the CPU probe, and the idle time its server reading is corrected by: the server's
# CPU is read from /proc's 10 ms ticks, so 400 requests of ~1 ms each read to about 2.5%.
CPU_REQUESTS = 400
CPU_IDLE_S = 1.0
CPU_OBJECT_BYTES = 4096  # a small object: the request's own CPU, not its bytes
CPU_WARM_STEPS = 10


@dataclass(frozen=True)
class RequestCpu:
    """CPU seconds one small S3 request costs the client (boto3) and the server (None: the
    server's CPU not readable, e.g. the in-process moto server)."""

    client_s: float
    server_s: float | None


def measure_request_cpu(endpoint: S3Endpoint, requests: int = CPU_REQUESTS) -> RequestCpu:
    """The CPU a request costs each side as the S3 exchange makes them: the runtime's own
    exchange (functions.s3sync.S3Exchange, one worker reducing its one partition of a small
    vector: PUT and GET of its gradient, PUT and range-GET of the state, the DELETE, the polls
    that find nothing) stepped until it sent `requests`; this process's CPU time over the
    count, and the server process's (/proc/<pid>/stat) less its idle rate. The exchange's
    thread pool, futures and update ride on every request, which a bare loop of boto3 calls
    leaves out (a quarter less CPU a request here). CPU time, not wall time, so a busy machine
    stretches neither."""
    client = s3_client_for(endpoint)
    bucket = f"calibrate-cpu-{secrets.token_hex(4)}"
    client.create_bucket(Bucket=bucket)
    exchange = _probe_exchange(client, bucket)
    size = CPU_OBJECT_BYTES // 4
    params, grads = np.zeros(size, np.float32), np.full(size, 1e-3, np.float32)
    try:
        iteration = exchange.start(params)
        for _ in range(CPU_WARM_STEPS):  # connections opened, arrivals learned, caches filled
            exchange.step(iteration, grads, params)
            iteration += 1
        sent0 = _sent(exchange)
        server_idle_s = _idle_cpu_rate(endpoint.pid, CPU_IDLE_S)
        server0, c0, t0 = _cpu_of(endpoint.pid), time.process_time(), time.perf_counter()
        while _sent(exchange) - sent0 < requests:
            exchange.step(iteration, grads, params)
            iteration += 1
        sent = _sent(exchange) - sent0
        client_s = (time.process_time() - c0) / sent
        wall_s, server1 = time.perf_counter() - t0, _cpu_of(endpoint.pid)
    finally:
        exchange.close()
    server_s = None
    if server0 is not None and server1 is not None and server_idle_s is not None:
        server_s = max(0.0, server1 - server0 - server_idle_s * wall_s) / sent
    return RequestCpu(client_s=client_s, server_s=server_s)


def _probe_exchange(client: Any, bucket: str) -> Any:
    """A one-worker, one-reducer S3 exchange in `bucket` (imported here: only this probe runs
    the worker's code in the calibrating process)."""
    from functions.ps.checkpoints import CheckpointStore
    from functions.s3sync import S3Exchange, partition_bounds

    store = CheckpointStore(client, bucket, "checkpoints", 1, secret=b"")
    bounds = partition_bounds(CPU_OBJECT_BYTES // 4, 1)
    return S3Exchange(client, bucket, "exchange/probe/run", 0, 1, bounds, 0.01, 0.9, 60.0, store)


def _sent(exchange: Any) -> int:
    """Every request the exchange has sent (misses are counted in `get` too)."""
    counts = exchange.counts.as_dict()
    return sum(v for kind, v in counts.items() if kind != "get_miss")


def _cpu_of(pid: int | None) -> float | None:
    return None if pid is None else process_cpu_s(pid)


def _idle_cpu_rate(pid: int | None, seconds: float) -> float | None:
    """CPU seconds per second the server spends with no request (heartbeats between its parts)."""
    before = _cpu_of(pid)
    time.sleep(seconds)
    after = _cpu_of(pid)
    return None if before is None or after is None else (after - before) / seconds
