"""The model's count of the S3 exchange's GETs that find nothing yet, from the runtime's rule,
and their price."""

from __future__ import annotations

import numpy as np
import pytest

from functions import s3sync
from provisioner import s3exchange
from provisioner.costs import s3_exchange_usd
from provisioner.s3exchange import backoff_misses, s3_exchange_misses


def test_the_model_polls_as_the_runtime_does() -> None:
    assert (s3exchange.POLL_FIRST_S, s3exchange.POLL_GROWTH, s3exchange.POLL_MAX_S) == (
        s3sync.POLL_FIRST_S,
        s3sync.POLL_GROWTH,
        s3sync.POLL_MAX_S,
    )


def test_a_cold_wait_misses_the_back_offs_polls_before_its_object() -> None:
    """Polls at 0, 5, 12.5, 23.75, 40.6, 65.9, 103.9, 160.8 ms, ... then every 200 ms; the
    runtime's own back-off counts the same."""
    waits = np.array([0.0, 0.004, 0.006, 0.1, 0.152, 1.0, 10.0])
    got = backoff_misses(waits)
    for wait_s, misses in zip(waits, got, strict=True):
        sent = [0.0]
        for gap in s3sync.backoff_delays_s():
            if sent[-1] >= wait_s:
                break
            sent.append(sent[-1] + gap)
        assert misses == sum(t < wait_s for t in sent), wait_s
    assert list(got[:5]) == [0, 1, 2, 6, 7]


def test_misses_are_half_a_get_per_wait_plus_each_links_cold_start() -> None:
    n, k = np.array([12]), np.array([1])
    steady = s3_exchange_misses(n, k, 0.152, np.array([1_000_000]), np.array([1]))
    assert float(steady[0]) == pytest.approx(24 * 0.5, rel=1e-4)  # 2·n·k waits
    one_link = s3_exchange_misses(n, k, 0.152, np.array([468]), np.array([1]))
    # first iteration: 7 back-off misses and a learning one per wait, instead of half a GET
    assert float(one_link[0]) == pytest.approx(24 * (0.5 + 7.5 / 468))
    six_links = s3_exchange_misses(n, k, 0.152, np.array([468]), np.array([6]))
    assert float(six_links[0]) > float(one_link[0])
    assert float(s3_exchange_misses(n, np.array([0]), 0.152, 468, 1)[0]) == 0.0  # a PS cell


def test_the_exchange_prices_its_misses_as_gets() -> None:
    n, k, iterations = np.array([12]), np.array([1]), np.array([468])
    hits_only = s3_exchange_usd(4e-7, 5e-6, n, k, iterations)
    with_misses = s3_exchange_usd(4e-7, 5e-6, n, k, iterations, np.array([12.5]))
    assert float(with_misses[0] - hits_only[0]) == pytest.approx(468 * 12.5 * 4e-7)
