"""The model's count of the S3 exchange's GETs that find nothing yet, from the runtime's rule,
and their price."""

from __future__ import annotations

import numpy as np
import pytest

from functions import polling, s3sync
from provisioner import load_catalog, s3exchange
from provisioner.costs import s3_exchange_usd
from provisioner.s3exchange import backoff_misses, s3_exchange_misses
from tests.functions.test_polling import FakeClock


def test_the_model_polls_as_the_runtime_does() -> None:
    assert (s3exchange.POLL_FIRST_S, s3exchange.POLL_GROWTH, s3exchange.POLL_MAX_S) == (
        polling.POLL_FIRST_S,
        polling.POLL_GROWTH,
        polling.POLL_MAX_S,
    )


def test_a_cold_wait_misses_the_back_offs_polls_before_its_object() -> None:
    """Polls at 0, 5, 12.5, 23.75, 40.6, 65.9, 103.9, 160.8 ms, ... then every 200 ms; the
    runtime's own back-off counts the same."""
    waits = np.array([0.0, 0.004, 0.006, 0.1, 0.152, 1.0, 10.0])
    got = backoff_misses(waits)
    for wait_s, misses in zip(waits, got, strict=True):
        sent = [0.0]
        for gap in polling.backoff_delays_s():
            if sent[-1] >= wait_s:
                break
            sent.append(sent[-1] + gap)
        assert misses == sum(t < wait_s for t in sent), wait_s
    assert list(got[:5]) == [0, 1, 2, 6, 7]


def cold_wait_misses(wait_s: float, get_s: float = 0.0) -> int:
    """The runtime's own poll loop (polling.poll_for, a cold ArrivalEstimate's back-off) on a
    fake clock, for an object that appears wait_s after the wait begins, every GET taking get_s
    to answer: its empty GETs."""
    clock = FakeClock()
    appears = clock.now + wait_s

    def fetch() -> bytes | None:
        sent, clock.now = clock.now, clock.now + get_s
        return b"x" if sent >= appears else None

    polled = polling.poll_for(
        fetch,
        polling.ArrivalEstimate(gap_s=0.005).delays_s(),
        timeout_s=60,
        what="k",
        clock=clock,
        sleep=clock.sleep,
    )
    return polled.misses


@pytest.mark.parametrize("get_s", [0.004, 0.03])
def test_a_cold_waits_polls_are_a_gap_after_the_last_one_answered(get_s: float) -> None:
    """The runtime sends a poll a gap after the one before answered, so a GET's round trip
    spaces a cold wait's polls too: at a 30 ms round trip (S3 from a function) a 1 s wait
    misses 11 GETs, not the 13 the gaps alone would send."""
    waits = np.array([0.0, 0.02, 0.1, 0.3, 1.0, 4.0])
    got = backoff_misses(waits, get_s)
    for wait_s, misses in zip(waits, got, strict=True):
        assert misses == cold_wait_misses(float(wait_s), get_s), wait_s
    assert (backoff_misses(np.array([1.0]), 0.03)[0], backoff_misses(np.array([1.0]))[0]) == (
        11,
        13,
    )


def runtime_first_iteration_misses(n: int, k: int, grad_s: float, state_s: float) -> int:
    """A link's first iteration as the runtime waits it: every worker starts its exchange at 0
    and its gradient is in S3 at grad_s; reducer j's gradient waits run GATHER_WINDOW at a
    time (the next starts when one is answered); its state is in S3 at grad_s + state_s; a
    worker reads the states once its uploads (and, a reducer, its reduce) are done."""
    assert s3sync.GATHER_WINDOW == s3exchange.GATHER_WINDOW
    misses, written_s = 0, []
    for _ in range(k):
        answered: list[float] = []
        for r in range(n):
            begins_s = 0.0 if r < s3sync.GATHER_WINDOW else answered[r - s3sync.GATHER_WINDOW]
            wait = max(grad_s - begins_s, 0.0)
            got = cold_wait_misses(wait)
            misses += got
            answered.append(begins_s + (0.0 if got == 0 else wait))
        written_s.append(grad_s + state_s)
    for rank in range(n):
        reads_from_s = written_s[rank] if rank < k else grad_s  # after its state PUT or its PUT
        misses += sum(cold_wait_misses(max(w - reads_from_s, 0.0)) for w in written_s)
    return misses


