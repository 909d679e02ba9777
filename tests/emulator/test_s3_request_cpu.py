"""Calibration's S3 request CPU: read by running the worker's own S3 exchange against the real
local SeaweedFS, so the figure carries what the exchange's machinery adds to each request."""

from __future__ import annotations

from typing import Any

from emulator.calibration import s3_probe
from emulator.s3server import S3Endpoint


def test_the_probe_steps_the_real_exchange_until_it_sent_the_requests(
    s3_endpoint: S3Endpoint, monkeypatch: Any
) -> None:
    sent: list[int] = []
    real = s3_probe._sent

    def counting(exchange: Any) -> int:
        sent.append(real(exchange))
        return sent[-1]

    monkeypatch.setattr(s3_probe, "_sent", counting)
    reading = s3_probe.measure_request_cpu(s3_endpoint, requests=40)
    # Counted before the loop, at each loop test and once after: the loop stops at the first
    # count 40 past the warm-up's, never earlier.
    before, last_short, final = sent[0], sent[-3], sent[-1]
    assert final == sent[-2] and final - before >= 40 and last_short - before < 40
    assert reading.client_s > 0.0
    assert reading.server_s is None or reading.server_s >= 0.0
