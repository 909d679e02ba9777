"""Measure this machine the way catalog/*.json describes AWS; write catalog/local.json.

`python -m emulator.calibrate [--quick] [--out PATH]` runs the project's real pieces on
127.0.0.1 — PS shards (`functions.ps`) reached through the worker's client
(`functions.ps_client`), the SeaweedFS server, the emulator's runner importing the worker
module — and fits the catalog's figures to what they do:

- worker<->PS: push+pull of several model sizes, time = 2·rtt + 2·d/B (λDNN's exchange term):
  B from the fit's slope, rtt from many exchanges of the smallest size; n = 1, 2, 4 clients on
  one shard give the shard's aggregate bandwidth;
- S3: PUT and GET of 64 KB .. 32 MB objects, time = latency + size/B;
- start-up: a cold and a warm invocation through the runner, and the orchestrator's gap;
- CPU: the cores, the emulator's CFS period, and the share a busy loop achieves in a CFS group.

The size fits (PS, S3, checkpoint) time every size once a round, so a change of load meets all
sizes alike, and where the time does not grow measurably with size they are taken again with a
larger size and more rounds; after the last attempt the bandwidth is the bound B ≥ d/t of the
largest size, and each figure read from it names that fallback in its source. A fast or busy
machine gets a sound catalog, never a failed calibration.

The result is in the lambda-2025 schema (`load_catalog("local")` reads it): 1 local core = 1
Lambda vCPU, one PS type `loopback`, no endpoints, prices copied from lambda-2025 so the
planner's objective is unchanged. Every figure says how it was obtained, on which machine, when.

`python -m emulator.calibrate --slack-from RUNS... [--out PATH]` measures nothing: it sets the
catalog's default_slack from finished runs' predictions and measurements (emulator/slack.py);
`--init-cores-from RUNS...` sets its start-up cores per n from their start-ups
(emulator/init_cores.py). Both may be given at once.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import datetime
import json
import math
import os
import platform
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from emulator import cpu, lifeline
from emulator import init_cores as init_runs
from emulator import slack as slack_runs
from emulator.child_env import child_env
from emulator.invocation import Outcome, poll, start_environment, submit
from emulator.naming import SECRET_ENV
from emulator.options import POLL_INTERVAL_S, default_safety_margin_s
from emulator.procs import Interrupted, Supervisor, wait_for_log_line
from emulator.s3_client import create_buckets, s3_client_for
from emulator.s3server import S3Endpoint, s3_server
from functions import datasets
from functions.ps_client import PSClient
from functions.runs import new_run
from provisioner.catalog import CATALOG_DIR, catalog_from_dict
from provisioner.files import write_text_atomically
from provisioner.local_machine import init_cores_at

REFERENCE_CATALOG = CATALOG_DIR / "lambda-2025.json"
DEFAULT_OUT = CATALOG_DIR / "local.json"
PS_SIZES_MB = (0.07, 1.0, 10.0, 40.0)
PS_SIZES_QUICK_MB = (0.07, 8.0)  # far apart, so a busy machine's noise does not swamp the slope
# A loop reading (measure_loop): small exchanges on a fresh shard, the median of a few readings
# (the round trip, the client's CPU share, the shard's CPU per exchange).
# The shard's CPU is read from /proc's 10 ms ticks: over 300 exchanges (~90 ms of it) one tick
# is 11%, and readings of the same machine an hour apart gave 0.17-0.57 ms an exchange
# (2026-11-27); 1,000 hold a tick to 3% and the median of three shards a stray reading out.
LOOP_EXCHANGES = 1000
LOOP_READINGS = 3
# the catalog's network figures a loop reading gives, and their units
LOOP_UNITS = {
    "function_ps_rtt_s": "s",
    "exchange_cpu_fraction": "CPU s per wall s",
    "ps_request_cpu_s": "CPU s per push+pull",
}
LOOP_FIGURES = tuple(LOOP_UNITS)
# Fresh runners behind load_cpu_s: each first load is one reading of a CPU-bound few tenths of
# a second, and five keep a round's anchor to about 15 s.
LOAD_RUNNERS = 5
ROUND_TRIP_GAP_S = 0.001  # busy work before each of them: a short training step
PS_CLIENTS = (1, 2, 4)
S3_SIZES_MB = (0.064, 1.0, 8.0, 32.0)
S3_SIZES_QUICK_MB = (0.064, 8.0)
# A size fit's slope is trusted where the time grows across the sizes by a tenth of the largest
# time or more: a busy machine's jitter makes shallower slopes, and a slope too shallow would
# overstate the bandwidth without bound (a steep one only understates it).
GROWTH_MIN_SHARE = 0.1
# Attempts at a measurable growth, each after the first with a size GROWTH_FACTOR× the largest
# added (up to GROWTH_MAX_MB: the full run's largest exchange, which a shard, its client and a
# checkpoint's copies hold a few times over in memory) and twice the rounds; then a bound.
GROWTH_ATTEMPTS = 3
GROWTH_FACTOR = 4.0
GROWTH_MAX_MB = 40.0
# No timing is shorter: a time of 0 is a clock that did not tick, not an infinite bandwidth.
MIN_TIME_S = 1e-6
CPU_SHARES = (0.25, 0.5, 1.0)
INVOCATION_TIMEOUT_S = 900
CONCURRENCY_LIMIT = 8  # emulated functions this machine hosts at once (policy)
INIT_REPEATS = 5  # start-up rounds per runner count: about 2 min on 2 cores (k = 8: ~11 s a round)
PS_MAX_SHARDS = 4
# Lambda figures kept from lambda-2025: /tmp sizes and prices (the objective stays the same)
COPIED_LAMBDA_FIGURES = (
    "ephemeral_min_mb",
    "ephemeral_max_mb",
    "ephemeral_free_mb",
    "ephemeral_usd_per_gb_s",
    "usd_per_request",
)
READY_TIMEOUT_S = 60.0
# Share of a deadline local plans hold back by default (policy, from measurements): the slowest
# run of bench/predict after the allocator fix (2026-11-25, synthetic-cifar-cnn, 21 runs on a
# 2-vCPU VM) took 1.19× its prediction, so a plan at the deadline needs 1 − 1/1.19 = 16% held
# back to be met; rounded up for the workloads and runs that grid did not see. Finished runs
# measure it instead: `--slack-from RUNS` (emulator/slack.py).
DEFAULT_SLACK = 0.2
BUSY_LOOP = (
    "import sys, time\n"
    "d = float(sys.argv[1]); w0 = time.monotonic(); c0 = time.process_time()\n"
    "while time.monotonic() - w0 < d:\n"
    "    pass\n"
    "print((time.process_time() - c0) / (time.monotonic() - w0))\n"
)


# -- pure fits --------------------------------------------------------------------------------
def fit_line(x: Sequence[float], y: Sequence[float]) -> tuple[float, float]:
    """Least-squares (intercept, slope) of y = a + b·x; needs two distinct x."""
    if len(x) != len(y) or len(set(x)) < 2:
        raise ValueError("a line fit needs samples at two or more distinct sizes")
    slope, intercept = np.polyfit(np.asarray(x, float), np.asarray(y, float), 1)
    return float(intercept), float(slope)


@dataclass(frozen=True)
class Fit:
    """A latency and a bandwidth read from timings, and how: `bound` where the bandwidth is a
    lower bound, not a slope; `note` says why and from what ("" for a plain line fit)."""

    latency_s: float
    mb_s: float
    bound: bool = False
    note: str = ""


def fit_sizes(sizes_mb: Sequence[float], times_s: Sequence[float], legs: int, what: str) -> Fit:
    """time = legs·latency + legs·d/B (an exchange: legs 2, a push and a pull; a request: 1):
    the line fit where its growth across the sizes is measurable (GROWTH_MIN_SHARE), else
    bandwidth_bound. A negative intercept (noise at tiny sizes) is read as latency 0."""
    intercept, slope = fit_line(sizes_mb, times_s)
    share = slope * (max(sizes_mb) - min(sizes_mb)) / max(max(times_s), MIN_TIME_S)
    if slope > 0 and share >= GROWTH_MIN_SHARE:
        return Fit(max(0.0, intercept / legs), legs / slope)
    why = (  # a share under a thousandth is a flat line's float rounding, or nothing
        f"{what} time does not grow with size"
        if share < 0.001
        else f"{what} time grows by {share:.1%} of the largest time across the sizes, within "
        f"a busy machine's jitter (under {GROWTH_MIN_SHARE:.0%})"
    )
    return bandwidth_bound(sizes_mb, times_s, legs, why)


def bandwidth_bound(
    sizes_mb: Sequence[float], times_s: Sequence[float], legs: int, why: str
) -> Fit:
    """The figures every timing bounds, for where a slope cannot be read (`why`): the bytes
    take no longer than the whole, so B ≥ legs·d/t at the largest size; the latency is taken as
    the smallest size's time over legs, which it is at most. Together they predict no transfer
    faster than this machine did one."""
    largest = max(range(len(sizes_mb)), key=lambda k: sizes_mb[k])
    smallest = min(range(len(sizes_mb)), key=lambda k: sizes_mb[k])
    d, t = sizes_mb[largest], max(times_s[largest], MIN_TIME_S)
    return Fit(
        latency_s=max(0.0, times_s[smallest]) / legs,
        mb_s=legs * d / t,
        bound=True,
        note=f"fallback, {why}: B ≥ {legs}·d/t of the largest size ({d:g} MB in {t:.4g} s), "
        f"the latency ≤ the smallest size's time{'/2' if legs == 2 else ''}",
    )


def fit_exchange(sizes_mb: Sequence[float], times_s: Sequence[float]) -> Fit:
    """(rtt_s, mb_s) of one push+pull: time = 2·rtt + 2·d/B (λDNN, Xu et al. 2022, eq. 5's
    communication term), or the bound where the time does not grow measurably with size."""
    return fit_sizes(sizes_mb, times_s, 2, "exchange")


def rtt_from_exchange_s(size_mb: float, exchange_s: float, mb_s: float) -> float:
    """The round trip of one small push+pull: (t − 2·d/B) / 2, at least 0.

    The fit's intercept is not the round trip: the 40 MB points' noise (a few ms) swamps an
    intercept of a few hundred µs, so the fit read 0.50 ms where an exchange of the digits MLP
    takes 0.30 ms in all. A model-sized exchange timed many times is what a worker pays."""
    return max(0.0, (exchange_s - 2.0 * size_mb / mb_s) / 2.0)


def fit_request(sizes_mb: Sequence[float], times_s: Sequence[float]) -> Fit:
    """(latency_s, mb_s) of one S3 request: time = latency + size/B, or the bound where the
    time does not grow measurably with size."""
    return fit_sizes(sizes_mb, times_s, 1, "request")


def grown(sizes_mb: Sequence[float]) -> tuple[float, ...]:
    """The sizes of the next attempt at a measurable growth: one GROWTH_FACTOR× the largest
    added, up to GROWTH_MAX_MB (the same sizes where the largest is there already)."""
    larger = min(GROWTH_MAX_MB, GROWTH_FACTOR * max(sizes_mb))
    return tuple(sizes_mb) if larger <= max(sizes_mb) else (*sizes_mb, larger)


def fit_growing(
    median_times: Callable[[Sequence[float], int], Sequence[float]],
    sizes_mb: Sequence[float],
    rounds: int,
    fit: Callable[[Sequence[float], Sequence[float]], Fit],
) -> Fit:
    """`fit` of `median_times(sizes, rounds)` (a median time per size), taken again with a
    larger size (grown) and twice the rounds while its growth is not measurable, up to
    GROWTH_ATTEMPTS times; the last attempt's bound where none was. Never raises on timings: a
    fast or busy machine gets a figure whose note says how it was read."""
    sizes, attempt = tuple(sizes_mb), 1
    result = fit(sizes, median_times(sizes, rounds))
    while result.bound and attempt < GROWTH_ATTEMPTS:
        sizes, rounds, attempt = grown(sizes), 2 * rounds, attempt + 1
        result = fit(sizes, median_times(sizes, rounds))
    if attempt == 1:
        return result
    how = (
        f"attempt {attempt} of {GROWTH_ATTEMPTS} (sizes "
        f"{'/'.join(f'{s:g}' for s in sizes)} MB, median of {rounds} rounds)"
    )
    return replace(result, note=f"{result.note}; {how}" if result.note else f"read at {how}")


def aggregate_mb_s(n_clients: int, size_mb: float, exchange_s: float, rtt_s: float) -> Fit:
    """MB/s one shard moves when n clients each push and pull `size_mb` per exchange:
    n·2·d/(t − 2·rtt); where noise made the exchange no longer than its two round trips, the
    bound n·2·d/t (round trips taken as 0), its note saying so."""
    moved_mb = 2.0 * n_clients * size_mb
    moving_s = exchange_s - 2.0 * rtt_s
    if moving_s > 0:
        return Fit(rtt_s, moved_mb / moving_s)
    t = max(exchange_s, MIN_TIME_S)
    return Fit(
        latency_s=0.0,
        mb_s=moved_mb / t,
        bound=True,
        note=f"fallback, the {n_clients}-client exchange of {exchange_s:.6f} s is not longer "
        f"than 2·rtt ({2.0 * rtt_s:.6f} s): B ≥ n·2·d/t, the round trips taken as 0",
    )


def mb_s_to_gbps(mb_s: float) -> float:
    """MB/s (decimal) to Gbit/s, the unit of EC2 bandwidth figures."""
    return mb_s * 8.0 / 1000.0


def memory_max_mb(total_vcpu: float, mb_per_vcpu: float = cpu.MB_PER_VCPU) -> int:
    """The largest memory whose vCPU share the workers' cores can give (1 MB steps)."""
    return max(128, math.floor(total_vcpu * mb_per_vcpu))


