"""The performance and cost model: λDNN's equations plus this project's extensions.

Every term is a small pure function over numpy arrays (scalars broadcast), so the planner can
evaluate millions of (n, m, arch, PS) cells at once and a single plan is the same computation on
one cell. Symbols follow λDNN (Xu et al., IEEE TC 71(2), 2022, §3): n functions of m MB, local
batch b_l, global batch b_g = n·b_l, n_t samples of d_t bytes, model of d_m bytes, e epochs.
Bandwidths are in decimal MB/s, sizes in MB = 10^6 bytes, /tmp in MiB as Lambda configures it.
A cell exchanges gradients through EC2 parameter servers (λDNN) or, with k > 0 reducers, through
S3 (issue 13: the S3 section below); n_terms and timeline pick the terms per cell.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from provisioner.catalog import Catalog, gbps_to_mb_s
from provisioner.profile import RateCurve, WorkloadProfile

Arr = npt.NDArray[Any]
MIB = 1024 * 1024
EPHEMERAL_HEADROOM_MB = 64  # room for the runtime's own scratch files next to shard + checkpoint


# --- λDNN's training-time terms ---------------------------------------------------------------


def local_batch(n: Arr, profiled_local_batch: int, max_global_batch: int) -> Arr:
    """λDNN local-batch rule: b_l = b_l^f while n·b_l^f ≤ b_g^max, else ⌊b_g^max / n⌋."""
    n = np.asarray(n, dtype=np.int64)
    capped = max_global_batch // np.maximum(n, 1)
    return np.where(n * profiled_local_batch <= max_global_batch, profiled_local_batch, capped)


def iterations(dataset_samples: int, epochs: int, global_batch: Arr) -> Arr:
    """λDNN iteration count k = ⌈n_t·e / b_g⌉ (integer arithmetic, no float rounding)."""
    gb = np.maximum(np.asarray(global_batch, dtype=np.int64), 1)
    return -(-(dataset_samples * epochs) // gb)


def s3_bandwidth_mb_s(memory_mb: Arr, per_memory_mb: float, intercept: float, cap: float) -> Arr:
    """λDNN B_s(m) = min(α2·m + β2, B_s^max): S3 → function bandwidth grows with memory."""
    return np.minimum(per_memory_mb * np.asarray(memory_mb, dtype=np.float64) + intercept, cap)


def load_time_s(dataset_mb: float, n: Arr, s3_mb_s: Arr) -> Arr:
    """λDNN t_load = d_t / (n·B_s(m)): each function reads its 1/n shard of the dataset."""
    return dataset_mb / (np.asarray(n, dtype=np.float64) * s3_mb_s)


def vcpu_share(memory_mb: Arr, mb_per_vcpu: float, max_vcpu: float) -> Arr:
    """Lambda's CPU credit: proportional to memory (1,769 MB = 1 vCPU), capped at max vCPUs."""
    return np.minimum(np.asarray(memory_mb, dtype=np.float64) / mb_per_vcpu, max_vcpu)


def training_rate_samples_s(curve: RateCurve, share: Arr, memory_mb: Arr) -> Arr:
    """R(m), extending λDNN's linear fit R = α1·m + β1 to measured points.

    Points (keyed by vCPU share, or by memory) are made non-decreasing (running maximum: more
    CPU never trains slower), interpolated linearly, proportional below the first point and flat
    beyond the last.
    """
    if curve.is_linear:
        alpha = float(curve.alpha1_samples_s_per_mb or 0.0)
        beta = float(curve.beta1_samples_s or 0.0)
        return np.maximum(alpha * np.asarray(memory_mb, dtype=np.float64) + beta, 0.0)
    by_memory = bool(curve.memory_points_mb)
    xs = np.asarray(curve.memory_points_mb if by_memory else curve.vcpu_shares, dtype=np.float64)
    ys = np.maximum.accumulate(np.asarray(curve.samples_per_s, dtype=np.float64))
    x = np.asarray(memory_mb if by_memory else threaded_share(share), dtype=np.float64)
    below = ys[0] * x / xs[0]
    return np.where(x < xs[0], below, np.interp(x, xs, ys))


def threaded_share(share: Arr) -> Arr:
    """The share a worker can use: min(s, max(1, ⌊s⌋)), as it runs max(1, ⌊s⌋) torch threads.

    functions/worker.torch_threads sets one thread per whole vCPU, so between whole vCPUs the
    extra fraction idles (measured: MobileNetV2 at 1.5 vCPU trains no faster than at 1.0) and
    points measured by vCPU share are read at this share. Memory-keyed and linear curves
    (λDNN's runtime, all cores busy) are not.
    """
    s = np.asarray(share, dtype=np.float64)
    return np.minimum(s, np.maximum(1.0, np.floor(s)))


def load_overhead_s(load_cpu_s: float | None, share: Arr, n: Arr, total_vcpu: float | None) -> Arr:
    """Extension: the load's CPU-bound part (S3 client, two requests, np.load) at the worker's
    share: load_cpu_s / min(1, s, C/n). Single-threaded, so more than one vCPU does not help;
    on C shared cores n loads at once run at C/n each (measured on 2 cores: 0.3 s at 1 vCPU,
    0.5 s at 0.58, 1.3–1.7 s with 8 workers)."""
    s = np.minimum(np.asarray(share, dtype=np.float64), 1.0)
    if total_vcpu is not None:
        s = np.minimum(s, total_vcpu / np.maximum(np.asarray(n, dtype=np.float64), 1.0))
    return (load_cpu_s or 0.0) / s


def compute_time_s(local_batch_: Arr, rate_samples_s: Arr) -> Arr:
    """λDNN t_comp = b_l / R(m): one forward + backward pass over the local batch."""
    with np.errstate(divide="ignore"):
        return np.asarray(local_batch_, dtype=np.float64) / rate_samples_s


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


def shared_slowdown(n: Arr, total_vcpu: Arr | float | None) -> Arr:
    """Extension: max(1, n/C), how much longer n CPU-bound tasks at once take on C shared
    cores than one alone; 1 where every function has its own cores (AWS: total_vcpu None)."""
    n = np.asarray(n, dtype=np.float64)
    if total_vcpu is None:
        return np.ones(n.shape)
    return np.maximum(1.0, n / total_vcpu)


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


