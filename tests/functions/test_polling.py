"""Waiting for an S3 object: the back-off, the deadline, cancellation, and the learned waits (a
recurring wait sleeps until its object is expected, then polls at the cost-balanced gap). Driven
by a fake clock: nothing really waits."""

from __future__ import annotations

import threading

import pytest

from functions import polling, wire
from functions.polling import ArrivalEstimate


class FakeClock:
    """A monotonic clock the test drives: sleeping advances it, nothing really waits."""

    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def appears_at(clock: FakeClock, at: float) -> object:
    """fetch() of an object that is there from clock time `at` on."""
    return lambda: b"x" if clock.now >= at else None


def test_poll_for_sleeps_until_the_first_poll_then_counts_its_misses() -> None:
    clock = FakeClock()
    polled = polling.poll_for(
        appears_at(clock, 100.25),  # type: ignore[arg-type]
        iter([0.1] * 20),
        timeout_s=5,
        what="k",
        clock=clock,
        sleep=clock.sleep,
        first_poll_s=0.1,
    )
    assert polled.value == b"x" and polled.misses == 2
    assert polled.last_miss_s == pytest.approx(0.2)
    assert clock.sleeps == pytest.approx([0.1, 0.1, 0.1])


def test_poll_for_keeps_the_deadline_when_the_first_poll_is_past_it() -> None:
    clock, tries = FakeClock(), []

    def never() -> None:
        tries.append(clock.now)

    with pytest.raises(polling.ExchangeTimeout):
        polling.poll_for(never, iter([0.1] * 20), timeout_s=1, what="k", clock=clock,
                        sleep=clock.sleep, first_poll_s=5.0)  # fmt: skip
    assert tries == [pytest.approx(101.0)]  # slept to the deadline, one try, no more


def test_the_first_wait_teaches_nothing_and_the_second_backs_off_again() -> None:
    """A link's first wait holds its peers' start-up: learnt, a 3 s cold start would send the
    next waits' first GETs 3 s late."""
    arrival = ArrivalEstimate(gap_s=0.01)
    arrival.learn(polling.Polled(b"x", misses=20, last_miss_s=2.9, found_s=3.1))
    assert arrival.first_poll_s is None
    assert next(arrival.delays_s()) == polling.POLL_FIRST_S  # still nothing known: back off
    arrival.learn(polling.Polled(b"x", misses=6, last_miss_s=0.066, found_s=0.104))
    assert arrival.first_poll_s == pytest.approx(0.085)


def test_a_cold_estimate_starts_at_the_last_miss_and_backs_off_until_then() -> None:
    arrival = ArrivalEstimate(gap_s=0.01)
    assert next(arrival.delays_s()) == polling.POLL_FIRST_S  # nothing known: back off from now
    arrival.learn(polling.Polled(b"x", misses=0, last_miss_s=None, found_s=0.0))  # the first
    arrival.learn(polling.Polled(b"x", misses=6, last_miss_s=0.066, found_s=0.104))
    assert arrival.first_poll_s == pytest.approx(0.085)  # the middle of the back-off's gap
    delays = arrival.delays_s()  # the gap, then (it is late) a back-off from the gap
    assert [next(delays) for _ in range(4)] == pytest.approx([0.01, 0.01, 0.015, 0.0225])


def test_steps_double_in_a_row_and_start_over_when_the_direction_turns() -> None:
    arrival = ArrivalEstimate(gap_s=0.01, first_poll_s=0.2)
    hit = polling.Polled(b"x", misses=0, last_miss_s=None, found_s=0.2)
    for want in (0.195, 0.185, 0.165):  # half a gap, then twice as far each time in a row
        arrival.learn(hit)
        assert arrival.first_poll_s == pytest.approx(want)
    arrival.learn(polling.Polled(b"x", misses=9, last_miss_s=0.4, found_s=0.5))
    assert arrival.first_poll_s == pytest.approx(0.17)  # an outlier moves it half a gap only
    arrival.learn(polling.Polled(b"x", misses=1, last_miss_s=0.17, found_s=0.18))
    assert arrival.first_poll_s == pytest.approx(0.175)  # never past the last miss's gap
    for _ in range(10):
        arrival.learn(hit)
    assert arrival.first_poll_s == 0.0  # never before the wait begins


@pytest.mark.parametrize("arrives_s", [0.0, 0.003, 0.1, 0.42])
def test_a_steady_wait_misses_about_every_other_time_and_is_late_by_under_a_gap(
    arrives_s: float,
) -> None:
    """An object that comes at the same lag every iteration: after a few waits, about
    half the waits miss once (the rule tracks the arrival from both sides) and none more, and
    no GET finds it more than one gap after it appeared."""
    clock, arrival, gap = FakeClock(), ArrivalEstimate(gap_s=0.01), 0.01
    misses, late = [], []
    for _ in range(41):
        begun = clock.now
        polled = polling.poll_for(appears_at(clock, begun + arrives_s), arrival.delays_s(),  # type: ignore[arg-type]
                                 timeout_s=5, what="k", clock=clock, sleep=clock.sleep,
                                 first_poll_s=arrival.first_poll_s or 0.0)  # fmt: skip
        arrival.learn(polled)
        misses.append(polled.misses)
        late.append(clock.now - begun - arrives_s)
        clock.now += 1.0  # the rest of the iteration
    steady = misses[10:]  # the cold wait and a few after it learn where it comes
    assert max(steady) <= 1 and sum(steady) <= 0.5 * len(steady) + 1
    assert max(late[10:]) <= gap + 1e-9


def test_the_gap_prices_a_miss_at_the_fleets_time_it_saves() -> None:
    assert polling.cost_balanced_gap_s(384, 12) == pytest.approx(0.0053, abs=1e-4)
    assert polling.cost_balanced_gap_s(1769, 2) == pytest.approx(0.0069, abs=1e-4)
    assert polling.cost_balanced_gap_s(128, 1) == pytest.approx(0.192, abs=1e-3)
    assert polling.cost_balanced_gap_s(64, 1) == polling.POLL_MAX_S  # clipped above
    assert polling.cost_balanced_gap_s(10240, 1000) == polling.POLL_FIRST_S  # clipped below


def test_poll_backs_off_exponentially_and_honours_the_deadline() -> None:
    clock, tries = FakeClock(), []

    def never() -> None:
        tries.append(clock.now)

    with pytest.raises(polling.ExchangeTimeout, match=r"^s3://b/k did not appear within 2 s$"):
        polling.poll(
            never,
            timeout_s=2.0,
            what="s3://b/k",
            clock=clock,
            sleep=clock.sleep,
            first_delay_s=0.1,
            max_delay_s=0.5,
            growth=2.0,
        )
    assert clock.sleeps == pytest.approx([0.1, 0.2, 0.4, 0.5, 0.5, 0.3])
    assert clock.now == pytest.approx(102.0)  # never past the deadline
    assert tries[-1] == pytest.approx(102.0)  # one last try at the deadline
    assert issubclass(polling.ExchangeTimeout, wire.PSTimeout)  # the loop's "ps_timeout"


def test_poll_returns_what_appears() -> None:
    clock, answers = FakeClock(), iter([None, None, b"x"])
    got = polling.poll(lambda: next(answers), timeout_s=5, what="k", clock=clock, sleep=clock.sleep)
    assert got == b"x" and len(clock.sleeps) == 2


def test_poll_stops_when_the_exchange_closes() -> None:
    stop = threading.Event()
    stop.set()
    with pytest.raises(polling.ExchangeClosed):
        polling.poll(lambda: None, timeout_s=60, what="k", sleep=stop.wait)
