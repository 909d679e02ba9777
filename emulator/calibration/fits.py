"""Pure fits of timings to the catalog's figures: a latency and a bandwidth from times per size.

Every fit is a line time = legs·latency + legs·d/B where the time grows measurably with size,
else the bound every timing gives (B ≥ legs·d/t of the largest size), its note saying why: a
fast or busy machine gets a sound figure, never a failed calibration.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from emulator import cpu

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