@pytest.mark.parametrize(
    ("n", "k", "grad_s", "state_s"),
    [(12, 3, 0.09, 1.1), (11, 2, 0.3, 0.6), (6, 2, 0.02, 0.07), (2, 1, 0.0, 0.0), (5, 5, 0.1, 0.2)],
)
def test_a_links_first_iteration_misses_what_the_runtimes_waits_miss(
    n: int, k: int, grad_s: float, state_s: float
) -> None:
    got = s3exchange.s3_first_iteration_misses(np.array([n]), np.array([k]), grad_s, state_s)
    assert float(got[0]) == runtime_first_iteration_misses(n, k, grad_s, state_s)


def test_a_links_first_two_iterations_back_off_and_a_long_run_half_a_get_a_wait() -> None:
    n, k = np.array([12]), np.array([3])
    cold = float(s3exchange.s3_first_iteration_misses(n, k, 0.09, 1.1)[0])
    one = s3_exchange_misses(n, k, 0.09, 1.1, np.array([1]), np.array([1]))
    assert float(one[0]) == cold  # no steady iteration
    two = s3_exchange_misses(n, k, 0.09, 1.1, np.array([2]), np.array([1]))
    assert float(two[0]) == pytest.approx(cold)  # the second learns nothing before it either
    three = s3_exchange_misses(n, k, 0.09, 1.1, np.array([3]), np.array([1]))
    assert float(three[0]) == pytest.approx((2 * cold + 72 * 0.5) / 3)
    steady = s3_exchange_misses(n, k, 0.09, 1.1, np.array([1_000_000]), np.array([1]))
    assert float(steady[0]) == pytest.approx(72 * 0.5, rel=1e-4)  # 2·n·k waits
    six_links = s3_exchange_misses(n, k, 0.09, 1.1, np.array([468]), np.array([6]))
    assert float(six_links[0]) > float(s3_exchange_misses(n, k, 0.09, 1.1, 468, 1)[0])
    assert float(s3_exchange_misses(n, np.array([0]), 0.09, 1.1, 468, 1)[0]) == 0.0  # PS cell
    assert float(s3_exchange_misses(n, k, 0.09, 1.1, 0, 0)[0]) == 0.0  # no iteration


def test_the_cold_waits_are_the_exchanges_phases_and_never_longer_than_it() -> None:
    """The PUT phase, then the GET phase, the sum and the state's PUT; scaled to the
    exchange time the timeline has (a shared-core correction may stretch or shrink it)."""
    args = (np.array([12]), np.array([3]), 9.0, 900.0, 200.0, 0.02, 0.04)
    push, gather, write, pull = 0.04 + 9 / 200, 0.02 + 36 / 900, 0.04 + 6 / 200, 0.02 + 9 / 900
    grad, state = s3exchange.s3_cold_waits_s(*args, np.array([push + gather + write + pull]))
    assert (float(grad[0]), float(state[0])) == pytest.approx((push, gather + write))
    grad, state = s3exchange.s3_cold_waits_s(*args, np.array([1.0]))  # 0.73 s of sum besides
    assert float(grad[0]) == pytest.approx(push)
    assert float(grad[0] + state[0]) == pytest.approx(1.0 - pull)
    half = np.array([(push + gather + write + pull) / 2])  # shrunk: each phase by half
    grad, state = s3exchange.s3_cold_waits_s(*args, half)
    assert (float(grad[0]), float(state[0])) == pytest.approx((push / 2, (gather + write) / 2))


def test_the_exchange_prices_its_misses_as_gets() -> None:
    n, k, iterations = np.array([12]), np.array([1]), np.array([468])
    hits_only = s3_exchange_usd(4e-7, 5e-6, n, k, iterations)
    with_misses = s3_exchange_usd(4e-7, 5e-6, n, k, iterations, np.array([12.5]))
    assert float(with_misses[0] - hits_only[0]) == pytest.approx(468 * 12.5 * 4e-7)


# --- steady waits: priced from the iteration's lateness over the runtime's poll gap --------------


def test_the_model_polls_at_the_runtimes_gap_of_a_fleet_from_4_8_gb() -> None:
    """The model prices every cell at the gap's floor: the runtime's gap of 4.8 GB or more
    of functions (a smaller fleet polls less often: fewer misses than priced)."""
    assert polling.cost_balanced_gap_s(1024, 5) == s3exchange.POLL_FIRST_S
    assert polling.cost_balanced_gap_s(448, 4) > s3exchange.POLL_FIRST_S


def late_wait_runtime_misses(late_s: float, gap_s: float, get_s: float) -> int:
    """A learned wait as the runtime polls it (polling.poll_for over expected_delays_s) on a
    fake clock where each GET takes get_s, its first GET sent at the estimate and its object
    there late_s after: the empty GETs."""
    clock = FakeClock()
    appears = clock.now + late_s

    def fetch() -> bytes | None:
        found = clock.now >= appears  # the GET sees what was there when it was sent
        clock.now += get_s
        return b"x" if found else None

    return polling.poll_for(fetch, polling.expected_delays_s(gap_s), timeout_s=600, what="k",
                            clock=clock, sleep=clock.sleep).misses  # fmt: skip


