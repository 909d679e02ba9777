"""The S3 exchange's part of the data-plane benchmark (bench.sync): measured and predicted.

n worker processes each drive one `functions.s3sync.S3Exchange` (the worker handler's own
exchange, built as `S3Exchange.for_task` builds it) against a real S3 server on 127.0.0.1
(SeaweedFS, `emulator.s3server.weed_server`): every step each worker PUTs its gradient of S MB
as k partitions, reducers 0..k−1 GET theirs, average, update and PUT the state, every worker
range-GETs the new parameters. There is no training: the step is the exchange alone. Beside
each measurement, the model's prediction for the local platform (`provisioner.model`'s S3 terms
on catalog/local.json) and the request counts against `s3_exchange_requests`' formula.
"""

from __future__ import annotations

import math
import multiprocessing as mp
import os
import statistics
import time
from collections.abc import Sequence
from dataclasses import astuple, dataclass, replace
from typing import Any

import numpy as np

MB = 1_000_000
BUCKET = "bench-sync"
PROFILE = "digits-mlp"  # its reduction rate (ps_aggregation_mb_s_per_core); S replaces its size
WARMUP_STEPS = 1
TIMEOUT_S = 120.0  # deadline on any one wait of the exchange (a stuck bench fails, not hangs)


@dataclass(frozen=True)
class S3Row:
    """One (S, n, k) measurement: per-iteration time and requests, and the model's figures."""

    size_mb: float
    n_workers: int
    reducers: int
    steps: int
    step_s: float  # median over the timed steps of the iteration's time (slowest worker)
    puts: float  # per iteration, summed over workers
    gets: float  # every GET, including the polls that found nothing
    get_misses: float
    deletes: float
    predicted_s: float  # communication + aggregation, provisioner.model on catalog local
    # Where rank 0's steps went (medians, s): functions.exchange.StepTiming's four parts.
    push_s: float = 0.0
    wait_s: float = 0.0
    transfer_s: float = 0.0
    reduce_s: float = 0.0

    @property
    def formula(self) -> tuple[float, float, float]:
        """(PUT, GET, DELETE) per iteration: n·k + k, 2·n·k (s3_exchange_requests), and k."""
        n, k = self.n_workers, self.reducers
        return n * k + k, 2 * n * k, k

    @property
    def accuracy(self) -> float:
        """1 − |predicted − measured| / measured."""
        return 1.0 - abs(self.predicted_s - self.step_s) / self.step_s


def reducer_choices(n: int) -> list[int]:
    """k = 1 and k = n, and k = 2 when n ≥ 4."""
    return sorted({1, n} | ({2} if n >= 4 else set()))


def steps_for(size_mb: float, n: int) -> int:
    """Timed steps: about 100 MB of gradients per configuration, at least 5, at most 30."""
    return int(min(30, max(5, 100 / (n * size_mb))))


def predict_s(size_mb: float, n: int, k: int, catalog: Any = None, profile: Any = None) -> float:
    """The model's exchange per iteration on the local platform: s3_cell_terms' communication
    plus aggregation, at one full vCPU of memory (the bench's processes are not capped; the
    reduction is one thread, so more memory would not change it)."""
    from provisioner import load_catalog, load_profile
    from provisioner.local_machine import shared_s3_cell_terms as s3_cell_terms

    catalog = catalog or load_catalog("local")
    profile = replace(profile or load_profile(PROFILE), model_bytes=int(size_mb * MB))
    comm, agg = s3_cell_terms(profile, catalog, np.asarray(n), np.asarray(k), catalog.mb_per_vcpu)
    return float(comm + agg)


def _worker(
    env: dict[str, str],
    base: str,
    rank: int,
    n: int,
    k: int,
    n_params: int,
    steps: int,
    barrier: Any,
    out_q: Any,
) -> None:
    """One worker: start the exchange, one warm-up step, then `steps` timed ones; reports the
    monotonic end time of each timed step, the requests the timed steps made and the medians
    of their StepTiming parts."""
    os.environ.update(env)
    from functions.aws import s3_client
    from functions.ps.checkpoints import CheckpointStore
    from functions.s3sync import S3Exchange, partition_bounds

    s3 = s3_client()
    store = CheckpointStore(s3, BUCKET, f"{base}/checkpoints", k, secret=b"")
    bounds = partition_bounds(n_params, k)
    exchange = S3Exchange(s3, BUCKET, f"{base}/exchange", rank, n, bounds, 0.01, 0.9,
                          TIMEOUT_S, store)  # fmt: skip
    grads = np.full(n_params, 1e-3, np.float32)
    params = np.zeros(n_params, np.float32)
    try:
        iteration = exchange.start(params)
        for _ in range(WARMUP_STEPS):
            exchange.step(iteration, grads, params)
            iteration += 1
        barrier.wait()
        before = exchange.counts.as_dict()
        ends, parts = [time.monotonic()], []
        for _ in range(steps):
            timing = exchange.step(iteration, grads, params)
            iteration += 1
            ends.append(time.monotonic())
            parts.append(astuple(timing))
        after = exchange.counts.as_dict()
    finally:
        exchange.close()
    medians = [float(m) for m in np.median(parts, axis=0)]
    out_q.put((rank, ends, {kind: after[kind] - before[kind] for kind in after}, medians))


