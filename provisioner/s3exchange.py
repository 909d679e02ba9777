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

from typing import Any

import numpy as np

from provisioner.catalog import Catalog
from provisioner.profile import WorkloadProfile
from provisioner.quota import vcpu_share
from provisioner.terms import Arr, checkpoint_time_s, s3_bandwidth_mb_s


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
        + s3_latency_s(request_s, put_request_s)
    )


def s3_latency_s(request_s: float, put_request_s: float) -> float:
    """The four phases' request latencies of s3_communication_s, bytes apart: two GETs (the
    reducer's gather, the worker's range-GET) and two PUTs (the gradient, the state)."""
    return 2.0 * (request_s + put_request_s)


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


def s3_link_requests(n: Arr, reducers: Arr, links: Arr | float) -> tuple[Arr, Arr, Arr]:
    """Extension: (PUTs, GETs, LISTs) of an S3 exchange outside its iterations, for the run
    (functions/s3sync.py's start and finish). Every link, each worker LISTs the exchange once;
    each reducer, at the end of the link, saves its checkpoint and LISTs the checkpoints to
    prune them. On the first link every worker LISTs the checkpoints for one to resume from
    (even where a peer's state 0 is there first: the count does not hang on the start order),
    and the reducers seed their states (k PUTs) from the model every worker built alike, so
    none reads them. A later link's workers read the k state slices of the
    iteration they resume at (n·k GETs) and its reducers GET their partition's newest state (k
    each). S3 bills a LIST as a PUT."""
    n = np.asarray(n, dtype=np.float64)
    k = np.asarray(reducers, dtype=np.float64)
    runs = np.asarray(links, dtype=np.float64)
    ran = (runs > 0) & (k > 0)  # no link (or no reducer): nothing to start or end
    puts = np.where(ran, k * (runs + 1.0), 0.0)
    gets = np.where(ran, (n + 1.0) * k * np.maximum(runs - 1.0, 0.0), 0.0)
    lists = np.where(ran, n * (runs + 1.0) + k * runs, 0.0)
    return puts, gets, lists


# The runtime's waits (functions/polling.py, tests/provisioner/test_s3_polls_model.py holds them
# equal): a wait nothing is known about polls at 0, 5 ms, then gaps × 1.5 up to 200 ms; a
# recurring wait learns where its object comes and sends its first GET there, every gap_s
# after it while late (× 1.5 per miss up to 200 ms). A reducer has GATHER_WINDOW gradient
# waits in flight: the next starts when one is answered.
POLL_FIRST_S, POLL_GROWTH, POLL_MAX_S = 0.005, 1.5, 0.2
GATHER_WINDOW = 4
# A steady wait's object arrives around its learned estimate with the iteration's jitter (its
# peers' requests and compute on shared cores, a throttled step). Read on the 2-core host over
# 11 runs of digits-mlp and the CNN at n = 2-10, k = 1-3 (bench/results/s3-requests.md): 23-40%
# of the steady waits missed at their first GET, and a late object came a median 0.17-0.22 of
# the iteration after it where the iteration is the exchange (digits-mlp), 0.04-0.18 where it
# is mostly compute (the CNN): the exchange jitters more than the compute. Priced as an
# exponential lateness of mean 0.15 of the exchange plus 0.04 of the rest of the iteration:
# the figures at which those runs' steady misses per wait came out closest (0.5-1.5 of
# measured, the same configuration's runs 0.7-1.5 apart).
STEADY_LATE_SHARE = 0.36
LATENESS_PER_EXCHANGE_S = 0.15
LATENESS_PER_COMPUTE_S = 0.04
# Where the request count is priced without the iteration's time (pipeline_local and the
# pipeline's boundaries): the runtime's rule with no jitter, a miss every other wait.
STEADY_MISSES_PER_WAIT = 0.5
# On shared cores (the local machine) the arrivals spread as the n workers take turns on the C
# cores: a steady wait's empty GETs grow with n/C, not with the iteration's length. Read on
# the S3 rows with steady waits of the held-out draws of seeds 21-24 (11 rows, a fit set kept
# apart: bench/results/s3-requests.md): 0.25-0.35 a wait at n = 2, 0.29 and 0.40 at 3 and 4,
# 0.66-0.75 at 5, 0.66-0.98 at 7-11 on 2 cores, where the lateness figures above priced them
# 0.39-0.76 with no trend in n (measured/priced 0.46-1.76 by row).
SHARED_MISSES_PER_WORKER_PER_CORE = 0.25
SHARED_MISSES_MAX = 0.9


