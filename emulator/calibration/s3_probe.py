"""The S3 probe: GET, PUT and a PS shard's checkpoint against the local SeaweedFS server.

Each is time = latency + size/B over 64 KB .. 32 MB objects, every size once a round, grown
until the time grows measurably (fits.fit_growing).
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Sequence

import numpy as np

from emulator.calibration.fits import Fit, fit_growing, fit_request
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
