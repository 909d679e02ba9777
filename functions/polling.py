"""Waiting for an S3 object a peer is writing: GETs that back off while nothing is known, and
a learned estimate of when a recurring wait's object appears (ArrivalEstimate), so the S3
exchange and the pipeline's boundaries poll with few GETs that find nothing and little added
latency. provisioner/s3exchange.py prices these polls (tests/provisioner/test_s3_polls_model.py
holds the two equal)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from functions import wire

T = TypeVar("T")
POLL_FIRST_S = 0.005  # first back-off: an object a peer is writing now is there within ms
# Growth per miss: doubling overshot a wait by up to its own length (a 50 ms wait became up to
# 70 ms: polls at 0, 10, 30, 70 ms), which on 50-130 ms exchanges was most of the error; ×1.5
# overshoots by at most half, for one or two more GETs, and a GET that misses costs
# $0.0004 per 1,000 (catalog s3_usd_per_get), against 12.5× that for the PUT it waits on.
POLL_GROWTH = 1.5
POLL_MAX_S = 0.2  # back-off ceiling: bounds both the request count and the added latency
# An S3 GET's price in Lambda x86 GB-seconds ($0.0004 per 1,000 / $0.0000166667 per GB-s):
# the function time a GET that finds nothing may save before it is not worth sending.
GET_GB_S = 0.0004e-3 / 0.0000166667


class ExchangeTimeout(wire.PSTimeout):
    """An exchange object did not appear within the task's ps_timeout_s. A PSTimeout, so the
    worker loop ends the link the same way in both modes (stopped "ps_timeout")."""


class ExchangeClosed(RuntimeError):
    """The exchange was closed while a wait was in progress (the link is ending)."""


def backoff_delays_s(
    first_s: float = POLL_FIRST_S, growth: float = POLL_GROWTH, max_s: float = POLL_MAX_S
) -> Iterator[float]:
    """The gaps of a wait nothing is known about: first_s, × growth per miss up to max_s."""
    delay_s = first_s
    while True:
        yield delay_s
        delay_s = min(growth * delay_s, max_s)


def expected_delays_s(gap_s: float) -> Iterator[float]:
    """The gaps of a wait whose object is expected now: gap_s, then (it is late: a slow peer,
    a throttled step, whose lateness tells nothing of when it ends) × POLL_GROWTH per miss up
    to POLL_MAX_S, so an outlier costs a few GETs and not one per gap."""
    yield gap_s
    yield from backoff_delays_s(gap_s, POLL_GROWTH, max(gap_s, POLL_MAX_S))


@dataclass(frozen=True)
class Polled(Generic[T]):
    """What a wait found, and the GETs that found nothing before it."""

    value: T
    misses: int
    last_miss_s: float | None  # since the wait began, when the last empty GET was sent
    found_s: float  # since the wait began, when the GET that found it was sent


def poll_for(
    fetch: Callable[[], T | None],
    delays_s: Iterator[float],
    *,
    timeout_s: float,
    what: str,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], object] = time.sleep,
    first_poll_s: float = 0.0,
) -> Polled[T]:
    """Sleep first_poll_s, then fetch() until it returns a value, sleeping the next of
    `delays_s` after each miss and never past the deadline: one last try at it, then
    ExchangeTimeout. `sleep` returning True means the wait was cancelled (ExchangeClosed)."""
    start = clock()
    deadline = start + timeout_s
    if first_poll_s > 0 and sleep(min(first_poll_s, timeout_s)) is True:
        raise ExchangeClosed(f"stopped waiting for {what}: the exchange was closed")
    misses, last_miss_s = 0, None
    while True:
        sent = clock()
        found = fetch()
        if found is not None:
            return Polled(found, misses, last_miss_s, sent - start)
        misses, last_miss_s = misses + 1, sent - start
        left_s = deadline - clock()
        if left_s <= 0:
            raise ExchangeTimeout(f"{what} did not appear within {timeout_s:g} s")
        if sleep(min(next(delays_s), left_s)) is True:
            raise ExchangeClosed(f"stopped waiting for {what}: the exchange was closed")


def poll(
    fetch: Callable[[], T | None],
    *,
    timeout_s: float,
    what: str,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], object] = time.sleep,
    first_delay_s: float = POLL_FIRST_S,
    max_delay_s: float = POLL_MAX_S,
    growth: float = POLL_GROWTH,
) -> T:
    """fetch() until it returns a value, backing off exponentially (first_delay_s, × growth per
    miss up to max_delay_s) and never past the deadline: one last try at it, then
    ExchangeTimeout.
    `sleep` returning True means the wait was cancelled (ExchangeClosed)."""
    delays = backoff_delays_s(first_delay_s, growth, max_delay_s)
    return poll_for(fetch, delays, timeout_s=timeout_s, what=what, clock=clock, sleep=sleep).value


def cost_balanced_gap_s(memory_mb: int, n_workers: int) -> float:
    """The poll gap at which a GET that finds nothing costs what the wait it shortens costs.

    A late poll delays the iteration's critical path (BSP: the last gradient holds the reducer,
    the reducer holds every worker), so the time is billed n times: gap = price of a GET /
    (n · memory_GB · price of a GB-second), clipped to [POLL_FIRST_S, POLL_MAX_S]. The prices'
    ratio is AWS's (catalog lambda-2025: s3_usd_per_get $0.0004 per 1,000, x86 usd_per_gb_s
    $0.0000166667): 12 functions of 384 MB, 5.3 ms; 2 of 1,769 MB, 6.9 ms.
    """
    gap_s = GET_GB_S / (max(1, n_workers) * memory_mb / 1024.0)
    return min(max(gap_s, POLL_FIRST_S), POLL_MAX_S)


@dataclass
class ArrivalEstimate:
    """When one recurring wait's object tends to appear, learned from the previous iterations.

    The first wait teaches nothing (it holds the peers' start-up); the second backs off from its
    start as the first did and gives the first estimate.

    first_poll_s (since the wait began) is where the next wait sends its first GET. It tracks
    the median arrival: a wait whose first GET missed moves it later, one whose first GET found
    the object moves it earlier, by half a gap, twice as far each time in a row (a shift of D
    is followed within log2(D/gap) waits) and back to half a gap when the direction turns, so
    one slow iteration (a throttled peer) moves it by half a gap only. Moving only to where
    hits were seen would ratchet upward (a hit is seen at the poll after the object appeared);
    a move up never passes the middle of the gap after the last miss. In the steady state
    about every other wait finds its object at the first GET, the others one gap later: at the
    median, a GET that finds nothing and a wait one gap too long cost alike (the gap is
    cost_balanced_gap_s).
    """

    gap_s: float
    first_poll_s: float | None = None
    _step_s: float = field(default=0.0, init=False)  # signed: + later, - earlier
    _first_seen: bool = field(default=False, init=False)

    def delays_s(self) -> Iterator[float]:
        """The gaps after each miss: a back-off while nothing is known, then gap_s."""
        if self.first_poll_s is None:
            return backoff_delays_s()
        return expected_delays_s(self.gap_s)

    def learn(self, polled: Polled[Any]) -> None:
        half_s = self.gap_s / 2.0
        if self.first_poll_s is None and not self._first_seen:
            # A link's first wait holds its peers' start-up (a cold start, a slower import): it
            # says nothing of the steady wait, and learnt it would send the next waits' first
            # GETs up to that long too late. The second wait backs off from its start again.
            self._first_seen = True
            return
        if self.first_poll_s is None:
            # A cold wait: its object came within the back-off's gap before the GET that found it.
            came_after_s = polled.last_miss_s if polled.last_miss_s is not None else 0.0
            self.first_poll_s = (came_after_s + polled.found_s) / 2.0
            return
        if polled.last_miss_s is None:
            step_s = 2.0 * self._step_s if self._step_s < 0 else -half_s
            self.first_poll_s = max(0.0, self.first_poll_s + step_s)
        else:
            step_s = 2.0 * self._step_s if self._step_s > 0 else half_s
            self.first_poll_s = min(self.first_poll_s + step_s, polled.last_miss_s + half_s)
        self._step_s = step_s
