"""The local S3 exchange's CPU: every request costs the client and the server CPU on the same cores.

On the local machine the S3 server (SeaweedFS) and the workers share C cores, and each request
costs CPU on both sides: the boto3 client's signing, HTTP and parsing in the worker's process,
held to its quota, and the server's handling. With a tiny model the exchange is requests, not
bytes, so its latency path (s3exchange.s3_communication_s) is not its bound: the exchange
cannot take less than the CPU its requests need, on the machine's cores and, for one worker,
its own requests' client CPU at its quota share.
"""

from __future__ import annotations

import numpy as np

from provisioner.s3exchange import (
    GATHER_WINDOW,
    s3_exchange_requests,
    shared_steady_misses_per_wait,
)
from provisioner.terms import Arr


def s3_iteration_requests(n: Arr, reducers: Arr, cores: float) -> Arr:
    """Extension: every request of one S3 exchange on the server: the PUTs and the GETs that
    find their object (s3_exchange_requests), the steady empty GETs of each of the 2·n·k waits
    on C shared cores (shared_steady_misses_per_wait; a link's first iteration's back-off is
    apart: rare in a long run) and each reducer's one DeleteObjects."""
    n = np.asarray(n, dtype=np.float64)
    k = np.asarray(reducers, dtype=np.float64)
    puts, gets = s3_exchange_requests(n, k)
    return puts + gets + shared_steady_misses_per_wait(n, cores) * 2.0 * n * k + k


def s3_reducer_requests(n: Arr, reducers: Arr, cores: float) -> Arr:
    """Extension: the requests of the busiest worker's process in one exchange, a reducer's:
    its k gradient partitions PUT and k state slices GET (as every worker), the n partitions
    it reduces GET, its state PUT and its DeleteObjects, and the steady empty GETs of its n + k
    waits on C shared cores."""
    n = np.asarray(n, dtype=np.float64)
    k = np.asarray(reducers, dtype=np.float64)
    return 2.0 * k + n + 2.0 + shared_steady_misses_per_wait(n, cores) * (n + k)


def s3_reducer_waves(n: Arr) -> Arr:
    """Extension: the reducer's request waves one after another in an exchange, each waiting
    on the server: its gradient partitions PUT (at once), the n partitions it reduces GET
    (GATHER_WINDOW in flight), its state PUT, the k state slices GET (at once), its DELETE."""
    return 4.0 + np.ceil(np.asarray(n, dtype=np.float64) / GATHER_WINDOW)


def s3_cpu_floor_s(
    n: Arr,
    reducers: Arr,
    share: Arr,
    client_cpu_s: float | None,
    server_cpu_s: float | None,
    cores: float | None,
) -> Arr:
    """Extension: the least an S3 exchange can take for the CPU its requests need on C shared
    cores: max(R·(c_client + c_server)/C, c_client·r/min(s, 1) + c_server·w), R every request
    of the iteration (s3_iteration_requests), r the reducer's own (s3_reducer_requests), s its
    quota share (the client's CPU runs in its process, held to the quota; one Python thread
    holds at most one core), w its waves (s3_reducer_waves): each wave waits for the server to
    handle it, and the server's CPU is not the worker's quota's, so the two add up.

    Read on 2 cores under load (the probe in emulator/calibration/s3_probe.py, stepping the
    worker's exchange): 2.75 ms of the worker's CPU a request and 1.75 ms of SeaweedFS's. One
    worker at 0.326 vCPU reducing its own gradient sends 5.25 requests (two waits, 0.125 empty
    GETs each) in 5 waves: 5.25 · 2.75 / 0.326 + 5 · 1.75 = 53 ms an iteration, where 61 ms was
    measured (digits-mlp n = 1, k = 1 in bench/results/hosts/amd-epyc-2c/history/seed12) and
    the client's quota alone says 44."""
    n = np.asarray(n, dtype=np.float64)
    shape = np.broadcast_shapes(n.shape, np.shape(reducers), np.shape(share))
    if cores is None or (client_cpu_s is None and server_cpu_s is None):
        return np.zeros(shape)
    client, server = client_cpu_s or 0.0, server_cpu_s or 0.0
    machine = s3_iteration_requests(n, reducers, cores) * (client + server) / cores
    with np.errstate(divide="ignore"):
        own = client * s3_reducer_requests(n, reducers, cores) / np.minimum(np.asarray(share), 1.0)
    own = own + server * s3_reducer_waves(n)
    return np.asarray(np.broadcast_to(np.maximum(machine, own), shape), dtype=np.float64)
