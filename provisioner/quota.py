"""Lambda's CPU share and the CFS quota that enforces it, extending λDNN's t_comp + t_comm.

λDNN times a step as compute plus exchange; under a CPU quota refilled every period (Linux
CFS, as Lambda and the emulator's runner throttle) the idle exchange gives quota back, so the
step is neither the sum nor the larger of the two (cfs_step_s).
"""

from __future__ import annotations

import numpy as np

from provisioner.terms import Arr


def vcpu_share(memory_mb: Arr, mb_per_vcpu: float, max_vcpu: float) -> Arr:
    """Lambda's CPU credit: proportional to memory (1,769 MB = 1 vCPU), capped at max vCPUs."""
    return np.minimum(np.asarray(memory_mb, dtype=np.float64) / mb_per_vcpu, max_vcpu)


def cfs_step_s(core_s: Arr, throttled_s: Arr, idle_s: Arr, period_s: float) -> Arr:
    """Extension of λDNN's t_comp + t_comm to a CPU quota refilled every period (Linux CFS;
    Lambda throttles the same way, every 20 ms, as pwrdrvr/lambda-dispatch found).

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
    predict-platform/digits-mlp.json): 2.79 and 7.98 ms at 0.5 and 0.25 vCPU,
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


def bsp_steps_s(
    core_s: Arr,
    throttled_s: Arr,
    exchange_s: Arr,
    exchange_burst_s: Arr,
    exchange_cpu_s: Arr,
    exchange_burst_cpu_s: Arr,
    share: Arr,
    period_s: float,
) -> tuple[Arr, Arr]:
    """A worker's step under its quota (cfs_step_s) with the exchange at the PS's baseline and
    at its burst bandwidth; the burst step is never slower than the baseline one (the quota's
    refund shrinks with a shorter exchange)."""
    base = cfs_step_s(
        *exchange_under_quota(core_s, throttled_s, exchange_s, exchange_cpu_s, share), period_s
    )
    burst_parts = exchange_under_quota(
        core_s, throttled_s, exchange_burst_s, exchange_burst_cpu_s, share
    )
    return base, np.minimum(cfs_step_s(*burst_parts, period_s), base)


def quota_compute_s(
    core_s: Arr,
    throttled_s: Arr,
    exchange_s: Arr,
    exchange_cpu_s: Arr,
    step_s: Arr,
    period_s: float,
) -> Arr:
    """Extension: the compute part of a step of `step_s` (bsp_steps_s) whose exchange of wall
    `exchange_s` holds `exchange_cpu_s` of the worker's own CPU, as a worker times them.

    The quota throttles whichever phase is running when the period's runtime runs out. The
    step starts after the exchange's idle part (its wall less its CPU) gave quota back, so the
    compute is cfs_step_s's compute with that idle; the exchange's CPU runs after it on what is
    left, and its throttling is timed in the exchange. The exchange is never shorter than its
    own wall: the compute is at most the step less it. With no exchange CPU this is
    cfs_compute_time_s over the whole exchange (the step's split as it was).
    """
    e = np.asarray(exchange_s, dtype=np.float64)
    idle = np.maximum(e - np.asarray(exchange_cpu_s, dtype=np.float64), 0.0)
    own = cfs_compute_time_s(core_s, throttled_s, idle, period_s)
    return np.minimum(own, np.asarray(step_s, dtype=np.float64) - e)