def late_wait_misses(lateness_s: Arr, gap_s: Arr | float, get_s: Arr | float) -> Arr:
    """Expected GETs that find nothing in a steady wait whose first GET missed, its object
    late by an exponential time of mean lateness_s: the first GET, then each later poll of
    functions.polling.expected_delays_s (gap, gap, × POLL_GROWTH up to max(gap, POLL_MAX_S)),
    sent one gap plus one GET's round trip (get_s) after the one before, that goes out before
    the object: 1 + Σ_j exp(−t_j / lateness)."""
    late = np.asarray(lateness_s, dtype=np.float64)
    gap = np.asarray(gap_s, dtype=np.float64)
    cap = np.maximum(gap, POLL_MAX_S)
    shape = np.broadcast(late, gap, np.asarray(get_s)).shape
    sent, delay, total = np.zeros(shape), gap, np.ones(shape)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for j in range(16):  # past ~10 polls the gap is at its cap: a geometric tail
            sent = sent + delay + get_s
            total = total + np.exp(-sent / late)
            delay = delay if j == 0 else np.minimum(delay * POLL_GROWTH, cap)
        step = cap + get_s  # every later poll
        tail = np.exp(-(sent + step) / late) / -np.expm1(-step / late)
        out = total + np.where(late > 0, tail, 0.0)
    return np.asarray(np.where(late > 0, out, 1.0), dtype=np.float64)


def steady_misses_per_wait(
    exchange_s: Arr, compute_s: Arr, gap_s: Arr | float, get_s: Arr | float
) -> Arr:
    """Extension: the GETs that find nothing per steady wait: STEADY_LATE_SHARE of the waits
    miss at their first GET and then poll over a lateness of LATENESS_PER_EXCHANGE_S of the
    iteration's exchange plus LATENESS_PER_COMPUTE_S of the rest (late_wait_misses)."""
    lateness = LATENESS_PER_EXCHANGE_S * np.asarray(exchange_s, dtype=np.float64)
    lateness = lateness + LATENESS_PER_COMPUTE_S * np.asarray(compute_s, dtype=np.float64)
    return STEADY_LATE_SHARE * late_wait_misses(lateness, gap_s, get_s)


def shared_steady_misses_per_wait(n: Arr, cores: float) -> Arr:
    """Extension: the GETs that find nothing per steady wait on C shared cores, min(a·n/C, cap)
    (SHARED_MISSES_PER_WORKER_PER_CORE, SHARED_MISSES_MAX)."""
    per_core = np.asarray(n, dtype=np.float64) / cores
    return np.minimum(SHARED_MISSES_PER_WORKER_PER_CORE * per_core, SHARED_MISSES_MAX)


def backoff_poll_times_s(get_s: float = 0.0) -> np.ndarray:
    """When a cold wait's GETs go out, from its start until the gap reaches POLL_MAX_S: each
    one gap after the one before has answered (a GET's round trip, get_s)."""
    times, delay_s = [0.0], POLL_FIRST_S
    while delay_s < POLL_MAX_S:
        times.append(times[-1] + get_s + delay_s)
        delay_s = min(POLL_GROWTH * delay_s, POLL_MAX_S)
    return np.array(times)


