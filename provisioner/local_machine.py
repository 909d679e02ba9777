"""The local machine's shared-core corrections: n workers and the PS shards on C shared cores."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from provisioner.catalog import Catalog
from provisioner.cells import NTerms, Step
from provisioner.local_s3 import s3_cpu_floor_s, s3_iteration_requests
from provisioner.local_warmup import warmup_s
from provisioner.profile import WorkloadProfile
from provisioner.quota import bsp_steps_s, quota_compute_s, vcpu_share
from provisioner.s3exchange import s3_cell_terms, s3_latency_s
from provisioner.shared_cores import shared_slowdown
from provisioner.terms import (
    Arr,
    burst_iterations,
    checkpoint_time_s,
    compute_time_s,
    load_overhead_s,
)


def applies(catalog: Catalog) -> bool:
    """Whether `catalog` describes shared cores (the local machine): any figure of theirs set."""
    return (
        catalog.total_vcpu is not None
        or catalog.compute_cores is not None
        or catalog.init_cores is not None
        or bool(catalog.init_cores_by_n)
    )


def corrected_n_terms(
    nt: NTerms,
    profile: WorkloadProfile,
    catalog: Catalog,
    core_rate_samples_s: Arr,
    burst_s: Arr,
) -> NTerms:
    """model.n_terms' per-n terms on shared cores: the exchange shared with the other workers
    and floored at the loop's measured exchange (PS cells), the steps slowed by each other
    (parallel_speed) and floored at R(1)·C/n, the checkpoint through the one local S3 server,
    the cold starts taking turns."""
    total = catalog.total_vcpu
    n = nt.n
    # On shared cores the exchange takes at least what the profile's loop measured it to take
    floor = loop_exchange_s(profile.loop_overhead, total) * shared_slowdown(n, total)
    shared = shared_exchange_s(nt.communication_s, n, total)
    comm = np.maximum(shared, floor)
    comm_burst = np.maximum(shared_exchange_s(nt.communication_burst_s, n, total), floor)
    checkpoint = checkpoint_time_s(
        profile.model_bytes / 1e6, np.maximum(nt.ps_count, 1), catalog.ps_s3_mb_s,
        catalog.checkpoint_latency_s, shared_host=total is not None,
    )  # fmt: skip
    if np.any(nt.s3):  # an S3 exchange is shared as well; no periodic checkpoint (link_end_s)
        # its requests' CPU at the smallest memory's share: n_terms' S3 terms bound every memory
        s3 = s3_exchange_s(
            nt.communication_s, n, nt.reducers, catalog, np.asarray(catalog.memory_min_mb)
        )
        comm = np.where(nt.s3, s3, comm)
        comm_burst = np.where(nt.s3, s3, comm_burst)
        checkpoint = np.where(nt.s3, 0.0, checkpoint)
    speed = parallel_speed(n, profile.parallel_speed_ratio, profile.parallel_processes, total)
    floor_rate = shared_core_rate_samples_s(core_rate_samples_s, n, catalog.step_cores)
    return replace(
        nt,
        communication_s=comm,
        exchange_s=comm + nt.aggregation_s,
        checkpoint_s=checkpoint,
        core_compute_s=compute_time_s(nt.local_batch, core_rate_samples_s) / speed,
        compute_floor_s=compute_time_s(nt.local_batch, floor_rate) / speed,
        speed=speed,
        communication_burst_s=comm_burst,
        exchange_burst_s=comm_burst + nt.aggregation_s,
        burst_iterations=burst_iterations(burst_s, comm_burst, nt.iterations),
        startup_s=crowded_startup_s(profile.startup_s, catalog, n),
    )


def corrected_step(
    st: Step,
    profile: WorkloadProfile,
    catalog: Catalog,
    nt: NTerms,
    memory_mb: Arr,
    rate_samples_s: Arr,
) -> Step:
    """model.step_terms' iteration on shared cores: the load's CPU at C/n, the step at no more
    than R(1)·C/n, the S3 exchange shared, the loop's own exchange CPU, the wait for the slowest
    rank, the iteration held to the CPU of every worker and shard, crowded first steps and the
    fresh environments' starts taking turns."""
    total = catalog.total_vcpu
    share = vcpu_share(memory_mb, catalog.mb_per_vcpu, catalog.max_vcpu)
    load = st.transfer_s + load_overhead_s(catalog.load_cpu_s, share, nt.n, total)
    # Under BSP the n workers compute at the same time, so on shared cores even a step the
    # quota would let run at full speed runs at no more than C/n cores.
    throttled = np.maximum(
        compute_time_s(nt.local_batch, rate_samples_s) / nt.speed, nt.compute_floor_s
    )
    core = np.maximum(nt.core_compute_s, nt.compute_floor_s)
    comm_base, comm_burst = st.communication_s, st.communication_burst_s
    exch_base, exch_burst = st.exchange_s, st.exchange_burst_s
    if np.any(nt.s3):  # step_terms put the S3 exchange at this memory: shared here
        s3_comm = s3_exchange_s(st.communication_s, nt.n, nt.reducers, catalog, memory_mb)
        comm_base = np.where(nt.s3, s3_comm, comm_base)
        exch_base = np.where(nt.s3, s3_comm + st.aggregation_s, exch_base)
        exch_burst = np.where(nt.s3, exch_base, exch_burst)
        comm_burst = np.where(nt.s3, s3_comm, comm_burst)
    # The exchange's CPU: the catalog's share of its wall time as one worker alone sees it (the
    # others' CPU stretches the wall on shared cores, not this worker's own CPU), or what the
    # profile measured the loop spending beyond its step, whichever is more (PS exchanges only:
    # an S3 exchange's requests are held at the share in its own floor, s3_request_floor_s, and
    # held again here they made digits at 0.19 vCPU wait 0.37 s an iteration where 0.28 s was
    # measured and the floor alone said 0.28).
    loop_cpu = np.where(nt.s3, 0.0, loop_extra_cpu_s(profile.loop_extra_cpu, share, total))
    cpu_base, cpu_burst = (
        np.where(
            nt.s3,
            0.0,
            np.maximum(
                own_exchange_cpu_s(catalog.exchange_cpu_fraction, comm, nt.n, total), loop_cpu
            ),
        )
        for comm in (comm_base, comm_burst)
    )
    period = catalog.cpu_throttle_period_s
    step_base, step_burst = bsp_steps_s(
        core, throttled, exch_base, exch_burst, cpu_base, cpu_burst, share, period
    )
    # The quota throttles whichever phase runs when it runs out: the exchange's own CPU is
    # timed as communication, so its wait is there too (quota_compute_s).
    with np.errstate(invalid="ignore"):  # inf − inf of an infeasible cell stays NaN → masked
        held_base = step_base - quota_compute_s(
            core, throttled, exch_base, cpu_base, step_base, period
        )
        held_burst = step_burst - quota_compute_s(
            core, throttled, exch_burst, cpu_burst, step_burst, period
        )
    # Every rank waits for the iteration's slowest step: idle in the exchange, but held out of
    # the quota's refund (cfs_step_s above), so the compute part stays as it was and the
    # search's bound on it (search._compute_bound) holds.
    wait = lockstep_wait_s(throttled, nt.n, profile.lockstep_wait_fraction, total)
    # On shared cores an iteration also needs the CPU of every worker and every shard.
    floor = shared_loop_floor_s(profile, catalog, nt, comm_base, st.aggregation_s, loop_cpu)
    # The platform's start of a fresh environment is CPU (an interpreter), so n of them take
    # turns as the start-ups after them do (cold_start_s): on 2 cores it measured 0.19-0.36 s
    # at n ≤ 2 and 0.50-0.61 s at n = 4 and 8.
    start = cold_start_s(catalog.launch_s, nt.n, startup_cores(catalog, nt.n))
    return replace(
        st,
        load_s=load,
        throttled_s=throttled,
        core_s=core,
        communication_s=held_base - st.aggregation_s,
        communication_burst_s=held_burst - st.aggregation_s,
        exchange_s=held_base,
        exchange_burst_s=held_burst,
        step_s=np.maximum(step_base + wait, floor),
        step_burst_s=np.maximum(step_burst + wait, floor),
        wait_s=wait,
        warmup_s=warmup_s(profile, catalog, nt, share),
        start_s=start,
        # at `core`: the step at one core, or the floor n steps take turns within on the cores
        # (the version the held-out rows were re-scored with, seeds 20-28)
        compute_wait_share=waits_in_compute(core, catalog.scheduler_tick_s),
    )


