"""The S3 gradient exchange's terms (sync "s3"): k reducers through S3, no PS.

Each iteration every worker PUTs its gradient as k partitions of d/k; reducer j (one of ranks
0..k−1) GETs the n partitions j, averages them, applies SGD momentum and PUTs one state object
(parameters + momentum, 2·d/k); every worker then range-GETs the k parameter slices (d). The
scheme is LambdaML's ScatterReduce through S3 (Jiang et al., SIGMOD 2021) with k ≤ n reducers.
Pipelining: the requests of one phase run at once (one per partition), so their latencies
overlap and their bytes share the function's S3 bandwidth B_s(m): a phase takes one latency
plus its bytes over B_s(m). Phases do not overlap: a reducer needs all n partitions before its
update and a worker all k slices before its next step (BSP), so the critical path is the sum.
"""

from __future__ import annotations

import numpy as np

from provisioner.catalog import Catalog
from provisioner.profile import WorkloadProfile
from provisioner.quota import vcpu_share
from provisioner.terms import Arr, s3_bandwidth_mb_s


def s3_reduce_mb_s(mb_s_per_core: float, share: Arr) -> Arr:
    """Extension: a reducer's averaging + momentum rate, the profile's PS rate per core at the
    function's vCPU share (numpy's element-wise work is one thread: never more than one core)."""
    return mb_s_per_core * np.minimum(np.asarray(share, dtype=np.float64), 1.0)


def s3_communication_s(
    n: Arr,
    reducers: Arr,
    model_mb: float,
    s3_mb_s: Arr,
    request_s: float,
    put_request_s: float,
    put_mb_s: Arr | float | None = None,
) -> Arr:
    """Extension of λDNN t_comm = 2·d_m/B to the exchange through S3: four phases of one
    latency each, PUT d (worker), GET n·d/k and PUT 2·d/k (reducer), range-GET d (worker):
    (d + n·d/k)/B_get + (d + 2·d/k)/B_put + 2·(latency_get + latency_put), where a PUT's
    bandwidth is the GET's unless measured apart (put_mb_s). The PUT's latency is the caller's
    (Catalog.put_latency_s: the GET's where not measured apart), one fallback for every term.

    Apart on the local server: its PUT is 2.4× slower to answer and 4.7× slower per MB than
    its GET; priced at the GET's figures, bench/sync's S3 rows measured 17-83% of prediction.
    """
    n = np.asarray(n, dtype=np.float64)
    put_bw = s3_mb_s if put_mb_s is None else put_mb_s
    with np.errstate(divide="ignore"):  # k = 0 (a PS cell) is masked by the caller
        share = model_mb / np.asarray(reducers, dtype=np.float64)
    return (
        (model_mb + n * share) / s3_mb_s
        + (model_mb + 2.0 * share) / put_bw
        + 2.0 * (request_s + put_request_s)
    )


def s3_aggregation_s(n: Arr, reducers: Arr, model_mb: float, reduce_mb_s: Arr) -> Arr:
    """Extension: a reducer averages n gradient partitions of d/k and applies the update, as a PS
    shard does with d_m/ps_count (aggregation_time_s), at its own rate s3_reduce_mb_s."""
    with np.errstate(divide="ignore"):
        part_mb = model_mb / np.asarray(reducers, dtype=np.float64)
    return np.asarray(n, dtype=np.float64) * part_mb / reduce_mb_s


def s3_exchange_requests(n: Arr, reducers: Arr) -> tuple[Arr, Arr]:
    """Extension: (PUTs, GETs that find their object) of one S3 exchange: n·k gradient
    partitions and k state objects PUT; n·k partitions GET by the reducers and n·k slices
    range-GET by the workers (DELETE of the previous iteration's objects is free). The GETs
    that find nothing yet are s3_exchange_misses."""
    n = np.asarray(n, dtype=np.float64)
    k = np.asarray(reducers, dtype=np.float64)
    return n * k + k, 2.0 * n * k