def backoff_misses(wait_s: Arr, get_s: float = 0.0) -> Arr:
    """The GETs that find nothing in a cold wait for an object that comes after wait_s: the
    back-off's polls sent before it (then one every POLL_MAX_S plus a round trip get_s)."""
    times = backoff_poll_times_s(get_s)
    wait = np.maximum(np.asarray(wait_s, dtype=np.float64), 0.0)
    early = np.searchsorted(times, wait, side="left").astype(np.float64)
    with np.errstate(invalid="ignore"):  # an infeasible cell's inf wait stays inf
        late = times.size + np.ceil((wait - times[-1]) / (POLL_MAX_S + get_s)) - 1.0
    return np.where(wait <= times[-1], early, late)


def s3_cold_waits_s(
    n: Arr,
    reducers: Arr,
    model_mb: Arr | float,
    get_mb_s: Arr | float,
    put_mb_s: Arr | float,
    get_s: float,
    put_s: float,
    exchange_s: Arr,
) -> tuple[Arr, Arr]:
    """Extension: (gradient wait, state wait) of a link's first iteration, the exchange's time
    (exchange_s: communication + aggregation as the timeline has them) cut in its phases'
    proportions (s3_communication_s: PUT d, GET n·d/k and the sum, PUT 2·d/k, range-GET d).

    Every worker starts the step's exchange when its compute ends, at about the same time:
    a reducer's wait for a gradient lasts the peers' PUT phase; a worker's wait for a state
    slice lasts from its own PUT's end until the reducer wrote the state (the reducer's GET
    phase, its sum, its PUT). The reducer's sum is counted in its GET phase's share: the
    aggregation term's own share of exchange_s is what remains of the four phases' sum."""
    n = np.asarray(n, dtype=np.float64)
    with np.errstate(divide="ignore"):  # k = 0 (a PS cell) is masked by the caller
        part_mb = np.asarray(model_mb, dtype=np.float64) / np.asarray(reducers, np.float64)
    push_s = put_s + np.asarray(model_mb, np.float64) / put_mb_s
    gather_s = get_s + n * part_mb / get_mb_s
    write_s = put_s + 2.0 * part_mb / put_mb_s
    pull_s = get_s + np.asarray(model_mb, np.float64) / get_mb_s
    exchange = np.asarray(exchange_s, dtype=np.float64)
    # What exchange_s holds beyond the four phases (the sum, a shared-core correction) falls
    # between the PUT of the gradients and the state's: the reducer's part.
    rest_s = np.maximum(exchange - (push_s + gather_s + write_s + pull_s), 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):  # an infeasible cell's inf stays inf
        scale = exchange / (push_s + gather_s + write_s + pull_s + rest_s)
        return push_s * scale, (gather_s + rest_s + write_s) * scale


def s3_first_iteration_misses(
    n: Arr, reducers: Arr, grad_wait_s: Arr, state_wait_s: Arr, get_s: float = 0.0
) -> Arr:
    """Extension: the GETs that find nothing in a link's first iteration, where every wait is
    cold (polling.ArrivalEstimate knows nothing yet) and backs off from its start, each poll
    sent once the one before has answered (a GET's round trip, get_s).

    Reducer j's first GATHER_WINDOW gradient waits start with its exchange and back off over
    the peers' PUT (grad_wait_s); each later one starts when an earlier one was answered, all
    gradients in: it finds its object at once. The n − k workers that reduce nothing wait
    state_wait_s for each of the k states; a reducer's own state is written before it reads
    the states, and the other reducers' at the same moment: found at once."""
    n = np.asarray(n, dtype=np.float64)
    k = np.asarray(reducers, dtype=np.float64)
    timed_grads = k * np.minimum(n, GATHER_WINDOW)
    timed_states = np.maximum(n - k, 0.0) * k
    grads = timed_grads * backoff_misses(grad_wait_s, get_s)
    return grads + timed_states * backoff_misses(state_wait_s, get_s)