def waits_in_compute(core_s: Arr, tick_s: float) -> Arr:
    """Extension: the share of a step's wait for the cores (its quota run out, or the other
    workers holding the shared cores) that a worker times inside its step, the rest landing in
    the exchange after it.

    The scheduler takes a running process off the cores at a tick (every `tick_s`) or when it
    blocks. The runtime runs out at a uniform point of a burst of c seconds of CPU; the wait is
    served inside the burst only if a tick comes before the burst's end: on average c/(2τ) for
    c < τ, 1 − τ/(2c) beyond. Otherwise the burst runs to its end, the worker blocks in its
    exchange, and the wait is served when it wakes: timed as communication. So the digits MLP's
    sub-millisecond steps keep their own time and long CNN steps take the whole wait. Measured
    on 2 cores (the held-out rows of bench/predict, seeds 20-27): the MLP's PS rows timed
    0.7 ms of compute an iteration where the model put 2.1 ms, and as much more communication;
    this split moved those rows' compute miss from 7.9% of the total to 1.9% and their
    communication's from 9.1% to 3.3%, the total unchanged; a tick from 2 to 20 ms moved each
    by under 0.2 points. tick_s 0: every wait in the step (the split as it was)."""
    c = np.asarray(core_s, dtype=np.float64)
    if tick_s <= 0:
        return np.ones(c.shape)
    with np.errstate(divide="ignore", invalid="ignore"):
        long = 1.0 - tick_s / (2.0 * c)
    return np.where(c < tick_s, c / (2.0 * tick_s), long)


