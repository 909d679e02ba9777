"""The PS probe: real shards (`functions.ps`) reached through the worker's client.

Push+pull of several model sizes gives the per-flow bandwidth (time = 2·rtt + 2·d/B, λDNN's
exchange term); many small exchanges, each after a short step's busy work, the round trip, the
client's CPU share of an exchange and the shard's CPU per exchange; n = 1, 2, 4 clients on one
shard its aggregate bandwidth.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from emulator.calibration.fits import (
    Fit,
    aggregate_mb_s,
    fit_exchange,
    fit_growing,
    rtt_from_exchange_s,
)
from emulator.calibration.timing import median_rounds
from emulator.naming import SECRET_ENV
from emulator.procs import Supervisor, wait_for_log_line
from functions.ps_client import PSClient
from functions.runs import new_run

PS_SIZES_MB = (0.07, 1.0, 10.0, 40.0)
PS_SIZES_QUICK_MB = (0.07, 8.0)  # far apart, so a busy machine's noise does not swamp the slope
# A loop reading (measure_loop): small exchanges on a fresh shard, the median of a few readings
# (the round trip, the client's CPU share, the shard's CPU per exchange).
# The shard's CPU is read from /proc's 10 ms ticks: over 300 exchanges (~90 ms of it) one tick
# is 11%, and readings of the same machine hours apart moved by 3×; 1,000 hold a tick to 3% and
# the median of three shards a stray reading out.
LOOP_EXCHANGES = 1000
LOOP_READINGS = 3
ROUND_TRIP_GAP_S = 0.001  # busy work before each of them: a short training step
PS_CLIENTS = (1, 2, 4)
READY_TIMEOUT_S = 60.0


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