def s3_exchange_misses(
    n: Arr,
    reducers: Arr,
    grad_wait_s: Arr,
    state_wait_s: Arr,
    iterations: Arr,
    links: Arr,
    steady_per_wait: Arr | float = STEADY_MISSES_PER_WAIT,
    get_s: float = 0.0,
) -> Arr:
    """Extension: the exchange's GETs per iteration that find nothing (S3 bills them too).

    Each of the 2·n·k GETs of an iteration is a wait: a reducer's for a gradient, a worker's
    for a state slice. A link's first two iterations poll with the back-off
    (s3_first_iteration_misses): the first's waits hold the peers' start-up, so the runtime
    learns from the second's (functions.polling.ArrivalEstimate); every later iteration's
    waits miss steady_per_wait (steady_misses_per_wait).
    """
    n = np.asarray(n, dtype=np.float64)
    k = np.asarray(reducers, dtype=np.float64)
    its = np.asarray(iterations, dtype=np.float64)
    steady = np.asarray(steady_per_wait, dtype=np.float64)
    waits = 2.0 * n * k
    cold = s3_first_iteration_misses(n, k, grad_wait_s, state_wait_s, get_s)
    cold_its = s3_cold_iterations(its, links)
    with np.errstate(divide="ignore", invalid="ignore"):  # a PS cell (k = 0) or k_iter = 0
        total = cold_its * cold + (its - cold_its) * waits * steady
        per_iteration = np.where(its > 0, total / its, 0.0)
    return np.asarray(np.where(k > 0, per_iteration, 0.0))


def s3_cold_iterations(iterations: Arr, links: Arr) -> Arr:
    """Extension: the iterations whose waits back off (s3_exchange_misses): each link's first
    and, where it has one, its second."""
    its = np.asarray(iterations, dtype=np.float64)
    first = np.minimum(np.asarray(links, dtype=np.float64), its)
    return first + np.minimum(first, np.maximum(its - first, 0.0))


def s3_link_checkpoint_s(
    model_mb: float,
    reducers: Arr,
    store_mb_s: float,
    s3_mb_s: Arr,
    put_request_s: float,
    list_request_s: float,
    shared_host: bool = False,
) -> Arr:
    """Extension: the S3 exchange's checkpoint at every link's end. Each reducer writes its
    partition (parameters + momentum, 2·d/k) in the PS's format, one PUT, then lists the
    checkpoints to prune the older ones. The write runs at the slower of the store's rate (it
    serialises and signs as a PS shard does: ps_s3_mb_s) and the function's S3 bandwidth;
    where the reducers share one host it takes the whole model's bytes (checkpoint_time_s).
    Measured on 2 cores, MobileNetV2 (9 MB) with one reducer: 0.14-0.16 s a link, where
    nothing was priced before."""
    rate = np.minimum(store_mb_s, np.asarray(s3_mb_s, dtype=np.float64))
    return (
        checkpoint_time_s(model_mb, np.maximum(reducers, 1), rate, put_request_s, shared_host)
        + list_request_s
    )


def s3_state_read_s(model_mb: float, s3_mb_s: Arr, request_s: float) -> Arr:
    """Extension: a re-invoked worker's first read of the trained state: a LIST finds the
    newest iteration, then the k state slices (d in all) are range-GET at once."""
    return 2.0 * request_s + model_mb / np.asarray(s3_mb_s, dtype=np.float64)


def s3_exchange_stored_mb(n: Arr, model_mb: float) -> Arr:
    """Extension: the exchange's objects in S3 at once, 2·(n + 2)·d: at most two iterations'
    objects live (n gradients d and the state 2·d each; one iteration is written while the
    previous one is read, then deleted)."""
    return 2.0 * (np.asarray(n, dtype=np.float64) + 2.0) * model_mb


def s3_exchanged_model_mb(stored_mb: Arr, n: Arr) -> Arr:
    """The model size d an exchange's s3_exchange_stored_mb was computed for (0 in a PS cell)."""
    return np.asarray(stored_mb, dtype=np.float64) / (2.0 * (np.asarray(n, np.float64) + 2.0))