def own_exchange_cpu_s(fraction: float, exchange_s: Arr, n: Arr, total_vcpu: float | None) -> Arr:
    """Extension: a worker's own CPU in its exchange: the catalog's `fraction` (the client's
    CPU over the wall of one exchange alone) of the exchange as one worker alone would take it.
    On shared cores the wall is stretched by the others' CPU (shared_exchange_s); this
    worker's own work is not. Read off the stretched wall, 12 digits-MLP workers at 0.125
    cores each were held 0.53 s an iteration by their quota where they spent 4-13 ms on
    their steps (`python -m emulator` of the 12-worker S3 plan with --cpu-scale auto)."""
    return fraction * np.asarray(exchange_s, dtype=np.float64) / shared_slowdown(n, total_vcpu)


def shared_s3_cell_terms(
    profile: WorkloadProfile, catalog: Catalog, n: Arr, reducers: Arr, memory_mb: Arr
) -> tuple[Arr, Arr]:
    """s3exchange.s3_cell_terms on the catalog's cores: the transfers shared as the PS
    exchange is, and never faster than its requests' CPU (local_s3.s3_cpu_floor_s; the same
    terms where every function has its own cores)."""
    comm, agg = s3_cell_terms(profile, catalog, n, reducers, memory_mb)
    return s3_exchange_s(comm, n, reducers, catalog, memory_mb), agg


def s3_request_floor_s(n: Arr, reducers: Arr, memory_mb: Arr, catalog: Catalog) -> Arr:
    """local_s3.s3_cpu_floor_s with the catalog's figures at memory_mb's share, on the cores
    the steps get (compute_cores, else total_vcpu); 0 on AWS (total_vcpu None)."""
    cores = catalog.step_cores if catalog.total_vcpu else None
    share = vcpu_share(memory_mb, catalog.mb_per_vcpu, catalog.max_vcpu)
    return s3_cpu_floor_s(
        n, reducers, share, catalog.s3_request_cpu_s, catalog.s3_server_cpu_s, cores
    )