def cold_start_s(startup_s: float, n: Arr, init_cores: Arr | float | None) -> Arr:
    """Extension: the first link's start-up when n functions start at once on C shared cores.

    A cold start (imports, model build) is CPU-bound; on AWS every function has its own cores,
    but on the local platform n start-ups share C cores, so each takes startup · max(1, n/C).
    C is the machine's cores, not the workers' quota total: the import runs in the init phase at
    burst CPU, outside the quota (measured on 2 cores, bench/predict 2026-11-24, the median
    start-up of three runs: 1.24-1.66 s at n = 1, 1.29-1.73 s at n = 2, 2.85-3.34 s at n = 4,
    5.43-6.24 s at n = 8: about n/2 × the n = 1 figure, where C = 1.5 predicted 4.0 s and 8.0 s).
    """
    return startup_s * shared_slowdown(n, init_cores)


def startup_cores(catalog: Catalog, n: Arr) -> Arr | float | None:
    """The cores n cold starts at once share on `catalog`: its init cores (per n where it
    measured them), else its workers' total_vcpu (None: unlimited, AWS)."""
    return init_cores_at(n, catalog.init_cores or catalog.total_vcpu, catalog.init_cores_by_n)


def crowded_warmup_s(
    n: Arr, alone_s: Arr, crowd_s: Arr | None, processes: int, cores: float | None
) -> Arr:
    """Extension: the wall seconds a cold process's slower first steps add when n workers take
    them at once on C shared cores: each pays w(n) seconds of CPU and n of them share C cores,
    so max(1, n/C) · w(n). w is the excess alone (`alone_s`) up to n = C, the crowd's
    (`crowd_s`, measured with `processes` > C workers) at n = processes, and grows with
    log(n/C) in between and beyond; `alone_s` wherever every function has its own cores (AWS:
    cores None). A first step faults its memory in, and the kernel's time for that grows with
    the processes taking turns on the cores: MobileNetV2's first step at batch 32 spent 0.51 s
    in the kernel alone, 0.48 s in 2, 1.13 s in 4 and 1.7 s in 8 on 2 cores (0.5 + 0.6 per
    doubling of n/C; the user time and the steps after it did not grow), so 8 workers on 2
    cores spent 6-9 s on their first steps where the warm-up alone predicted under 1 s
    (bench/results/fixed-cost.md)."""
    n = np.asarray(n, dtype=np.float64)
    alone = np.asarray(alone_s, dtype=np.float64)
    if cores is None:
        return np.broadcast_to(alone, np.broadcast_shapes(n.shape, alone.shape)).copy()
    excess = alone
    if crowd_s is not None and processes > cores:
        doublings = np.log(np.maximum(n, cores) / cores) / np.log(processes / cores)
        excess = alone + np.maximum(0.0, np.asarray(crowd_s) - alone) * doublings
    return shared_slowdown(n, cores) * excess


def cfs_step_s(core_s: Arr, throttled_s: Arr, idle_s: Arr, period_s: float) -> Arr:
    """Extension of λDNN's t_comp + t_comm to a CPU quota refilled every period (Linux CFS;
    Lambda throttles the same way, every 20 ms: pwrdrvr/lambda-dispatch issue 246).

    x = b_l/R(s) is the compute time the profile measured back to back at share s; c = b_l/R(1)
    the same work at full single-core speed; the worker then idles e seconds (the exchange).
    Its quota is q = s·P per period P, with s = c/x its effective share. The compute takes c
    plus the time it waits for a refill, the larger of
    - the fluid wait x − c − e: the average share cannot exceed s, and the idle e gives quota
      back (all of it when c + e ≪ P);
    - the fresh-quota wait (P−q)/P·[(c−q) + (P−q)(⌈c/q⌉ − 3/2)] of a step starting at a
      uniformly random phase with a full quota (0 when c ≤ q), weighted by min(1, (c + e)/P),
      the chance that a refill came between two starts.
    So compute → x when e → 0 or c ≫ q, = c when the demand fits the quota, and the step is
    non-decreasing in x and in e (the planner's T(m) stays non-increasing). s ≥ 1 (x ≤ c) or
    P = 0: x + e, λDNN's step. Written as max(x, c + e + wait) so that a step the fluid bound
    decides is x to the last bit, whatever e (PS types that differ only in e tie exactly).
    """
    c = np.asarray(core_s, dtype=np.float64)
    x = np.asarray(throttled_s, dtype=np.float64)
    e = np.asarray(idle_s, dtype=np.float64)
    if period_s <= 0:
        return x + e
    p = period_s
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        q = p * c / x
        # ⌈c/q⌉ = ⌈x/P⌉, less a relative hair so an exact multiple does not round up
        refills = np.ceil(x / p * (1.0 - 1e-12))
        fresh = np.where(c > q, (p - q) / p * ((c - q) + (p - q) * (refills - 1.5)), 0.0)
        # A wait is never negative (with one refill and c barely above q the expression is):
        # unclamped, the step dipped below c + e at x = P and rose again as x fell, so more
        # memory was slower (found by hypothesis: 200 → 208 MB, a 20.0000 → 20.0003 ms step).
        fresh = np.maximum(fresh, 0.0)
        chance = np.minimum((c + e) / p, 1.0)
        quota_step = np.maximum(x, c + e + chance * fresh)
    return np.where(x > c, quota_step, x + e)