def s3_cell_misses(
    catalog: Catalog,
    n: Arr,
    reducers: Arr,
    model_mb: Arr | float,
    exchange_s: Arr,
    iterations: Arr,
    links: Arr,
    iteration_s: Arr,
) -> Arr:
    """s3_exchange_misses of cells, their waits cut from exchange_s (the timeline's
    communication + aggregation per iteration) in its phases' proportions (s3_cold_waits_s),
    the steady ones priced over the exchange and the rest of the iteration (iteration_s, the
    whole iteration; steady_misses_per_wait) at the runtime's poll gap and a GET's round trip:
    its latency and, where measured (the local machine), its CPU on the client and on the
    server.

    The proportions are the phases' at the full S3 bandwidth, the same at every memory: a
    cell's misses then never grow with its memory, as its exchange does not, and the search
    bounds a block of memories' cost from below by its top memory's (Cells.others_floor_usd)."""
    get_mb_s = catalog.s3_max_mb_s
    put_mb_s = get_mb_s if catalog.s3_put_mb_s is None else catalog.s3_put_mb_s
    grad_s, state_s = s3_cold_waits_s(
        n, reducers, model_mb, get_mb_s, put_mb_s, catalog.s3_request_s, catalog.put_latency_s,
        exchange_s,
    )  # fmt: skip
    # The runtime polls every cost_balanced_gap_s: POLL_FIRST_S from a fleet of 4.8 GB up (a
    # smaller one polls less often, so this prices it a few misses high), and a GET's round
    # trip (between a cold wait's polls too) is at least its latency and its CPU at a full
    # core. Both kept apart from the memory so a cell's misses at one link split never grow
    # with it: the search bounds a pair's cost from below by its non-Lambda cost at the top
    # memory (Cells.others_floor_usd).
    get_s = (
        catalog.s3_request_s + (catalog.s3_request_cpu_s or 0.0) + (catalog.s3_server_cpu_s or 0.0)
    )
    cores = catalog.step_cores
    if cores:  # shared cores: the arrivals spread with the workers per core
        steady = shared_steady_misses_per_wait(n, cores)
    else:
        exchange = np.asarray(exchange_s, dtype=np.float64)
        with np.errstate(invalid="ignore"):  # an infeasible cell's inf - inf
            rest_s = np.maximum(np.asarray(iteration_s, dtype=np.float64) - exchange, 0.0)
            steady = steady_misses_per_wait(exchange, np.nan_to_num(rest_s), POLL_FIRST_S, get_s)
    return s3_exchange_misses(n, reducers, grad_s, state_s, iterations, links, steady, get_s)


def s3_cell_terms(
    profile: WorkloadProfile, catalog: Catalog, n: Arr, reducers: Arr, memory_mb: Arr
) -> tuple[Arr, Arr]:
    """(communication, aggregation) per iteration of an S3 exchange at memory m: transfers on
    B_s(m), the reduction at the share's rate (shared cores: local_machine.shared_s3_cell_terms)."""
    return s3_exchange_terms(profile, catalog, n, reducers, profile.model_bytes / 1e6, memory_mb)


def s3_exchange_terms(
    profile: WorkloadProfile,
    catalog: Catalog,
    n: Arr,
    reducers: Arr,
    model_mb: Any,
    memory_mb: Arr,
) -> tuple[Arr, Arr]:
    """s3_cell_terms of a model of `model_mb` (a number, or an array broadcast element-wise
    against n, reducers and memory: a pipeline's stages at once)."""
    bw = s3_bandwidth_mb_s(
        memory_mb, catalog.s3_mb_s_per_memory_mb, catalog.s3_mb_s_intercept, catalog.s3_max_mb_s
    )
    share = vcpu_share(memory_mb, catalog.mb_per_vcpu, catalog.max_vcpu)
    comm = s3_communication_s(
        n, reducers, model_mb, bw, catalog.s3_request_s, catalog.put_latency_s, catalog.s3_put_mb_s
    )
    reduce = s3_reduce_mb_s(profile.ps_aggregation_mb_s_per_core, share)
    return comm, s3_aggregation_s(n, reducers, model_mb, reduce)