def s3_exchange_s(comm_s: Arr, n: Arr, reducers: Arr, catalog: Catalog, memory_mb: Arr) -> Arr:
    """The S3 exchange's communication on shared cores: its latency path `comm_s`
    (s3exchange.s3_communication_s) shared (shared_s3_path_s), or its requests' CPU
    (s3_request_floor_s), whichever is longer."""
    shared = shared_s3_path_s(comm_s, n, catalog)
    return np.maximum(shared, s3_request_floor_s(n, reducers, memory_mb, catalog))


def shared_s3_path_s(comm_s: Arr, n: Arr, catalog: Catalog) -> Arr:
    """Extension: the S3 exchange's latency path on shared cores: its bytes stretched as the PS
    exchange's are (shared_exchange_s: n clients' transfers through the one server on the same
    cores), its four requests' latencies as they are. A request's CPU on the shared cores is
    what s3_request_floor_s bounds; stretched here too, the digits MLP's requests were counted
    twice: 4 workers at 0.40 vCPU, 65 ms an iteration predicted, 41 ms measured, the floor 40."""
    latency = s3_latency_s(catalog.s3_request_s, catalog.put_latency_s)
    comm = np.asarray(comm_s, dtype=np.float64)
    bytes_s = np.maximum(comm - latency, 0.0)
    return np.minimum(comm, latency) + shared_exchange_s(bytes_s, n, catalog.total_vcpu)


def shared_core_rate_samples_s(core_rate_samples_s: Arr, n: Arr, cores: float | None) -> Arr:
    """Extension: R(1)·C/n, a worker's rate when n functions compute at once on C shared cores
    (the local platform: the catalog's compute_cores, else total_vcpu); inf if unlimited.

    The scheduler time-slices the n processes at full single-core speed (no quota binds when
    C/n is below the memory's share), so a worker trains at its one-core rate for C/n of the
    time: measured on 2 cores, 8 MobileNetV2 workers took 3.8 s an iteration, R(1)·C/n
    predicts 3.4 s and R(C/n) (the points timed under a quota of C/n) 4.8 s. C is every core
    the steps get, not the memory limit's total_vcpu: k free-running copies at 0.72 vCPU got
    0.93-1.02 of C = 2 on 2 cores (bench/results/shared-cores.md). What n steps at once lose
    to each other (caches, memory bandwidth) is the profile's parallel_speed_ratio, apart.
    """
    n = np.asarray(n, dtype=np.float64)
    if cores is None:
        return np.full(n.shape, np.inf)
    return np.asarray(core_rate_samples_s, dtype=np.float64) * cores / np.maximum(n, 1.0)


def parallel_speed(n: Arr, ratio: float | None, processes: int, total_vcpu: float | None) -> Arr:
    """Extension: a worker's compute speed while n workers compute at once on shared cores,
    relative to alone: 1 at n = 1, the profile's `ratio` (measured with `processes` = the
    machine's cores busy) from n = processes on, linear in between; 1 where every function has
    its own cores (AWS: total_vcpu None) or nothing was measured.

    Workers share caches and memory bandwidth: on 2 cores, two MobileNetV2 steps at once each
    run slower than one alone, so a profile timed alone overstates n ≥ 2 workers in lockstep.
    The ratio is measured in lockstep (the ranks of one BSP loop, against one child alone in the
    same loop), where every step starts at once: measured on 2 cores, 0.868 for MobileNetV2.
    """
    n = np.asarray(n, dtype=np.float64)
    if total_vcpu is None or ratio is None or processes < 2:
        return np.ones(n.shape)
    busy = (np.clip(n, 1.0, float(processes)) - 1.0) / (processes - 1.0)
    return 1.0 - (1.0 - ratio) * busy