@pytest.mark.parametrize(
    ("mean_s", "gap_s", "get_s"),
    [(0.01, 0.005, 0.0), (0.05, 0.005, 0.012), (0.2, 0.0069, 0.03), (1.5, 0.005, 0.01)],
)
def test_a_late_wait_misses_the_runtimes_polls_before_its_object(
    mean_s: float, gap_s: float, get_s: float
) -> None:
    """The closed form against the runtime's own loop, averaged over 4,000 quantiles of the
    exponential lateness (a miss counted at least once: the wait is late)."""
    quantiles = (np.arange(4000) + 0.5) / 4000
    lateness = -mean_s * np.log1p(-quantiles)
    runtime = np.mean([max(1, late_wait_runtime_misses(x, gap_s, get_s)) for x in lateness])
    model = float(s3exchange.late_wait_misses(np.array([mean_s]), gap_s, get_s)[0])
    assert model == pytest.approx(runtime, rel=0.03)


def test_a_steady_wait_misses_more_as_its_iteration_jitters_more() -> None:
    exchange_s = np.array([0.0, 0.05, 0.2, 1.0, 5.0])
    per_wait = s3exchange.steady_misses_per_wait(exchange_s, 0.0, 0.005, 0.01)
    assert float(per_wait[0]) == s3exchange.STEADY_LATE_SHARE  # no jitter: the first GET only
    assert all(np.diff(per_wait) > 0)
    # the exchange jitters more than the compute: a second of it costs more misses
    exchange, compute = (
        s3exchange.steady_misses_per_wait(*x, 0.005, 0.01) for x in ((1, 0), (0, 1))
    )
    assert float(exchange) > float(compute) > s3exchange.STEADY_LATE_SHARE
    # past the back-off's ramp every poll is 200 ms + a GET apart: a long lateness's extra
    # seconds are as many polls as 210 ms go into them
    long = s3exchange.steady_misses_per_wait(np.array([50.0, 100.0]), 0.0, 0.005, 0.01)
    more = float(long[1] - long[0]) / s3exchange.STEADY_LATE_SHARE
    assert more == pytest.approx(s3exchange.LATENESS_PER_EXCHANGE_S * 50.0 / 0.21, rel=0.02)


def test_a_steady_count_above_one_a_wait_is_priced_from_the_third_iteration_on() -> None:
    n, k = np.array([12]), np.array([3])
    cold = float(s3exchange.s3_first_iteration_misses(n, k, 0.09, 1.1)[0])
    four = s3_exchange_misses(n, k, 0.09, 1.1, np.array([4]), np.array([1]), 1.7)
    assert float(four[0]) == pytest.approx((2 * cold + 2 * 72 * 1.7) / 4)


def test_the_cells_steady_misses_follow_their_iteration_time() -> None:
    catalog = load_catalog("lambda-2025")
    args = (catalog, np.array([8, 8]), np.array([2, 2]), 1.0, np.array([0.5, 0.5]),
            np.array([1000, 1000]), np.array([1, 1]))  # fmt: skip
    short, long = s3exchange.s3_cell_misses(*args, np.array([0.6, 6.0]))
    assert long > short > 32 * s3exchange.STEADY_LATE_SHARE


def test_on_shared_cores_the_steady_misses_follow_the_workers_per_core() -> None:
    """On C shared cores a steady wait misses min(0.25·n/C, 0.9) GETs, whatever the iteration:
    2 workers on 2 cores 0.25 a wait, 12 the cap (a long run: the cold iterations vanish)."""
    import dataclasses

    catalog = dataclasses.replace(load_catalog("lambda-2025"), compute_cores=2.0, total_vcpu=1.5)
    its, one = np.array([100_000]), np.array([1])

    def per_wait(n: int, iteration_s: float) -> float:
        misses = s3exchange.s3_cell_misses(
            catalog, np.array([n]), one, 1.0, np.array([0.05]), its, one, np.array([iteration_s])
        )
        return float(misses[0]) / (2 * n)

    assert per_wait(2, 0.1) == pytest.approx(0.25, rel=1e-3)
    assert per_wait(2, 5.0) == pytest.approx(0.25, rel=1e-3)  # not the iteration's length
    assert per_wait(12, 0.1) == pytest.approx(0.9, rel=1e-3)