# -- measurements -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Measurements:
    """What this machine did; every field a figure of the catalog or the basis of one."""

    cores: int
    total_vcpu: float
    cfs_period_s: float
    cpu_share_ratio: float | None  # None: CFS groups not usable here (cpu_share_note says why)
    cpu_share_note: str
    ps_rtt_s: float
    exchange_cpu_fraction: float  # of a small push+pull's wall time, the client's CPU
    ps_request_cpu_s: float | None  # the shard's CPU per small push+pull; None: not readable
    ps_mb_s: float
    ps_aggregate_mb_s: float
    s3_get_latency_s: float
    s3_get_mb_s: float
    s3_put_latency_s: float
    s3_put_mb_s: float
    # a PS shard's checkpoint as functions.ps writes it: time = latency + (params + momentum)/B
    checkpoint_latency_s: float
    checkpoint_mb_s: float
    cold_start_s: float
    warm_start_s: float
    init_cores: float  # cores n cold starts at once effectively share (parallel_init_cores)
    load_cpu_s: float  # the worker's load of a tiny dataset (bytes ~0) in a fresh runner
    restart_s: float
    launch_s: float  # a fresh runner's first invocation before the handler's clock (spawn on)
    memory_gib: float
    arch: str  # "x86_64" | "arm64": the loopback PS type's architecture
    repeats: int
    # the same per n, (n, cores) for n in init_counts(cores); () = init_cores at every n
    init_cores_by_n: tuple[tuple[int, float], ...] = ()
    init_repeats: int = INIT_REPEATS  # rounds per n behind init_cores_by_n
    # (fit, note) where a bandwidth fit was not the first attempt's line (Fit.note): "ps" (one
    # client), "aggregate" (one shard), "s3_get", "s3_put", "checkpoint"; each figure read
    # from that fit leads its source with the note
    fit_notes: tuple[tuple[str, str], ...] = ()

    def noted(self, fit: str, method: str) -> str:
        """`method`, led by the note of `fit` where it has one (a fallback says so first)."""
        note = dict(self.fit_notes).get(fit, "")
        return f"{note}; {method}" if note else method