def shared_exchange_s(exchange_s: Arr, n: Arr, total_vcpu: float | None) -> Arr:
    """Extension: the exchange when n workers and the PS share C cores: exchange · max(1, n/C).

    On loopback an exchange is CPU, not wire (the client's and the PS's Python, syscalls and
    copies), so n workers exchanging at once share the cores as n cold starts do: measured on
    2 cores, 8 MLP workers spent 7.4 ms an iteration in the exchange, one alone 0.6 ms.
    Where every function has its own cores (AWS) it is the exchange as it is.
    """
    if total_vcpu is None:
        return np.asarray(exchange_s, dtype=np.float64)
    return exchange_s * shared_slowdown(n, total_vcpu)


def crowded_step_factor(n: Arr, ratio: float | None, processes: int, cores: float | None) -> Arr:
    """Extension: how much more CPU a step takes while n workers, more than the C shared cores,
    take turns on them: 1 while n ≤ C, the profile's `ratio` (measured with `processes` > C
    workers and a PS shard) from n = processes on, linear in between; 1 where every function
    has its own cores (AWS: cores None) or nothing was measured. In a BSP loop every worker
    blocks on the exchange each iteration, so once the workers outnumber the cores each step
    starts on caches another process filled. The shards are not counted: they idle while the
    workers compute (measured on 2 cores, digits MLP, `python -m bench.shared_loop`: the
    step's CPU in the loop 1.17× alone with 2 workers and 1 shard, 1.16× with 2 and 2,
    2.0-2.4× with 4 or 8 workers).
    """
    n = np.asarray(n, dtype=np.float64)
    if cores is None or ratio is None or processes <= cores:
        return np.ones(n.shape)
    return 1.0 + (ratio - 1.0) * np.clip((n - cores) / (processes - cores), 0.0, 1.0)


def shared_cpu_iteration_s(n: Arr, worker_cpu_s: Arr, ps_cpu_s: Arr, cores: float | None) -> Arr:
    """Extension: the shortest an iteration can take when the workers and the PS shards share
    C cores: (n · a worker's CPU per iteration + the shards' CPU per iteration) / C; 0 where
    every function and the PS have their own cores (AWS: cores None).

    Measured on 2 cores (`python -m bench.shared_loop`, bench/results/shared-loop.md): 8
    digits-MLP workers and 2 shards spent 1.98 ms of CPU each and 5.89 ms in the shards an
    iteration, (15.8 + 5.9)/2 = 10.9 ms against 11.6 ms measured; the quota-and-exchange step
    (cfs_step_s) of one worker alone said about 4 ms."""
    if cores is None:
        return np.zeros(np.shape(worker_cpu_s))
    n = np.asarray(n, dtype=np.float64)
    return (n * np.asarray(worker_cpu_s, dtype=np.float64) + ps_cpu_s) / cores


def init_cores_at(
    n: Arr, init_cores: float | None, by_n: tuple[tuple[float, float], ...] = ()
) -> Arr | float | None:
    """Extension: the cores n cold starts at once effectively get: the catalog's points per n
    (`by_n`) interpolated linearly and flat beyond the ends, else `init_cores` at every n (None:
    unlimited, AWS). Measured per n because contention is not one figure: on 2 cores the
    start-ups in bench/predict took 1.0× one alone at n = 2 (2 cores), 2.3× at n = 4 (1.74) and
    4.2× at n = 8 (1.9), so the one figure from k = 4 (1.7) over-predicted n = 2 by 18% and
    n = 8 by 12%."""
    if not by_n:
        return init_cores
    xs, ys = zip(*by_n, strict=True)
    return np.asarray(np.interp(np.asarray(n, dtype=np.float64), xs, ys), dtype=np.float64)