# The runtime's waits (functions/s3sync.py, tests/provisioner/test_s3_polls_model.py holds them
# equal): a wait nothing is known about polls at 0, 5 ms, then gaps × 1.5 up to 200 ms; a
# recurring wait learns where its object comes and then misses about every other time.
POLL_FIRST_S, POLL_GROWTH, POLL_MAX_S = 0.005, 1.5, 0.2
STEADY_MISSES_PER_WAIT = 0.5


def backoff_poll_times_s() -> np.ndarray:
    """When a cold wait's GETs go out, from its start until the gap reaches POLL_MAX_S."""
    times, delay_s = [0.0], POLL_FIRST_S
    while delay_s < POLL_MAX_S:
        times.append(times[-1] + delay_s)
        delay_s = min(POLL_GROWTH * delay_s, POLL_MAX_S)
    return np.array(times)


def backoff_misses(wait_s: Arr) -> Arr:
    """The GETs that find nothing in a cold wait for an object that comes after wait_s: the
    back-off's polls sent before it (then one gap of POLL_MAX_S each)."""
    times = backoff_poll_times_s()
    wait = np.maximum(np.asarray(wait_s, dtype=np.float64), 0.0)
    early = np.searchsorted(times, wait, side="left").astype(np.float64)
    with np.errstate(invalid="ignore"):  # an infeasible cell's inf wait stays inf
        late = times.size + np.ceil((wait - times[-1]) / POLL_MAX_S) - 1.0
    return np.where(wait <= times[-1], early, late)


def s3_exchange_misses(n: Arr, reducers: Arr, wait_s: Arr, iterations: Arr, links: Arr) -> Arr:
    """Extension: the exchange's GETs per iteration that find nothing (S3 bills them too).

    Each of the 2·n·k GETs of an iteration is a wait: a reducer's for a gradient, a worker's for
    a state slice. In a link's first iteration nothing is known yet: each polls with the
    back-off for about the exchange's own time (wait_s, an upper bound on either wait), and the
    next one still learns (one more miss). After that each misses STEADY_MISSES_PER_WAIT.
    """
    waits = 2.0 * np.asarray(n, dtype=np.float64) * np.asarray(reducers, dtype=np.float64)
    cold = backoff_misses(wait_s) + 1.0 - STEADY_MISSES_PER_WAIT
    with np.errstate(divide="ignore", invalid="ignore"):
        links_share = np.minimum(
            np.asarray(links, np.float64) / np.asarray(iterations, np.float64), 1.0
        )
    return np.asarray(waits * (STEADY_MISSES_PER_WAIT + cold * np.nan_to_num(links_share)))


def s3_exchange_stored_mb(n: Arr, model_mb: float) -> Arr:
    """Extension: the exchange's objects in S3 at once, 2·(n + 2)·d: at most two iterations'
    objects live (n gradients d and the state 2·d each; one iteration is written while the
    previous one is read, then deleted)."""
    return 2.0 * (np.asarray(n, dtype=np.float64) + 2.0) * model_mb


def s3_cell_terms(
    profile: WorkloadProfile, catalog: Catalog, n: Arr, reducers: Arr, memory_mb: Arr
) -> tuple[Arr, Arr]:
    """(communication, aggregation) per iteration of an S3 exchange at memory m: transfers on
    B_s(m), the reduction at the share's rate (shared cores: local_machine.shared_s3_cell_terms)."""
    model_mb = profile.model_bytes / 1e6
    bw = s3_bandwidth_mb_s(
        memory_mb, catalog.s3_mb_s_per_memory_mb, catalog.s3_mb_s_intercept, catalog.s3_max_mb_s
    )
    share = vcpu_share(memory_mb, catalog.mb_per_vcpu, catalog.max_vcpu)
    comm = s3_communication_s(
        n, reducers, model_mb, bw, catalog.s3_request_s, catalog.put_latency_s, catalog.s3_put_mb_s
    )
    reduce = s3_reduce_mb_s(profile.ps_aggregation_mb_s_per_core, share)
    return comm, s3_aggregation_s(n, reducers, model_mb, reduce)