def cfs_compute_time_s(core_s: Arr, throttled_s: Arr, idle_s: Arr, period_s: float) -> Arr:
    """The compute part of cfs_step_s (the step less its idle exchange)."""
    return cfs_step_s(core_s, throttled_s, idle_s, period_s) - np.asarray(idle_s, dtype=np.float64)


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
    the least disturbed. The digits profile of 2026-11-27 read 1.06 ms at 1 vCPU and 0.37 ms at
    2; its runs' exchange took 0.37 ms an iteration at 1.5 vCPU (the median of five,
    bench/results/predict.md).

    On loopback the exchange is the worker's and the shard's CPU on the critical path (pickling
    nothing, but syscalls, copies, the shard's Python), not the wire the catalog's bandwidth and
    round trip describe: the digits MLP's exchange took 0.28 ms an iteration, the catalog's
    transfer and round trip 0.11 ms (bench/results/predict-platform/, 2026-11-25). At lower
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
    of MobileNetV2's beyond the exchange the model held (bench/predict, 2026-11-26). Held the
    same at every n ≥ 2: the CNN's waits read 4.2-5.4% at n = 2, 5.8% at 4 and 4.7% at 8. A
    fraction of x, which falls with memory, so T(m) keeps its non-increasing shape."""
    x = np.asarray(throttled_s, dtype=np.float64)
    if total_vcpu is None or not fraction:
        return np.zeros(np.broadcast_shapes(x.shape, np.shape(n)))
    return np.where(np.asarray(n) >= 2, fraction * x, 0.0)


def exchange_under_quota(
    core_s: Arr, throttled_s: Arr, exchange_s: Arr, exchange_cpu_s: Arr, share: Arr
) -> tuple[Arr, Arr, Arr]:
    """Extension: the step's (core, throttled, idle) parts for cfs_step_s when part of the
    exchange is the worker's own CPU (on loopback: serialising, syscalls and copies).

    That part is work like compute: within the quota it runs at full speed, and once the quota
    binds it takes 1/s seconds per CPU second at the memory's share s (never faster than one
    core: the client is one thread); it gives no quota back, and only the rest of the exchange
    is idle. Held at s, not at the step's own slowdown x/c: a step timed back to back under a
    quota costs more CPU than alone (the MLP's 0.76 ms step, 1.04 ms of CPU at 0.5 vCPU), and
    the exchange's CPU, measured at the share, already holds what it costs there. Measured on
    2 cores, the digits MLP's loop with one worker and a loopback shard (bench/results/
    predict-platform/digits-mlp.json of 9396ac5): 2.79 and 7.98 ms at 0.5 and 0.25 vCPU,
    (s·x + CPU)/s = 2.80 and 7.98 ms, where x/c held it to 3.07 and 9.88 ms. With no CPU part
    this is (c, x, e), λDNN's reading (the exchange waits on the wire).
    """
    c = np.asarray(core_s, dtype=np.float64)
    x = np.asarray(throttled_s, dtype=np.float64)
    cpu = np.asarray(exchange_cpu_s, dtype=np.float64)
    rate = np.minimum(np.asarray(share, dtype=np.float64), 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        # no slowdown where the step is not throttled at all (x ≤ c: a whole core or more)
        slowdown = np.where(x > c, 1.0 / rate, 1.0)
        held = np.where(cpu > 0, cpu * slowdown, 0.0)  # no 0·inf where a cell is infeasible
    # The loop's CPU can exceed the exchange's wall time (the step's own extra is in it): the
    # exchange then has no idle part left, never a negative one.
    return c + cpu, x + held, np.maximum(np.asarray(exchange_s, dtype=np.float64) - cpu, 0.0)


def burst_iterations(burst_s: Arr, communication_burst_s: Arr, k: Arr) -> Arr:
    """Extension: iterations done while the PS has network I/O credits, at most k.

    EC2 instances whose bandwidth is "up to" a peak run at the peak for a limited time (the
    catalog's burst_s, spent while the instance sends above its baseline) and at the baseline
    after. The PS sends only during the exchange, so a fresh instance's credits last
    ⌊burst_s / t_comm at the peak⌋ iterations. Credits earned while the PS idles are not
    counted (conservative), and this depends on n and the PS only, never on memory.
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        fit = np.floor(np.asarray(burst_s, dtype=np.float64) / communication_burst_s)
    fit = np.where(np.isfinite(fit), fit, 0.0)
    return np.minimum(fit, np.asarray(k, dtype=np.float64))


def two_rate_mean(k: Arr, k_burst: Arr, burst: Arr, baseline: Arr) -> Arr:
    """The mean over k iterations of a term that is `burst` for k_burst and `baseline` after."""
    k = np.maximum(np.asarray(k, dtype=np.float64), 1.0)
    with np.errstate(invalid="ignore"):  # 0 · inf of an infeasible cell stays NaN → masked
        return np.where(k_burst > 0, (k_burst * burst + (k - k_burst) * baseline) / k, baseline)


def ps_bandwidth_mb_s(
    n: Arr, function_mb_s: float, shard_mb_s: Arr, ps_count: Arr, flow_cap_mb_s: float
) -> Arr:
    """λDNN B_p(n) = min(B_f^max, B_ps / n), extended to sharded PS with a per-flow cap.

    Each of the ps_count shards serves d_m/ps_count to n workers over its *baseline* bandwidth;
    a worker's flow to one shard is capped (5 Gbps outside a placement group), so the effective
    per-worker bandwidth is min(B_f^max, ps_count · min(flow cap, shard baseline / n)).
    """
    n = np.asarray(n, dtype=np.float64)
    per_shard = np.minimum(flow_cap_mb_s, np.asarray(shard_mb_s, dtype=np.float64) / n)
    return np.minimum(function_mb_s, np.asarray(ps_count, dtype=np.float64) * per_shard)


def communication_time_s(model_mb: float, ps_mb_s: Arr, rtt_s: float) -> Arr:
    """λDNN t_comm = 2·d_m / B_p(n) (push gradients, pull parameters), plus one round trip each."""
    return 2.0 * model_mb / ps_mb_s + 2.0 * rtt_s


def aggregation_time_s(n: Arr, model_mb: float, ps_count: Arr, mb_s_per_core: float) -> Arr:
    """Extension: each PS shard averages n gradients of d_m/ps_count and applies the update.

    One core per shard: the shard process's numpy element-wise work is single-threaded.
    """
    shard_mb = model_mb / np.asarray(ps_count, dtype=np.float64)
    return np.asarray(n, dtype=np.float64) * shard_mb / mb_s_per_core


def checkpoint_time_s(
    model_mb: float,
    ps_count: Arr,
    ps_s3_mb_s: float,
    put_request_s: float,
    shared_host: bool = False,
) -> Arr:
    """Extension: shards write their slice (parameters + momentum, 2·d_m/ps_count) to S3 at once,
    each one PUT: its request latency plus the slice at the PS's S3 bandwidth.

    Where the shards share one host (`shared_host`: the local platform's cores and its one S3
    server) the slices share its bandwidth, so the write takes the whole model's bytes: measured
    on 2 cores, MobileNetV2 (9 MB) with two shards, 0.26-0.30 s a checkpoint against 0.21 s
    with one (bench/predict 2026-11-26), where halving the bytes predicted 0.12 s.
    """
    writers = np.where(shared_host, 1.0, np.asarray(ps_count, dtype=np.float64))
    return put_request_s + 2.0 * model_mb / writers / ps_s3_mb_s


def checkpoint_interval_s(checkpoint_s: Arr, max_loss_s: float, max_overhead: float) -> Arr:
    """Extension: training seconds between periodic PS checkpoints.

    A PS shard that crashes restores its newest checkpoint, so the interval bounds the training
    redone (λDNN checkpoints proactively for the same reason); each checkpoint stalls the
    iteration that writes it by checkpoint_s, so the interval is never shorter than
    checkpoint_s / max_overhead (Young, CACM 1974: the interval trades the two).
    """
    return np.maximum(max_loss_s, np.asarray(checkpoint_s, dtype=np.float64) / max_overhead)


def checkpoint_every_iterations(step_s: Arr, interval_s: Arr) -> Arr:
    """Extension: the interval in iterations (every shard counts the same iterations, so the
    shards' checkpoints always share an iteration a restore can return to); at least 1."""
    with np.errstate(divide="ignore", invalid="ignore"):
        every = np.ceil(np.asarray(interval_s, dtype=np.float64) / step_s)
    return np.where(np.isfinite(every), np.maximum(every, 1.0), 1.0)


def periodic_checkpoint_s(checkpoint_s: Arr, every: Arr) -> Arr:
    """Extension: the periodic checkpoint's time per iteration, C every ⌈τ/step⌉ iterations."""
    return np.asarray(checkpoint_s) / every


def iterations_per_invocation(usable_s: float, overhead_s: Arr, iteration_s: Arr, k: Arr) -> Arr:
    """Extension (15-minute limit): iterations one invocation completes after its fixed overhead.

    0 means the configuration cannot make progress within one invocation (infeasible).
    """
    room = usable_s - overhead_s
    with np.errstate(divide="ignore", invalid="ignore"):
        fit = np.floor(np.where(room > 0, room, 0.0) / iteration_s)
    fit = np.where(np.isfinite(fit), fit, 0.0)
    return np.minimum(fit, np.asarray(k, dtype=np.float64)).astype(np.int64)


def invocations(k: Arr, per_invocation: Arr) -> Arr:
    """Extension: chain links per worker, ⌈k / iterations per invocation⌉ (1 if infeasible)."""
    per = np.maximum(per_invocation, 1)
    return -(-np.asarray(k, dtype=np.int64) // per)


def ephemeral_storage_mb(dataset_bytes: int, n: Arr, model_bytes: int, minimum_mb: int) -> Arr:
    """/tmp the worker needs: its dataset shard, a model checkpoint pair and fixed headroom."""
    shard = dataset_bytes / np.asarray(n, dtype=np.float64) + 2.0 * model_bytes
    need = np.ceil(shard / MIB) + EPHEMERAL_HEADROOM_MB
    return np.asarray(np.maximum(need, minimum_mb), dtype=np.int64)


# --- cost terms ----------------------------------------------------------------------------------


def lambda_compute_usd(usd_per_gb_s: Arr, memory_mb: Arr, n: Arr, billed_s: Arr) -> Arr:
    """λDNN Eq. 10, C = p·(m/1024)·n·T, over the billed time of every worker."""
    return usd_per_gb_s * (np.asarray(memory_mb, dtype=np.float64) / 1024.0) * n * billed_s


def requests_usd(usd_per_request: float, n: Arr, links: Arr) -> Arr:
    """Extension: one request per worker per chain link."""
    return usd_per_request * (np.asarray(n, dtype=np.float64) * links)


def ephemeral_usd(usd_per_gb_s: float, storage_mb: Arr, free_mb: int, n: Arr, billed_s: Arr) -> Arr:
    """Extension: /tmp above the free 512 MB, per GB-second of every worker."""
    extra_gb = np.maximum(np.asarray(storage_mb, dtype=np.float64) - free_mb, 0.0) / 1024.0
    return usd_per_gb_s * extra_gb * n * billed_s


def ps_usd(usd_per_hour: Arr, ps_count: Arr, total_s: Arr, min_billed_s: float) -> Arr:
    """Extension: the EC2 PS shards run for the whole job, billed per second with a minimum."""
    return usd_per_hour / 3600.0 * ps_count * np.maximum(total_s, min_billed_s)


def step_functions_usd(
    usd_per_transition: float, fixed: int, per_link: int, n: Arr, links: Arr
) -> Arr:
    """Extension: state transitions of the orchestrating workflow (fixed + per worker link)."""
    return usd_per_transition * (fixed + per_link * (np.asarray(n, dtype=np.float64) * links))


def endpoints_usd(usd_per_hour: float, endpoints: int, total_s: Arr) -> Arr:
    """Extension: the VPC interface endpoints the PS network needs, for every started hour.

    PrivateLink bills each endpoint per AZ per hour, a partial hour as a full one; the endpoints
    live as long as the stacks, so this is the run's share, not the idle time until destroy.
    """
    hours = np.ceil(np.maximum(np.asarray(total_s, dtype=np.float64), 1.0) / 3600.0)
    return usd_per_hour * endpoints * hours


def s3_requests_usd(
    get_usd: float, put_usd: float, n: Arr, links: Arr, ps_count: Arr, periodic: Arr
) -> Arr:
    """Extension: shard GETs per link; dataset upload, checkpoints per shard, results.

    After each checkpoint a shard lists the checkpoints (LIST is billed as a PUT) to delete
    its own older ones (DELETE is free), so a checkpoint costs two PUT-class requests; each
    shard checkpoints iteration 0 when it is initialised, at the end of every link and
    `periodic` times in between.
    """
    n = np.asarray(n, dtype=np.float64)
    gets = n * links
    # checkpoints + lists (initial, one per link, periodic), shards, manifest, split, results
    puts = 2.0 * ps_count * (links + 1 + np.asarray(periodic, dtype=np.float64)) + n + 4.0
    return np.asarray(get_usd * gets + put_usd * puts)


# --- the S3 gradient exchange (sync "s3", issue 13) -------------------------------------------
#
# Each iteration every worker PUTs its gradient as k partitions of d/k; reducer j (one of ranks
# 0..k−1) GETs the n partitions j, averages them, applies SGD momentum and PUTs one state object
# (parameters + momentum, 2·d/k); every worker then range-GETs the k parameter slices (d). The
# scheme is LambdaML's ScatterReduce through S3 (Jiang et al., SIGMOD 2021) with k ≤ n reducers.
# Pipelining: the requests of one phase run at once (one per partition), so their latencies
# overlap and their bytes share the function's S3 bandwidth B_s(m): a phase takes one latency
# plus its bytes over B_s(m). Phases do not overlap: a reducer needs all n partitions before its
# update and a worker all k slices before its next step (BSP), so the critical path is the sum.


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
    """Extension: (PUTs, GETs) of one S3 exchange: n·k gradient partitions and k state objects
    PUT; n·k partitions GET by the reducers and n·k slices range-GET by the workers (DELETE of
    the previous iteration's objects is free)."""
    n = np.asarray(n, dtype=np.float64)
    k = np.asarray(reducers, dtype=np.float64)
    return n * k + k, 2.0 * n * k


def s3_exchange_usd(get_usd: float, put_usd: float, n: Arr, reducers: Arr, k_iter: Arr) -> Arr:
    """Extension: the exchange's request charges, per iteration × k iterations (0 at k = 0)."""
    puts, gets = s3_exchange_requests(n, reducers)
    return (put_usd * puts + get_usd * gets) * np.asarray(k_iter, dtype=np.float64)


def s3_exchange_stored_mb(n: Arr, model_mb: float) -> Arr:
    """Extension: the exchange's objects in S3 at once, 2·(n + 2)·d: at most two iterations'
    objects live (n gradients d and the state 2·d each; one iteration is written while the
    previous one is read, then deleted)."""
    return 2.0 * (np.asarray(n, dtype=np.float64) + 2.0) * model_mb


def s3_storage_usd(usd_per_gb_month: float, stored_mb: Arr, total_s: Arr) -> Arr:
    """Extension: S3 Standard storage for the whole run, billed by the GB-hour (730 h a month)."""
    months = np.asarray(total_s, dtype=np.float64) / (730.0 * 3600.0)
    return usd_per_gb_month * np.asarray(stored_mb, dtype=np.float64) / 1000.0 * months


# --- one evaluation over a grid of cells ---------------------------------------------------------


@dataclass(frozen=True)
class Cells:
    """Every term for a set of (n, m, arch, PS) cells; arrays share one broadcast shape."""

    feasible: Arr
    startup_s: Arr
    local_batch: Arr
    iterations: Arr
    s3_mb_s: Arr
    ps_mb_s: Arr
    load_s: Arr
    compute_per_iteration_s: Arr
    warmup_s: Arr  # the cold processes' slower first steps (compute, once per cold process)
    communication_per_iteration_s: Arr  # mean over the run (PS burst, then baseline)
    burst_iterations: Arr
    aggregation_per_iteration_s: Arr
    iteration_s: Arr
    checkpoint_s: Arr
    checkpoint_every: Arr
    periodic_checkpoint_s: Arr
    iterations_per_invocation: Arr
    invocations: Arr
    ephemeral_mb: Arr
    chaining_s: Arr
    launch_s: Arr
    total_s: Arr
    billed_s: Arr
    lambda_usd: Arr
    requests_usd: Arr
    ephemeral_usd: Arr
    ps_usd: Arr
    sfn_usd: Arr
    s3_usd: Arr
    endpoints_usd: Arr
    total_usd: Arr
    exchange_usd: Arr  # S3 sync: the exchange's requests and storage (0 in a PS cell)


@dataclass(frozen=True)
class Axis:
    """Broadcastable inputs of one evaluation: memory-side, n-side and PS-side arrays."""

    memory_mb: Arr
    rate_samples_s: Arr  # R(m) for this cell's architecture
    usd_per_gb_s: Arr  # this cell's architecture's tier-1 price
    n: Arr
    shard_mb_s: Arr  # baseline bandwidth of one PS shard
    ps_count: Arr
    ps_usd_per_hour: Arr
    core_rate_samples_s: Arr  # R(1 vCPU) for this cell's architecture
    burst_shard_mb_s: Arr  # bandwidth of one PS shard while its credits last
    burst_s: Arr  # seconds of burst of a fresh PS instance
    reducers: Arr  # S3 sync: k reducers; 0 = a PS cell


@dataclass(frozen=True)
class NTerms:
    """The terms that depend on n and the PS option only (not on memory or architecture)."""

    n: Arr
    ps_count: Arr
    local_batch: Arr
    iterations: Arr
    ps_mb_s: Arr
    communication_s: Arr  # per iteration
    aggregation_s: Arr  # per iteration
    exchange_s: Arr  # communication + aggregation, per iteration (baseline PS bandwidth)
    checkpoint_s: Arr
    ephemeral_mb: Arr
    ok: Arr  # b_l ≥ 1 and the shard fits in /tmp
    core_compute_s: Arr  # b_l / R(1 vCPU): the step at full single-core speed
    compute_floor_s: Arr  # b_l / (R(1)·C/n): shared cores (0 when unlimited)
    speed: Arr  # parallel_speed: the compute terms above are already divided by it
    communication_burst_s: Arr  # per iteration while the PS has burst credits
    exchange_burst_s: Arr
    burst_iterations: Arr  # iterations the PS runs at its burst bandwidth (fresh instance)
    startup_s: Arr  # the first link's cold start (cold_start_s)
    # S3 sync (k > 0): the exchange terms above are at the smallest memory (the slowest; the
    # timeline puts them at the cell's memory), checkpoint 0 (the state is in S3 every iteration)
    reducers: Arr
    s3: Arr  # bool: the cell exchanges through S3
    exchange_stored_mb: Arr  # S3 sync: the exchange's objects in S3 at once (0 in a PS cell)

    def flat(self) -> NTerms:
        """Every field broadcast to one shape and flattened, so cells can be taken by index."""
        arrays = np.broadcast_arrays(*(np.asarray(getattr(self, f)) for f in _NTERM_FIELDS))
        return NTerms(*(a.ravel() for a in arrays))

    def take(self, index: Arr) -> NTerms:
        return NTerms(*(getattr(self, f)[index] for f in _NTERM_FIELDS))


_NTERM_FIELDS = tuple(NTerms.__dataclass_fields__)


@dataclass(frozen=True)
class Timeline:
    """The memory-dependent time terms of cells (T and everything it is made of)."""

    s3_mb_s: Arr
    load_s: Arr
    compute_s: Arr  # per iteration, mean over the run
    warmup_s: Arr  # the cold processes' slower first steps, over the whole run
    communication_s: Arr  # per iteration, mean over the run (burst, then baseline)
    aggregation_s: Arr  # per iteration: PS shard or S3 reducer averaging and update
    burst_iterations: Arr  # iterations run at the PS burst bandwidth
    iteration_s: Arr  # compute + exchange + the periodic checkpoint's share
    checkpoint_every: Arr  # iterations between periodic PS checkpoints
    periodic_checkpoint_s: Arr  # per iteration
    iterations_per_invocation: Arr
    invocations: Arr
    chaining_s: Arr
    launch_s: Arr  # the first link's platform start and dispatch (launch_s + restart_s)
    total_s: Arr
    billed_s: Arr
    feasible: Arr


def n_terms(
    profile: WorkloadProfile,
    catalog: Catalog,
    n: Arr,
    shard_mb_s: Arr,
    ps_count: Arr,
    *,
    core_rate_samples_s: Arr,
    burst_shard_mb_s: Arr,
    burst_s: Arr,
    reducers: Arr | None = None,
) -> NTerms:
    """λDNN's batch rule, k and t_comm, plus PS aggregation, checkpoint and /tmp size, per n;
    the step at full core speed, the shared-core floor, and t_comm while the PS bursts.
    Cells with reducers k > 0 exchange through S3 (no PS): see s3_cell_terms."""
    model_mb = profile.model_bytes / 1e6
    k_red = np.zeros(1, dtype=np.int64) if reducers is None else np.asarray(reducers)
    s3_sync = k_red > 0
    shards = np.maximum(ps_count, 1)  # an S3 cell has no shard: its PS terms are replaced
    b_l = local_batch(n, profile.profiled_local_batch, profile.max_global_batch)
    k = iterations(profile.dataset_samples, profile.epochs, n * b_l)
    flow_cap = gbps_to_mb_s(catalog.per_flow_cap_gbps)
    bw = ps_bandwidth_mb_s(n, catalog.function_ps_mb_s, shard_mb_s, shards, flow_cap)
    with np.errstate(divide="ignore"):  # an S3 cell's PS bandwidth is 0; replaced below
        comm = shared_exchange_s(
            communication_time_s(model_mb, bw, catalog.function_ps_rtt_s), n, catalog.total_vcpu
        )
        # a burst never slows the PS down (a catalog peak below the baseline counts as the
        # baseline)
        burst_bw = ps_bandwidth_mb_s(
            n, catalog.function_ps_mb_s, np.maximum(burst_shard_mb_s, shard_mb_s), shards, flow_cap
        )
        comm_burst = shared_exchange_s(
            communication_time_s(model_mb, burst_bw, catalog.function_ps_rtt_s),
            n,
            catalog.total_vcpu,
        )
    # On shared cores the exchange takes at least what the profile's loop measured it to take
    floor = loop_exchange_s(profile.loop_overhead, catalog.total_vcpu) * shared_slowdown(
        n, catalog.total_vcpu
    )
    comm, comm_burst = np.maximum(comm, floor), np.maximum(comm_burst, floor)
    agg = aggregation_time_s(n, model_mb, shards, profile.ps_aggregation_mb_s_per_core)
    eph = ephemeral_storage_mb(
        profile.dataset_bytes, n, profile.model_bytes, catalog.ephemeral_min_mb
    )
    speed = parallel_speed(
        n, profile.parallel_speed_ratio, profile.parallel_processes, catalog.total_vcpu
    )
    checkpoint = checkpoint_time_s(
        model_mb, shards, catalog.ps_s3_mb_s, catalog.checkpoint_latency_s,
        shared_host=catalog.total_vcpu is not None,
    )  # fmt: skip
    ok = (b_l >= 1) & (eph <= catalog.ephemeral_max_mb)
    stored = np.zeros(1)
    if np.any(s3_sync):
        # upper bounds over memory (B_s(m) and the reducer's rate grow with m); exact per cell
        # in the timeline
        s3_comm, s3_agg = s3_cell_terms(
            profile, catalog, n, k_red, np.asarray(catalog.memory_min_mb)
        )
        comm = np.where(s3_sync, s3_comm, comm)
        comm_burst = np.where(s3_sync, s3_comm, comm_burst)
        agg = np.where(s3_sync, s3_agg, agg)
        bw = np.where(s3_sync, 0.0, bw)
        checkpoint = np.where(s3_sync, 0.0, checkpoint)
        ok = ok & (~s3_sync | (k_red <= n))
        stored = np.where(s3_sync, s3_exchange_stored_mb(n, model_mb), 0.0)
    return NTerms(
        n=np.asarray(n),
        ps_count=np.asarray(ps_count),
        local_batch=b_l,
        iterations=k,
        ps_mb_s=bw,
        communication_s=comm,
        aggregation_s=agg,
        exchange_s=comm + agg,
        checkpoint_s=checkpoint,
        ephemeral_mb=eph,
        ok=ok,
        core_compute_s=compute_time_s(b_l, core_rate_samples_s) / speed,
        compute_floor_s=compute_time_s(
            b_l,
            shared_core_rate_samples_s(
                core_rate_samples_s, n, catalog.compute_cores or catalog.total_vcpu
            ),
        )
        / speed,
        speed=speed,
        communication_burst_s=comm_burst,
        exchange_burst_s=comm_burst + agg,
        burst_iterations=burst_iterations(burst_s, comm_burst, k),
        startup_s=cold_start_s(profile.startup_s, n, startup_cores(catalog, n)),
        reducers=k_red,
        s3=s3_sync,
        exchange_stored_mb=stored,
    )


def s3_cell_terms(
    profile: WorkloadProfile, catalog: Catalog, n: Arr, reducers: Arr, memory_mb: Arr
) -> tuple[Arr, Arr]:
    """(communication, aggregation) per iteration of an S3 exchange at memory m: transfers on
    B_s(m) (on C shared cores, shared as the PS exchange is), the reduction at the share's rate."""
    model_mb = profile.model_bytes / 1e6
    bw = s3_bandwidth_mb_s(
        memory_mb, catalog.s3_mb_s_per_memory_mb, catalog.s3_mb_s_intercept, catalog.s3_max_mb_s
    )
    share = vcpu_share(memory_mb, catalog.mb_per_vcpu, catalog.max_vcpu)
    comm = shared_exchange_s(
        s3_communication_s(
            n, reducers, model_mb, bw, catalog.s3_request_s,
            catalog.put_latency_s, catalog.s3_put_mb_s,
        ),
        n,
        catalog.total_vcpu,
    )  # fmt: skip
    reduce = s3_reduce_mb_s(profile.ps_aggregation_mb_s_per_core, share)
    return comm, s3_aggregation_s(n, reducers, model_mb, reduce)


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
    has no shard."""
    cores = catalog.compute_cores or catalog.total_vcpu
    if catalog.total_vcpu is None:
        return np.zeros(np.shape(nt.core_compute_s))
    shards = np.where(nt.s3, 0.0, np.asarray(nt.ps_count, dtype=np.float64))
    crowded = crowded_step_factor(
        nt.n, profile.crowded_step_ratio, profile.crowded_processes, cores
    )
    alone_exchange_s = communication_s / shared_slowdown(nt.n, catalog.total_vcpu)
    exchange_cpu = np.maximum(catalog.exchange_cpu_fraction * alone_exchange_s, loop_cpu_s)
    # The crowd's ratio was measured with every core busy, so it holds what steps at once lose
    # to each other (parallel_speed, in core_compute_s) already: the larger of the two counts.
    worker_cpu = nt.core_compute_s * np.maximum(1.0, crowded * nt.speed) + exchange_cpu
    ps_cpu = np.where(
        nt.s3,
        0.0,
        nt.n * shards * catalog.ps_request_cpu_s + shards * np.asarray(aggregation_s),
    )
    return shared_cpu_iteration_s(nt.n, worker_cpu, ps_cpu, cores)


def warmup_s(profile: WorkloadProfile, catalog: Catalog, nt: NTerms) -> Arr:
    """A cold process's slower first steps (crowded_warmup_s), in steps of the one-vCPU step;
    none where the profile measured none (even where a step is infinitely slow: 0·inf is nan)."""

    def steps_s(steps: float) -> Arr:
        if not steps:
            return np.zeros(np.shape(nt.core_compute_s))
        return steps * np.asarray(nt.core_compute_s, dtype=np.float64)

    crowd = profile.crowded_warmup_iterations
    return crowded_warmup_s(
        nt.n,
        steps_s(profile.warmup_iterations),
        None if crowd is None else steps_s(crowd),
        profile.crowded_processes,
        catalog.compute_cores or catalog.total_vcpu,
    )


def timeline(
    profile: WorkloadProfile, catalog: Catalog, nt: NTerms, memory_mb: Arr, rate_samples_s: Arr
) -> Timeline:
    """T = t_load + k·(t_comp + t_comm) (λDNN) + aggregation, start-up and chaining.

    The worker's timeline: start-up and shard load, then iterations until the invocation's usable
    time (timeout − safety margin) is spent, a PS checkpoint, and a new link (restart, start-up
    and shard reload, assuming a cold environment) until k iterations are done. t_comp is the
    CPU-quota one (cfs_step_s) at min(R(m), R(1)·C/n); the first iterations, while the PS
    has burst credits, exchange at the burst bandwidth, the rest at the baseline.
    """
    s3 = s3_bandwidth_mb_s(
        memory_mb, catalog.s3_mb_s_per_memory_mb, catalog.s3_mb_s_intercept, catalog.s3_max_mb_s
    )
    share = vcpu_share(memory_mb, catalog.mb_per_vcpu, catalog.max_vcpu)
    load = load_time_s(profile.dataset_bytes / 1e6, nt.n, s3) + load_overhead_s(
        catalog.load_cpu_s, share, nt.n, catalog.total_vcpu
    )
    throttled = np.maximum(
        compute_time_s(nt.local_batch, rate_samples_s) / nt.speed, nt.compute_floor_s
    )
    period = catalog.cpu_throttle_period_s
    # Under BSP the n workers compute at the same time, so on shared cores even a step the
    # quota would let run at full speed runs at no more than C/n cores.
    core = np.maximum(nt.core_compute_s, nt.compute_floor_s)
    cpu_share = catalog.exchange_cpu_fraction
    comm_base, agg = nt.communication_s, nt.aggregation_s
    exch_base, exch_burst, comm_burst = nt.exchange_s, nt.exchange_burst_s, nt.communication_burst_s
    if np.any(nt.s3):  # the S3 exchange at this memory (n_terms holds its slowest)
        s3_comm, s3_agg = s3_cell_terms(profile, catalog, nt.n, nt.reducers, memory_mb)
        comm_base = np.where(nt.s3, s3_comm, comm_base)
        agg = np.where(nt.s3, s3_agg, agg)
        exch_base = np.where(nt.s3, s3_comm + s3_agg, exch_base)
        exch_burst = np.where(nt.s3, exch_base, exch_burst)
        comm_burst = np.where(nt.s3, s3_comm, nt.communication_burst_s)
    # The exchange's CPU: the catalog's share of its wall time, or on shared cores what the
    # profile measured the loop spending beyond its step, whichever is more (PS exchanges only).
    loop_cpu = np.where(
        nt.s3, 0.0, loop_extra_cpu_s(profile.loop_extra_cpu, share, catalog.total_vcpu)
    )
    cpu_base = np.maximum(cpu_share * comm_base, loop_cpu)
    cpu_burst = np.maximum(cpu_share * comm_burst, loop_cpu)
    step_base = cfs_step_s(
        *exchange_under_quota(core, throttled, exch_base, cpu_base, share), period
    )
    burst_parts = exchange_under_quota(core, throttled, exch_burst, cpu_burst, share)
    # never slower than the baseline step (the quota refund shrinks with a shorter exchange)
    step_burst = np.minimum(cfs_step_s(*burst_parts, period), step_base)
    # Every rank waits for the iteration's slowest step: idle in the exchange, but held out of
    # the quota's refund (cfs_step_s above), so the compute part stays as it was and the
    # search's bound on it (search._compute_bound) holds.
    wait = lockstep_wait_s(throttled, nt.n, profile.lockstep_wait_fraction, catalog.total_vcpu)
    # On shared cores an iteration also needs the CPU of every worker and every shard.
    floor = shared_loop_floor_s(profile, catalog, nt, comm_base, agg, loop_cpu)
    step_base = np.maximum(step_base + wait, floor)
    step_burst = np.maximum(step_burst + wait, floor)
    k_burst = nt.burst_iterations
    step = two_rate_mean(nt.iterations, k_burst, step_burst, step_base)
    exchange = two_rate_mean(nt.iterations, k_burst, exch_burst, exch_base) + wait
    comm = two_rate_mean(nt.iterations, k_burst, comm_burst, comm_base) + wait
    comp = step - exchange
    interval = checkpoint_interval_s(
        nt.checkpoint_s, catalog.checkpoint_max_loss_s, catalog.checkpoint_max_overhead
    )
    every = checkpoint_every_iterations(step, interval)
    periodic = periodic_checkpoint_s(nt.checkpoint_s, every)
    it = step + periodic
    usable = catalog.invocation_timeout_s - catalog.safety_margin_s
    link_overhead = nt.startup_s + load
    # A cold process's slower first steps, at the one-vCPU step: a figure per n like start-up,
    # so T(m) keeps its shape in memory (the budget search's bisection relies on it); on shared
    # cores n first steps at once take turns and fault more (crowded_warmup_s).
    warmup = warmup_s(profile, catalog, nt)
    per_inv = iterations_per_invocation(
        usable, link_overhead + warmup + nt.checkpoint_s, it, nt.iterations
    )
    if catalog.max_iterations_per_invocation > 0:
        per_inv = np.minimum(per_inv, catalog.max_iterations_per_invocation)
    links = invocations(nt.iterations, per_inv)
    feasible = (per_inv >= 1) & nt.ok
    # A re-invocation's start-up: cold (imports, shard reload, warm-up) unless the platform
    # says the next link lands on the previous link's warm environment, as the emulator's do.
    cold_relinks = catalog.warm_start_s is None
    relink = link_overhead if catalog.warm_start_s is None else catalog.warm_start_s
    # Every link ends with the PS's checkpoint, the last one too: the job is done when the
    # trained model is in S3 (measured on 2 cores, MobileNetV2, one link: 0.24 s that no other
    # term held). Where a periodic checkpoint fell on a link's last iteration the PS skips it,
    # so this counts at most one checkpoint a link too many; the exact count (⌊k/E⌋ + the ends
    # E misses) steps with the iteration time and would break T(m)'s monotone shape in memory
    # that the budget search relies on.
    chaining = links * nt.checkpoint_s + (links - 1) * (catalog.restart_s + relink)
    warmup_total = warmup * (links if cold_relinks else 1)
    # Before any worker starts, the run opens its endpoints and starts the PS: both bill
    # (endpoints_usd, ps_usd take the total), Lambda does not.
    setup = np.where(nt.s3, 0.0, catalog.run_setup_s)  # an S3 run opens and starts nothing
    # The first link waits for what every link does (restart_s: the dispatch, the orchestrator
    # seeing the result) and for the platform to start a fresh environment before the handler's
    # clock runs (launch_s; measured on 2 cores: 0.1-0.7 s of an emulator run's wall that no
    # worker's handler saw, bench/predict 2026-11-25). The start is CPU (an interpreter), so n
    # of them on shared cores take turns as the start-ups after them do (cold_start_s): on 2
    # cores it measured 0.19-0.36 s at n ≤ 2 and 0.50-0.61 s at n = 4 and 8.
    fresh = cold_start_s(catalog.launch_s, nt.n, startup_cores(catalog, nt.n))
    launch = np.broadcast_to(fresh + catalog.restart_s, np.shape(links)).astype(np.float64)
    with np.errstate(invalid="ignore"):
        total = np.where(
            feasible,
            setup + launch + link_overhead + nt.iterations * it + chaining + warmup_total,
            np.inf,
        )
        # Lambda bills no dispatch gap; it bills the init (launch_s, and the imports in
        # link_overhead)
        billed = total - setup - links * catalog.restart_s
    return Timeline(
        s3_mb_s=s3,
        load_s=load,
        compute_s=comp,
        warmup_s=warmup_total,
        communication_s=comm,
        aggregation_s=agg,
        burst_iterations=k_burst,
        iteration_s=it,
        checkpoint_every=every,
        periodic_checkpoint_s=periodic,
        iterations_per_invocation=per_inv,
        invocations=links,
        chaining_s=chaining,
        launch_s=launch,
        total_s=total,
        billed_s=billed,
        feasible=feasible,
    )


def costs(
    catalog: Catalog,
    nt: NTerms,
    tl: Timeline,
    memory_mb: Arr,
    usd_per_gb_s: Arr,
    ps_usd_per_hour: Arr,
) -> Cells:
    """The cost items of evaluated cells (λDNN Eq. 10 and this project's extensions)."""
    n, links, billed = nt.n, tl.invocations, tl.billed_s
    # Infeasible cells carry inf times; their costs are masked to inf below (inf·0 is nan).
    with np.errstate(invalid="ignore"):
        lam = lambda_compute_usd(usd_per_gb_s, memory_mb, n, billed)
        req = requests_usd(catalog.usd_per_request, n, links)
        ephc = ephemeral_usd(
            catalog.ephemeral_usd_per_gb_s, nt.ephemeral_mb, catalog.ephemeral_free_mb, n, billed
        )
        psc = ps_usd(ps_usd_per_hour, nt.ps_count, tl.total_s, catalog.ps_min_billed_s)
        sfn = step_functions_usd(
            catalog.sfn_usd_per_transition,
            catalog.sfn_fixed_transitions,
            catalog.sfn_transitions_per_invocation,
            n,
            links,
        )
        periodic = np.floor(nt.iterations / tl.checkpoint_every)
        s3c = s3_requests_usd(
            catalog.s3_usd_per_get, catalog.s3_usd_per_put, n, links, nt.ps_count, periodic
        )
        net = np.where(
            nt.s3,
            0.0,
            endpoints_usd(
                catalog.endpoint_usd_per_hour, len(catalog.interface_endpoints), tl.total_s
            ),
        )
        exch = np.where(
            nt.s3,
            s3_exchange_usd(
                catalog.s3_usd_per_get, catalog.s3_usd_per_put, n, nt.reducers, nt.iterations
            )
            + s3_storage_usd(catalog.s3_usd_per_gb_month, nt.exchange_stored_mb, tl.total_s),
            0.0,
        )
        cost = lam + req + ephc + psc + sfn + s3c + net + exch
    return Cells(
        feasible=tl.feasible,
        startup_s=nt.startup_s,
        local_batch=nt.local_batch,
        iterations=nt.iterations,
        s3_mb_s=tl.s3_mb_s,
        ps_mb_s=nt.ps_mb_s,
        load_s=tl.load_s,
        compute_per_iteration_s=tl.compute_s,
        warmup_s=tl.warmup_s,
        communication_per_iteration_s=tl.communication_s,
        burst_iterations=tl.burst_iterations,
        aggregation_per_iteration_s=tl.aggregation_s,
        iteration_s=tl.iteration_s,
        checkpoint_s=nt.checkpoint_s,
        checkpoint_every=tl.checkpoint_every,
        periodic_checkpoint_s=tl.periodic_checkpoint_s,
        iterations_per_invocation=tl.iterations_per_invocation,
        invocations=links,
        ephemeral_mb=nt.ephemeral_mb,
        chaining_s=tl.chaining_s,
        launch_s=tl.launch_s,
        total_s=tl.total_s,
        billed_s=billed,
        lambda_usd=lam,
        requests_usd=req,
        ephemeral_usd=ephc,
        ps_usd=psc,
        sfn_usd=sfn,
        s3_usd=s3c,
        endpoints_usd=net,
        total_usd=np.where(tl.feasible, cost, np.inf),
        exchange_usd=exch,
    )


def evaluate(profile: WorkloadProfile, catalog: Catalog, x: Axis) -> Cells:
    """Every term and cost item at the cells `x` spans (n-terms, then timeline, then costs)."""
    nt = n_terms(
        profile,
        catalog,
        x.n,
        x.shard_mb_s,
        x.ps_count,
        core_rate_samples_s=x.core_rate_samples_s,
        burst_shard_mb_s=x.burst_shard_mb_s,
        burst_s=x.burst_s,
        reducers=x.reducers,
    )
    tl = timeline(profile, catalog, nt, x.memory_mb, x.rate_samples_s)
    return costs(catalog, nt, tl, x.memory_mb, x.usd_per_gb_s, x.ps_usd_per_hour)