def cold_start_s(
    startup_s: float, n: Arr, init_cores: Arr | float | None, crowded_s: float | None = None
) -> Arr:
    """Extension: the first link's start-up when n functions start at once on C shared cores.

    A cold start's import is CPU-bound; on AWS every function has its own cores, but on the
    local platform n imports share C cores, so each takes max(1, n/C) × its time alone. C is the
    machine's cores, not the workers' quota total: the import runs in the init phase at burst
    CPU, outside the quota (measured on 2 cores, bench/predict, the median start-up of three
    runs: 1.24-1.66 s at n = 1, 1.29-1.73 s at n = 2, 2.85-3.34 s at n = 4, 5.43-6.24 s at
    n = 8: about n/2 × the n = 1 figure, where C = 1.5 predicted 4.0 s and 8.0 s).

    `crowded_s` is the part of `startup_s` the crowd slows: the import alone, which every
    workload shares (calibration's runners import the same worker module); the rest (the
    workload's build, its first pull) is its own and is not stretched. None: all of it, as
    catalogs without the figure read. With the whole anchored start-up stretched, nine CNN
    workers were predicted 6.26 s against 5.60 s measured: the CNN's start-up alone read 1.22 s
    where the digits MLP's read 1.09 s, yet both imported for 5.3-5.5 s in a crowd of nine.
    """
    slowdown = shared_slowdown(n, init_cores)
    crowded = startup_s if crowded_s is None else min(crowded_s, startup_s)
    return startup_s + crowded * (slowdown - 1.0)


def crowded_startup_s(startup_s: float, catalog: Catalog, n: Arr) -> Arr:
    """A first link's start-up of n workers at once on `catalog`: cold_start_s with its init
    cores at n and its import alone (the profile's `startup_s` on AWS)."""
    return cold_start_s(startup_s, n, startup_cores(catalog, n), catalog.init_import_s)


def startup_cores(catalog: Catalog, n: Arr) -> Arr | float | None:
    """The cores n cold starts at once share on `catalog`: its init cores (per n where it
    measured them), else its workers' total_vcpu (None: unlimited, AWS)."""
    return init_cores_at(n, catalog.init_cores or catalog.total_vcpu, catalog.init_cores_by_n)


def loop_extra_cpu_s(
    points: tuple[tuple[float, float], ...], share: Arr, total_vcpu: float | None
) -> Arr:
    """Extension: CPU seconds an iteration of the worker's loop spends beyond the back-to-back
    step, at the worker's share: the profile's points measured through a loopback PS,
    interpolated linearly and flat beyond the ends; 0 where every function has its own cores
    (AWS: total_vcpu None) or nothing was measured. The points are made non-increasing in the
    share (running minimum), as the rate curve is made non-decreasing: more memory is never
    slower, so the search's T(m) keeps its shape (the 2-vCPU point of digits-mlp, two torch
    threads, read 0.47 ms against 0.17 at 1 vCPU).

    It is the exchange's own CPU and what interleaving the exchange costs the step: on 2 cores
    the digits MLP's loop took 0.20-0.26 ms of CPU an iteration beyond its step, where the
    catalog's exchange CPU share makes 0.13 ms of it."""
    s = np.asarray(share, dtype=np.float64)
    if total_vcpu is None or not points:
        return np.zeros(np.shape(s))
    xs, ys = zip(*points, strict=True)
    falling = np.minimum.accumulate(np.asarray(ys, dtype=np.float64))
    return np.asarray(np.interp(s, xs, falling), dtype=np.float64)


def loop_exchange_s(points: tuple[tuple[float, float], ...], total_vcpu: float | None) -> float:
    """Extension: the wall seconds one worker's exchange alone takes on loopback: the profile's
    loop overhead (an iteration of the worker's loop through a loopback PS shard beyond its
    back-to-back step) at 1 vCPU, interpolated, where one torch thread never meets the quota, or
    at a larger share measured, whichever is least; 0 where every function has its own cores
    (AWS: total_vcpu None) or nothing was measured.

    From 1 vCPU up the exchange is the same single-threaded work that meets no quota, so each
    such point times the same thing, and a machine's noise only adds to a timing: the least is
    the least disturbed. The digits profile read 1.06 ms at 1 vCPU and 0.37 ms at
    2; its runs' exchange took 0.37 ms an iteration at 1.5 vCPU (the median of five,
    bench/results/predict.md).

    On loopback the exchange is the worker's and the shard's CPU on the critical path (pickling
    nothing, but syscalls, copies, the shard's Python), not the wire the catalog's bandwidth and
    round trip describe: the digits MLP's exchange took 0.28 ms an iteration, the catalog's
    transfer and round trip 0.11 ms (bench/results/predict-platform/). At lower
    shares the loop's overhead also holds the quota's throttling, which cfs_step_s models: the
    figure at 0.39 vCPU counted twice made the digits 12 s plan 13% slow (bench.predict
    --rescore)."""
    if total_vcpu is None or not points:
        return 0.0
    xs, ys = zip(*points, strict=True)
    above = [y for x, y in points if x > 1.0]
    return float(min([np.interp(1.0, xs, ys), *above]))


