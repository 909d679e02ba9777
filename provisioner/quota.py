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


def quota_binds(
    step_cpu_s: Arr, exchange_cpu_s: Arr, unthrottled_s: Arr, share: Arr, period_s: float
) -> Arr:
    """Extension: whether a worker's quota throttles its loop: a step of `step_cpu_s` of CPU
    and an exchange holding `exchange_cpu_s` of it, an iteration of `unthrottled_s` wall when
    nothing throttles it, at share s per period P.

    The quota is s·P seconds of CPU per period. The loop asks for c + u of CPU every
    unthrottled iteration w, so on average it fits when c + u ≤ s·w; a step that alone needs
    more than a period's quota (c > s·P) is throttled within itself whatever the idle after it.
    Otherwise no period runs out and the step never pays the back-to-back step's throttled
    cost: 2 digits-MLP workers and a loopback shard at 0.58 vCPU spent 0.94 ms of CPU an
    iteration of 3.2 ms (0.29 cores; the workers' train_cpu_s in `python -m emulator`), their
    steps 0.70 ms at the median, where the profile's back-to-back step at 0.58 vCPU is 1.95
    ms. On shared cores w holds the step at the machine's C/n, its CPU c does not. The
    exchange's CPU is taken as spread over its wall (requests between waits), not one burst:
    an exchange that spends more than s·P of CPU in one go is throttled within itself."""
    c = np.asarray(step_cpu_s, dtype=np.float64)
    u = np.asarray(exchange_cpu_s, dtype=np.float64)
    s = np.asarray(share, dtype=np.float64)
    return ((c + u) > s * np.asarray(unthrottled_s, dtype=np.float64)) | (c > s * period_s)


def quota_split_compute_s(
    core_s: Arr,
    throttled_s: Arr,
    step_cpu_s: Arr,
    exchange_s: Arr,
    exchange_cpu_s: Arr,
    step_s: Arr,
    period_s: float,
) -> Arr:
    """Extension: the compute part of a throttled iteration of `step_s` (a step of wall
    `core_s` at full speed and `throttled_s` back to back under the quota, holding `step_cpu_s`
    of CPU, then an exchange of wall e holding u of the worker's own CPU), as a worker times it.

    The quota runs out after every s·P seconds of the cgroup's CPU, and the wait until the
    refill lands in whichever phase is running then. Where the exchange's idle part g = e − u
    spans a refill (chance min(1, g/P)) the step starts on a full quota and waits only as
    quota_compute_s says (the exchange's CPU, run after it, takes its own throttling). Where
    it does not, the point where the quota runs out falls anywhere in the loop's CPU, so the
    wait step − core − e lands in the step with chance c/(c + u), in proportion to its CPU.
    Against an event-by-event CFS simulation (tests/provisioner/test_quota_split.py) this
    holds the compute within 15% where either rule alone missed by up to 5× (the exchange's
    CPU above a period's quota) or 25% (idle ≪ P)."""
    c = np.asarray(step_cpu_s, dtype=np.float64)
    u = np.asarray(exchange_cpu_s, dtype=np.float64)
    core = np.asarray(core_s, dtype=np.float64)
    e = np.asarray(exchange_s, dtype=np.float64)
    step = np.asarray(step_s, dtype=np.float64)
    wait = np.maximum(step - core - e, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        part = np.where(c + u > 0, c / (c + u), 1.0)
    anywhere = core + wait * part
    refunded = quota_compute_s(core, throttled_s, e, u, step, period_s)
    if period_s <= 0:  # no quota: nothing waits, refunded is the whole story
        return refunded
    chance = np.minimum(np.maximum(e - u, 0.0) / period_s, 1.0)
    return np.asarray(chance * refunded + (1.0 - chance) * anywhere, dtype=np.float64)