def measure(env: dict[str, str], size_mb: float, n: int, k: int, steps: int, tag: str) -> S3Row:
    """n worker processes exchanging S MB through S3 with k reducers; iteration i's time is
    the last worker's end of step i less the last worker's end of step i − 1 (the barrier's
    release for the first), the median over the steps is kept."""
    ctx = mp.get_context("fork")
    barrier, out_q = ctx.Barrier(n), ctx.Queue()
    n_params = int(size_mb * MB) // 4
    base = f"bench/{tag}/s{size_mb:g}-n{n}-k{k}"
    procs = [
        ctx.Process(target=_worker, args=(env, base, r, n, k, n_params, steps, barrier, out_q))
        for r in range(n)
    ]
    for p in procs:
        p.start()
    results = sorted(out_q.get(timeout=900) for _ in procs)
    for p in procs:
        p.join(timeout=60)
    if any(p.exitcode != 0 for p in procs):
        raise RuntimeError(f"S3 exchange S={size_mb:g} n={n} k={k}: a worker failed")
    last = np.max([ends for _, ends, _, _ in results], axis=0)
    totals = {kind: sum(r[2][kind] for r in results) / steps for kind in results[0][2]}
    push_s, wait_s, transfer_s, reduce_s = results[0][3]
    return S3Row(
        size_mb=size_mb,
        n_workers=n,
        reducers=k,
        steps=steps,
        step_s=float(statistics.median(np.diff(last))),
        puts=totals["put"],
        gets=totals["get"],
        get_misses=totals["get_miss"],
        deletes=totals["delete"],
        predicted_s=predict_s(size_mb, n, k),
        push_s=push_s,
        wait_s=wait_s,
        transfer_s=transfer_s,
        reduce_s=reduce_s,
    )


def create_bucket(env: dict[str, str]) -> None:
    """The bench's bucket on a fresh server."""
    import boto3

    boto3.client(
        "s3",
        endpoint_url=env["AWS_ENDPOINT_URL_S3"],
        region_name=env["AWS_REGION"],
        aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
    ).create_bucket(Bucket=BUCKET)


def measure_grid(sizes: Sequence[float], workers: Sequence[int]) -> list[S3Row]:
    """Every (S, n, k) of the grid against one SeaweedFS server, started and stopped here."""
    from emulator.s3server import weed_server

    rows = []
    with weed_server() as endpoint:
        env = endpoint.client_env()
        create_bucket(env)
        for n in workers:
            for size in sizes:
                for k in reducer_choices(n):
                    row = measure(env, size, n, k, steps_for(size, n), tag=str(os.getpid()))
                    rows.append(row)
                    print(
                        f"S={size:g} MB n={n} k={k}: s3 {row.step_s:.4f} s/iteration, "
                        f"predicted {row.predicted_s:.4f} s ({row.accuracy:.0%})",
                        flush=True,
                    )
    return rows


def _requests(measured: float, formula: float) -> str:
    return f"{measured:.1f} / {formula:g}"


def table(rows: Sequence[S3Row], ps_step_s: dict[tuple[float, int], float]) -> str:
    """The S3 rows beside the PS step of the same S and n."""
    lines = [
        "| model MB | n | k | steps | S3 iteration s | PS step s | S3 / PS | predicted s | "
        "accuracy | PUT meas / formula | GET meas / formula | of which misses | "
        "DELETE meas / formula |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        ps = ps_step_s.get((r.size_mb, r.n_workers))
        put, get, delete = r.formula
        lines.append(
            f"| {r.size_mb:g} | {r.n_workers} | {r.reducers} | {r.steps} | {r.step_s:.4f} | "
            + (f"{ps:.4f} | {r.step_s / ps:.0f}× | " if ps else "— | — | ")
            + f"{r.predicted_s:.4f} | {r.accuracy:.0%} | {_requests(r.puts, put)} | "
            f"{_requests(r.gets, get)} | {r.get_misses:.1f} | {_requests(r.deletes, delete)} |"
        )
    return "\n".join(lines)


def breakdown(rows: Sequence[S3Row]) -> str:
    """Where rank 0's steps went (it reduces partition 0 in every configuration)."""
    lines = [
        "| model MB | n | k | S3 iteration s | push s | wait s | transfer s | reduce s |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r.size_mb:g} | {r.n_workers} | {r.reducers} | {r.step_s:.4f} | {r.push_s:.4f} "
            f"| {r.wait_s:.4f} | {r.transfer_s:.4f} | {r.reduce_s:.4f} |"
        )
    return "\n".join(lines)


def summary(rows: Sequence[S3Row]) -> list[str]:
    accuracy = [r.accuracy for r in rows]
    exact = all(
        all(map(math.isclose, (r.puts, r.gets - r.get_misses, r.deletes), r.formula)) for r in rows
    )
    return [
        f"- S3 exchange, predicted vs measured per iteration: accuracy median "
        f"{statistics.median(accuracy):.0%}, min {min(accuracy):.0%}, max {max(accuracy):.0%} "
        f"over {len(rows)} configurations.",
        "- S3 requests per iteration, PUT, GET that found the object and DELETE: "
        + ("equal to the formula in every configuration" if exact else "NOT equal to the formula")
        + "; the polls that found nothing come on top (the *misses* column).",
    ]