def lockstep_wait_s(
    throttled_s: Arr, n: Arr, fraction: float | None, total_vcpu: float | None
) -> Arr:
    """Extension: the wait an iteration's slowest rank adds to every other rank's exchange under
    BSP, as the profile's lockstep_wait_fraction of the step x (n ≥ 2 on shared cores; 0 on AWS,
    where it was not measured, and at n = 1, where no rank waits for another).

    Steps of equal work do not take equal time (on 2 cores the CNN's 1-vCPU step went 0.105 to
    0.155 s in spells of about 2 s), and each rank waits for the slowest before the next one
    starts: on 2 cores the straggler's communication measured 4-6% of the CNN's step and 2-5%
    of MobileNetV2's beyond the exchange the model held (bench/predict). Held the
    same at every n ≥ 2: the CNN's waits read 4.2-5.4% at n = 2, 5.8% at 4 and 4.7% at 8. A
    fraction of x, which falls with memory, so T(m) keeps its non-increasing shape."""
    x = np.asarray(throttled_s, dtype=np.float64)
    if total_vcpu is None or not fraction:
        return np.zeros(np.broadcast_shapes(x.shape, np.shape(n)))
    return np.where(np.asarray(n) >= 2, fraction * x, 0.0)


def shared_loop_floor_s(
    profile: WorkloadProfile,
    catalog: Catalog,
    nt: NTerms,
    communication_s: Arr,
    aggregation_s: Arr,
    loop_cpu_s: Arr,
) -> Arr:
    """shared_cpu_iteration_s of the BSP loop on the platform's shared cores (0 on AWS).

    A worker's CPU per iteration: its step at full core speed, slowed by the steps beside it
    (parallel_speed) or crowded (crowded_step_factor), whichever costs more, and the exchange's
    own CPU (the catalog's share of the exchange as one worker alone sees it,
    or the profile's loop extra, whichever is more). The shards': a push and a pull per worker
    and shard (the catalog's ps_request_cpu_s) and the averaging of n gradients. An S3 exchange
    has no shard and no PS client: its CPU is every request's on the client and on the server
    (local_s3.s3_iteration_requests), the CPU its own floor counts (s3_request_floor_s)."""
    cores = catalog.step_cores
    if catalog.total_vcpu is None or cores is None:
        return np.zeros(np.shape(nt.core_compute_s))
    shards = np.where(nt.s3, 0.0, np.asarray(nt.ps_count, dtype=np.float64))
    crowded = crowded_step_factor(
        nt.n, profile.crowded_step_ratio, profile.crowded_processes, cores
    )
    alone_exchange_s = communication_s / shared_slowdown(nt.n, catalog.total_vcpu)
    exchange_cpu = np.maximum(catalog.exchange_cpu_fraction * alone_exchange_s, loop_cpu_s)
    # The crowd's ratio was measured with every core busy, so it holds what steps at once lose
    # to each other (parallel_speed, in core_compute_s) already: the larger of the two counts.
    worker_cpu = nt.core_compute_s * np.maximum(1.0, crowded * nt.speed) + np.where(
        nt.s3, 0.0, exchange_cpu
    )
    request_cpu_s = (catalog.s3_request_cpu_s or 0.0) + (catalog.s3_server_cpu_s or 0.0)
    ps_cpu = np.where(
        nt.s3,
        s3_iteration_requests(nt.n, nt.reducers, cores) * request_cpu_s,
        nt.n * shards * catalog.ps_request_cpu_s + shards * np.asarray(aggregation_s),
    )
    return shared_cpu_iteration_s(nt.n, worker_cpu, ps_cpu, cores)