def _timer(action: Callable[[], object]) -> Callable[[], float]:
    """A callable timing one call of `action`, after a first untimed call: it opens
    connections and fills caches, not what a figure describes."""
    action()

    def timed() -> float:
        t0 = time.perf_counter()
        action()
        return time.perf_counter() - t0

    return timed


def median_rounds(timers: Sequence[Callable[[], float]], rounds: int) -> list[float]:
    """Each timer's median time over `rounds` rounds, every timer once a round in turn: a
    change of the machine's load meets every size alike, where timing all of one size and then
    all of the next read a load that came and went as a time falling with size."""
    samples: list[list[float]] = [[] for _ in timers]
    for _ in range(rounds):
        for timer, taken in zip(timers, samples, strict=True):
            taken.append(timer())
    return [statistics.median(taken) for taken in samples]


def start_ps_shard(
    supervisor: Supervisor,
    env: dict[str, str],
    workers: int,
    logs: Path,
    shard: tuple[int, int] = (0, 1),
) -> tuple[subprocess.Popen[bytes], str]:
    """One real PS shard (no checkpoints) for `workers` clients, shard k of `shard` = (k,
    shards) of the parameters: (process, endpoint)."""
    log_path = logs / f"ps-{workers}-{len(supervisor.pgids())}.log"
    argv = [
        sys.executable,
        "-m",
        "functions.ps",
        "--job-id",
        "calibrate",
        "--workers",
        str(workers),
        "--host",
        "127.0.0.1",
        "--port",
        "0",
        "--secret-ref",
        f"env:{SECRET_ENV}",
        "--shard",
        str(shard[0]),
        "--shards",
        str(shard[1]),
    ]
    proc = supervisor.spawn(argv, env=env, log_path=log_path)
    return proc, wait_for_log_line(proc, log_path, "READY", READY_TIMEOUT_S)


@contextlib.contextmanager
def _clients(
    endpoint: str, secret: bytes, n: int, size_mb: float
) -> Iterator[tuple[list[PSClient], list[np.ndarray], int]]:
    """n PS clients of one run connected to one shard, the shard initialised with `size_mb` of
    parameters: (clients, one vector each, the shard's iteration); closed on exit."""
    params = max(1, round(size_mb * 1e6 / 4))
    run_id, run_started = new_run(datetime.datetime.now(datetime.UTC), "calibrate")
    clients = [
        PSClient((endpoint,), "calibrate", rank, secret, params, timeout_s=120.0,
                 run_id=run_id, run_started=run_started)
        for rank in range(n)
    ]  # fmt: skip
    vectors = [np.zeros(params, np.float32) for _ in range(n)]
    try:
        for client in clients:
            client.connect()
        clients[0].init_params(vectors[0])
        yield clients, vectors, clients[0].shard_iterations[0]
    finally:
        for client in clients:
            client.close()


@contextlib.contextmanager
def _exchanges(
    supervisor: Supervisor, env: dict[str, str], logs: Path, n: int, size_mb: float
) -> Iterator[Callable[[], float]]:
    """A fresh shard (a job's parameter count is fixed when the shard is initialised) with n
    clients of `size_mb`: a callable timing one BSP push+pull of all n at once (threads), the
    first exchange, which warms buffers, done untimed. The shard is stopped on exit."""
    proc, endpoint = start_ps_shard(supervisor, env, n, logs)
    try:
        with _clients(endpoint, env[SECRET_ENV].encode(), n, size_mb) as (
            clients,
            vectors,
            start,
        ):
            it = start

            def exchange() -> float:
                nonlocal it
                errors: list[BaseException] = []

                def one(rank: int) -> None:
                    try:
                        clients[rank].push(it, vectors[rank])
                        clients[rank].pull(it + 1, vectors[rank])
                    except BaseException as err:  # noqa: BLE001 - re-raised in the main thread
                        errors.append(err)

                threads = [threading.Thread(target=one, args=(r,)) for r in range(n)]
                t0 = time.perf_counter()
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
                took = time.perf_counter() - t0
                if errors:
                    raise errors[0]
                it += 1
                return took

            exchange()
            yield exchange
    finally:
        supervisor.stop(proc, grace_s=2.0)


def process_cpu_s(pid: int) -> float | None:
    """User + system CPU seconds process `pid` has used so far (Linux /proc); None where it
    cannot be read (another OS, the process gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks = os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None
    # after the ")" of the command name: state is field 3, utime 14 and stime 15 (proc(5))
    return (int(fields[11]) + int(fields[12])) / ticks


def _round_trips(
    endpoint: str, secret: bytes, size_mb: float, repeats: int, ps_pid: int | None = None
) -> tuple[float, float, float | None]:
    """(median wall s, CPU share, the shard's CPU s per exchange) of one client's push+pull of
    `size_mb`, in this thread, each after ROUND_TRIP_GAP_S of busy work as a worker computes
    between exchanges; the shard's CPU is read from process `ps_pid` (None: not read).

    The gap matters: back to back, the PS never sleeps and an exchange of the digits MLP took
    0.18 ms; after 0.5-2 ms of work it took 0.30-0.48 ms (the PS's wake-up), which is what a
    worker pays. No thread per exchange as in _exchanges: starting one costs about as much
    as a small exchange. The CPU share is this process's CPU time over the wall time of the
    exchanges alone: the part of an exchange a CPU quota holds. The shard's CPU (0.27-0.32 ms
    an exchange on 2 cores for the MLP's 69 KB) is counted over all the exchanges: the clock
    ticks of /proc are 10 ms."""
    with _clients(endpoint, secret, 1, size_mb) as ((client,), (vector,), it):
        walls: list[float] = []
        cpus: list[float] = []
        ps_before: float | None = None
        for k in range(repeats + 1):  # the first warms buffers and is not counted
            if k == 1 and ps_pid is not None:
                ps_before = process_cpu_s(ps_pid)
            busy_until = time.perf_counter() + ROUND_TRIP_GAP_S
            while time.perf_counter() < busy_until:
                pass
            c0, t0 = time.process_time(), time.perf_counter()
            client.push(it + k, vector)
            client.pull(it + k + 1, vector)
            walls.append(time.perf_counter() - t0)
            cpus.append(time.process_time() - c0)
        ps_after = process_cpu_s(ps_pid) if ps_pid is not None else None
        cpu_share = sum(cpus[1:]) / sum(walls[1:])
        ps_cpu = None if ps_before is None or ps_after is None else (ps_after - ps_before) / repeats
        return statistics.median(walls[1:]), min(1.0, cpu_share), ps_cpu


@dataclass(frozen=True)
class LoopReading:
    """One client's small push+pull through a fresh shard, after a short step's busy work."""

    exchange_s: float  # median wall time of one push+pull
    cpu_fraction: float  # the client's CPU over the exchanges' wall time
    ps_request_cpu_s: float | None  # the shard's CPU per push+pull; None: not readable


def measure_loop(
    supervisor: Supervisor,
    env: dict[str, str],
    logs: Path,
    size_mb: float,
    readings: int = LOOP_READINGS,
    exchanges: int = LOOP_EXCHANGES,
) -> LoopReading:
    """The median of `readings` _round_trips of `exchanges` each, every one on a fresh shard
    (a shard's first requests and its allocations are not what a loop pays), figure by figure."""
    secret = env[SECRET_ENV].encode()
    taken = []
    for _ in range(readings):
        proc, endpoint = start_ps_shard(supervisor, env, 1, logs)
        taken.append(_round_trips(endpoint, secret, size_mb, exchanges, proc.pid))
        supervisor.stop(proc, grace_s=2.0)
    shard = [t[2] for t in taken if t[2] is not None]
    return LoopReading(
        exchange_s=statistics.median(t[0] for t in taken),
        cpu_fraction=statistics.median(t[1] for t in taken),
        ps_request_cpu_s=statistics.median(shard) if len(shard) == len(taken) else None,
    )


def loop_figures(reading: LoopReading, size_mb: float, mb_s: float) -> dict[str, float]:
    """The catalog's network figures a loop reading gives (function_ps_rtt_s from the exchange
    less its bytes at the per-flow `mb_s`); the shard's CPU only where it was read."""
    figures = {
        "function_ps_rtt_s": rtt_from_exchange_s(size_mb, reading.exchange_s, mb_s),
        "exchange_cpu_fraction": reading.cpu_fraction,
    }
    if reading.ps_request_cpu_s is not None:
        figures["ps_request_cpu_s"] = reading.ps_request_cpu_s
    return figures


def loop_method(readings: int = LOOP_READINGS, exchanges: int = LOOP_EXCHANGES) -> str:
    """How measure_loop reads the exchange: the text a figure's source quotes."""
    return (
        f"{exchanges} push+pull of {PS_SIZES_MB[0]:g} MB through a fresh functions.ps shard, "
        f"each after {ROUND_TRIP_GAP_S * 1e3:g} ms of busy work (a short step)"
        + (f", the median of {readings} such readings" if readings > 1 else "")
    )


def loop_anchored(
    doc: dict[str, Any], figures: dict[str, float], read: str, where: Provenance
) -> dict[str, Any]:
    """A copy of the catalog document `doc` with the network's loop `figures` (loop_figures) set
    as `read` (e.g. "round 3's anchor of bench.predict, 2026-11-27 17:40 UTC") `where`."""
    held = {f: (round(v, 6), LOOP_UNITS[f]) for f, v in figures.items()}
    return _measured_in(doc, "network", held, f"{read}: {loop_method()}", where)


def _measured_in(
    doc: dict[str, Any],
    section: str,
    figures: dict[str, tuple[float, str]],
    source: str,
    where: Provenance,
) -> dict[str, Any]:
    """A copy of the catalog document `doc` with each of `figures` (field: value and unit) set
    in `section` as measured by `source` `where`: a round's anchor of some of its figures."""
    out = copy.deepcopy(doc)
    for field, (value, unit) in figures.items():
        out[section][field] = _fig(value, unit, source, where, "measured")
    return out


def measure_loop_now(endpoint: S3Endpoint, work: Path, mb_s: float) -> dict[str, float]:
    """loop_figures of a measure_loop taken now, against the S3 server at `endpoint` (a shard
    needs one), its children stopped on return: a round's anchor of the catalog's loop."""
    with Supervisor().guard() as supervisor:
        env = child_env(endpoint, secrets.token_hex(16), tmp_dir=work)
        reading = measure_loop(supervisor, env, work, PS_SIZES_MB[0])
    return loop_figures(reading, PS_SIZES_MB[0], mb_s)


def load_method(runners: int = LOAD_RUNNERS) -> str:
    """How measure_load reads the load's CPU-bound part: the text a figure's source quotes."""
    return (
        "median first load in a fresh runner of a one-shard dataset of 32 samples "
        "(S3 client, manifest, shard, np.load) through emulator.startup_probe, at 1 vCPU "
        f"where a CPU group holds it, {runners} runners"
    )


def measure_load_now(endpoint: S3Endpoint, work: Path) -> float:
    """measure_load taken now against the S3 server at `endpoint`, its
    runners stopped and its CPU group gone on return: a round's anchor of load_cpu_s."""
    with contextlib.ExitStack() as stack:
        supervisor = stack.enter_context(Supervisor().guard())
        env = child_env(endpoint, secrets.token_hex(16), tmp_dir=work)
        limiter = stack.enter_context(cpu.CpuLimiter(f"lambda-dnn-anchor-load-{os.getpid()}"))
        placement = limiter.place("load", 1.0)  # a no-op where no CPU group can be held
        return measure_load(supervisor, env, endpoint, work, LOAD_RUNNERS, placement)


def load_anchored(
    doc: dict[str, Any], load_cpu_s: float, read: str, where: Provenance
) -> dict[str, Any]:
    """A copy of the catalog document `doc` with lambda.load_cpu_s set to `load_cpu_s` as
    `read` (e.g. "round 3's anchor of bench.predict, 2026-11-27 17:40 UTC") `where`."""
    held = {"load_cpu_s": (round(load_cpu_s, 4), "s")}
    return _measured_in(doc, "lambda", held, f"{read}: {load_method()}", where)


@dataclass(frozen=True)
class PsReading:
    """What measure_ps read: the round trip, one client's and one shard's bandwidth (each a
    Fit saying how it was read), and the small exchange's loop."""

    rtt_s: float
    per_flow: Fit
    aggregate: Fit
    loop: LoopReading


def measure_ps(
    supervisor: Supervisor,
    env: dict[str, str],
    logs: Path,
    sizes_mb: Sequence[float],
    repeats: int,
    loop_readings: int = LOOP_READINGS,
) -> PsReading:
    """The round trip, the per-flow and one shard's aggregate bandwidth, and the small
    exchange's CPU, through real PS shards: every size's shard open at once and timed in rounds
    (median_rounds), grown until the time grows measurably (fit_growing)."""

    def median_times(sizes: Sequence[float], rounds: int) -> list[float]:
        with contextlib.ExitStack() as shards:
            timers = [shards.enter_context(_exchanges(supervisor, env, logs, 1, s)) for s in sizes]
            return median_rounds(timers, rounds)

    per_flow = fit_growing(median_times, sizes_mb, repeats, fit_exchange)
    smallest = min(sizes_mb)
    loop = measure_loop(supervisor, env, logs, smallest, loop_readings, LOOP_EXCHANGES)
    rtt_s = rtt_from_exchange_s(smallest, loop.exchange_s, per_flow.mb_s)
    largest = max(sizes_mb)
    aggregate = per_flow
    for n in PS_CLIENTS[1:]:
        with _exchanges(supervisor, env, logs, n, largest) as exchange:
            (exchange_s,) = median_rounds([exchange], repeats)
        aggregate = max(aggregate, aggregate_mb_s(n, largest, exchange_s, rtt_s),
                        key=lambda fit: fit.mb_s)  # fmt: skip
    return PsReading(rtt_s, per_flow, aggregate, loop)


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
        return lambda sizes, rounds: median_rounds([_timer(action(s)) for s in sizes], rounds)

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
        return median_rounds([_timer(checkpoint(s)) for s in sizes], rounds)

    def fit_both_vectors(sizes: Sequence[float], times: Sequence[float]) -> Fit:
        return fit_request([2.0 * s for s in sizes], times)

    return fit_growing(median_times, sizes_mb, repeats, fit_both_vectors)


def _invoke(
    supervisor: Supervisor,
    environment: Any,
    work: Path,
    name: str,
    poll_s: float,
    event: dict[str, Any] | None = None,
) -> Outcome:
    inv = submit(environment, name=name, event=event or {}, limit_s=60.0, work_dir=work)
    while (outcome := poll(supervisor, inv)) is None:
        time.sleep(poll_s)
    if not outcome.ok:
        raise RuntimeError(f"start-up probe failed: {outcome.error}")
    return outcome


def _invoke_s(
    supervisor: Supervisor, environment: Any, work: Path, name: str, poll_s: float
) -> float:
    return _invoke(supervisor, environment, work, name, poll_s).wall_s


def measure_startup(
    supervisor: Supervisor, env: dict[str, str], work: Path, repeats: int
) -> tuple[float, float, float, float]:
    """(cold_s, warm_s, restart_s, launch_s): a fresh runner's first invocation (spawn
    included), a second one in the same environment, the gap the orchestrator adds between the
    links of a chain (warm calls polled at its interval, each working a different share of that
    interval: a link ends at any phase of the poll, so the mean wait is about half an interval;
    a call that returns at once always waited a whole one, less the work), and the part of the
    cold invocation before the handler's own clock: `repeats` fresh runners' first invocations,
    less the worker module's import each reports (the start-up a worker times itself), median."""
    launches = []
    for k in range(repeats):
        t0 = time.perf_counter()
        probe = start_environment(supervisor, name=f"launch-{k}",
                                  handler="emulator.startup_probe:handler", memory_mb=1769,
                                  work_dir=work, env=env)  # fmt: skip
        import_s = float(_invoke(supervisor, probe, work, f"launch-{k}", 0.005).result["import_s"])
        launches.append(max(0.0, time.perf_counter() - t0 - import_s))
        supervisor.stop(probe.proc, grace_s=2.0)
    t0 = time.perf_counter()
    environment = start_environment(
        supervisor,
        name="probe",
        handler="emulator.startup_probe:handler",
        memory_mb=1769,
        work_dir=work,
        env=env,
    )
    _invoke_s(supervisor, environment, work, "cold", 0.005)
    cold_s = time.perf_counter() - t0
    warm = [_invoke_s(supervisor, environment, work, f"warm-{k}", 0.005) for k in range(repeats)]
    phases = [POLL_INTERVAL_S * (k + 0.5) / repeats for k in range(repeats)]
    gaps = [
        _invoke(supervisor, environment, work, f"gap-{k}", POLL_INTERVAL_S,
                {"sleep_s": sleep_s}).wall_s - sleep_s
        for k, sleep_s in enumerate(phases)
    ]  # fmt: skip
    supervisor.stop(environment.proc, grace_s=2.0)
    return cold_s, statistics.median(warm), statistics.mean(gaps), statistics.median(launches)


def parallel_init_cores(one_s: float, together_s: float, k: int, cores: int) -> float:
    """The cores k cold starts at once effectively get: k·t₁/t_k, within [1, cores].

    Imports run at burst CPU outside the quota, but not at `cores` × one: k processes reading
    the same shared objects and faulting in their pages at once also wait on each other."""
    if one_s <= 0 or together_s <= 0:
        return float(cores)
    return float(min(cores, max(1.0, k * one_s / together_s)))


def init_counts(cores: int) -> tuple[int, ...]:
    """The numbers of runners measure_init_cores starts together: one per core, two and four
    (n = 2, 4, 8 on 2 cores, the crowds bench/predict runs), never more than CONCURRENCY_LIMIT:
    no plan on this catalog starts more, and a 16-core machine would otherwise import torch in
    64 runners at once (the model holds the curve flat beyond its last point)."""
    return tuple(sorted({min(k, CONCURRENCY_LIMIT) for k in (cores, 2 * cores, 4 * cores)}))


def single_init_cores(by_n: tuple[tuple[int, float], ...], cores: int) -> float:
    """The one `init_cores` figure of catalogs read without the curve: the curve at 2·cores
    runners (the count it was measured at before), as the model reads the curve."""
    return float(np.asarray(init_cores_at(2 * cores, None, by_n)))


def measure_init_cores(
    supervisor: Supervisor, env: dict[str, str], work: Path, cores: int, repeats: int
) -> tuple[tuple[int, float], ...]:
    """(k, effective cores) for each k of init_counts: k runners started together, each
    importing functions.worker (torch) as a worker's cold start does, against one alone: the
    median of `repeats` rounds per k over the median of every one-alone round, one of which
    runs just before each k's round.

    A torch import alone here takes 1.6-2.6 s from one round to the next (2026-11-26 17:58 UTC,
    15 rounds), so the one-alone figure, the denominator of every k's, is read in as many rounds
    as all the k's together. With three of them for all k, three runs of the measurement minutes
    apart (17:45 UTC) gave 1.82, 1.44 and 1.97 cores at k = 2 and 1.79, 1.51 and 2.0 at k = 8;
    paired k by k (each k over the round just before it), 1.41-2.0 at k = 2 within one run.

    A start-up is the slowest runner's own import of functions.worker (its IMPORT_S), the figure
    the emulator's report measures a worker's start-up by; not the round's wall time, which adds
    k spawns one after the other and the polls: timed so, 4 runners gave 1.53-1.65 cores where
    bench/predict's start-ups at n = 4 and 8 showed 1.8-2.0."""

    def round_s(count: int, tag: str) -> float:
        environments = [
            start_environment(
                supervisor,
                name=f"init-{tag}-{j}",
                handler="emulator.startup_probe:handler",
                memory_mb=1769,
                work_dir=work,
                env=env,
            )
            for j in range(count)
        ]
        imports_s = [  # each returns once its import is done
            _invoke(supervisor, environment, work, f"init-{tag}-{j}", 0.005).result["import_s"]
            for j, environment in enumerate(environments)
        ]
        for environment in environments:
            supervisor.stop(environment.proc, grace_s=2.0)
        return float(max(imports_s))

    alone: list[float] = []
    together: dict[int, list[float]] = {k: [] for k in init_counts(cores)}
    for r in range(repeats):  # every k once a repeat, so a drift of the machine meets them alike
        for k, samples in together.items():
            alone.append(round_s(1, f"one{k}-{r}"))
            samples.append(round_s(k, f"k{k}-{r}"))
    one = statistics.median(alone)
    return tuple(
        (k, parallel_init_cores(one, statistics.median(samples), k, cores))
        for k, samples in together.items()
    )


def measure_load(
    supervisor: Supervisor,
    env: dict[str, str],
    endpoint: S3Endpoint,
    work: Path,
    repeats: int,
    placement: cpu.Placement | None = None,
) -> float:
    """Median seconds of the worker's load of a tiny one-shard dataset (S3 client, manifest,
    shard, np.load: the CPU-bound part, bytes ~0), each the first load of a fresh runner, held
    to 1 vCPU where `placement` holds it, as a worker's load runs at its memory's share (the
    model divides the figure by that share: provisioner.model.load_overhead_s). The dataset
    goes to one bucket, created where it is not there yet: a benchmark's rounds read on one
    server (with a new bucket a round, beside the cases' own, weed failed the fifth one's first
    PUT with InternalError, 2026-11-27)."""
    bucket, prefix = "calibrate-load", "tiny"
    create_buckets(endpoint, [bucket])
    client = s3_client_for(endpoint)
    datasets.write_shards(client, "synthetic-cifar:32", 1, bucket, prefix, seed=0)
    samples = []
    for k in range(repeats):
        environment = start_environment(
            supervisor,
            name=f"load-{k}",
            handler="emulator.startup_probe:handler",
            memory_mb=1769,
            work_dir=work,
            env=env,
            placement=placement,
        )
        _invoke_s(supervisor, environment, work, f"load-cold-{k}", 0.005)
        event = {"dataset_bucket": bucket, "dataset_prefix": prefix}
        outcome = _invoke(supervisor, environment, work, f"load-{k}", 0.005, event)
        supervisor.stop(environment.proc, grace_s=2.0)
        samples.append(float(outcome.result["load_s"]))
    return statistics.median(samples)


def measure_cpu_share(duration_s: float) -> tuple[float | None, str]:
    """Mean achieved/asked CPU share of a busy loop in a CFS group at each of CPU_SHARES."""
    limiter = cpu.CpuLimiter(f"lambda-dnn-calibrate-{os.getpid()}")
    if not limiter.enforced:
        return None, limiter.reason
    with limiter:
        ratios = []
        for k, cores in enumerate(CPU_SHARES):
            placement = limiter.place(f"share-{k}", cores)
            out = subprocess.run(
                [sys.executable, "-c", BUSY_LOOP, repr(duration_s)],
                capture_output=True,
                text=True,
                timeout=60.0 + duration_s,
                check=True,
                # dies with this process (run() waits in the thread that forks), enters its group
                preexec_fn=lifeline.die_with_parent(placement.enter),  # noqa: PLW1509
            )
            ratios.append(float(out.stdout.strip()) / cores)
    shares = ", ".join(f"{c:g}" for c in CPU_SHARES)
    return statistics.mean(ratios), f"busy loop {duration_s:g} s in a CFS group at {shares} core"


def machine_memory_gib() -> float:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30


def measure(quick: bool, work: Path) -> Measurements:
    """Run every measurement against real local servers; all children stopped on return."""
    repeats = 3 if quick else 7
    init_repeats = 1 if quick else INIT_REPEATS
    cores = int(cpu.machine_cores())
    share, share_note = measure_cpu_share(0.3 if quick else 2.0)
    secret = secrets.token_hex(16)
    with contextlib.ExitStack() as stack:
        endpoint = stack.enter_context(s3_server(data_dir=work / "s3", log_dir=work / "s3-logs"))
        supervisor = stack.enter_context(Supervisor().guard())
        env = child_env(endpoint, secret, tmp_dir=work)
        ps = measure_ps(
            supervisor,
            env,
            work,
            PS_SIZES_QUICK_MB if quick else PS_SIZES_MB,
            repeats,
            1 if quick else LOOP_READINGS,
        )
        s3_sizes_mb = S3_SIZES_QUICK_MB if quick else S3_SIZES_MB
        s3_get, s3_put = measure_s3(endpoint, s3_sizes_mb, repeats)
        checkpoint = measure_checkpoint(endpoint, s3_sizes_mb, repeats)
        cold_s, warm_s, restart_s, launch_s = measure_startup(
            supervisor, env, work / "startup", repeats
        )
        init_cores_by_n = measure_init_cores(supervisor, env, work / "init", cores, init_repeats)
        # a no-op placement where no CPU group can be held (the figure is then unthrottled)
        limiter = stack.enter_context(cpu.CpuLimiter(f"lambda-dnn-calibrate-load-{os.getpid()}"))
        load_s = measure_load(
            supervisor, env, endpoint, work / "load", min(repeats, LOAD_RUNNERS),
            limiter.place("load", 1.0),
        )  # fmt: skip
    return Measurements(
        cores=cores,
        total_vcpu=cpu.WORKER_CORE_FRACTION * cores,
        cfs_period_s=cpu.CFS_PERIOD_US / 1e6,
        cpu_share_ratio=share,
        cpu_share_note=share_note,
        ps_rtt_s=ps.rtt_s,
        exchange_cpu_fraction=ps.loop.cpu_fraction,
        ps_request_cpu_s=ps.loop.ps_request_cpu_s,
        ps_mb_s=ps.per_flow.mb_s,
        ps_aggregate_mb_s=ps.aggregate.mb_s,
        s3_get_latency_s=s3_get.latency_s,
        s3_get_mb_s=s3_get.mb_s,
        s3_put_latency_s=s3_put.latency_s,
        s3_put_mb_s=s3_put.mb_s,
        checkpoint_latency_s=checkpoint.latency_s,
        checkpoint_mb_s=checkpoint.mb_s,
        cold_start_s=cold_s,
        warm_start_s=warm_s,
        init_cores=single_init_cores(init_cores_by_n, cores),
        init_cores_by_n=init_cores_by_n,
        init_repeats=init_repeats,
        load_cpu_s=load_s,
        restart_s=restart_s,
        launch_s=launch_s,
        memory_gib=machine_memory_gib(),
        arch="arm64" if platform.machine() in ("aarch64", "arm64") else "x86_64",
        repeats=repeats,
        fit_notes=tuple(
            (key, fit.note)
            for key, fit in (
                ("ps", ps.per_flow),
                ("aggregate", ps.aggregate),
                ("s3_get", s3_get),
                ("s3_put", s3_put),
                ("checkpoint", checkpoint),
            )
            if fit.note
        ),
    )


# -- the catalog ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Provenance:
    """Where and when the figures were taken."""

    machine: str
    date: str


def here_today() -> Provenance:
    """This machine (cpu.this_machine) and today's date: where figures measured now were
    taken."""
    return Provenance(cpu.this_machine(), datetime.date.today().isoformat())


def _fig(value: Any, unit: str, source: str, where: Provenance, tag: str) -> dict[str, Any]:
    return {
        "value": value,
        "unit": unit,
        "source": source,
        "machine": where.machine,
        "date": where.date,
        "tag": tag,
    }


def _copied(figure: dict[str, Any], where: Provenance) -> dict[str, Any]:
    """A lambda-2025 figure kept as it is (prices: the planner's objective is unchanged)."""
    out = copy.deepcopy(figure)
    out.update(
        source=f"copied from lambda-2025: {figure.get('source', '')}",
        tag="copied",
        machine=where.machine,
        date=where.date,
    )
    return out


def _lambda_section(m: Measurements, ref: dict[str, Any], w: Provenance) -> dict[str, Any]:
    def measured(value: Any, unit: str, method: str) -> dict[str, Any]:
        return _fig(value, unit, method, w, "measured")

    def policy(value: Any, unit: str, why: str) -> dict[str, Any]:
        return _fig(value, unit, why, w, "policy")

    if m.cpu_share_ratio is None:
        share = policy(1.0, "achieved/asked", f"not measured ({m.cpu_share_note}): assumed exact")
    else:
        share = measured(round(m.cpu_share_ratio, 4), "achieved/asked", m.cpu_share_note)
    cores_method = (
        f"os.sched_getaffinity: {m.cores} cores × emulator/cpu.py WORKER_CORE_FRACTION "
        f"{cpu.WORKER_CORE_FRACTION}"
    )
    per_n = {}  # an older Measurements (tests) has no per-n figure: init_cores at every n
    if m.init_cores_by_n:
        per_n["init_cores_by_n"] = measured(
            [[k, round(c, 3)] for k, c in m.init_cores_by_n],
            "[n, cores]",
            "k·t₁/t_k as init_cores, for each k = n emulator runners cold-started at once: t_k "
            f"the median of {m.init_repeats} rounds, t₁ of one alone before each of them; the "
            "model interpolates between them (provisioner.model.init_cores_at)",
        )
    return {
        "memory_min_mb": policy(128, "MB", "Lambda's smallest size, kept"),
        "memory_max_mb": measured(
            memory_max_mb(m.total_vcpu), "MB", f"floor(total_vcpu × 1769); {cores_method}"
        ),
        "memory_step_mb": policy(1, "MB", "Lambda's 1 MB step, kept"),
        "mb_per_vcpu": policy(cpu.MB_PER_VCPU, "MB", "1 local core = 1 Lambda vCPU (cpu_scale 1)"),
        "max_vcpu": measured(m.total_vcpu, "vCPU", cores_method),
        "total_vcpu": measured(m.total_vcpu, "vCPU", cores_method),
        "init_cores": measured(
            round(m.init_cores, 3),
            "cores",
            f"k·t₁/t_k for k = {min(2 * m.cores, CONCURRENCY_LIMIT)} emulator runners "
            "cold-started at once (each imports "
            "functions.worker: torch; t = the slowest runner's own import time, as a worker "
            "reports its start-up) against one alone, within [1, "
            f"{m.cores}] (os.sched_getaffinity); imports run at burst CPU, outside the workers' "
            "quota (emulator/runner.py init_phase)",
        ),
        **per_n,
        "compute_cores": measured(
            float(m.cores),
            "cores",
            f"os.sched_getaffinity: {m.cores} cores; the workers' steps are held by their own "
            "quotas only, and the PS, the S3 server and the orchestrator wait while a BSP step "
            "computes, so n steps at once share every core (k copies at 0.72 vCPU got 0.93-1.02 "
            "of 2 cores: bench/results/shared-cores.md)",
        ),
        "cpu_throttle_period_s": policy(
            m.cfs_period_s, "s", "emulator/cpu.py CFS_PERIOD_US (Lambda's 20 ms slice)"
        ),
        "cpu_share_achieved_ratio": share,
        "invocation_timeout_s": policy(INVOCATION_TIMEOUT_S, "s", "Lambda's limit, kept"),
        **{key: _copied(ref[key], w) for key in COPIED_LAMBDA_FIGURES},
        "concurrency_limit": policy(
            CONCURRENCY_LIMIT, "functions", "emulated functions this machine hosts at once"
        ),
        "unreserved_concurrency_min": policy(0, "functions", "no other functions share it"),
        "restart_s": measured(
            round(m.restart_s, 4),
            "s",
            "mean wall less work of warm emulator.startup_probe invocations polled at "
            f"the orchestrator's POLL_INTERVAL_S, working {m.repeats} evenly spread shares of "
            "it (a link ends at any phase of the poll)",
        ),
        "cold_start_s": measured(
            round(m.cold_start_s, 4),
            "s",
            "spawn of emulator.runner --serve to the first result; the "
            "handler module imports functions.worker (torch)",
        ),
        "launch_s": measured(
            round(m.launch_s, 4),
            "s",
            f"median of {m.repeats} fresh emulator.runner spawns to their first result (polled "
            "every 5 ms) less the functions.worker import each reports: the spawn, interpreter "
            "and runner start no handler times",
        ),
        "warm_start_s": measured(
            round(m.warm_start_s, 4),
            "s",
            f"median second invocation in the same runner, {m.repeats} repeats",
        ),
        "load_cpu_s": measured(
            round(m.load_cpu_s, 4), "s", load_method(min(m.repeats, LOAD_RUNNERS))
        ),
        "safety_margin_s": policy(
            default_safety_margin_s(INVOCATION_TIMEOUT_S),
            "s",
            "emulator/orchestrator.py default_safety_margin_s(900)",
        ),
        # Only this machine's architecture: the emulator cannot run the other one's workers.
        "architectures": {
            name: _copied(arch, w) for name, arch in ref["architectures"].items() if name == m.arch
        },
    }


def _network_section(m: Measurements, w: Provenance) -> dict[str, Any]:
    ps_method = (
        f"push+pull through a functions.ps shard with functions.ps_client, sizes "
        f"{'/'.join(f'{s:g}' for s in (PS_SIZES_QUICK_MB if m.repeats <= 3 else PS_SIZES_MB))}"
        f" MB, median of {m.repeats} rounds of every size, fit time = 2·rtt + 2·d/B"
    )
    small = loop_method(1 if m.repeats <= 3 else LOOP_READINGS)
    rtt_method = m.noted("ps", f"the median exchange of {small}, less 2·d/B: (t − 2·d/B)/2")
    rounds = f"median of {m.repeats} rounds of every size, fit latency + d/B"
    s3_method = m.noted("s3_get", f"boto3 GET from SeaweedFS on 127.0.0.1, {rounds}")
    s3_put_method = m.noted("s3_put", f"boto3 PUT to SeaweedFS on 127.0.0.1, {rounds}")
    checkpoint_method = m.noted(
        "checkpoint",
        "functions.ps.CheckpointStore: copy, np.savez, HMAC, PUT to SeaweedFS on 127.0.0.1, LIST "
        f"and prune, as a PS shard checkpoints; {rounds}",
    )
    return {
        "function_ps_mb_s": _fig(
            round(m.ps_mb_s, 3), "MB/s", m.noted("ps", ps_method), w, "measured"
        ),
        "function_ps_rtt_s": _fig(round(m.ps_rtt_s, 6), "s", rtt_method, w, "measured"),
        "exchange_cpu_fraction": _fig(
            round(m.exchange_cpu_fraction, 3),
            "CPU s per wall s",
            f"the client's process CPU time over the wall time of {small}",
            w,
            "measured",
        ),
        **(
            {}
            if m.ps_request_cpu_s is None
            else {
                "ps_request_cpu_s": _fig(
                    round(m.ps_request_cpu_s, 6),
                    "CPU s per push+pull",
                    f"the shard process's CPU time (/proc/<pid>/stat) over {small}, per exchange",
                    w,
                    "measured",
                )
            }
        ),
        "s3_mb_s_per_memory_mb": _fig(
            0, "MB/s per MB", "loopback does not depend on memory", w, "policy"
        ),
        "s3_mb_s_intercept": _fig(round(m.s3_get_mb_s, 3), "MB/s", s3_method, w, "measured"),
        "s3_max_mb_s": _fig(round(m.s3_get_mb_s, 3), "MB/s", s3_method, w, "measured"),
        "s3_request_s": _fig(round(m.s3_get_latency_s, 6), "s", s3_method, w, "measured"),
        "s3_put_request_s": _fig(round(m.s3_put_latency_s, 6), "s", s3_put_method, w, "measured"),
        "s3_put_mb_s": _fig(round(m.s3_put_mb_s, 3), "MB/s", s3_put_method, w, "measured"),
        "per_flow_cap_gbps": _fig(
            round(mb_s_to_gbps(m.ps_mb_s), 4),
            "Gbit/s",
            m.noted("ps", f"one client's B, {ps_method}"),
            w,
            "measured",
        ),
        "ps_s3_mb_s": _fig(
            round(m.checkpoint_mb_s, 3),
            "MB/s",
            f"{checkpoint_method}, d the parameters and the momentum",
            w,
            "measured",
        ),
        "ps_checkpoint_request_s": _fig(
            round(m.checkpoint_latency_s, 6), "s", checkpoint_method, w, "measured"
        ),
        "vpc_interface_endpoints": _fig([], "AWS service names", "no VPC on loopback", w, "policy"),
        "vpc_endpoint_usd_per_hour": _fig(0, "USD/h", "no endpoints on loopback", w, "policy"),
    }


def _ps_section(m: Measurements, ref: dict[str, Any], w: Provenance) -> dict[str, Any]:
    default = next(p for p in ref["candidates"] if p["name"] == ref["default_type"])
    aggregate = (
        f"largest push+pull with {'/'.join(map(str, PS_CLIENTS))} clients on one shard: the "
        "highest n·2·d/(t − 2·rtt)"
    )
    gbps = round(mb_s_to_gbps(m.ps_aggregate_mb_s), 4)
    return {
        "max_shards": _fig(
            PS_MAX_SHARDS, "shards", "shards this machine hosts beside workers", w, "policy"
        ),
        "min_billed_s": _copied(ref["min_billed_s"], w),
        "default_type": "loopback",
        "candidates": [
            {
                "name": "loopback",
                "arch": m.arch,
                "vcpu": _fig(m.cores, "vCPU", "os.sched_getaffinity", w, "measured"),
                "memory_gib": _fig(
                    round(m.memory_gib, 2), "GiB", "sysconf physical pages", w, "measured"
                ),
                "baseline_gbps": _fig(
                    gbps, "Gbit/s", m.noted("aggregate", aggregate), w, "measured"
                ),
                "peak_gbps": _fig(
                    gbps, "Gbit/s", m.noted("aggregate", f"= baseline; {aggregate}"), w, "measured"
                ),
                "burst_s": _fig(0, "s", "loopback has no burst credit", w, "policy"),
                "usd_per_hour": _copied(default["usd_per_hour"], w),
            }
        ],
    }


def build_catalog(m: Measurements, reference: dict[str, Any], where: Provenance) -> dict[str, Any]:
    """The local catalog document (lambda-2025 schema) from the measurements; pure."""
    return {
        "schema_version": reference.get("schema_version", 1),
        "name": "local",
        "description": f"This machine ({where.machine}) as the emulator runs it, measured "
        f"{where.date}: 1 local core = 1 Lambda vCPU, PS shards on loopback.",
        "refresh": "Generated per machine by `make calibrate` (python -m emulator.calibrate); "
        "not committed.",
        "tags": {
            "measured": "measured on this machine by emulator/calibrate.py (source = method)",
            "policy": "a choice of this project or of the emulator, not a measurement",
            "copied": "copied from lambda-2025 (prices) so the planner's objective is the same",
        },
        "lambda": _lambda_section(m, reference["lambda"], where),
        "network": _network_section(m, where),
        "parameter_servers": _ps_section(m, reference["parameter_servers"], where),
        "orchestration": {
            **{key: _copied(fig, where) for key, fig in reference["orchestration"].items()},
            "default_slack": _fig(
                DEFAULT_SLACK,
                "share of the deadline",
                "emulator/calibrate.py DEFAULT_SLACK: runs here land up to 1.19× their "
                "prediction (bench/results/predict-synthetic-cifar-cnn.md, every run), so plans "
                "aim at 80% of a deadline unless the user gives a slack",
                where,
                "policy",
            ),
        },
    }


def write_catalog(document: dict[str, Any], out: Path) -> None:
    """Check that the catalog loads, then write it whole or not at all."""
    catalog_from_dict(document)
    write_text_atomically(out, json.dumps(document, indent=2) + "\n")


# -- CLI --------------------------------------------------------------------------------------
def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m emulator.calibrate", description=__doc__)
    p.add_argument("--quick", action="store_true", help="fewer sizes and repeats (tests)")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help="catalog file to write")
    p.add_argument(
        "--slack-from",
        type=Path,
        nargs="+",
        metavar="RUNS",
        help="measure nothing: set the --out catalog's default_slack from finished runs (run "
        "reports, folders of them, bench.predict results; emulator/slack.py)",
    )
    p.add_argument(
        "--init-cores-from",
        type=Path,
        nargs="+",
        metavar="RUNS",
        help="measure nothing: set the --out catalog's start-up cores per n from finished runs' "
        "start-ups (run reports, folders of them, bench.predict results; emulator/init_cores.py)",
    )
    return p.parse_args(argv)


def check_out(out: Path) -> None:
    """ValueError unless `out` is a .json path in an existing, writable folder."""
    if out.suffix != ".json":
        raise ValueError(f"bad --out {str(out)!r}: expected a path ending in .json")
    folder = out.parent if str(out.parent) else Path(".")
    if not folder.is_dir() or not os.access(folder, os.W_OK):
        raise ValueError(f"bad --out {str(out)!r}: folder {str(folder)!r} is not a writable folder")


def read_catalog_to_update(out: Path, options: str) -> dict[str, Any]:
    """The catalog document at `out` that `options` rewrite. ValueError (one line) when it
    cannot be read."""
    try:
        doc: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(
            f"--out {str(out)!r} cannot be read ({type(err).__name__}): {options} updates a "
            "catalog `make calibrate` wrote"
        ) from None
    return doc


def slack_set(
    catalog: dict[str, Any], runs: Sequence[Path], where: Provenance
) -> tuple[dict[str, Any], slack_runs.Slack]:
    """The catalog with default_slack read from `runs` (emulator/slack.py), every other
    figure as it was, and what was read. ValueError (one line) where the runs give none."""
    found = slack_runs.slack_for(slack_runs.ratios_from(runs, where.machine))
    method = found.source([str(r) for r in runs])
    figure = _fig(found.slack, "share of the deadline", method, where, "measured")
    return slack_runs.with_slack(catalog, figure), found


def init_cores_set(
    catalog: dict[str, Any], runs: Sequence[Path], where: Provenance, cores: float
) -> tuple[dict[str, Any], init_runs.InitCores]:
    """The catalog with lambda.init_cores_by_n (and the one init_cores figure read from it,
    single_init_cores) from `runs`' start-ups (emulator/init_cores.py), every other figure as
    it was, and what was read. ValueError (one line) where the runs give none."""
    found = init_runs.cores_by_n(init_runs.startups_from(runs, where.machine), cores)
    method = found.source([str(r) for r in runs])
    by_n = _fig([[n, c] for n, c in found.by_n], "[n, cores]", method, where, "measured")
    single = round(single_init_cores(found.by_n, int(cores)), 3)
    one = _fig(single, "cores", f"the curve at {2 * int(cores)} runners: {method}", where,
               "measured")  # fmt: skip
    return init_runs.with_init_cores(catalog, by_n, one), found


def update_from_runs(args: argparse.Namespace) -> list[str]:
    """--slack-from and --init-cores-from: rewrite the --out catalog's figures read from
    finished runs, in one write after every one was read (a bad RUNS leaves the catalog as it
    was); a line per figure written. ValueError (one line) otherwise."""
    given = [o for o, v in (("--slack-from", args.slack_from),
                            ("--init-cores-from", args.init_cores_from)) if v]  # fmt: skip
    catalog = read_catalog_to_update(args.out, " and ".join(given))
    where = here_today()
    said = []
    if args.init_cores_from:
        catalog, cores = init_cores_set(catalog, args.init_cores_from, where, cpu.machine_cores())
        each = ", ".join(f"{c:g} at n = {n}" for n, c in cores.by_n)
        said.append(f"start-up cores {each} from {cores.startups} start-ups")
    if args.slack_from:
        catalog, found = slack_set(catalog, args.slack_from, where)
        said.append(
            f"default_slack {found.slack:.0%} from {found.runs} runs (measured/predicted up to "
            f"{found.highest:.2f}×, 1-in-{slack_runs.TAIL_RUNS} {found.fitted:.2f}×)"
        )
    write_catalog(catalog, args.out)
    return [f"wrote {args.out}: {line}" for line in said]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        check_out(args.out)
        if args.slack_from or args.init_cores_from:
            print("\n".join(update_from_runs(args)))
            return 0
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    # The servers' logs (weed's, the PS shards') are in the work folder: kept when a
    # measurement fails, so the one-line error can point at them.
    work = Path(tempfile.mkdtemp(prefix="calibrate-"))
    try:
        m = measure(args.quick, work)
        shutil.rmtree(work, ignore_errors=True)
        where = here_today()
        reference = json.loads(REFERENCE_CATALOG.read_text(encoding="utf-8"))
        write_catalog(build_catalog(m, reference, where), args.out)
    except Interrupted as stop:
        shutil.rmtree(work, ignore_errors=True)
        print(f"error: calibration stopped by {stop.signal_name}; nothing written", file=sys.stderr)
        return 128 + stop.signum
    except Exception as err:  # noqa: BLE001 - any failed measurement is one line, not a trace
        kept = f" (the servers' logs: {work})" if work.is_dir() else ""
        print(f"error: calibration failed: {type(err).__name__}: {err}{kept}", file=sys.stderr)
        return 1
    print(
        f"wrote {args.out}: worker<->PS {m.ps_mb_s:.0f} MB/s, rtt {m.ps_rtt_s * 1e3:.2f} ms; "
        f"S3 GET {m.s3_get_mb_s:.0f} MB/s; cold start {m.cold_start_s:.2f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
